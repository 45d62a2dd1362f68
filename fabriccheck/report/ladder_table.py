"""The report's ladder view: a row per ladder level (1x, 2x pairs, 2x collective, 4x, 8x),
a column per node, each cell the node's passing and failing tests at that level (pure).

Skipped levels (``extra["ladder"]["skipped"]``) are rows with their reason. Past
:data:`LADDER_MAX_NODES` nodes the columns are aggregated the way the heatmaps are: per level,
how many nodes passed everything, failed some, failed all or were not tested, and the nodes
with failures by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fabriccheck.models import PASS, RunResult
from fabriccheck.policy import GROUP_PROBES, PAIR_PROBES
from fabriccheck.report.paths import contention_ids, glitch_ids

#: one column per node up to this many nodes (the pair heatmap's limit)
LADDER_MAX_NODES = 64
#: failing nodes named per aggregated level at most
MAX_NAMED = 40


@dataclass
class LadderCell:
    """One node at one level: its tests passed and not passed (glitches among the latter)."""

    passed: int = 0
    failed: int = 0
    glitches: int = 0
    #: failures judged possible ECMP contention with nobody blamed (RoCE)
    contention: int = 0
    tests: list[str] = field(default_factory=list)

    @property
    def cls(self) -> str:
        """CSS class: ``ok`` all passed, ``some`` some failed, ``bad`` all failed, ``glitch``
        when every failure was a glitch the run found did not reproduce, ``contention`` when
        the rest were possible ECMP contention nobody was blamed for."""
        if not self.failed:
            return "ok"
        if self.failed == self.glitches:
            return "glitch"
        if self.contention and self.failed == self.glitches + self.contention:
            return "contention"
        return "bad" if not self.passed else "some"

    @property
    def text(self) -> str:
        return f"{self.passed}/{self.passed + self.failed}"

    @property
    def title(self) -> str:
        g = f" ({self.glitches} glitch)" if self.glitches else ""
        if self.contention:
            g += f" ({self.contention} possible ECMP contention, nobody blamed)"
        return (f"{self.passed} passed, {self.failed} not passing{g}; failing: "
                f"{', '.join(self.tests) or 'none'}")


@dataclass
class LadderRow:
    """A level: its label, the skip reason (skipped rows have no cells) and its node cells."""

    label: str
    skipped: str = ""
    cells: dict[str, LadderCell] = field(default_factory=dict)

    def tally(self, nodes: list[str]) -> dict[str, int]:
        """Nodes all-pass / some-fail / all-fail / not tested at this level."""
        out = {"all pass": 0, "some fail": 0, "all fail": 0, "not tested": 0}
        for n in nodes:
            c = self.cells.get(n)
            key = ("not tested" if c is None else "all pass" if c.cls in ("ok", "glitch",
                                                                          "contention")
                   else "all fail" if c.cls == "bad" else "some fail")
            out[key] += 1
        return out

    def failing(self, nodes: list[str]) -> list[str]:
        """Nodes with a non-glitch failure at this level, in column order."""
        return [n for n in nodes if n in self.cells and self.cells[n].cls in ("bad", "some")]


@dataclass(frozen=True)
class LadderTable:
    """The ladder view: the node columns, whether they are aggregated, the rows."""

    nodes: list[str]
    aggregated: bool
    rows: list[LadderRow]


def _row_key(probe: str, size: int) -> tuple[int, int] | None:
    """Sort key of the row a test belongs to: (size, 0 pairs / 1 collective); None: no row."""
    if probe in PAIR_PROBES and size == 2:
        return (2, 0)
    if probe in GROUP_PROBES:
        return (size, 1)
    return None  # signals, preflight


def _label(key: tuple[int, int], probes: dict[tuple[int, int], str], n_nodes: int) -> str:
    size, kind = key
    probe = probes.get(key, "")
    if size == 2:
        return f"2x {probe or 'pairs'}" if kind == 0 else f"2x collective ({probe or 'none'})"
    if size in (1, 4, 8):
        return f"{size}x {probe}".strip()
    if size == n_nodes:
        return f"job: {size} nodes ({probe})"
    return f"{size} nodes ({probe}, follow-up)"


def ladder_table(result: RunResult, nodes: list[str]) -> LadderTable | None:
    """The ladder view of a run, or None when the run climbed no ladder (no ``extra["ladder"]``).

    Parameters
    ----------
    result
        The run; its observations are grouped by level (nodes per test) and probe.
    nodes
        The columns, in order (the run's nodes).

    Returns
    -------
    LadderTable | None
        Rows in level order; levels the ladder skipped carry their reason.

    Examples
    --------
    >>> from fabriccheck.models import Observation, Test, FAIL
    >>> obs = [Observation(Test("a", "nccl", ("n1",)), PASS),
    ...        Observation(Test("b", "nccl", ("n2",)), FAIL)]
    >>> r = RunResult(mode="sweep", nodes=["n1", "n2"], observations=obs,
    ...               extra={"ladder": {"levels": [1], "skipped": {"8": "only 2 node(s)"}}})
    >>> t = ladder_table(r, ["n1", "n2"])
    >>> [(row.label, row.skipped) for row in t.rows]
    [('1x nccl', ''), ('8x', 'only 2 node(s)')]
    >>> t.rows[0].cells["n2"].text, t.rows[0].cells["n2"].cls
    ('0/1', 'bad')
    """
    info = result.extra.get("ladder")
    if not isinstance(info, dict) or not (info.get("levels") or info.get("skipped")):
        return None
    rows, probes = _observed_rows(result)
    for lv in info.get("levels") or ():
        for key in ([(2, 1)] if lv == 2 else [(int(lv), 1)]):
            rows.setdefault(key, LadderRow(""))
    skipped: dict[tuple[int, int], str] = {}
    for lv, why in (info.get("skipped") or {}).items():
        key = (int(lv), 1)
        skipped[key] = str(why)
        rows.setdefault(key, LadderRow(""))
    out = []
    for key in sorted(rows):
        row = rows[key]
        row.skipped = skipped.get(key, "") if not row.cells else ""
        row.label = f"{key[0]}x" if row.skipped else _label(key, probes, len(nodes))
        out.append(row)
    return LadderTable(list(nodes), len(nodes) > LADDER_MAX_NODES, out)


def _observed_rows(result: RunResult
                   ) -> tuple[dict[tuple[int, int], LadderRow], dict[tuple[int, int], str]]:
    """The rows the run's tests fill, by row key (each node's passing and failing tests at
    that level, glitches and contention counted apart), and each row's first probe."""
    glitches = glitch_ids(result)
    contention = contention_ids(result)
    rows: dict[tuple[int, int], LadderRow] = {}
    probes: dict[tuple[int, int], str] = {}
    for obs in result.observations:
        t = obs.test
        key = _row_key(t.probe, len(t.nodes))
        if key is None:
            continue
        probes.setdefault(key, t.probe)
        row = rows.setdefault(key, LadderRow(""))
        for n in t.nodes:
            c = row.cells.setdefault(n, LadderCell())
            if obs.status == PASS:
                c.passed += 1
                continue
            c.failed += 1
            c.glitches += t.test_id in glitches
            c.contention += t.test_id in contention and t.test_id not in glitches
            if len(c.tests) < 6:
                c.tests.append(t.test_id)
    return rows, probes


def ladder_context(table: LadderTable | None) -> dict[str, Any] | None:
    """What the template draws: per row its label, reason, cells (small) or tally (large)."""
    if table is None:
        return None
    rows = []
    for r in table.rows:
        fail = r.failing(table.nodes)
        rows.append({
            "label": r.label, "skipped": r.skipped,
            "cells": [r.cells.get(n) for n in table.nodes],
            "tally": r.tally(table.nodes), "failing": fail[:MAX_NAMED],
            "more": max(0, len(fail) - MAX_NAMED),
        })  # fmt: skip
    return {"nodes": table.nodes, "aggregated": table.aggregated, "rows": rows}
