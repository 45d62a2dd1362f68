"""What the topology pictures share: sizes, link styles, legends, titles and switch states."""

from __future__ import annotations

from fabriccheck.models import BAD, SUSPECT, LinkKey
from fabriccheck.report.path_overlay import cable
from fabriccheck.report.paths import FailPaths
from fabriccheck.report.svg import STATE_COLOURS, Svg
from fabriccheck.report.view import RunView
from fabriccheck.topology.model import Topology

DETAIL_MAX_NODES = 32
WIDTH = 1360
LINK_STYLE = {
    BAD: {"stroke": STATE_COLOURS[BAD], "stroke_width": 3.5},
    SUSPECT: {"stroke": STATE_COLOURS[SUSPECT], "stroke_width": 2.5, "stroke_dasharray": "6 3"},
}
NIC_FILL = {BAD: STATE_COLOURS[BAD], SUSPECT: STATE_COLOURS[SUSPECT]}
FONT = "font-family:system-ui,sans-serif"
#: above this many bad/suspect links the aggregated picture draws them thin
BOLD_LINES_MAX = 6
#: a leaf-group box names at most this many of its unhealthy nodes
NAMES_PER_BOX = 3


def fit_font(label: str, width: float, size: float = 11.0) -> float:
    """A font size at most ``size`` at which ``label`` fits in ``width`` (5 at least)."""
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


NO_PATHS = FailPaths((), {})
#: room for the failing-path legend (two rows)
PATH_LEGEND_H = 36.0


def link_title(topo: Topology, key: LinkKey, st: str) -> str:
    """``link leaf-1 port 17 ↔ spine-0 port 3: bad`` (ports where the topology has them)."""
    return f"link {cable(topo, key)}: {st}"


def legend(svg: Svg, y: float, items: list[tuple[str, str]]) -> None:
    """A row of colour swatches with their labels at height ``y``."""
    x = 12.0
    for label, colour in items:
        svg.add("rect", x=x, y=y, width=12, height=12, rx=2, fill=colour)
        svg.add("text", label, x=x + 17, y=y + 10, font_size=11, style=FONT, fill="#333")
        x += 28 + 7 * len(label)


def state_legend(svg: Svg, y: float) -> None:
    """The component-state legend (healthy, suspect, bad, ...)."""
    legend(svg, y, [(s, STATE_COLOURS[s]) for s in STATE_COLOURS])


def node_title(view: RunView, node: str) -> str:
    """A node's tooltip: its state and why."""
    st = view.node_state.get(node, "")
    why = view.node_reason.get(node, "")
    return f"{node}: {st}" + (f" — {why}" if why else "")
