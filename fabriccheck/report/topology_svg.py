"""The topology picture: tiers of switches over nodes, bad and suspect parts highlighted.

Up to :data:`DETAIL_MAX_NODES` nodes every node, NIC port, switch and link is drawn (here). Above
that the picture aggregates (:mod:`fabriccheck.report.topology_agg`): switches become small cells
per tier and nodes become cells inside one box per leaf group, so 4,096 nodes stay readable.
Both draw the failing tests' paths (:mod:`fabriccheck.report.path_overlay`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from markupsafe import Markup

from fabriccheck.models import BAD, HEALTHY, SUSPECT, LinkKey
from fabriccheck.report.path_overlay import draw_paths, path_legend
from fabriccheck.report.paths import FailPaths
from fabriccheck.report.svg import STATE_COLOURS, Svg
from fabriccheck.report.topology_agg import render_aggregated
from fabriccheck.report.topology_base import (
    DETAIL_MAX_NODES,
    FONT,
    LINK_STYLE,
    NIC_FILL,
    NO_PATHS,
    PATH_LEGEND_H,
    WIDTH,
    fit_font,
    link_title,
    node_title,
    state_legend,
    switch_states,
)
from fabriccheck.report.view import RunView, natural_key
from fabriccheck.topology.model import Topology

__all__ = ["DETAIL_MAX_NODES", "render_topology", "switch_states"]


def render_topology(
    view: RunView, topology: Topology | None, paths: FailPaths | None = None
) -> Markup:
    """The topology SVG for a run; node tiles only when there is no topology.

    ``paths`` (:func:`fabriccheck.report.paths.failing_paths`) draws where the failing tests
    went over the switch links, under the verdict's bad and suspect links.
    """
    if topology is None or not topology.switches:
        return _node_tiles(view)
    paths = paths or NO_PATHS
    if len(view.nodes) <= DETAIL_MAX_NODES:
        return _detailed(view, topology, paths)
    return render_aggregated(view, topology, paths)


# ---- detailed ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _DetailLayout:
    """Where the detailed picture puts things: tier rows of switches, leaves, a row of nodes."""

    nodes: list[str]
    node_w: float
    width: float
    height: float
    y_tier: dict[str, float]  # core / spine row -> top y
    leaf_y: float
    node_y: float
    node_x: dict[str, float]  # node -> left x of its box


def _detailed(view: RunView, topo: Topology, paths: FailPaths) -> Markup:
    """Every switch, node and NIC port with every link; failing tests' paths over the healthy
    links, bad and suspect links on top."""
    lay = _detail_layout(view, topo)
    extra_h = PATH_LEGEND_H if paths.tests else 0.0
    svg = Svg(lay.width, lay.height + extra_h, "fabric topology")
    pos = _switch_positions(view, topo, lay)

    def ends(key: LinkKey) -> tuple[float, float, float, float] | None:
        if key[0] not in pos or key[1] not in pos:
            return None
        (x1, t1, _), (x2, t2, _) = sorted((pos[key[0]], pos[key[1]]), key=lambda p: p[1])
        return x1, t1 + 22, x2, t2

    def overlay() -> None:
        draw_paths(svg, paths, topo, ends, len(view.nodes))

    _draw_detail_links(svg, view, topo, lay, pos, overlay)
    _draw_detail_switches(svg, view, topo, lay, pos)
    for n in lay.nodes:
        _draw_detail_node(svg, view, topo, lay, n)
    state_legend(svg, lay.height - 22)
    path_legend(svg, lay.height - 4, paths, len(view.nodes))
    return svg.markup()


def _detail_layout(view: RunView, topo: Topology) -> _DetailLayout:
    """Size the picture: one box per node (a port per rail), a row per switch tier above."""
    nodes = [n for g in view.groups for n in g.nodes]
    rails = max(topo.rails, 1)
    node_w = max(64.0, rails * 11 + 10)
    gap = 14.0
    width = max(900.0, len(nodes) * (node_w + gap) + 40)
    tiers = [t for t in ("core", "spine") if any(s.tier == t for s in topo.switches.values())]
    row_h = 70.0
    y_tier = {t: 30 + i * row_h for i, t in enumerate(tiers)}
    leaf_y = 30 + len(tiers) * row_h + 10
    node_y = leaf_y + 100
    return _DetailLayout(
        nodes=nodes, node_w=node_w, width=width, height=node_y + 90, y_tier=y_tier,
        leaf_y=leaf_y, node_y=node_y,
        node_x={n: 20 + i * (node_w + gap) for i, n in enumerate(nodes)},
    )  # fmt: skip


def _switch_positions(
    view: RunView, topo: Topology, lay: _DetailLayout
) -> dict[str, tuple[float, float, float]]:
    """Switch -> (centre x, top y, width): leaves above their node groups, other tiers spread."""
    pos: dict[str, tuple[float, float, float]] = {}
    placed: set[str] = set()
    for g in view.groups:
        members = [n for n in g.nodes if n in lay.node_x]
        leaves = [lf for lf in sorted(g.leaves, key=natural_key) if lf not in placed]
        if not members or not leaves:
            continue
        x0 = lay.node_x[members[0]]
        span = lay.node_x[members[-1]] + lay.node_w - x0
        slot = span / len(leaves)
        for i, lf in enumerate(leaves):
            pos[lf] = (x0 + slot * (i + 0.5), lay.leaf_y, min(84.0, slot - 4))
            placed.add(lf)
    others = sorted((s for s in topo.switches if s not in pos), key=natural_key)
    by_tier: dict[str, list[str]] = {}
    for s in others:
        by_tier.setdefault(topo.switches[s].tier, []).append(s)
    for tier, names in by_tier.items():
        y = lay.y_tier.get(tier, lay.leaf_y)
        slot = (lay.width - 40) / len(names)
        for i, s in enumerate(names):
            pos[s] = (20 + slot * (i + 0.5), y, min(84.0, slot - 4))
    return pos


def _draw_detail_links(
    svg: Svg, view: RunView, topo: Topology, lay: _DetailLayout,
    pos: dict[str, tuple[float, float, float]], overlay: Callable[[], None] = lambda: None,
) -> None:  # fmt: skip
    """Every link as a line, healthy ones thin and first, then ``overlay`` (the failing tests'
    paths), bad and suspect ones styled on top."""
    top_layer: list[tuple[LinkKey, float, float, float, float, str]] = []
    for key in sorted(topo.links):
        a, b = key
        st = view.link_state.get(key, HEALTHY)
        ends = []
        for e in (a, b):
            if e in pos:
                cx, top, _ = pos[e]
                ends.append((cx, top, "sw"))
            elif e in topo.nics and topo.nics[e].node in lay.node_x:
                nic = topo.nics[e]
                ends.append((lay.node_x[nic.node] + 8 + nic.rail * 11 + 4, lay.node_y, "nic"))
                if view.nic_state.get(e) == BAD and st == HEALTHY:
                    st = SUSPECT
        if len(ends) != 2:
            continue
        (x1, t1, k1), (x2, t2, k2) = sorted(ends, key=lambda p: p[1])
        y1 = t1 + 22 if k1 == "sw" else t1
        if st in LINK_STYLE:
            top_layer.append((key, x1, y1, x2, t2, st))
        else:
            svg.add("line", x1=x1, y1=y1, x2=x2, y2=t2, stroke="#b8c0cc", stroke_width=0.8)
    overlay()
    for key, x1, y1, x2, y2, st in top_layer:
        svg.add(
            "line", title=link_title(topo, key, st),
            x1=x1, y1=y1, x2=x2, y2=y2, **LINK_STYLE[st], data_link=f"{key[0]} -- {key[1]}",
        )  # fmt: skip


def _draw_detail_switches(
    svg: Svg, view: RunView, topo: Topology, lay: _DetailLayout,
    pos: dict[str, tuple[float, float, float]],
) -> None:  # fmt: skip
    """Each switch as a named box (edged by the worst link it is on), then the tier labels."""
    sw_state = switch_states(topo, view)
    for s, (cx, top, w) in pos.items():
        st = sw_state.get(s, HEALTHY)
        colour = STATE_COLOURS[st] if st in (BAD, SUSPECT) else "#4a5568"
        note = f"on a {st} link" if st != HEALTHY else "ok"
        svg.add(
            "rect", title=f"{topo.switches[s].tier} {s}: {note}",
            x=cx - w / 2, y=top, width=w, height=22, rx=4, fill="#fff", stroke=colour,
            stroke_width=2 if st != HEALTHY else 1.2, data_switch=s,
        )  # fmt: skip
        svg.add(
            "text", s, x=cx, y=top + 15, text_anchor="middle",
            font_size=fit_font(s, w - 4), style=FONT, fill="#1a202c",
        )  # fmt: skip
    for tier, y in lay.y_tier.items():
        svg.add("text", tier, x=4, y=y - 6, font_size=10, style=FONT, fill="#718096")
    svg.add("text", "leaf", x=4, y=lay.leaf_y - 6, font_size=10, style=FONT, fill="#718096")


def _draw_detail_node(
    svg: Svg, view: RunView, topo: Topology, lay: _DetailLayout, n: str
) -> None:
    """One node: a box coloured by its state, a port per NIC on top, its name and state."""
    x = lay.node_x[n]
    node_w, node_y = lay.node_w, lay.node_y
    st = view.node_state[n]
    colour = STATE_COLOURS.get(st, "#999")
    svg.open_group(title=node_title(view, n), data_node=n, class_=f"node st-{st}")
    svg.add(
        "rect", x=x, y=node_y, width=node_w, height=56, rx=5, fill=colour,
        fill_opacity=0.14 if st == HEALTHY else 0.28, stroke=colour,
        stroke_width=1.2 if st == HEALTHY else 2.5,
    )  # fmt: skip
    for nic in topo.nodes[n].nics if n in topo.nodes else ():
        nst = view.nic_state.get(nic.endpoint, HEALTHY)
        svg.add(
            "rect", title=f"{nic.endpoint} (rail {nic.rail}): {nst}",
            x=x + 8 + nic.rail * 11, y=node_y - 4, width=8, height=8, rx=1,
            fill=NIC_FILL.get(nst, "#5a6577"), data_nic=nic.endpoint,
        )  # fmt: skip
    svg.add(
        "text", n, x=x + node_w / 2, y=node_y + 26, text_anchor="middle",
        font_size=fit_font(n, node_w - 6, 12), style=FONT, font_weight="600", fill="#1a202c",
    )  # fmt: skip
    svg.add(
        "text", st, x=x + node_w / 2, y=node_y + 42, text_anchor="middle",
        font_size=10, style=FONT, fill=colour,
    )  # fmt: skip
    svg.close_group()


# ---- no topology ------------------------------------------------------------------------------
def _node_tiles(view: RunView) -> Markup:
    nodes = view.nodes
    big = len(nodes) <= 256
    tile_w, tile_h = (118.0, 30.0) if big else (10.0, 10.0)
    per_row = max(1, int((WIDTH - 20) // (tile_w + 4)))
    rows = -(-len(nodes) // per_row) if nodes else 1
    height = 20 + rows * (tile_h + 4) + 34
    svg = Svg(WIDTH, height, "nodes (no topology given)")
    for i, n in enumerate(nodes):
        r, c = divmod(i, per_row)
        x, y = 10 + c * (tile_w + 4), 12 + r * (tile_h + 4)
        st = view.node_state[n]
        colour = STATE_COLOURS.get(st, "#999")
        svg.add(
            "rect", title=node_title(view, n), x=x, y=y, width=tile_w, height=tile_h, rx=3,
            fill=colour, fill_opacity=0.25 if big and st == HEALTHY else (0.45 if big else 1),
            stroke=colour, data_node=n, class_=f"node st-{st}",
        )  # fmt: skip
        if big:
            svg.add(
                "text", n, x=x + tile_w / 2, y=y + 19, text_anchor="middle",
                font_size=fit_font(n, tile_w - 8, 11), style=FONT, fill="#1a202c",
            )  # fmt: skip
    state_legend(svg, height - 22)
    return svg.markup()
