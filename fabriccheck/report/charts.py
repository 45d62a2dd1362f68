"""The report's small charts: per-NIC bars, the round timeline and history sparklines.

Inputs beyond the run itself, read from ``RunResult.extra`` when present:

``extra["baselines"]``
    Learned baselines: ``{probe: {key: value}}`` in that probe's unit (``Gb/s`` for
    ``ib_write_bw``/``iperf3``, ``GB/s`` busbw for collectives); ``key`` is a NIC endpoint
    (``node-017/mlx5_3``), a node, or ``"*"`` for the fleet. The most specific key wins.
    A list of ``store.Baseline`` dicts (``probe``, ``group_size``, ``median``) also works.
``extra["history"]``
    Past runs per node, oldest first: ``{node: [{"time": ISO-8601 str, "ratio": float | None,
    "state": "healthy" | "suspect" | "bad" | ..., "run_id": str}]}``, where ``ratio`` is the
    node's measured / expected bandwidth in that run (1.0 = as expected; its worst test).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from statistics import median
from typing import Any

from markupsafe import Markup

from fabriccheck.models import FAIL, HANG, PASS, UNREACHABLE, Observation, RunResult, nic_node
from fabriccheck.report.svg import STATE_COLOURS, STATUS_COLOURS, Svg
from fabriccheck.report.view import natural_key, obs_ratio
from fabriccheck.topology.model import Topology

GANTT_MAX_TESTS = 60
_FONT = "font-family:system-ui,sans-serif"
_STATUS_RANK = {PASS: 0, FAIL: 1, "error": 2, HANG: 3, UNREACHABLE: 4}


# ---- per-NIC bars -----------------------------------------------------------------------------
def baseline_for(extra: Mapping[str, Any], probe: str, nic: str) -> float | None:
    """The learned baseline for ``nic`` under ``probe`` (NIC, then node, then ``"*"``).

    ``extra["baselines"]`` may also be a list of :class:`fabriccheck.store.Baseline` dicts
    (``probe``, ``group_size``, ``median``): the pair (group size 2) median is the fleet value.

    >>> baseline_for({"baselines": {"nccl": {"*": 360.0, "n1": 300.0}}}, "nccl", "n1/mlx5_0")
    300.0
    >>> baseline_for({"baselines": [{"probe": "nccl", "group_size": 2, "median": 355.0}]},
    ...              "nccl", "n1/mlx5_0")
    355.0
    """
    raw = extra.get("baselines") or {}
    if isinstance(raw, list):
        rows = [b for b in raw if isinstance(b, Mapping) and b.get("probe") == probe]
        rows.sort(key=lambda b: b.get("group_size") != 2)
        value = rows[0].get("median") if rows else None
        return float(value) if isinstance(value, int | float) else None
    table = raw.get(probe) or {} if isinstance(raw, Mapping) else {}
    for key in (nic, nic_node(nic), "*"):
        if isinstance(table.get(key), int | float):
            return float(table[key])
    return None


def render_nic_bars(result: RunResult, node: str, topology: Topology | None) -> Markup | None:
    """Bars of each NIC's measured bandwidth for ``node`` against the floor and baseline."""
    per_probe = _node_nic_observations(result, node)
    if not any(o.value is not None for nics in per_probe.values() for lst in nics.values()
               for o in lst):
        return None
    single = [p for p in per_probe if p in ("ib_write_bw", "iperf3")]
    probe = max(single or per_probe, key=lambda p: len(per_probe[p]))
    by_nic = per_probe[probe]
    nics = sorted(by_nic, key=natural_key)
    if topology is not None and node in topology.nodes:
        nics = [n.endpoint for n in topology.nodes[node].nics if n.endpoint in by_nic] or nics
    values = [o.value for lst in by_nic.values() for o in lst if o.value is not None]
    refs = [x for lst in by_nic.values() for o in lst for x in (o.floor, o.expected) if x]
    bases = [b for nic in nics if (b := baseline_for(result.extra, probe, nic)) is not None]
    top_v = max(values + refs + bases + [1.0]) * 1.1
    unit = next((o.unit for lst in by_nic.values() for o in lst if o.unit), "")
    bar_w, gap, plot_h, left = 34.0, 10.0, 120.0, 46.0
    width = left + len(nics) * (bar_w + gap) + 120
    svg = Svg(max(width, 360), plot_h + 58, f"{node} per-NIC {probe}", "fig bars")

    def y_of(v: float) -> float:
        return 10 + plot_h * (1 - v / top_v)

    _draw_bar_scale(svg, y_of, top_v, left, width - 110)
    for i, nic in enumerate(nics):
        x = left + i * (bar_w + gap)
        base = baseline_for(result.extra, probe, nic)
        _draw_nic_bar(svg, nic, by_nic[nic], base, unit, x, bar_w, plot_h, y_of)
    _draw_bar_legend(svg, width - 104)
    svg.add("text", f"{probe} ({unit})", x=left, y=plot_h + 44, font_size=10, style=_FONT,
            fill="#4a5568")  # fmt: skip
    return svg.markup()


def _node_nic_observations(result: RunResult, node: str) -> dict[str, dict[str, list[Observation]]]:
    """The observations of ``node``'s tests, by probe and then by the node's NIC they used."""
    per_probe: dict[str, dict[str, list[Observation]]] = {}
    for obs in result.observations:
        if node not in obs.test.nodes:
            continue
        for nic in obs.test.nics:
            if nic_node(nic) == node:
                per_probe.setdefault(obs.test.probe, {}).setdefault(nic, []).append(obs)
    return per_probe


def _draw_bar_scale(
    svg: Svg, y_of: Callable[[float], float], top_v: float, left: float, right: float
) -> None:
    """Grid lines with their values at 0, half and the top of the scale."""
    for frac in (0.0, 0.5, 1.0):
        v = top_v * frac / 1.1
        svg.add("line", x1=left, x2=right, y1=y_of(v), y2=y_of(v), stroke="#e2e8f0")
        tick = f"{v:.0f}" if top_v > 20 else f"{v:.2g}"
        svg.add("text", tick, x=left - 4, y=y_of(v) + 3, text_anchor="end", font_size=9,
                style=_FONT, fill="#718096")  # fmt: skip


def _draw_nic_bar(
    svg: Svg, nic: str, obs_list: list[Observation], base: float | None, unit: str, x: float,
    bar_w: float, plot_h: float, y_of: Callable[[float], float],
) -> None:  # fmt: skip
    """One NIC: a bar to its best value, a dot per test, the spec floor and the baseline."""
    vals = [o.value for o in obs_list if o.value is not None]
    best = max(vals) if vals else 0.0
    floor = max((o.floor for o in obs_list if o.floor), default=None)
    status = "pass" if all(o.passed for o in obs_list) else (
        "fail" if vals else (obs_list[0].status if obs_list else "fail"))  # fmt: skip
    colour = STATUS_COLOURS.get(status, "#d7263d")
    detail = "; ".join(
        f"{o.test.test_id}: {o.status} {'' if o.value is None else f'{o.value:.1f}'}"
        for o in obs_list[:8]
    )
    svg.add(
        "rect", title=f"{nic} best {best:.1f} {unit} ({detail})", x=x, y=y_of(best),
        width=bar_w, height=max(plot_h + 10 - y_of(best), 0.5), fill=colour, rx=2,
    )  # fmt: skip
    for v in vals:
        svg.add("circle", cx=x + bar_w / 2, cy=y_of(v), r=2.6, fill="#1a202c", opacity=0.7)
    if not vals:
        svg.add("text", "no data", x=x + bar_w / 2, y=plot_h, text_anchor="middle",
                font_size=8, style=_FONT, fill=colour)  # fmt: skip
    if floor:
        svg.add("line", x1=x - 3, x2=x + bar_w + 3, y1=y_of(floor), y2=y_of(floor),
                stroke="#d7263d", stroke_width=2, stroke_dasharray="4 2")  # fmt: skip
    if base:
        svg.add("line", x1=x - 3, x2=x + bar_w + 3, y1=y_of(base), y2=y_of(base),
                stroke="#2b6cb0", stroke_width=2)  # fmt: skip
    svg.add("text", nic.split("/", 1)[1], x=x + bar_w / 2, y=plot_h + 24,
            text_anchor="middle", font_size=9, style=_FONT, fill="#333")  # fmt: skip


def _draw_bar_legend(svg: Svg, lx: float) -> None:
    """What the lines mean: spec floor, baseline, test value."""
    for k, (label, colour, dash) in enumerate(
        (
            ("spec floor", "#d7263d", "4 2"),
            ("baseline", "#2b6cb0", None),
            ("test value", "#1a202c", None),
        )
    ):
        yy = 18 + k * 16
        svg.add("line", x1=lx, x2=lx + 16, y1=yy, y2=yy, stroke=colour, stroke_width=2,
                stroke_dasharray=dash)  # fmt: skip
        svg.add("text", label, x=lx + 20, y=yy + 3, font_size=9, style=_FONT, fill="#333")


# ---- round timeline ---------------------------------------------------------------------------
def round_spans(result: RunResult) -> list[dict[str, Any]]:
    """Per round: start/end seconds (rounds run one after another), counts by status, purposes."""
    rounds: dict[int, list[Observation]] = {}
    for obs in result.observations:
        rounds.setdefault(obs.test.round, []).append(obs)
    out, t = [], 0.0
    for r in sorted(rounds):
        obs = rounds[r]
        dur = max((_duration(o) for o in obs), default=0.0)
        counts: dict[str, int] = {}
        for o in obs:
            counts[o.status] = counts.get(o.status, 0) + 1
        purposes = sorted({o.test.purpose for o in obs})
        out.append({"round": r, "start_s": t, "end_s": t + dur, "counts": counts,
                    "purposes": purposes, "tests": obs})  # fmt: skip
        t += dur
    return out


def _duration(obs: Observation) -> float:
    if obs.raw is not None and obs.raw.duration_s:
        return obs.raw.duration_s
    return obs.test.timeout_s if obs.status == HANG else 0.0


def render_timeline(result: RunResult) -> Markup | None:
    """Rounds one after another; a Gantt row per test for small runs, status bars otherwise."""
    spans = round_spans(result)
    if not spans:
        return None
    total = max(spans[-1]["end_s"], 1e-6)
    gantt = len(result.observations) <= GANTT_MAX_TESTS
    left, plot_w = (290.0, 980.0) if gantt else (190.0, 1080.0)
    scale = plot_w / total
    row_h = 14.0
    n_rows = len(result.observations) if gantt else len(spans)
    height = 46 + n_rows * (row_h + 3 if gantt else 30) + 36
    svg = Svg(left + plot_w + 30, height, "round timeline", "fig timeline")
    for s in spans:
        x = left + s["start_s"] * scale
        w = max((s["end_s"] - s["start_s"]) * scale, 2)
        svg.add("rect", x=x, y=20, width=w, height=height - 56, fill="#f7fafc", stroke="#e2e8f0")
        svg.add("text", f"R{s['round']} {'/'.join(s['purposes'])}", x=x + 3, y=14,
                font_size=10, style=_FONT, fill="#2d3748")  # fmt: skip
    y = 26.0
    if gantt:
        for s in spans:
            for o in sorted(s["tests"], key=lambda o: natural_key(o.test.test_id)):
                x = left + s["start_s"] * scale
                w = max(_duration(o) * scale, 2)
                label = f"{o.test.test_id} {o.test.probe} {' ↔ '.join(o.test.nodes)}"
                if len(o.test.flows) == 1:
                    label += f" {o.test.flows[0].src.split('/', 1)[-1]}"
                svg.add("text", label[:56], x=left - 6, y=y + 10, text_anchor="end",
                        font_size=9, style=_FONT, fill="#333")  # fmt: skip
                svg.add("rect", title=f"{label}: {o.status} {o.reason}", x=x, y=y, width=w,
                        height=row_h, rx=2, fill=STATUS_COLOURS.get(o.status, "#999"))  # fmt: skip
                y += row_h + 3
    else:
        for s in spans:
            x0 = left + s["start_s"] * scale
            w = max((s["end_s"] - s["start_s"]) * scale, 2)
            n = sum(s["counts"].values())
            svg.add("text", f"round {s['round']}: {n:,} tests", x=left - 6, y=y + 16,
                    text_anchor="end", font_size=10, style=_FONT, fill="#333")  # fmt: skip
            x = x0
            for status in (PASS, FAIL, "error", HANG, UNREACHABLE):
                k = s["counts"].get(status, 0)
                if not k:
                    continue
                seg = max(w * k / n, 1.5)
                svg.add("rect", title=f"round {s['round']}: {k:,} {status}", x=x, y=y + 4,
                        width=seg, height=18, fill=STATUS_COLOURS[status])  # fmt: skip
                x += seg
            y += 30
    svg.add("text", "0 s", x=left, y=height - 20, font_size=9, style=_FONT, fill="#718096")
    svg.add("text", f"{total:.1f} s of testing", x=left + plot_w, y=height - 20,
            text_anchor="end", font_size=9, style=_FONT, fill="#718096")  # fmt: skip
    lx = 10.0
    for status, colour in STATUS_COLOURS.items():
        svg.add("rect", x=lx, y=height - 14, width=10, height=10, fill=colour)
        svg.add("text", status, x=lx + 14, y=height - 5, font_size=9, style=_FONT, fill="#333")
        lx += 30 + 6 * len(status)
    return svg.markup()


# ---- sparklines -------------------------------------------------------------------------------
def render_sparkline(points: list[Mapping[str, Any]]) -> Markup | None:
    """A 120×26 sparkline of a node's past ratios (see the module docstring for the shape)."""
    pts = [p for p in points if isinstance(p, Mapping)][-30:]
    if len(pts) < 1:
        return None
    w, h = 120.0, 26.0
    svg = Svg(w, h, "history", "spark")
    ratios = [p.get("ratio") for p in pts]
    nums = [r for r in ratios if isinstance(r, int | float)]
    lo = min(nums + [0.5]) if nums else 0.5
    hi = max(nums + [1.05]) if nums else 1.05
    step = (w - 8) / max(len(pts) - 1, 1)

    def yy(r: float) -> float:
        return h - 4 - (h - 8) * (r - lo) / max(hi - lo, 1e-9)

    svg.add(
        "line", x1=2, x2=w - 2, y1=yy(1.0), y2=yy(1.0), stroke="#cbd5e0", stroke_dasharray="2 2"
    )
    coords = [(4 + i * step, yy(r)) for i, r in enumerate(ratios) if isinstance(r, int | float)]
    if len(coords) > 1:
        svg.add("polyline", points=" ".join(f"{x:.1f},{y:.1f}" for x, y in coords), fill="none",
                stroke="#4a5568", stroke_width=1.2)  # fmt: skip
    for i, p in enumerate(pts):
        r = p.get("ratio")
        st = str(p.get("state", ""))
        if isinstance(r, int | float):
            y, what = yy(r), f"ratio {r:.2f}"
        else:  # no number (history from verdicts only): the state sets the height
            y, what = yy(_STATE_LEVEL.get(st, lo)), "no number"
        svg.add("circle", title=f"{p.get('time', '')} {p.get('run_id', '')}: {st}, {what}",
                cx=4 + i * step, cy=y, r=2.2 if i < len(pts) - 1 else 3.2,
                fill=STATE_COLOURS.get(st, "#4a5568"))  # fmt: skip
    return svg.markup()


#: where a history point without a ratio sits, by its state
_STATE_LEVEL = {"healthy": 1.0, "suspect": 0.8, "bad": 0.5, "hung": 0.5, "unreachable": 0.5}


def history_from_runs(runs: list[Mapping[str, Any]], nodes: set[str]) -> dict[str, list[dict]]:
    """``extra["history"]`` for ``nodes`` from past run summaries (the run-result contract).

    ``runs`` are oldest first, each ``{"run_id", "time", "nodes", "summary"}``; a node's state in
    a run is read from the summary's lists (``unreachable``, ``hung``, ``drain``/``bad_nodes``/
    ``bad_nics``, ``suspects``), healthy when it was in the run and in none of them; no ratio.

    >>> runs = [{"run_id": "a", "time": "t1", "nodes": ["n1", "n2"],
    ...          "summary": {"drain": ["n2"], "bad_nics": ["n2/mlx5_0"]}}]
    >>> history_from_runs(runs, {"n2"})["n2"][0]["state"]
    'bad'
    """
    out: dict[str, list[dict]] = {}
    for run in runs:
        s = run.get("summary") or {}
        bad = {*s.get("drain", ()), *s.get("bad_nodes", ()),
               *(nic_node(n) for n in s.get("bad_nics", ()))}  # fmt: skip
        states = [(set(s.get("unreachable", ())), "unreachable"), (set(s.get("hung", ())), "hung"),
                  (bad, "bad"), (set(s.get("suspects", ())), "suspect")]  # fmt: skip
        for node in nodes & set(run.get("nodes", ())):
            state = next((st for group, st in states if node in group), "healthy")
            out.setdefault(node, []).append(
                {"time": run.get("time", ""), "ratio": None, "state": state,
                 "run_id": run.get("run_id", "")}  # fmt: skip
            )
    return out


def median_ratio(observations: list[Observation]) -> float | None:
    """Median measured/expected ratio of some observations (None without numbers)."""
    rs = [r for o in observations if (r := obs_ratio(o)) is not None]
    return median(rs) if rs else None
