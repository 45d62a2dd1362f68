"""The HTML report: one self-contained page (inline CSS, SVG and JS; no network at view time).

The page is a jinja2 template rendered with autoescape on; figures come from
:mod:`fabriccheck.report.svg`, which escapes on its own. A Content-Security-Policy allows only the
page's own script (by hash), so even a missed escape could not run injected code.
"""

from __future__ import annotations

import base64
import hashlib
import time
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup

from fabriccheck.models import (
    BAD,
    HEALTHY,
    PASS,
    SUSPECT,
    Observation,
    RunResult,
    Verdict,
    nic_node,
)
from fabriccheck.report.advice import Headline, headline, next_steps
from fabriccheck.report.charts import render_nic_bars, render_sparkline, render_timeline
from fabriccheck.report.config_table import config_rows
from fabriccheck.report.heatmaps import render_pair_matrix, render_rail_heatmap
from fabriccheck.report.ladder_table import ladder_context, ladder_table
from fabriccheck.report.path_overlay import cable, counted_links, per_test
from fabriccheck.report.paths import FailPaths, failing_paths
from fabriccheck.report.rack_svg import render_racks
from fabriccheck.report.signals_table import signal_rows
from fabriccheck.report.topology_svg import DETAIL_MAX_NODES, render_topology
from fabriccheck.report.view import (
    HUNG,
    NODE_STATES,
    RunView,
    build_view,
    compact,
    link_names,
    natural_key,
    obs_ratio,
)
from fabriccheck.topology.model import Topology

#: the page lists every test when there are at most this many (all are in observations.csv)
ALL_TESTS_MAX = 400
#: healthy verdicts are listed when there are at most this many
HEALTHY_VERDICTS_MAX = 300
#: failing/evidence tests listed with commands and output (the rest: observations.csv)
LISTED_MAX = 500
#: per-node cards with NIC bars, most severe first
BLAMED_MAX = 24
#: bad/suspect links listed with their cable (ports) under the topology picture
CABLES_MAX = 40
OUTPUT_CHARS = 3000
_RANK = {s: i for i, s in enumerate(NODE_STATES)}


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("fabriccheck.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
    )


@lru_cache(maxsize=2)
def _asset(name: str) -> str:
    return resources.files("fabriccheck.report").joinpath("templates", name).read_text("utf-8")


def script_hash(js: str) -> str:
    """The CSP source (``sha256-...``) that allows exactly the inline script ``js``."""
    digest = hashlib.sha256(js.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


@dataclass(frozen=True)
class Stat:
    label: str
    value: float
    text: str
    cls: str = ""


def _run_time(extra: dict[str, Any]) -> str:
    """When the run started (``started_at`` text or ``started_s`` epoch), else when rendered."""
    if extra.get("started_at"):
        return f"run {extra['started_at']}"
    if isinstance(extra.get("started_s"), int | float):
        return "run " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(extra["started_s"]))
    return "rendered " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def _secs(s: float) -> str:
    """Seconds for people: ``0.4 s``, ``45 s``, ``12 min 5 s``."""
    if s < 10:
        return f"{s:.1f} s"
    if s < 600:
        return f"{s:.0f} s"
    return f"{int(s // 60)} min {int(s % 60)} s"


def _num(x: float | None, digits: int = 1) -> str:
    return "" if x is None else f"{x:,.{digits}f}"


def _test_row(obs: Observation, listed: bool) -> dict[str, Any]:
    r = obs_ratio(obs)
    raw = obs.raw
    output = ""
    if raw is not None and not obs.passed:
        parts = []
        if raw.error:
            parts.append(f"[executor] {raw.error}")
        if raw.stderr:
            parts.append("[stderr]\n" + raw.stderr[-OUTPUT_CHARS:])
        if raw.stdout:
            parts.append("[stdout]\n" + raw.stdout[-OUTPUT_CHARS:])
        output = "\n".join(parts)
    t = obs.test
    return {
        "test_id": t.test_id,
        "round": t.round,
        "purpose": t.purpose,
        "probe": t.probe,
        "nodes": compact(t.nodes, 80) if len(t.nodes) > 3 else " ".join(t.nodes),
        "nics": " ".join(sorted({n.split("/", 1)[1] for n in t.nics}, key=natural_key)),
        "status": obs.status,
        "value": f"{_num(obs.value)} {obs.unit}".strip() if obs.value is not None else "—",
        "value_sort": obs.value if obs.value is not None else -1,
        "floor": _num(obs.floor),
        "ratio": _num(r, 2),
        "ratio_sort": r if r is not None else -1,
        "duration": _num(raw.duration_s if raw else None),
        "reason": obs.reason or (raw.error if raw and raw.error else ""),
        "commands": raw.commands if raw else (),
        "output": output,
        "failing": listed,
    }


def _verdict_rows(result: RunResult, view: RunView) -> tuple[list[dict[str, Any]], int]:
    history = result.extra.get("history") or {}
    rows: list[Verdict] = []
    seen: set[tuple[str, str]] = set()
    healthy = [v for v in result.verdicts if v.state == HEALTHY]
    for v in result.verdicts:
        if v.state != HEALTHY or len(healthy) <= HEALTHY_VERDICTS_MAX:
            rows.append(v)
            seen.add((v.kind, v.name))
    # components the lists blame without a verdict of their own
    for n in view.run_nodes:
        st = view.node_state[n]
        if st not in (HEALTHY, "untested") and ("node", n) not in seen:
            if not any(nic_node(k) == n for k, s in view.nic_state.items() if s != HEALTHY):
                rows.append(Verdict("node", n, st, view.node_reason.get(n, "")))
    for nic, st in view.nic_state.items():
        if st != HEALTHY and ("nic", nic) not in seen:
            rows.append(Verdict("nic", nic, st, view.node_reason.get(nic_node(nic), "")))
    covered = {v.link for v in rows if v.kind == "link" and v.link is not None}
    covered |= {k for v in rows if v.kind == "link" for k in link_names(v.name)}
    for key, st in view.link_state.items():
        if st != HEALTHY and key not in covered:
            rows.append(Verdict("link", f"{key[0]} -- {key[1]}", st, "", link=key))
    out = []
    for v in rows:
        state = HUNG if v.kind == "node" and view.node_state.get(v.name) == HUNG else v.state
        pts = history.get(v.name) if v.kind == "node" and isinstance(history, dict) else None
        out.append({
            "kind": v.kind, "name": v.name, "state": state, "reason": v.reason,
            "evidence": list(v.evidence), "rank": -_RANK.get(state, 0),
            "spark": render_sparkline(pts) if pts else None,
        })  # fmt: skip
    out.sort(key=lambda d: (d["rank"], d["kind"], natural_key(d["name"])))
    return out, len(healthy) if len(healthy) > HEALTHY_VERDICTS_MAX else 0


#: blamed-node cards: actionable first (bars to read), then hung, unreachable, suspect
_CARD_ORDER = {"bad": 0, HUNG: 1, "unreachable": 2, "suspect": 3}


def _blamed(view: RunView) -> list[str]:
    nodes = [n for n in view.run_nodes if view.node_state[n] in _CARD_ORDER]
    return sorted(nodes, key=lambda n: (_CARD_ORDER[view.node_state[n]], natural_key(n)))


def _stats(result: RunResult, view: RunView) -> list[Stat]:
    total = len(view.run_nodes)
    tested = len(view.tested & set(view.run_nodes))
    st = [
        Stat("nodes tested", tested, f"{tested:,}/{total:,}"),
        Stat("healthy", view.count(HEALTHY), f"{view.count(HEALTHY):,}", "healthy"),
        Stat("bad", view.count("bad"), f"{view.count('bad'):,}", "bad"),
        Stat("hung", view.count(HUNG), f"{view.count(HUNG):,}", "hung"),
        Stat("unreachable", view.count("unreachable"), f"{view.count('unreachable'):,}",
             "unreachable"),  # fmt: skip
        Stat("suspect", view.count("suspect"), f"{view.count('suspect'):,}", "suspect"),
        Stat("bad links", len(result.bad_links), f"{len(result.bad_links):,}", "bad"),
        Stat("rounds", result.rounds, f"{result.rounds}"),
        Stat("tests", result.tests, f"{result.tests:,}"),
        Stat(f"test time ({_secs(result.wall_seconds)} wall)" if result.wall_seconds
             else "test time", result.test_seconds, _secs(result.test_seconds)),
    ]  # fmt: skip
    return st


def render_html(result: RunResult, topology: Topology | None = None) -> str:
    """The report page for a run.

    Parameters
    ----------
    result
        The run (observations with raw results make the tables and figures richer).
    topology
        The fabric, for the topology picture and NIC rails; None draws nodes only.

    Returns
    -------
    str
        A complete, self-contained HTML document.
    """
    view = build_view(result, topology)
    paths = failing_paths(result, topology) if topology is not None and topology.switches else None
    fabric = topology.fabric if topology is not None else str(result.extra.get("fabric", ""))
    head = headline(result, view)
    js = _asset("report.js")
    return _env().get_template("index.html.j2").render(
        **_run_context(result, view, topology, fabric, head),
        **_figure_context(result, view, topology, paths),
        **_table_context(result, view, topology),
        css=Markup(_asset("style.css")),
        js=Markup(js),
        script_hash=script_hash(js),
    )


def _run_context(
    result: RunResult, view: RunView, topology: Topology | None, fabric: str, head: Headline
) -> dict[str, Any]:
    """The page's head, as template variables: what ran where and when, the headline, the
    stat tiles, the next steps and notes, the embedded summary and the version."""
    from fabriccheck import __version__

    steps = next_steps(result, view, fabric, _topology_ref(result, topology))
    return {
        "result": result,
        "topo_name": topology.name if topology is not None else result.extra.get("topology", ""),
        "fabric": fabric,
        "run_id": result.extra.get("run_id", ""),
        "sim_note": str(result.extra.get("faults") or ""),
        "executor": str(result.extra.get("executor") or ""),
        "seed": result.extra.get("seed"),
        "started": _run_time(result.extra),
        "headline": head,
        "stats": _stats(result, view),
        "steps": [s for s in steps if s.level != "info"],
        "notes": [s for s in steps if s.level == "info"],
        "summary": _summary(result, head),
        "version": __version__,
    }


def _figure_context(
    result: RunResult, view: RunView, topology: Topology | None, paths: FailPaths | None
) -> dict[str, Any]:
    """The page's figures, as template variables: the topology picture with its caption and
    cables, the racks, the pair and rail heatmaps, the ladder table and the timeline."""
    pair_svg, pair_caption = render_pair_matrix(result, view)
    rail = render_rail_heatmap(result, view, topology)
    racks, racks_legend, racks_caption = render_racks(result, view, topology)
    return {
        "topology_svg": render_topology(view, topology, paths),
        "topo_caption": _topology_caption(view, topology) + _paths_caption(paths, view),
        "cables": _cables(view, topology, paths),
        "racks": racks,
        "racks_legend": racks_legend,
        "racks_caption": racks_caption,
        "pair_svg": pair_svg,
        "pair_caption": pair_caption,
        "pair_wide": len(view.run_nodes) > 24,
        "rail_wide": len(view.run_nodes) > 64,
        "rail_svg": rail[0] if rail else None,
        "rail_caption": rail[1] if rail else "",
        "ladder": ladder_context(ladder_table(result, list(view.run_nodes))),
        "timeline_svg": render_timeline(result),
    }


def _table_context(
    result: RunResult, view: RunView, topology: Topology | None
) -> dict[str, Any]:
    """The page's lists, as template variables: the blamed-node cards, the verdict rows, the
    signal and config rows, the warnings, and the tests listed in full (failing or evidence)
    and all of them on a small run."""
    blamed_nodes = _blamed(view)
    verdicts, healthy_hidden = _verdict_rows(result, view)
    listed, listed_more = _listed_tests(result, verdicts)
    listed_ids = {o.test.test_id for o in listed}
    all_tests = []
    if len(result.observations) <= ALL_TESTS_MAX:
        all_tests = [_test_row(o, o.test.test_id in listed_ids) for o in result.observations]
    return {
        "blamed": _blamed_cards(result, view, topology, blamed_nodes[:BLAMED_MAX]),
        "blamed_more": max(0, len(blamed_nodes) - BLAMED_MAX),
        "verdicts": verdicts,
        "healthy_note": (
            f"{healthy_hidden:,} healthy verdicts not listed (see results.json)."
            if healthy_hidden else "Healthy components without a verdict row passed every test."
        ),
        "signal_rows": signal_rows(result.extra.get("signals") or {}),
        "config_rows": config_rows(result.extra.get("config") or {}),
        "node_warnings": result.extra.get("warnings") or [],
        "preflight_skipped": result.extra.get("preflight_skipped") or [],
        "failing": [_test_row(o, True) for o in listed],
        "failing_more": listed_more,
        "all_tests": all_tests,
        "tests_note": f"{len(result.observations):,} tests: every one is in observations.csv.",
    }


def _topology_ref(result: RunResult, topology: Topology | None) -> str:
    """The topology's name or file for re-test commands (empty when it has no usable file)."""
    topo_ref = str(result.extra.get("topology") or "")
    if not topo_ref and topology is not None and not topology.source.startswith("<"):
        topo_ref = topology.source
    return topo_ref


def _blamed_cards(
    result: RunResult, view: RunView, topology: Topology | None, nodes: list[str]
) -> list[dict[str, Any]]:
    """A card per blamed node: its state, reason, NIC bars and history sparkline."""
    history = result.extra.get("history") or {}
    blamed = []
    for n in nodes:
        pts = history.get(n) if isinstance(history, dict) else None
        blamed.append({
            "node": n, "state": view.node_state[n], "reason": view.node_reason.get(n, ""),
            "bars": render_nic_bars(result, n, topology),
            "spark": render_sparkline(pts) if pts else None,
            "runs": min(len(pts), 30) if pts else 0,
        })  # fmt: skip
    return blamed


def _listed_tests(
    result: RunResult, verdicts: list[dict[str, Any]]
) -> tuple[list[Observation], int]:
    """The tests listed in full (failing or evidence of a verdict, capped) and how many not."""
    evidence = {t for v in verdicts if v["state"] != HEALTHY for t in v["evidence"]}
    listed = [o for o in result.observations if o.status != PASS or o.test.test_id in evidence]
    # evidence of a verdict first, then the other failures; a capped list on huge runs
    listed.sort(key=lambda o: (o.test.test_id not in evidence, o.test.round,
                               natural_key(o.test.test_id)))  # fmt: skip
    listed_more = max(0, len(listed) - LISTED_MAX)
    listed = sorted(listed[:LISTED_MAX], key=lambda o: (o.test.round, natural_key(o.test.test_id)))
    return listed, listed_more


def _topology_caption(view: RunView, topology: Topology | None) -> str:
    """The caption under the topology picture: what is drawn at this size."""
    if topology is None:
        return "No topology given: nodes only, coloured by state."
    if len(view.nodes) <= DETAIL_MAX_NODES:
        return (
            "Every switch, node and NIC port (small squares, one per rail). Bad links are thick "
            "red, suspect links dashed amber. Hover for names and reasons."
        )
    return (f"{len(view.nodes):,} nodes aggregated into {len(view.groups):,} leaf "
            "groups: one cell per node (dark strip: the group's leaf switches), one "
            "cell per spine/core switch; only bad (red) and suspect (amber) links "
            "are drawn. Hover any cell for its name and state.")  # fmt: skip


def _paths_caption(paths: FailPaths | None, view: RunView) -> str:
    """What the blue path lines mean at this size ("" when no failing test crossed a switch)."""
    if paths is None or not paths.tests:
        return ""
    n = len(paths.tests)
    if per_test(paths, len(view.nodes)):
        maybe = any(t.maybe for t in paths.tests)
        dashed = "; dashed: one of its equal-cost paths" if maybe else ""
        return (f" Blue: the switch links each of the {n} failing test(s) crossed (solid: known "
                f"path{dashed}). Hover a path for its test.")
    dashed = ("; dashed: only as one of their equal-cost paths"
              if any(not ld.known for ld in paths.links.values()) else "")
    left = len(paths.links) - len(counted_links(paths))
    left_out = (f" {len(paths.links) - left:,} of {len(paths.links):,} links are drawn: those a "
                "test surely crossed first, then the candidates most tests may have crossed."
                if left else "")
    return (f" Blue: {n:,} failing tests counted per switch link (darker and wider: more"
            f"{dashed}). Hover a link for its tests.{left_out}")


def _cables(
    view: RunView, topology: Topology | None, paths: FailPaths | None
) -> list[dict[str, Any]]:
    """Bad then suspect links with the cable to pull (ports where known) and failing tests."""
    if topology is None:
        return []
    marked = sorted(((st != BAD, k) for k, st in view.link_state.items() if st in (BAD, SUSPECT)))
    rows = []
    for not_bad, key in marked[:CABLES_MAX]:
        load = paths.links.get(key) if paths is not None else None
        rows.append({"state": SUSPECT if not_bad else BAD, "cable": cable(topology, key),
                     "tests": load.total if load else 0})
    return rows


def _summary(result: RunResult, head: Headline) -> dict[str, Any]:
    """The machine-readable verdict embedded in the page."""
    return {
        "verdict": head.verdict, "mode": result.mode, "drain": list(result.drain),
        "bad_nodes": list(result.bad_nodes), "bad_nics": list(result.bad_nics),
        "bad_links": [list(lk) for lk in result.bad_links],
        "unreachable": list(result.unreachable),
    }  # fmt: skip
