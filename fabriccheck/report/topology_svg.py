"""The topology picture: tiers of switches over nodes, bad and suspect parts highlighted.

Up to :data:`DETAIL_MAX_NODES` nodes every node, NIC port, switch and link is drawn. Above that
the picture aggregates: switches become small cells per tier and nodes become cells inside one
box per leaf group; only bad and suspect links are drawn as lines, so 4,096 nodes stay readable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from markupsafe import Markup

from fabriccheck.models import BAD, HEALTHY, SUSPECT, LinkKey
from fabriccheck.report.path_overlay import cable, draw_paths, path_legend
from fabriccheck.report.paths import FailPaths
from fabriccheck.report.svg import STATE_COLOURS, Svg
from fabriccheck.report.view import Group, RunView, natural_key
from fabriccheck.topology.model import Topology

DETAIL_MAX_NODES = 32
WIDTH = 1360
_LINK_STYLE = {
    BAD: {"stroke": STATE_COLOURS[BAD], "stroke_width": 3.5},
    SUSPECT: {"stroke": STATE_COLOURS[SUSPECT], "stroke_width": 2.5, "stroke_dasharray": "6 3"},
}
_NIC_FILL = {BAD: STATE_COLOURS[BAD], SUSPECT: STATE_COLOURS[SUSPECT]}
_FONT = "font-family:system-ui,sans-serif"
#: above this many bad/suspect links the aggregated picture draws them thin
_BOLD_LINES_MAX = 6
#: a leaf-group box names at most this many of its unhealthy nodes
_NAMES_PER_BOX = 3


def _fit_font(label: str, width: float, size: float = 11.0) -> float:
    return round(max(5.0, min(size, width / max(len(label), 1) * 1.75)), 1)


def switch_states(topology: Topology, view: RunView) -> dict[str, str]:
    """A switch is bad/suspect when a bad/suspect link touches it."""
    out: dict[str, str] = {}
    for (a, b), st in view.link_state.items():
        if st not in (BAD, SUSPECT):
            continue
        for end in (a, b):
            if end in topology.switches and out.get(end) != BAD:
                out[end] = st
    return out


_NO_PATHS = FailPaths((), {})
#: room for the failing-path legend (two rows)
_PATH_LEGEND_H = 36.0


def render_topology(
    view: RunView, topology: Topology | None, paths: FailPaths | None = None
) -> Markup:
    """The topology SVG for a run; node tiles only when there is no topology.

    ``paths`` (:func:`fabriccheck.report.paths.failing_paths`) draws where the failing tests
    went over the switch links, under the verdict's bad and suspect links.
    """
    if topology is None or not topology.switches:
        return _node_tiles(view)
    paths = paths or _NO_PATHS
    if len(view.nodes) <= DETAIL_MAX_NODES:
        return _detailed(view, topology, paths)
    return _aggregated(view, topology, paths)


def _link_title(topo: Topology, key: LinkKey, st: str) -> str:
    """``link leaf-1 port 17 ↔ spine-0 port 3: bad`` (ports where the topology has them)."""
    return f"link {cable(topo, key)}: {st}"


def _legend(svg: Svg, y: float, items: list[tuple[str, str]]) -> None:
    x = 12.0
    for label, colour in items:
        svg.add("rect", x=x, y=y, width=12, height=12, rx=2, fill=colour)
        svg.add("text", label, x=x + 17, y=y + 10, font_size=11, style=_FONT, fill="#333")
        x += 28 + 7 * len(label)


def _state_legend(svg: Svg, y: float) -> None:
    _legend(svg, y, [(s, STATE_COLOURS[s]) for s in STATE_COLOURS])


def _node_title(view: RunView, node: str) -> str:
    st = view.node_state.get(node, "")
    why = view.node_reason.get(node, "")
    return f"{node}: {st}" + (f" — {why}" if why else "")


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
    extra_h = _PATH_LEGEND_H if paths.tests else 0.0
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
    _state_legend(svg, lay.height - 22)
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
        if st in _LINK_STYLE:
            top_layer.append((key, x1, y1, x2, t2, st))
        else:
            svg.add("line", x1=x1, y1=y1, x2=x2, y2=t2, stroke="#b8c0cc", stroke_width=0.8)
    overlay()
    for key, x1, y1, x2, y2, st in top_layer:
        svg.add(
            "line", title=_link_title(topo, key, st),
            x1=x1, y1=y1, x2=x2, y2=y2, **_LINK_STYLE[st], data_link=f"{key[0]} -- {key[1]}",
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
            font_size=_fit_font(s, w - 4), style=_FONT, fill="#1a202c",
        )  # fmt: skip
    for tier, y in lay.y_tier.items():
        svg.add("text", tier, x=4, y=y - 6, font_size=10, style=_FONT, fill="#718096")
    svg.add("text", "leaf", x=4, y=lay.leaf_y - 6, font_size=10, style=_FONT, fill="#718096")


def _draw_detail_node(
    svg: Svg, view: RunView, topo: Topology, lay: _DetailLayout, n: str
) -> None:
    """One node: a box coloured by its state, a port per NIC on top, its name and state."""
    x = lay.node_x[n]
    node_w, node_y = lay.node_w, lay.node_y
    st = view.node_state[n]
    colour = STATE_COLOURS.get(st, "#999")
    svg.open_group(title=_node_title(view, n), data_node=n, class_=f"node st-{st}")
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
            fill=_NIC_FILL.get(nst, "#5a6577"), data_nic=nic.endpoint,
        )  # fmt: skip
    svg.add(
        "text", n, x=x + node_w / 2, y=node_y + 26, text_anchor="middle",
        font_size=_fit_font(n, node_w - 6, 12), style=_FONT, font_weight="600", fill="#1a202c",
    )  # fmt: skip
    svg.add(
        "text", st, x=x + node_w / 2, y=node_y + 42, text_anchor="middle",
        font_size=10, style=_FONT, fill=colour,
    )  # fmt: skip
    svg.close_group()


# ---- aggregated -------------------------------------------------------------------------------
class _GroupBox(NamedTuple):
    """Where one leaf group's box goes and how many cells a row of it holds."""

    index: int
    group: Group
    x: float
    y: float
    w: float
    h: float
    cols: int


def _aggregated(view: RunView, topo: Topology, paths: FailPaths) -> Markup:
    """Switch cells per tier over one box of node cells per leaf group; bad links only."""
    n = len(view.nodes)
    pitch = 20.0 if n <= 128 else (15.0 if n <= 512 else 11.0)
    cell = pitch - 2
    sw_state = switch_states(topo, view)
    centres, rows, y = _tier_cells(topo, pitch, cell)
    boxes, height, used_w = _group_boxes(view, pitch, y + 8)
    height += _PATH_LEGEND_H if paths.tests else 0.0
    used_w = max(used_w, *(c[0] + pitch for c in centres.values()), 560.0)
    svg = Svg(min(WIDTH, used_w + 10), height, "fabric topology (aggregated by leaf group)")
    for label, ty in rows:
        svg.add("text", label, x=8, y=ty + 8, font_size=10, style=_FONT, fill="#4a5568")
    svg.add("text", "leaf groups", x=8, y=y, font_size=10, style=_FONT, fill="#4a5568")
    node_pos: dict[str, tuple[float, float]] = {}
    for box in boxes:
        _draw_group_box(svg, view, sw_state, box, pitch, centres, node_pos)
    _draw_tier_switches(svg, topo, sw_state, centres, cell)

    def ends(key: LinkKey) -> tuple[float, float, float, float] | None:
        a, b = centres.get(key[0]), centres.get(key[1])
        return None if a is None or b is None else (*a, *b)

    draw_paths(svg, paths, topo, ends, n)
    _draw_marked_links(svg, view, topo, centres, node_pos)
    if paths.tests:
        _state_legend(svg, height - 22 - _PATH_LEGEND_H)
        path_legend(svg, height - 4 - _PATH_LEGEND_H, paths, n)
    else:
        _state_legend(svg, height - 22)
    return svg.markup()


def _tier_cells(
    topo: Topology, pitch: float, cell: float
) -> tuple[dict[str, tuple[float, float]], list[tuple[str, float]], float]:
    """Centres of the core/spine switch cells, row labels, and the y where leaf groups start."""
    tiers = [t for t in ("core", "spine") if any(s.tier == t for s in topo.switches.values())]
    per_row = int((WIDTH - 90) // pitch)
    centres: dict[str, tuple[float, float]] = {}
    y = 16.0
    rows: list[tuple[str, float]] = []
    for tier in tiers:
        names = sorted((s for s, sw in topo.switches.items() if sw.tier == tier), key=natural_key)
        rows.append((f"{tier} ×{len(names)}", y))
        for i, s in enumerate(names):
            r, c = divmod(i, per_row)
            centres[s] = (80 + c * pitch + cell / 2, y + r * pitch + cell / 2)
        y += (-(-len(names) // per_row)) * pitch + 22
    return centres, rows, y


def _group_boxes(view: RunView, pitch: float, top: float) -> tuple[list[_GroupBox], float, float]:
    """Leaf-group boxes in a flowing layout from ``top``; the picture's height and used width."""
    boxes = []
    x, row_top, row_h, used_w = 10.0, top, 0.0, 0.0
    for gi, g in enumerate(view.groups):
        cols = max(4, min(8 if pitch < 20 else 16, max(len(g.nodes), len(g.leaves))))
        leaf_rows = -(-len(g.leaves) // cols) if g.leaves else 0
        node_rows = -(-len(g.nodes) // cols)
        flagged = [n for n in g.nodes if view.node_state[n] not in (HEALTHY, "untested")]
        w = max(cols * pitch + 12, 96.0 if flagged else 0.0)
        h = 20 + (leaf_rows * pitch + 4 if leaf_rows else 0) + node_rows * pitch + 6
        h += 11 * min(len(flagged), _NAMES_PER_BOX + 1)
        if x + w > WIDTH - 10:
            x, row_top, row_h = 10.0, row_top + row_h + 8, 0.0
        boxes.append(_GroupBox(gi, g, x, row_top, w, h, cols))
        x += w + 8
        row_h = max(row_h, h)
        used_w = max(used_w, x)
    return boxes, row_top + row_h + 40, used_w


def _draw_group_box(
    svg: Svg, view: RunView, sw_state: dict[str, str], box: _GroupBox, pitch: float,
    centres: dict[str, tuple[float, float]], node_pos: dict[str, tuple[float, float]],
) -> None:  # fmt: skip
    """One leaf group: its framed box, leaf strip, node cells and unhealthy nodes' names."""
    g = box.group
    flagged = [n for n in g.nodes if view.node_state[n] not in (HEALTHY, "untested")]
    svg.open_group(title=f"{g.label}: {len(g.nodes)} nodes, {len(flagged)} not healthy",
                   data_group=box.index)  # fmt: skip
    _draw_box_frame(svg, sw_state, box, len(flagged))
    cy = _draw_box_leaves(svg, sw_state, box, pitch, centres)
    ty = _draw_box_nodes(svg, view, box, cy, pitch, node_pos)
    _draw_box_names(svg, view, flagged, box.x, ty)
    svg.close_group()


def _draw_box_frame(svg: Svg, sw_state: dict[str, str], box: _GroupBox, bad: int) -> None:
    """The box, edged red/amber when a node or leaf in it is bad/suspect, and its label."""
    g, bx, by, w, h = box.group, box.x, box.y, box.w, box.h
    leaf_st = {sw_state.get(lf) for lf in g.leaves}
    edge = (STATE_COLOURS[BAD] if bad or BAD in leaf_st
            else STATE_COLOURS[SUSPECT] if SUSPECT in leaf_st else "#cbd2dc")  # fmt: skip
    svg.add(
        "rect", x=bx, y=by, width=w, height=h, rx=4, fill="#fff",
        stroke=edge, stroke_width=1 if edge == "#cbd2dc" else 1.6,
    )  # fmt: skip
    svg.add(
        "text", g.label, x=bx + 5, y=by + 12, font_size=_fit_font(g.label, w - 8, 9),
        style=_FONT, fill="#2d3748",
    )  # fmt: skip


def _draw_box_leaves(
    svg: Svg, sw_state: dict[str, str], box: _GroupBox, pitch: float,
    centres: dict[str, tuple[float, float]],
) -> float:  # fmt: skip
    """The group's leaf switches as a dark strip (their centres recorded); the y below it."""
    g, bx, cols, cell = box.group, box.x, box.cols, pitch - 2
    cy = box.y + 18
    for i, lf in enumerate(sorted(g.leaves, key=natural_key)):
        r, c = divmod(i, cols)
        lx, ly = bx + 6 + c * pitch, cy + r * pitch
        st = sw_state.get(lf, HEALTHY)
        svg.add(
            "rect", title=f"leaf {lf}: {st}", x=lx, y=ly, width=cell, height=cell / 2 + 1,
            fill=STATE_COLOURS[st] if st != HEALTHY else "#4a5568", data_switch=lf,
        )  # fmt: skip
        centres[lf] = (lx + cell / 2, ly + 2)
    if g.leaves:
        cy += (-(-len(g.leaves) // cols)) * pitch + 4
    return cy


def _draw_box_nodes(
    svg: Svg, view: RunView, box: _GroupBox, cy: float, pitch: float,
    node_pos: dict[str, tuple[float, float]],
) -> float:  # fmt: skip
    """One cell per node from ``cy`` (centres recorded); the y where the names go."""
    g, bx, cols, cell = box.group, box.x, box.cols, pitch - 2
    for i, n in enumerate(g.nodes):
        r, c = divmod(i, cols)
        nx_, ny = bx + 6 + c * pitch, cy + r * pitch
        st = view.node_state[n]
        svg.add(
            "rect", title=_node_title(view, n), x=nx_, y=ny, width=cell, height=cell,
            rx=1.5, fill=STATE_COLOURS.get(st, "#999"), data_node=n, class_=f"node st-{st}",
            stroke="#000" if st not in (HEALTHY, "untested") else None, stroke_width=0.8,
        )  # fmt: skip
        node_pos[n] = (nx_ + cell / 2, ny + cell / 2)
    return cy + (-(-len(g.nodes) // cols)) * pitch + 8


def _draw_box_names(svg: Svg, view: RunView, flagged: list[str], bx: float, ty: float) -> None:
    """Name the first few unhealthy nodes of a group, then how many more there are."""
    for i, n in enumerate(flagged[:_NAMES_PER_BOX]):
        st = view.node_state[n]
        svg.add("text", f"{n} {st}", x=bx + 6, y=ty + i * 11, font_size=9, style=_FONT,
                fill=STATE_COLOURS.get(st, "#333"), font_weight="600")  # fmt: skip
    if len(flagged) > _NAMES_PER_BOX:
        svg.add("text", f"+{len(flagged) - _NAMES_PER_BOX} more", x=bx + 6,
                y=ty + _NAMES_PER_BOX * 11, font_size=9, style=_FONT, fill="#333")  # fmt: skip


def _draw_tier_switches(
    svg: Svg, topo: Topology, sw_state: dict[str, str],
    centres: dict[str, tuple[float, float]], cell: float,
) -> None:  # fmt: skip
    """One cell per core/spine switch (leaves are drawn in their groups' boxes)."""
    for s, (cx, cy) in centres.items():
        if topo.switches[s].tier == "leaf":
            continue
        st = sw_state.get(s, HEALTHY)
        svg.add(
            "rect", title=f"{topo.switches[s].tier} {s}: {st}", x=cx - cell / 2, y=cy - cell / 2,
            width=cell, height=cell, rx=1.5, fill=STATE_COLOURS[st] if st != HEALTHY else "#4a5568",
            data_switch=s,
        )  # fmt: skip


def _draw_marked_links(
    svg: Svg, view: RunView, topo: Topology, centres: dict[str, tuple[float, float]],
    node_pos: dict[str, tuple[float, float]],
) -> None:  # fmt: skip
    """Bad and suspect links between cell centres, thin and see-through when there are many."""
    marked = [(k, st) for k, st in sorted(view.link_state.items()) if st in _LINK_STYLE]
    many = len(marked) > _BOLD_LINES_MAX  # many lines: thin and see-through, the cells speak
    for key, st in marked:
        ends = [centres.get(e) or _nic_centre(e, topo, node_pos) for e in key]
        if None in ends:
            continue
        (x1, y1), (x2, y2) = ends  # type: ignore[misc]
        style = {**_LINK_STYLE[st], **({"stroke_width": 1.3} if many else {})}
        svg.add(
            "line", title=_link_title(topo, key, st), x1=x1, y1=y1, x2=x2, y2=y2,
            stroke_opacity=0.45 if many else 0.9, data_link=f"{key[0]} -- {key[1]}", **style,
        )  # fmt: skip


def _nic_centre(
    endpoint: str, topo: Topology, node_pos: dict[str, tuple[float, float]]
) -> tuple[float, float] | None:
    nic = topo.nics.get(endpoint)
    return node_pos.get(nic.node) if nic is not None else None


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
            "rect", title=_node_title(view, n), x=x, y=y, width=tile_w, height=tile_h, rx=3,
            fill=colour, fill_opacity=0.25 if big and st == HEALTHY else (0.45 if big else 1),
            stroke=colour, data_node=n, class_=f"node st-{st}",
        )  # fmt: skip
        if big:
            svg.add(
                "text", n, x=x + tile_w / 2, y=y + 19, text_anchor="middle",
                font_size=_fit_font(n, tile_w - 8, 11), style=_FONT, fill="#1a202c",
            )  # fmt: skip
    _state_legend(svg, height - 22)
    return svg.markup()
