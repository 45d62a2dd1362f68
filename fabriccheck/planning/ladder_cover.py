"""Ladder coverage: how many different groups each node met at each level >= 2.

The ladder promises two carvings per level, "each node with different partners over different
paths" (docs/design.md "How faults are found", step 2). This module measures what the rounds
kept of that promise, and says why a node met fewer than two different groups.

The measure, per level ``k`` >= 2: the distinct member sets of the ladder's ``k``-level tests
a node was in (purpose ``sweep``/``scale``, two nodes or more). At 2x both probes of the level
count: the rail-pair rounds (``ib_write_bw``/``iperf3``, a pair per rail) and the 2-node
collective rounds; a node's 2x groups are its partners in either, so it meets two different
groups at 2x when it had two different partners. The collective rounds alone are reported
too (``collective``), so a gap there stays visible.

A node that met one group (or none) is listed with the reason of each round it missed:
``busy`` (a follow-up of the round held it), ``suspect`` (left out of the carving),
``left over`` (free, but no group took it: a remainder, or every group it could join would
have shared a link with another test), or ``same group`` (its second carving gave it the
members of its first, e.g. a level of as many nodes as the fabric has). Nodes out of play
(bad, hung, unreachable) are counted apart: the promise is for nodes that can be tested.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from fabriccheck.models import Purpose, Test
from fabriccheck.policy import PAIR_PROBES

_LADDER = (Purpose.SWEEP, Purpose.SCALE)


class LadderCoverage:
    """Records each ladder round's groups (and why a node had none), summarized by level."""

    def __init__(self) -> None:
        #: level -> node -> distinct member sets (all probes of the level)
        self.groups: dict[int, dict[str, set[frozenset[str]]]] = defaultdict(
            lambda: defaultdict(set))
        #: level -> node -> distinct member sets of the level's collectives only
        self.collective: dict[int, dict[str, set[frozenset[str]]]] = defaultdict(
            lambda: defaultdict(set))
        #: level -> node -> why it had no group in a round of the level
        self.missed: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        self.out: set[str] = set()
        self.nodes: tuple[str, ...] = ()

    def record(self, level: int, name: str, tests: Sequence[Test], nodes: Sequence[str],
               active: Iterable[str], blamed: Iterable[str]) -> None:
        """Read one round of ``level`` (its step's ``name``): who met whom, who missed out."""
        if level < 2:
            return
        self.nodes = tuple(nodes)
        play, blamed = set(active), set(blamed)
        self.out |= set(nodes) - play
        seen: set[str] = set()
        held: dict[str, str] = {}
        for t in tests:
            if t.purpose in _LADDER and len(t.nodes) >= 2:
                members = frozenset(t.nodes)
                for n in members:
                    self.groups[level][n].add(members)
                    if t.probe not in PAIR_PROBES:
                        self.collective[level][n].add(members)
                seen |= members
            else:
                held.update(dict.fromkeys(t.nodes, str(t.purpose)))
        for n in sorted(play - seen):
            why = (f"busy ({held[n]})" if n in held else
                   "suspect" if n in blamed else "left over")
            self.missed[level][n].append(f"{name}: {why}")

    def info(self) -> dict[str, dict]:
        """Per level: nodes that met two different groups or more, one, none (with reasons)."""
        out: dict[str, dict] = {}
        for level in sorted(self.groups.keys() | self.missed.keys()):
            out[f"{level}x"] = self._level(level)
        return out

    def _level(self, level: int) -> dict:
        row: dict = {"twice": 0, "once": {}, "never": {}, "out_of_play": len(self.out)}
        groups, missed = self.groups[level], self.missed[level]
        play = len(self.nodes) - len(self.out)
        same = (f"only one {level}-node group: {play} nodes in play" if play <= level else
                "same group: no other ring fitted beside the round's without sharing a link")
        for n in self.nodes:
            if n in self.out:
                continue
            met = len(groups.get(n, ()))
            if met >= 2:
                row["twice"] += 1
                continue
            why = missed.get(n) or [same]
            row["once" if met == 1 else "never"][n] = "; ".join(why)
        coll = self.collective.get(level)
        if coll and level == 2:
            row["collective_twice"] = sum(len(coll.get(n, ())) >= 2 for n in self.nodes
                                          if n not in self.out)
        return row


def count(info: dict[str, dict]) -> dict[str, tuple[int, int, int]]:
    """``{"4x": (twice, once, never)}`` from :meth:`LadderCoverage.info`."""
    return {lv: (row["twice"], len(row["once"]), len(row["never"])) for lv, row in info.items()}
