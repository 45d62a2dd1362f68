"""The rack picture: each NVLink domain drawn as its rack, with what the run found marked.

A rack (:func:`render_rack`) stacks its compute trays over and under its NVSwitch trays as an
NVL72 does (10 trays, the 9 switch trays, 8 trays): each compute tray a row coloured by its
state with a cell per GPU, each switch tray a row with a cell per switch chip. Marked (with a
``data-mark`` attribute, and red or amber): a tray not healthy (drained, suspect, hung,
unreachable), a GPU the domain level named, an inactive NVLink port (a line from the GPU to the
switch chip it is wired to), a switch tray or chip found down, a rack not settled. Racks with
something marked come first; at most :data:`RACKS_MAX` are drawn. Every text goes through
:class:`~fabriccheck.report.svg.Svg` (escaped); hover a part for its name and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from fabriccheck.models import BAD, HEALTHY, SUSPECT, RunResult
from fabriccheck.report.rack_marks import PortMark, RackMarks, rack_marks
from fabriccheck.report.svg import STATE_COLOURS, Svg
from fabriccheck.report.topology_base import FONT, fit_font, legend
from fabriccheck.report.view import RunView
from fabriccheck.topology.model import Topology

__all__ = ["RACKS_MAX", "render_rack", "render_racks"]

#: racks drawn at most (the marked ones first); the caption counts the others
RACKS_MAX = 16
#: port lines drawn per rack at most (a switch tray down is marked on the switch tray)
PORT_LINES_MAX = 40
WIDTH, HEAD_H, ROW_H, GAP = 250.0, 36.0, 15.0, 2.0
CELL_X = 112.0
SWITCH_FILL = "#e2e8f0"
DOWN = STATE_COLOURS[BAD]


@dataclass(frozen=True)
class _Layout:
    """Row tops: compute trays by name, switch trays by index; the picture's height."""

    tray_y: dict[str, float]
    switch_y: dict[int, float]
    top_trays: frozenset[str]
    height: float


def _layout(m: RackMarks) -> _Layout:
    """An NVL72's order: the first 10 of 18 trays (the same share of any count), the switch
    trays, the rest."""
    d = m.domain
    top = min(len(d.trays), (len(d.trays) * 10 + 17) // 18)
    y = HEAD_H
    tray_y: dict[str, float] = {}
    for tray in d.trays[:top]:
        tray_y[tray] = y
        y += ROW_H + GAP
    y += 4
    switch_y = {}
    for t in range(d.switch_trays):
        switch_y[t] = y
        y += ROW_H + GAP
    y += 4
    for tray in d.trays[top:]:
        tray_y[tray] = y
        y += ROW_H + GAP
    return _Layout(tray_y, switch_y, frozenset(d.trays[:top]), y + 6)


def _cell(count: int, i: int) -> tuple[float, float]:
    """(x, width) of cell ``i`` of ``count`` in a row."""
    w = min(18.0, (WIDTH - 10 - CELL_X) / max(count, 1) - 4)
    return CELL_X + i * (w + 4), w


def _draw_head(svg: Svg, m: RackMarks) -> None:
    d = m.domain
    title = f"{d.name}: {len(d.trays)} compute trays, {d.switch_trays} NVSwitch trays"
    colour = STATE_COLOURS[SUSPECT] if m.suspect else "#1a202c"
    mark = {"data_mark": "rack"} if m.suspect else {}
    svg.add("text", d.name, title=title + (f" — not settled: {m.suspect}" if m.suspect else ""),
            x=8, y=15, font_size=13, font_weight="600", style=FONT, fill=colour, **mark)
    note = m.stats or f"{len(d.trays)} x {d.gpus_per_tray} GPUs, {d.chips} switch chips"
    svg.add("text", note, x=8, y=29, font_size=fit_font(note, WIDTH - 16, 9.5), style=FONT,
            fill="#718096")


def _draw_tray(svg: Svg, m: RackMarks, tray: str, y: float) -> None:
    st = m.tray_state.get(tray, HEALTHY)
    colour = STATE_COLOURS.get(st, "#999")
    why = m.tray_why.get(tray, "")
    flagged = st not in (HEALTHY, "untested")
    svg.open_group(title=f"{tray}: {st}" + (f" — {why}" if why else ""), data_tray=tray,
                   class_=f"tray st-{st}", **({"data_mark": "tray"} if flagged else {}))
    svg.add("rect", x=6, y=y, width=WIDTH - 12, height=ROW_H, rx=2, fill=colour,
            fill_opacity=0.3 if flagged else 0.12, stroke=colour,
            stroke_width=2 if flagged else 0.8)
    svg.add("text", tray, x=11, y=y + 11, font_size=fit_font(tray, CELL_X - 14, 9.5),
            style=FONT, fill="#1a202c", font_weight="600" if flagged else None)
    svg.close_group()
    for g in range(m.domain.gpus_per_tray):
        x, w = _cell(m.domain.gpus_per_tray, g)
        why = m.gpus.get((tray, g))
        down = [f"nvl{p.port}" for p in m.ports if (p.tray, p.gpu) == (tray, g)]
        name = f"{tray}/gpu{g}"
        if why:
            note, mark = f"failing — {why}", "gpu"
        elif down:
            note, mark = "inactive ports " + ", ".join(down), "port-gpu"
        else:
            note, mark = "ok", None
        svg.add("rect", title=f"{name}: {note}", x=x, y=y + 2, width=w, height=ROW_H - 4, rx=1,
                fill=DOWN if why else "#fff", stroke=DOWN if mark else "#94a3b8",
                stroke_width=1.6 if mark else 0.7, data_gpu=name, data_mark=mark)


def _draw_switch_tray(svg: Svg, m: RackMarks, t: int, y: float) -> None:
    d = m.domain
    name = d.switch_tray_names()[t]
    why = m.switch_trays.get(t)
    svg.open_group(title=f"{name}: " + (f"down — {why}" if why else "NVSwitch tray"),
                   data_nvsw=name, **({"data_mark": "switch"} if why else {}))
    svg.add("rect", x=6, y=y, width=WIDTH - 12, height=ROW_H, rx=2,
            fill=DOWN if why else SWITCH_FILL, fill_opacity=0.3 if why else 1,
            stroke=DOWN if why else "#94a3b8", stroke_width=2 if why else 0.8)
    label = name.removeprefix(f"{d.name}-")
    svg.add("text", label, x=11, y=y + 11, font_size=9.5, style=FONT, fill="#1a202c")
    svg.close_group()
    for k in range(d.chips_per_switch_tray):
        chip = t * d.chips_per_switch_tray + k
        x, w = _cell(d.chips_per_switch_tray, k)
        cwhy = m.chips.get(chip) or why
        ports = ", ".join(p.name for p in m.ports if p.chip == chip)
        note = (f"down — {cwhy}" if cwhy else f"inactive ports to it: {ports}" if ports
                else "ok")
        svg.add("rect", title=f"{d.chip_name(chip)}: {note}", x=x, y=y + 2, width=w,
                height=ROW_H - 4, rx=1, fill=DOWN if cwhy else "#fff",
                stroke=DOWN if cwhy or ports else "#64748b",
                stroke_width=1.6 if cwhy or ports else 0.7, data_chip=d.chip_name(chip),
                data_mark="chip" if m.chips.get(chip) else None)


def _draw_ports(svg: Svg, m: RackMarks, lay: _Layout) -> None:
    """A red line per inactive port, GPU cell to switch-chip cell (the first
    :data:`PORT_LINES_MAX`)."""
    d = m.domain
    for p in m.ports[:PORT_LINES_MAX]:
        gx, gw = _cell(d.gpus_per_tray, p.gpu)
        t, k = divmod(p.chip, d.chips_per_switch_tray)
        cx, cw = _cell(d.chips_per_switch_tray, k)
        ty, sy = lay.tray_y[p.tray], lay.switch_y[t]
        above = p.tray in lay.top_trays
        y1 = ty + ROW_H - 2 if above else ty + 2
        y2 = sy + 2 if above else sy + ROW_H - 2
        svg.add("line", title=_port_title(p), x1=gx + gw / 2, y1=y1, x2=cx + cw / 2, y2=y2,
                stroke=DOWN, stroke_width=1.8, stroke_linecap="round", data_port=p.name,
                data_mark="port")


def _port_title(p: PortMark) -> str:
    return f"{p.name} -> {p.chip_name}: inactive" + (f" ({p.note})" if p.note else "")


def render_rack(m: RackMarks) -> Markup:
    """One rack's picture."""
    lay = _layout(m)
    svg = Svg(WIDTH, lay.height, f"NVLink domain {m.domain.name}", css_class="fig rack")
    _draw_head(svg, m)
    for tray, y in lay.tray_y.items():
        _draw_tray(svg, m, tray, y)
    for t, y in lay.switch_y.items():
        _draw_switch_tray(svg, m, t, y)
    _draw_ports(svg, m, lay)
    if len(m.ports) > PORT_LINES_MAX:
        svg.add("text", f"+{len(m.ports) - PORT_LINES_MAX} more inactive ports",
                x=8, y=lay.height - 2, font_size=9, style=FONT, fill=DOWN)
    return svg.markup()


def _legend() -> Markup:
    items = [("healthy tray", STATE_COLOURS[HEALTHY]), ("drained / bad", STATE_COLOURS[BAD]),
             ("suspect", STATE_COLOURS[SUSPECT]), ("NVSwitch tray", SWITCH_FILL),
             ("failing GPU, down chip or port (line: GPU port -> chip)", DOWN)]
    svg = Svg(900, 22, "rack legend", css_class="fig")
    legend(svg, 5, items)
    return svg.markup()


def render_racks(result: RunResult, view: RunView, topology: Topology | None
                 ) -> tuple[list[Markup], Markup | None, str]:
    """The rack pictures of a run (none when the topology has no NVLink domains), their legend
    and the caption."""
    racks = rack_marks(result, view, topology)
    if not racks:
        return [], None, ""
    order = sorted(racks, key=lambda m: not m.marked)  # stable: marked first, topology order
    shown = order[:RACKS_MAX]
    marked = sum(m.marked for m in racks)
    caption = (f"{len(racks)} NVLink domain(s): compute trays over and under their NVSwitch "
               f"trays (a cell per GPU, per switch chip); {marked} with something marked. Red: "
               "drained trays, failing GPUs, down switch trays or chips, inactive ports (a line "
               "from the GPU to the chip it is wired to); amber: suspect. Hover for why.")
    if len(racks) > len(shown):
        caption += f" {len(racks) - len(shown)} rack(s) with nothing marked are not drawn."
    return [render_rack(m) for m in shown], _legend(), caption
