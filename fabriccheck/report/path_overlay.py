"""The failing tests' paths drawn over the topology picture, and the cables of link verdicts.

Few tests on a small fabric: one line group per failing test (``data-test``), its known links
solid, its ECMP candidate links dashed and lighter ("one of N"), parallel tests side by side.
Many tests or a big fabric: one line per switch link, coloured and widened by how many failing
tests crossed it (blue scale; dashed when only candidates did), so 4,096 nodes stay readable.
Tests judged possible ECMP contention that no verdict blames are drawn light blue, never red.
"""

from __future__ import annotations

from collections.abc import Callable

from fabriccheck.models import LinkKey
from fabriccheck.report.paths import FailPaths, LinkLoad, TestPath
from fabriccheck.report.svg import CONTENTION, Svg
from fabriccheck.topology.model import Topology

#: a failing test's path (attributed or not yet explained)
PATH_COLOUR = "#2b6cb0"
#: a failing test judged possible ECMP contention with nobody blamed (also the heatmap's cell)
CONTENTION_COLOUR = CONTENTION
#: one line group per test up to this many failing tests with a path ...
PER_TEST_MAX = 12
#: ... and this many nodes; beyond either: one line per link, coloured by its count
PER_TEST_MAX_NODES = 64
#: counted per link: at most this many lines (links surely crossed first, then the most-crossed
#: candidates), so a RoCE fabric of 4,096 nodes, where each failing flow fans out over every
#: spine, stays a page of a few MB
PATH_LINES_MAX = 1500
_LIGHT, _DARK = (66, 146, 198), (8, 48, 107)  # darker than CONTENTION at the light end
_FONT = "font-family:system-ui,sans-serif"

#: where a link's line goes: (x1, y1, x2, y2), None when an end is not drawn
Ends = Callable[[LinkKey], "tuple[float, float, float, float] | None"]


def per_test(paths: FailPaths, nodes: int) -> bool:
    """Draw each test's path (True) or aggregate per link (False)."""
    return nodes <= PER_TEST_MAX_NODES and len(paths.tests) <= PER_TEST_MAX


def cable(topo: Topology, key: LinkKey) -> str:
    """The cable of a link with its ports where the topology has them.

    >>> from fabriccheck.topology.model import Link, Topology
    >>> t = Topology("t", "infiniband", {}, {}, {("leaf-1", "spine-0"): Link("leaf-1",
    ...     "spine-0", 400.0, (17,), (3,))})
    >>> cable(t, ("leaf-1", "spine-0"))
    'leaf-1 port 17 ↔ spine-0 port 3'
    >>> cable(t, ("leaf-2", "spine-0"))
    'leaf-2 ↔ spine-0 (ports unknown)'
    """
    link = topo.links.get(key)
    if link is None or not (link.a_port or link.b_port):
        return f"{key[0]} ↔ {key[1]} (ports unknown)"
    return link.describe().replace(" -- ", " ↔ ")


def scale_colour(count: int, most: int) -> str:
    """Blue (one failing test) to dark blue (the most on any link).

    >>> scale_colour(1, 1), scale_colour(1, 5) != scale_colour(5, 5)
    ('#08306b', True)
    """
    t = 1.0 if most <= 1 else (count - 1) / (most - 1)
    r, g, b = (round(a + (z - a) * t) for a, z in zip(_LIGHT, _DARK, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


def draw_paths(svg: Svg, paths: FailPaths, topo: Topology, ends: Ends, nodes: int) -> None:
    """Draw the failing tests' paths (per test or per link, see :func:`per_test`)."""
    if not paths.tests:
        return
    if per_test(paths, nodes):
        n = len(paths.tests)
        for i, tp in enumerate(paths.tests):
            _draw_test(svg, tp, topo, ends, (i - (n - 1) / 2) * 2.5)
    else:
        _draw_counts(svg, paths, topo, ends)


def _shift(xy: tuple[float, float, float, float], off: float) -> tuple[float, ...]:
    """The line moved ``off`` units sideways (so parallel tests' paths do not hide each other)."""
    x1, y1, x2, y2 = xy
    dx, dy = x2 - x1, y2 - y1
    norm = (dx * dx + dy * dy) ** 0.5 or 1.0
    ox, oy = -dy / norm * off, dx / norm * off
    return x1 + ox, y1 + oy, x2 + ox, y2 + oy


def _draw_test(svg: Svg, tp: TestPath, topo: Topology, ends: Ends, off: float) -> None:
    colour = CONTENTION_COLOUR if tp.contention else PATH_COLOUR
    how = "path known" if not tp.maybe else (
        f"solid: links it surely crossed; dashed: one of {tp.ways} equal-cost paths")
    why = ("; possible ECMP contention, nobody blamed" if tp.contention
           else "; evidence of a verdict" if tp.blamed else "")
    svg.open_group(title=f"failing test {tp.label}: {how}{why}", data_test=tp.test_id,
                   class_="fpath" + (" contention" if tp.contention else ""))
    for key, sure in sorted([*((k, True) for k in tp.known), *((k, False) for k in tp.maybe)]):
        xy = ends(key)
        if xy is None:
            continue
        x1, y1, x2, y2 = _shift(xy, off)
        svg.add(
            "line", title=f"{tp.test_id} {'crossed' if sure else 'may have crossed'} "
            f"{cable(topo, key)}", x1=x1, y1=y1, x2=x2, y2=y2, stroke=colour,
            stroke_width=2.2 if sure else 1.6, stroke_opacity=0.85 if sure else 0.5,
            stroke_dasharray=None if sure else "5 3", stroke_linecap="round",
            data_path_link=f"{key[0]} -- {key[1]}", data_path_kind="known" if sure else "maybe",
        )  # fmt: skip
    svg.close_group()


def counted_links(paths: FailPaths) -> list[tuple[LinkKey, LinkLoad]]:
    """The links drawn when counting per link: surely crossed ones first, then by count."""
    ranked = sorted(paths.links.items(), key=lambda kv: (
        not kv[1].known, -kv[1].total, -kv[1].known, kv[0]))
    return ranked[:PATH_LINES_MAX]


def _draw_counts(svg: Svg, paths: FailPaths, topo: Topology, ends: Ends) -> None:
    most = paths.max_total
    for key, ld in sorted(counted_links(paths), key=lambda kv: kv[1].total):
        xy = ends(key)
        if xy is None:
            continue
        only_contention = ld.contention == ld.total
        colour = CONTENTION_COLOUR if only_contention else scale_colour(ld.total, most)
        svg.add(
            "line", title=f"{cable(topo, key)}: {ld.describe()}", x1=xy[0], y1=xy[1],
            x2=xy[2], y2=xy[3], stroke=colour, stroke_width=round(1 + 3 * ld.total / most, 2),
            stroke_opacity=0.8, stroke_dasharray=None if ld.known else "5 3",
            stroke_linecap="round", data_path_link=f"{key[0]} -- {key[1]}",
            data_fail_count=ld.total, class_="fpath-link",
        )  # fmt: skip


def path_legend(svg: Svg, y: float, paths: FailPaths, nodes: int) -> None:
    """The legend rows under the state legend (two at most): what the path lines mean."""
    if not paths.tests:
        return
    if per_test(paths, nodes):
        ways = max((tp.ways for tp in paths.tests), default=1)
        items = [("failing test's path", PATH_COLOUR, None)]
        if ways > 1:
            items.append((f"dashed: one of up to {ways} ECMP paths", PATH_COLOUR, "5 3"))
    else:
        most = paths.max_total
        items = [("1 failing test", scale_colour(1, most), None),
                 (f"{most} failing tests on a link", scale_colour(most, most), None)]
        if any(not ld.known for ld in paths.links.values()):
            items.append(("dashed: only as an ECMP candidate", PATH_COLOUR, "5 3"))
    if any(tp.contention for tp in paths.tests):
        items.append(("possible contention, nobody blamed", CONTENTION_COLOUR, None))
    x = 12.0
    for label, colour, dash in items:
        w = 40 + 6.3 * len(label)
        if x > 12 and x + w > svg.width:  # wrap onto the second row the picture keeps free
            x, y = 12.0, y + 16
        svg.add("line", x1=x, y1=y + 6, x2=x + 22, y2=y + 6, stroke=colour, stroke_width=3,
                stroke_dasharray=dash)
        svg.add("text", label, x=x + 27, y=y + 10, font_size=11, style=_FONT, fill="#333")
        x += w
