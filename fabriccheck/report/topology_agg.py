"""The aggregated topology picture (more than :data:`DETAIL_MAX_NODES` nodes).

Switches become small cells per tier and nodes become cells inside one box per leaf group; only
bad and suspect links and the failing tests' paths are drawn as lines, so 4,096 nodes stay
readable.
"""

from __future__ import annotations

from typing import NamedTuple

from markupsafe import Markup

from fabriccheck.models import BAD, HEALTHY, SUSPECT, LinkKey
from fabriccheck.report.path_overlay import draw_paths, path_legend
from fabriccheck.report.paths import FailPaths
from fabriccheck.report.svg import STATE_COLOURS, Svg
from fabriccheck.report.topology_base import (
    BOLD_LINES_MAX,
    FONT,
    LINK_STYLE,
    NAMES_PER_BOX,
    PATH_LEGEND_H,
    WIDTH,
    fit_font,
    link_title,
    node_title,
    state_legend,
    switch_states,
)
from fabriccheck.report.view import Group, RunView, natural_key
from fabriccheck.topology.model import Topology


class _GroupBox(NamedTuple):
    """Where one leaf group's box goes and how many cells a row of it holds."""

    index: int
    group: Group
    x: float
    y: float
    w: float
    h: float
    cols: int


def render_aggregated(view: RunView, topo: Topology, paths: FailPaths) -> Markup:
    """Switch cells per tier over one box of node cells per leaf group; bad links only."""
    n = len(view.nodes)
    pitch = 20.0 if n <= 128 else (15.0 if n <= 512 else 11.0)
    cell = pitch - 2
    sw_state = switch_states(topo, view)
    centres, rows, y = _tier_cells(topo, pitch, cell)
    boxes, height, used_w = _group_boxes(view, pitch, y + 8)
    height += PATH_LEGEND_H if paths.tests else 0.0
    used_w = max(used_w, *(c[0] + pitch for c in centres.values()), 560.0)
    svg = Svg(min(WIDTH, used_w + 10), height, "fabric topology (aggregated by leaf group)")
    for label, ty in rows:
        svg.add("text", label, x=8, y=ty + 8, font_size=10, style=FONT, fill="#4a5568")
    svg.add("text", "leaf groups", x=8, y=y, font_size=10, style=FONT, fill="#4a5568")
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
        state_legend(svg, height - 22 - PATH_LEGEND_H)
        path_legend(svg, height - 4 - PATH_LEGEND_H, paths, n)
    else:
        state_legend(svg, height - 22)
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
        h += 11 * min(len(flagged), NAMES_PER_BOX + 1)
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
        "text", g.label, x=bx + 5, y=by + 12, font_size=fit_font(g.label, w - 8, 9),
        style=FONT, fill="#2d3748",
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
            "rect", title=node_title(view, n), x=nx_, y=ny, width=cell, height=cell,
            rx=1.5, fill=STATE_COLOURS.get(st, "#999"), data_node=n, class_=f"node st-{st}",
            stroke="#000" if st not in (HEALTHY, "untested") else None, stroke_width=0.8,
        )  # fmt: skip
        node_pos[n] = (nx_ + cell / 2, ny + cell / 2)
    return cy + (-(-len(g.nodes) // cols)) * pitch + 8


def _draw_box_names(svg: Svg, view: RunView, flagged: list[str], bx: float, ty: float) -> None:
    """Name the first few unhealthy nodes of a group, then how many more there are."""
    for i, n in enumerate(flagged[:NAMES_PER_BOX]):
        st = view.node_state[n]
        svg.add("text", f"{n} {st}", x=bx + 6, y=ty + i * 11, font_size=9, style=FONT,
                fill=STATE_COLOURS.get(st, "#333"), font_weight="600")  # fmt: skip
    if len(flagged) > NAMES_PER_BOX:
        svg.add("text", f"+{len(flagged) - NAMES_PER_BOX} more", x=bx + 6,
                y=ty + NAMES_PER_BOX * 11, font_size=9, style=FONT, fill="#333")  # fmt: skip


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
    marked = [(k, st) for k, st in sorted(view.link_state.items()) if st in LINK_STYLE]
    many = len(marked) > BOLD_LINES_MAX  # many lines: thin and see-through, the cells speak
    for key, st in marked:
        ends = [centres.get(e) or _nic_centre(e, topo, node_pos) for e in key]
        if None in ends:
            continue
        (x1, y1), (x2, y2) = ends  # type: ignore[misc]
        style = {**LINK_STYLE[st], **({"stroke_width": 1.3} if many else {})}
        svg.add(
            "line", title=link_title(topo, key, st), x1=x1, y1=y1, x2=x2, y2=y2,
            stroke_opacity=0.45 if many else 0.9, data_link=f"{key[0]} -- {key[1]}", **style,
        )  # fmt: skip


def _nic_centre(
    endpoint: str, topo: Topology, node_pos: dict[str, tuple[float, float]]
) -> tuple[float, float] | None:
    nic = topo.nics.get(endpoint)
    return node_pos.get(nic.node) if nic is not None else None
