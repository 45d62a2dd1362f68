"""Bandwidth heatmaps: node × node pairs and node × rail NICs (aggregated by leaf group when big).

Each cell is the measured / expected ratio of the tests it summarises (the spec floor when a test
has no expectation): worst test for a pair, best test for a NIC (a bad NIC never does well, a good
one paired once with a bad partner does). Hover shows the tests behind a cell.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from markupsafe import Markup

from fabriccheck.models import FAIL, HANG, PASS, UNREACHABLE, Observation, RunResult, nic_node
from fabriccheck.report.paths import contention_ids, glitch_ids
from fabriccheck.report.svg import (
    CONTENTION,
    NO_DATA,
    STATE_COLOURS,
    STATUS_COLOURS,
    Svg,
    ratio_colour,
)
from fabriccheck.report.view import RunView, merge_groups, natural_key, obs_ratio
from fabriccheck.topology.model import Topology

MATRIX_MAX_NODES = 64
MATRIX_MAX_GROUPS = 64
RAIL_ROWS_MAX_NODES = 64
_ALARM = ("bad", "suspect", "hung", "unreachable")
#: colour of a cell whose only failures were glitches (``extra["glitches"]``)
GLITCH = "#f3e3b3"
_FONT = "font-family:system-ui,sans-serif"
_STATUS_RANK = {PASS: 0, FAIL: 1, "error": 2, HANG: 3, UNREACHABLE: 4}

@dataclass
class Cell:
    """What a heatmap cell summarises: worst ratio, worst status, test ids and count."""

    ratio: float | None = None
    status: str = PASS
    tests: list[str] = field(default_factory=list)
    count: int = 0
    failing: int = 0
    glitches: int = 0  # failures the run found did not reproduce: shown, but not as the colour
    #: failures the run judged possible ECMP contention with nobody blamed: not an alarm either
    contention: int = 0

    def add(
        self, ratio: float | None, status: str, test_id: str, *, best: bool = False,
        glitch: bool = False, contention: bool = False,
    ) -> None:  # fmt: skip
        self.count += 1
        if glitch:
            self.glitches += 1
            if len(self.tests) < 6:
                self.tests.append(f"{test_id} (glitch)")
            return
        if contention and status != PASS:
            self.contention += 1
            if len(self.tests) < 6:
                self.tests.append(f"{test_id} (contention)")
            return
        self.failing += status != PASS
        if ratio is not None:
            if self.ratio is None:
                self.ratio = ratio
            else:
                self.ratio = max(self.ratio, ratio) if best else min(self.ratio, ratio)
        if _STATUS_RANK.get(status, 1) > _STATUS_RANK.get(self.status, 0):
            self.status = status
        if len(self.tests) < 6:
            self.tests.append(test_id)

    @property
    def colour(self) -> str:
        if self.glitches == self.count:
            return GLITCH
        if self.contention and not self.failing:
            return CONTENTION
        if self.status in (HANG, UNREACHABLE, "error") and self.ratio is None:
            return STATUS_COLOURS[self.status]
        return ratio_colour(self.ratio)

    def describe(self) -> str:
        r = f"{self.ratio:.2f}× expected" if self.ratio is not None else "no number"
        more = "…" if self.count > len(self.tests) else ""
        glitches = f", {self.glitches} glitch(es) that did not reproduce" if self.glitches else ""
        if self.contention:
            glitches += (f", {self.contention} possible ECMP contention (nobody blamed)")
        return (
            f"{r}; {self.count} test(s), {self.failing} not passing{glitches}, worst status "
            f"{self.status}; tests {', '.join(self.tests)}{more}"
        )


def _obs_pairs(obs: Observation) -> set[tuple[str, str]]:
    pairs = {tuple(sorted((nic_node(f.src), nic_node(f.dst)))) for f in obs.test.flows}
    if not pairs:
        nodes = obs.test.nodes
        if len(nodes) == 1:
            pairs = {(nodes[0], nodes[0])}
        else:
            ring = zip(nodes, nodes[1:] + nodes[:1], strict=True)
            pairs = {tuple(sorted((a, b))) for a, b in ring}
    return pairs  # type: ignore[return-value]


def _legend(svg: Svg, x: float, y: float, contention: bool = False) -> None:
    items = [("≥0.95×", ratio_colour(1.0)), ("0.8×", ratio_colour(0.8)),
             ("≤0.5×", ratio_colour(0.5)), ("hang", STATUS_COLOURS[HANG]),
             ("unreachable", STATUS_COLOURS[UNREACHABLE]), ("glitch only", GLITCH),
             ("no test", NO_DATA)]  # fmt: skip
    if contention:
        items.insert(-1, ("contention, not blamed", CONTENTION))
    for label, colour in items:
        svg.add("rect", x=x, y=y, width=12, height=12, rx=2, fill=colour, stroke="#cbd2dc")
        svg.add("text", label, x=x + 16, y=y + 10, font_size=10, style=_FONT, fill="#333")
        x += 26 + 6.5 * len(label)


def _fs(n: int, cell: float) -> float:
    return max(6.0, min(11.0, cell * 0.8))


# ---- pair matrix ------------------------------------------------------------------------------
def render_pair_matrix(result: RunResult, view: RunView) -> tuple[Markup, str]:
    """Node × node (or leaf group × leaf group) heatmap of measured/expected bandwidth.

    Returns the SVG and a caption naming what the axes are.
    """
    labels, index, caption, blocks = _matrix_axes(view)
    cells = _pair_cells(result, index)
    n = len(labels)
    cell = max(8.0, min(34.0, 1000.0 / max(n, 1)))
    label_w = min(190.0, 7.0 * max((len(s) for s in labels), default=4) + 10)
    left, top = label_w, label_w * 0.75 + 10
    width = left + n * cell + label_w * 0.7
    height = top + n * cell + 40
    svg = Svg(max(width, 520), height, f"pair heatmap ({caption})", "fig heat")
    fs = _fs(n, cell)
    for i, lab in enumerate(labels):
        state = _label_state(view, lab, i, not blocks)
        colour = STATE_COLOURS[state] if state in _ALARM else "#333"
        weight = "700" if colour != "#333" else None
        svg.add("text", lab, x=left - 4, y=top + i * cell + cell / 2 + fs / 3, text_anchor="end",
                font_size=fs, style=_FONT, fill=colour, font_weight=weight)  # fmt: skip
        cx = left + i * cell + cell / 2
        svg.add("text", lab, x=cx, y=top - 4, font_size=fs, style=_FONT, fill=colour,
                font_weight=weight, transform=f"rotate(-50 {cx:.1f} {top - 4:.1f})")  # fmt: skip
    _draw_pair_cells(svg, cells, labels, left, top, cell, blocks)
    _legend(svg, 10, height - 22, any(c.colour == CONTENTION for c in cells.values()))
    return svg.markup(), caption


def _matrix_axes(view: RunView) -> tuple[list[str], dict[str, int], str, bool]:
    """The matrix's labels, each node's row/column, the caption and whether labels are leaf
    groups: the tested nodes, or past ``MATRIX_MAX_NODES`` their leaf groups (merged to at most
    ``MATRIX_MAX_GROUPS``)."""
    nodes = [n for n in view.run_nodes if n in view.node_obs]
    if len(nodes) <= MATRIX_MAX_NODES:
        return nodes, {n: i for i, n in enumerate(nodes)}, "node × node", False
    groups = merge_groups(view.groups, MATRIX_MAX_GROUPS)
    labels = [g.label for g in groups]
    index = {n: i for i, g in enumerate(groups) for n in g.nodes}
    caption = (f"aggregated: {len(groups)} leaf groups × {len(groups)}: worst pair per block, "
               "paler when few of its tests failed")  # fmt: skip
    return labels, index, caption, True


def _pair_cells(result: RunResult, index: dict[str, int]) -> dict[tuple[int, int], Cell]:
    """Every test folded into the cells of the node pairs it measured (both ways round)."""
    cells: dict[tuple[int, int], Cell] = {}
    glitches = glitch_ids(result)
    contention = contention_ids(result)
    for obs in result.observations:
        r = obs_ratio(obs)
        g = obs.test.test_id in glitches
        c = obs.test.test_id in contention
        for a, b in _obs_pairs(obs):
            if a not in index or b not in index:
                continue
            i, j = index[a], index[b]
            for key in {(i, j), (j, i)}:
                cells.setdefault(key, Cell()).add(r, obs.status, obs.test.test_id, glitch=g,
                                                  contention=c)
    return cells


def _draw_pair_cells(svg: Svg, cells: dict[tuple[int, int], Cell], labels: list[str],
                     left: float, top: float, cell: float, blocks: bool) -> None:  # fmt: skip
    """The matrix body: untested pairs as one patterned grid, then each tested cell on it."""
    n = len(labels)
    # untested pairs: a grid of blank cells in one pattern, then only the tested cells
    svg.open("defs")
    svg.open("pattern", id="fc-nodata", width=cell, height=cell, x=left, y=top,
             patternUnits="userSpaceOnUse")  # fmt: skip
    svg.add("rect", width=cell - 1, height=cell - 1, fill=NO_DATA)
    svg.close("pattern")
    svg.close("defs")
    svg.add("rect", title="not tested together", x=left, y=top, width=n * cell, height=n * cell,
            fill="url(#fc-nodata)")  # fmt: skip
    for (i, j), c in sorted(cells.items()):
        # blocks: a block where only a few of many tests failed is drawn paler
        share = c.failing / max(c.count - c.glitches - c.contention, 1)
        opacity = round(0.35 + 0.65 * share, 2) if blocks and c.failing else None
        svg.add(
            "rect", title=f"{labels[i]} ↔ {labels[j]}: {c.describe()}", x=left + j * cell,
            y=top + i * cell, width=cell - 1, height=cell - 1, fill=c.colour,
            fill_opacity=opacity, class_="contention" if c.colour == CONTENTION else None,
        )  # fmt: skip


def _label_state(view: RunView, label: str, i: int, is_node: bool) -> str:
    if is_node:
        return view.node_state.get(label, "")
    return ""


# ---- rail heatmap -----------------------------------------------------------------------------
def nic_cells(result: RunResult) -> dict[str, Cell]:
    """Per NIC endpoint: the best ratio of the tests whose flows use it."""
    out: dict[str, Cell] = {}
    glitches = glitch_ids(result)
    contention = contention_ids(result)
    for obs in result.observations:
        r = obs_ratio(obs)
        g = obs.test.test_id in glitches
        c = obs.test.test_id in contention
        for nic in {e for f in obs.test.flows for e in (f.src, f.dst)}:
            out.setdefault(nic, Cell()).add(r, obs.status, obs.test.test_id, best=True, glitch=g,
                                            contention=c)
    return out


def render_rail_heatmap(
    result: RunResult, view: RunView, topology: Topology | None
) -> tuple[Markup, str] | None:
    """Node × rail (or rail × leaf group) heatmap of each NIC's best measured/expected ratio."""
    cells = nic_cells(result)
    if not cells:
        return None
    rail_at = _nic_rails(cells, topology)
    rails = sorted(set(rail_at.values()))
    rail_label = {r: f"rail {r}" for r in rails}
    nodes = [n for n in view.run_nodes if n in view.node_obs]
    by_node = len(nodes) <= RAIL_ROWS_MAX_NODES
    if by_node:
        rows = nodes
        key_of = {n: i for i, n in enumerate(nodes)}
        caption = "node × rail: each NIC's best test"
    else:
        groups = merge_groups(view.groups, 128)
        rows = [g.label for g in groups]
        key_of = {n: i for i, g in enumerate(groups) for n in g.nodes}
        caption = f"rail × {len(groups)} leaf groups: worst NIC per block"
    agg = _rail_blocks(cells, key_of, rail_at, rails)
    if by_node:
        svg, height, at, size = _node_rail_grid(view, rows, rails, rail_label, caption)
    else:
        svg, height, at, size = _group_rail_grid(rows, rails, rail_label, caption)
    for (i, j), c in agg.items():
        x, y = at(i, j)
        w, h = size
        where = rows[i]
        svg.add(
            "rect", title=f"{where} · {rail_label[rails[j]]}: {c.describe()}", x=x, y=y,
            width=w, height=h, rx=2, fill=c.colour,
        )  # fmt: skip
    _legend(svg, 10, height - 22, any(c.colour == CONTENTION for c in agg.values()))
    return svg.markup(), caption


def _nic_rails(cells: dict[str, Cell], topology: Topology | None) -> dict[str, int]:
    """The rail of each NIC: the topology's, else the NIC name's place among all names."""
    rail_of: dict[str, int] = {}
    if topology is not None:
        rail_of = {e: nic.rail for e, nic in topology.nics.items()}
    names = sorted({e.split("/", 1)[1] for e in cells}, key=natural_key)
    col_of = {nm: i for i, nm in enumerate(names)}
    return {e: rail_of.get(e, col_of[e.split("/", 1)[1]]) for e in cells}


def _rail_blocks(
    cells: dict[str, Cell], key_of: dict[str, int], rail_at: dict[str, int], rails: list[int]
) -> dict[tuple[int, int], Cell]:
    """Merge the NIC cells into (row, rail) blocks: worst ratio and status, all counts."""
    agg: dict[tuple[int, int], Cell] = {}
    for e, c in cells.items():
        node = nic_node(e)
        if node not in key_of:
            continue
        k = (key_of[node], rails.index(rail_at[e]))
        tgt = agg.setdefault(k, Cell())
        tgt.count += c.count
        tgt.failing += c.failing
        tgt.glitches += c.glitches
        tgt.contention += c.contention
        tgt.tests = (tgt.tests + c.tests)[:6]
        if c.ratio is not None:
            tgt.ratio = c.ratio if tgt.ratio is None else min(tgt.ratio, c.ratio)
        if _STATUS_RANK.get(c.status, 1) > _STATUS_RANK.get(tgt.status, 0):
            tgt.status = c.status
    return agg


#: a rail grid: the labelled SVG, its height, (row, rail) -> cell top-left, the cell size
_Grid = tuple[Svg, float, Callable[[int, int], tuple[float, float]], tuple[float, float]]


def _node_rail_grid(
    view: RunView, rows: list[str], rails: list[int], rail_label: dict[int, str], caption: str
) -> _Grid:
    """A row per node, a column per rail: the labelled SVG, its height, cell origin and size."""
    cell, row_h = 34.0, (26.0 if len(rows) <= 16 else 15.0)
    fs = min(11.0, row_h * 0.72)
    label_w = min(190.0, fs * 0.62 * max(len(s) for s in rows) + 12)
    width, height = label_w + len(rails) * cell + 30, 34 + len(rows) * row_h + 40
    svg = Svg(max(width, 520), height, caption, "fig heat")
    for j, r in enumerate(rails):
        svg.add("text", rail_label[r], x=label_w + j * cell + cell / 2, y=26,
                text_anchor="middle", font_size=9, style=_FONT, fill="#333")  # fmt: skip
    for i, lab in enumerate(rows):
        st = view.node_state.get(lab, "")
        svg.add("text", lab, x=label_w - 4, y=34 + i * row_h + row_h / 2 + fs / 3,
                text_anchor="end", font_size=fs, style=_FONT,
                fill=STATE_COLOURS[st] if st in _ALARM else "#333",
                font_weight="700" if st in _ALARM else None)  # fmt: skip

    def at(i: int, j: int) -> tuple[float, float]:
        return label_w + j * cell, 34.0 + i * row_h

    return svg, height, at, (cell - 2, row_h - 2)


def _group_rail_grid(
    rows: list[str], rails: list[int], rail_label: dict[int, str], caption: str
) -> _Grid:
    """A row per rail, a column per leaf group: the labelled SVG, its height, cell origin, size."""
    cell = max(6.0, min(16.0, 1200.0 / max(len(rows), 1)))
    width, height = 70 + len(rows) * cell + 20, 20 + len(rails) * 16 + 50
    svg = Svg(max(width, 520), height, caption, "fig heat")
    for j, r in enumerate(rails):
        svg.add("text", rail_label[r], x=62, y=20 + j * 16 + 11, text_anchor="end",
                font_size=10, style=_FONT, fill="#333")  # fmt: skip

    def at(i: int, j: int) -> tuple[float, float]:
        return 70 + i * cell, 20 + j * 16

    return svg, height, at, (cell - 1, 15.0)


