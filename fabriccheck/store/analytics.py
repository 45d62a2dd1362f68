"""What history teaches: learned baselines, drifting nodes and lemon nodes (queries + robust stats).

- **baseline** per SKU, probe and group size from *passing* results: median and MAD, so a few
  slow outliers do not move it; the evaluator may use it beside the spec floor.
- **drift** a node whose peer-normalized bandwidth falls run after run (Theil–Sen slope and
  early-vs-late medians), flagged while it still passes the floor.
- **lemons** nodes implicated again and again (bad or suspect verdicts, failing tests, drained
  and returned, flapping) ranked by a score whose signals are returned with it.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from statistics import median
from typing import Any

from fabriccheck.models import Observation
from fabriccheck.store.stats import MAD_TO_SIGMA, mad, theil_sen_slope

#: observation statuses that count against the nodes of a test (``error`` is fabriccheck's own
#: trouble reading a result: evidence of nothing)
FAILING = ("fail", "hang", "unreachable")

#: which runs history learns from: ``REAL`` (every executor but the simulator: the default for
#: baselines, drift and lemons of real nodes), ``None`` (all), or one executor name (``"sim"``)
REAL = "real"


def executor_filter(executor: str | None, col: str = "r.executor") -> tuple[str, list[Any]]:
    """The SQL condition (`` AND ...``) and its arguments selecting runs by executor.

    >>> executor_filter("real")
    (" AND r.executor != 'sim'", [])
    >>> executor_filter("sim", "executor")
    (' AND executor = ?', ['sim'])
    """
    if executor is None:
        return "", []
    if executor == REAL:
        return f" AND {col} != 'sim'", []
    return f" AND {col} = ?", [executor]


def learns_from(executor: str | None) -> str:
    """The runs a run by ``executor`` is compared with: simulated with simulated, real with real.

    >>> learns_from("sim"), learns_from("ssh"), learns_from(None)
    ('sim', 'real', 'real')
    """
    return "sim" if executor == "sim" else REAL


@dataclass(frozen=True)
class Baseline:
    """What passing results looked like for one SKU / probe / group size."""

    sku: str
    probe: str
    group_size: int
    median: float
    mad: float
    n: int
    unit: str = ""

    @property
    def sigma(self) -> float:
        """MAD scaled to a normal standard deviation."""
        return self.mad * MAD_TO_SIGMA

    def robust_floor(self, k: float = 4.0) -> float:
        """``median - k * sigma``: below it a value is far outside what this SKU normally does."""
        return self.median - k * self.sigma


def baseline(
    conn: sqlite3.Connection,
    sku: str | None,
    probe: str,
    group_size: int,
    *,
    min_samples: int = 8,
    max_samples: int = 500,
    exclude_run: str | None = None,
    executor: str | None = REAL,
) -> Baseline | None:
    """The learned baseline, or None when fewer than ``min_samples`` passing results exist.

    ``sku=None`` pools every SKU. The newest ``max_samples`` passing values are used;
    ``exclude_run`` leaves one run out (the run being judged); ``executor`` selects the runs
    (default :data:`REAL`: simulated runs never make a real baseline).
    """
    q = (
        "SELECT o.value, o.unit FROM observations o JOIN runs r ON r.run_id = o.run_id"
        " WHERE o.probe = ? AND o.group_size = ? AND o.status = 'pass' AND o.value IS NOT NULL"
        " AND o.run_id != ?"
    )
    args: list[Any] = [probe, group_size, exclude_run or ""]
    cond, cargs = executor_filter(executor)
    q += cond
    args += cargs
    if sku is not None:
        q += " AND r.sku = ?"
        args.append(sku)
    rows = conn.execute(q + " ORDER BY o.id DESC LIMIT ?", (*args, max_samples)).fetchall()
    if len(rows) < min_samples:
        return None
    values = [float(v) for v, _ in rows]
    return Baseline(
        sku=sku or "", probe=probe, group_size=group_size, median=float(median(values)),
        mad=mad(values), n=len(values), unit=rows[0][1] or "",
    )  # fmt: skip


@dataclass(frozen=True)
class DriftReport:
    """A node whose bandwidth (relative to its peers in the same run) falls across sweeps."""

    node: str
    probe: str
    group_size: int
    runs: int
    early_ratio: float  # median of the first half (value / run median)
    late_ratio: float  # median of the last third
    drop_fraction: float
    slope_per_run: float
    latest_value: float | None
    latest_floor: float | None
    below_floor: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _node_series(
    conn: sqlite3.Connection, probe: str | None, sku: str | None, last_runs: int,
    executor: str | None = REAL,
) -> dict[tuple[str, str, int], list[tuple[float, float, float | None, float | None]]]:
    """(node, probe, group size) -> [(run start, ratio to run median, value, floor)] by time."""
    q = (
        "SELECT o.run_id, r.started_s, o.probe, o.group_size, o.value, o.floor, n.node"
        " FROM observations o JOIN runs r ON r.run_id = o.run_id"
        " JOIN obs_nodes n ON n.obs_id = o.id"
        " WHERE o.value IS NOT NULL AND o.value > 0 AND o.status IN ('pass', 'fail')"
        " AND r.run_id IN (SELECT run_id FROM runs r WHERE 1{cond}"
        " ORDER BY started_s DESC LIMIT ?)"
    )
    cond, cargs = executor_filter(executor)
    q = q.replace("{cond}", cond)
    args: list[Any] = [*cargs, last_runs]
    if probe is not None:
        q += " AND o.probe = ?"
        args.append(probe)
    if sku is not None:
        q += " AND r.sku = ?"
        args.append(sku)
    rows = conn.execute(q, args).fetchall()
    run_vals: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for run_id, _, pr, gs, value, _, _ in rows:
        run_vals[(run_id, pr, gs)].append(value)
    run_median = {k: median(v) for k, v in run_vals.items()}
    per_node_run: dict[tuple[str, str, int], dict[str, list]] = defaultdict(dict)
    for run_id, started, pr, gs, value, floor, node in rows:
        entry = per_node_run[(node, pr, gs)].setdefault(run_id, [started, [], None, None])
        entry[1].append(value / run_median[(run_id, pr, gs)])
        entry[2] = value if entry[2] is None else min(entry[2], value)
        entry[3] = floor
    out = {}
    for key, runs in per_node_run.items():
        out[key] = sorted((s, float(median(r)), v, f) for s, r, v, f in runs.values())
    return out


def drifting_nodes(
    conn: sqlite3.Connection,
    *,
    probe: str | None = None,
    sku: str | None = None,
    min_runs: int = 4,
    min_drop: float = 0.05,
    last_runs: int = 20,
    executor: str | None = REAL,
) -> list[DriftReport]:
    """Nodes whose peer-normalized bandwidth fell by at least ``min_drop`` over the last runs.

    A node drifts when the median of the last third of its runs is ``min_drop`` below the
    median of the first half and the Theil–Sen trend is downward. Comparing with the run's
    median (its peers) cancels fabric-wide changes. Sorted by the drop, largest first.
    Only real runs count unless ``executor`` says otherwise (see :func:`executor_filter`).
    """
    out = []
    for (node, pr, gs), series in _node_series(conn, probe, sku, last_runs, executor).items():
        if len(series) < min_runs:
            continue
        ratios = [r for _, r, _, _ in series]
        early = float(median(ratios[: max(2, len(ratios) // 2)]))
        late = float(median(ratios[-max(2, len(ratios) // 3) :]))
        slope = theil_sen_slope(ratios)
        drop = 1.0 - late / early if early > 0 else 0.0
        if drop >= min_drop and slope < 0:
            _, _, value, floor = series[-1]
            out.append(
                DriftReport(
                    node=node, probe=pr, group_size=gs, runs=len(series), early_ratio=early,
                    late_ratio=late, drop_fraction=drop, slope_per_run=slope,
                    latest_value=value, latest_floor=floor,
                    below_floor=floor is not None and value is not None and value < floor,
                )
            )  # fmt: skip
    return sorted(out, key=lambda d: -d.drop_fraction)


#: weights of the lemon score's signals
LEMON_WEIGHTS = {
    "bad_runs": 3.0,
    "suspect_runs": 1.0,
    "unreachable_runs": 1.0,
    "returned": 2.0,
    "flaps": 1.0,
    "fail_rate": 2.0,
    "warn_runs": 0.5,
}


@dataclass
class LemonScore:
    """A node's lemon score and the signals behind it (see :data:`LEMON_WEIGHTS`)."""

    node: str
    score: float
    signals: dict[str, float] = field(default_factory=dict)
    last_state: str = "untested"
    last_seen_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "score": round(self.score, 3),
            "last_state": self.last_state,
            "last_seen_s": self.last_seen_s,
            **self.signals,
        }


def _worst_states(conn: sqlite3.Connection, ids: list[str]) -> dict[str, dict[str, str]]:
    """node -> run -> its worst verdict state in that run (a NIC verdict counts for its node)."""
    rank = {"bad": 3, "unreachable": 2, "suspect": 1, "healthy": 0}
    marks = ",".join("?" * len(ids))
    state: dict[str, dict[str, str]] = defaultdict(dict)
    for node, run_id, st in conn.execute(
        f"SELECT node, run_id, state FROM verdicts WHERE node IS NOT NULL AND run_id IN ({marks})",
        ids,
    ):
        prev = state[node].get(run_id)
        if prev is None or rank.get(st, 0) > rank.get(prev, 0):
            state[node][run_id] = st
    return state


def _warn_runs(conn: sqlite3.Connection, ids: list[str]) -> dict[str, set[str]]:
    """node -> the runs in which a node-local reading of it had a warn-level finding (recurring
    warnings count towards lemons: docs/node-checks.md)."""
    marks = ",".join("?" * len(ids))
    out: dict[str, set[str]] = defaultdict(set)
    for node, run_id, js in conn.execute(
        "SELECT n.node, o.run_id, o.obs_json FROM observations o JOIN obs_nodes n"
        f" ON n.obs_id = o.id WHERE o.run_id IN ({marks}) AND o.probe LIKE 'signal:%'"
        " AND o.obs_json LIKE '%\"severity\": \"warn\"%'", ids,
    ):  # fmt: skip
        if any(f.get("severity") == "warn" for f in json.loads(js).get("findings", ())):
            out[node].add(run_id)
    return out


def _applied_actions(conn: sqlite3.Connection, ids: list[str]) -> tuple[dict, dict]:
    """How often each node was taken out and given back (applied actions of these runs)."""
    marks = ",".join("?" * len(ids))
    drains: dict[str, int] = defaultdict(int)
    returns: dict[str, int] = defaultdict(int)
    for node, action in conn.execute(
        "SELECT node, action FROM actions WHERE status = 'applied'"
        f" AND (run_id IS NULL OR run_id IN ({marks}))",
        ids,
    ):
        if action in ("drain", "cordon"):
            drains[node] += 1
        elif action in ("resume", "uncordon"):
            returns[node] += 1
    return drains, returns


def lemon_nodes(
    conn: sqlite3.Connection, *, last_runs: int = 50, executor: str | None = REAL
) -> list[LemonScore]:
    """Nodes ranked by how often they were implicated over the last ``last_runs`` runs.

    Signals: runs tested, tests and failing tests (``fail_rate``), runs with a bad / suspect /
    unreachable verdict (a NIC verdict counts for its node), times drained and returned, and
    flaps (implicated in one run, healthy in the next, or back). Highest score first; nodes
    never implicated have score 0 and are left out. Only real runs count unless ``executor``
    says otherwise: a simulated fault never makes a real node a lemon.
    """
    cond, cargs = executor_filter(executor, "executor")
    runs = conn.execute(
        f"SELECT run_id, started_s FROM runs WHERE 1{cond} ORDER BY started_s DESC LIMIT ?",
        (*cargs, last_runs),
    ).fetchall()
    started = {r: s for r, s in runs}
    if not started:
        return []
    ids = list(started)
    tests = _test_counts(conn, ids)
    tested_runs = _tested_runs(conn, ids)
    state = _worst_states(conn, ids)
    warned = _warn_runs(conn, ids)
    drains, returns = _applied_actions(conn, ids)
    out = []
    for node in set(tests) | set(state):
        per_run = state.get(node, {})
        seq = [per_run.get(r, "healthy") for r in sorted(tested_runs[node] | set(per_run),
                                                          key=lambda r: started[r])]  # fmt: skip
        t = tests.get(node, {"tests": 0, "failed_tests": 0})
        signals = _lemon_signals(seq, t, drained=drains.get(node, 0),
                                 returned=returns.get(node, 0),
                                 warn_runs=len(warned.get(node, ())))  # fmt: skip
        score = sum(w * signals[k] for k, w in LEMON_WEIGHTS.items())
        if score <= 0:
            continue
        last_run = max(tested_runs[node] | set(per_run), key=lambda r: started[r])
        out.append(
            LemonScore(node=node, score=score, signals=signals, last_state=seq[-1],
                       last_seen_s=started[last_run])  # fmt: skip
        )
    return sorted(out, key=lambda s: (-s.score, s.node))


def _test_counts(conn: sqlite3.Connection, ids: list[str]) -> dict[str, dict[str, int]]:
    """node -> its tests and failing tests over these runs."""
    marks = ",".join("?" * len(ids))
    tests: dict[str, dict[str, int]] = defaultdict(lambda: {"tests": 0, "failed_tests": 0})
    for node, status in conn.execute(
        f"SELECT n.node, o.status FROM obs_nodes n JOIN observations o ON o.id = n.obs_id"
        f" WHERE n.run_id IN ({marks})",
        ids,
    ):
        tests[node]["tests"] += 1
        tests[node]["failed_tests"] += status in FAILING
    return tests


def _tested_runs(conn: sqlite3.Connection, ids: list[str]) -> dict[str, set[str]]:
    """node -> the runs (of these) that tested it."""
    marks = ",".join("?" * len(ids))
    tested_runs: dict[str, set[str]] = defaultdict(set)
    for node, run_id in conn.execute(
        f"SELECT DISTINCT node, run_id FROM obs_nodes WHERE run_id IN ({marks})", ids
    ):
        tested_runs[node].add(run_id)
    return tested_runs


def _lemon_signals(seq: list[str], t: dict[str, int], *, drained: int, returned: int,
                   warn_runs: int) -> dict[str, float]:  # fmt: skip
    """One node's lemon signals from its worst state per run (oldest first), its test counts,
    its applied drains and returns, and its runs with a warning."""
    implicated = [s in ("bad", "suspect", "unreachable") for s in seq]
    return {
        "runs_tested": len(seq),
        "tests": t["tests"],
        "failed_tests": t["failed_tests"],
        "fail_rate": round(t["failed_tests"] / t["tests"], 4) if t["tests"] else 0.0,
        "bad_runs": seq.count("bad"),
        "suspect_runs": seq.count("suspect"),
        "unreachable_runs": seq.count("unreachable"),
        "drained": drained,
        "returned": returned,
        "flaps": sum(1 for a, b in zip(implicated, implicated[1:], strict=False) if a != b),
        "warn_runs": warn_runs,
    }


def evidence_of(conn: sqlite3.Connection, run_id: str, node: str) -> list[str]:
    """The test ids behind ``node``'s verdicts in ``run_id``."""
    rows = conn.execute(
        "SELECT evidence_json FROM verdicts WHERE run_id = ? AND node = ?", (run_id, node)
    ).fetchall()
    return sorted({e for (js,) in rows for e in json.loads(js)})


def below_baseline(
    conn: sqlite3.Connection,
    observations: Sequence[Observation],
    *,
    sku: str | None,
    exclude_run: str | None = None,
    k: float = 3.5,
    executor: str | None = REAL,
) -> dict[str, Any]:
    """Passing results far below what this SKU usually does (``median - k * sigma`` of its
    learned baseline): spec-compliant but unusual. Nodes with two or more such tests are
    listed; nothing is judged bad for it (the spec floor decides that).
    """
    cache: dict[tuple[str, int], Baseline | None] = {}
    low: list[dict[str, Any]] = []
    per_node: dict[str, int] = defaultdict(int)
    for o in observations:
        if not o.passed or o.value is None:
            continue
        key = (o.test.probe, o.test.group_size)
        if key not in cache:
            cache[key] = baseline(conn, sku, *key, exclude_run=exclude_run, executor=executor)
        b = cache[key]
        if b is None or b.mad <= 0:
            continue
        lower = b.robust_floor(k) if o.unit != "us" else b.median + k * b.sigma
        if (o.value < lower) if o.unit != "us" else (o.value > lower):
            low.append({"test": o.test.test_id, "nodes": list(o.test.nodes), "value": o.value,
                        "baseline_median": round(b.median, 3), "limit": round(lower, 3)})
            for n in o.test.nodes:
                per_node[n] += 1
    nodes = sorted(n for n, c in per_node.items() if c >= 2)
    return {"tests": low, "nodes": nodes}
