"""Bisection's judge: which nodes fail only at scale (culprits) and which stay open suspects.

The planner (:mod:`fabriccheck.planning.planner`) only decides what to test next: the failing
groups to bisect, the parts each step tests and their padding (:class:`BisectPart`, carried by
the round's plan). What the results mean is decided here, from the run's history and the
blamed nodes of its :class:`~fabriccheck.inference.state.Inference`:

* :func:`unexplained_failures`: a failing group of a scale round that no blamed node explains
  is worth bisecting;
* :func:`at_scale_suspects`: after the ladder's 4x/8x rounds, the nodes that failed in every
  group they were in (two at least: both carvings, different members over different paths;
  four with both levels) and that nothing else explains. A group failing in one carving only
  is a glitch, contention or its path's business (links);
* :func:`judge_bisection`: round by round, what each bisection part showed
  (:class:`PartOutcome`), the culprits (node -> the chain of test ids that convicted it) and
  the at-scale suspects bisection could not settle (:meth:`BisectVerdicts.open_suspects`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from fabriccheck.models import FAIL, HANG, PASS, Observation, Probe, StrEnum, Test
from fabriccheck.run_history import RunHistory
from fabriccheck.topology.view import FabricView

__all__ = ["BisectPart", "BisectVerdicts", "PartOutcome", "at_scale_suspects",
           "judge_bisection", "pod_local", "unexplained_failures"]


@dataclass(frozen=True)
class BisectPart:
    """What one bisection test tests: ``suspects`` (its other nodes are known-good padding),
    split off the part or failing group test ``origin``."""

    suspects: tuple[str, ...]
    origin: str


class PartOutcome(StrEnum):
    """What a bisection part's test showed."""

    CLEARED = "cleared"  # it passed: its nodes are cleared
    EXPLAINED = "explained"  # a blamed node of the part explains it (or it did not run)
    SPLIT = "split"  # it failed with several suspects: split it again
    CONFIRM = "confirm"  # a lone ladder suspect failed once: test it again, other padding
    UNSETTLED = "unsettled"  # a lone suspect whose padded ring crossed spines: not convicted
    CULPRIT = "culprit"  # a lone suspect failed (twice, after a ladder): convicted


@dataclass(frozen=True)
class BisectVerdicts:
    """What bisection has shown so far (:func:`judge_bisection`, once per round)."""

    #: node -> the chain of test ids that convicted it (fails only at scale)
    culprits: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: at-scale suspects whose lone failing part crossed spines (not convicted)
    unsettled: frozenset[str] = frozenset()
    #: node -> the failing part it was alone in, awaiting its confirmation
    lone_fail: Mapping[str, str] = field(default_factory=dict)
    #: bisection test id -> what its part showed
    outcomes: Mapping[str, PartOutcome] = field(default_factory=dict)

    def open_suspects(self) -> list[str]:
        """At-scale suspects bisection could not settle (not convicted), sorted."""
        return sorted(self.unsettled - set(self.culprits))


def pod_local(nodes: Iterable[str], view: FabricView) -> bool:
    """True when a group's nodes hang off the same leaves (its ring crosses no spine)."""
    return len({view.pod(n) for n in nodes}) == 1


def unexplained_failures(observations: Iterable[Observation], blamed: AbstractSet[str]
                         ) -> list[Test]:
    """The failing (or hung) group tests of a scale round that no blamed node explains."""
    return [o.test for o in observations
            if o.status in (FAIL, HANG) and not (set(o.test.nodes) & blamed)]


def _scale_groups(history: RunHistory, rounds: Collection[int], view: FabricView
                  ) -> dict[str, tuple[list[str], int]]:
    """node -> (its failing 4x/8x group test ids, its 4x/8x group tests) over ``rounds``."""
    seen: dict[str, tuple[list[str], int]] = {}
    roce = view.fabric == "roce"
    for r in history.rounds:
        if r.number not in rounds:
            continue
        for o in r.observations:
            if o.test.probe == Probe.SIGNAL or len(o.test.nodes) < 2 \
                    or o.test.purpose != "scale" or o.status not in (PASS, FAIL, HANG):
                continue
            if roce and o.status != PASS and not pod_local(o.test.nodes, view):
                continue  # rings over ECMP spines may hash onto one link: says nothing
            for n in o.test.nodes:
                ids, k = seen.get(n, ([], 0))
                seen[n] = ([*ids, o.test.test_id] if o.status != PASS else ids, k + 1)
    return seen


def at_scale_suspects(history: RunHistory, rounds: Collection[int], view: FabricView,
                      blamed: AbstractSet[str]) -> tuple[list[str], str]:
    """The nodes that failed in every group test of the ladder's 4x/8x ``rounds`` they were
    in (two at least) and that no blamed node explains, sorted, with the first failing group
    test of the first of them (the origin of their bisection; ``""`` when there is none)."""
    seen = _scale_groups(history, rounds, view)
    suspects = sorted(n for n, (ids, k) in seen.items()
                      if k >= 2 and len(ids) == k and n not in blamed)
    return suspects, (seen[suspects[0]][0][0] if suspects else "")


def _outcome(o: Observation, part: BisectPart, blamed: AbstractSet[str], view: FabricView,
             ladder: bool, lone_fail: Mapping[str, str]) -> PartOutcome:
    if o.status not in (FAIL, HANG) or set(part.suspects) & blamed:
        return PartOutcome.CLEARED if o.status == PASS else PartOutcome.EXPLAINED
    if len(part.suspects) != 1:
        return PartOutcome.SPLIT
    if ladder and not pod_local(o.test.nodes, view):
        # its padded ring crossed spines: a slow link (or, on RoCE, two rings hashed onto
        # one) explains it as well as the node; it convicts nobody, the node stays open
        return PartOutcome.UNSETTLED
    if ladder and part.suspects[0] not in lone_fail:
        # the ladder's suspects come from many groups, some failing by chance: one failing
        # padded part is confirmed by a second with other padding
        return PartOutcome.CONFIRM
    return PartOutcome.CULPRIT


def judge_bisection(history: RunHistory, blamed: AbstractSet[str], view: FabricView,
                    parts: Mapping[str, BisectPart], *, ladder: bool,
                    last: BisectVerdicts | None = None) -> BisectVerdicts:
    """The bisection verdicts after the round just run.

    Parameters
    ----------
    history
        The run's rounds so far.
    blamed
        The nodes the run's :class:`~fabriccheck.inference.state.Inference` blames now: a
        failing part with one of them is explained by it.
    view
        The fabric (does a padded part's ring cross spines?).
    parts
        The bisection tests of the round just run, in the order planned: test id -> its part.
    ladder
        The run climbed a ladder: its at-scale suspects come from many groups, so a lone
        suspect is convicted by a second failing part, never by a part that crossed spines.
    last
        The verdicts after the previous round.

    Returns
    -------
    BisectVerdicts
    """
    last = last or BisectVerdicts()
    if not parts:
        return last
    culprits, lone_fail = dict(last.culprits), dict(last.lone_fail)
    unsettled, outcomes = set(last.unsettled), dict(last.outcomes)
    by_id = history.by_test_id
    for test_id, part in parts.items():
        o = by_id.get(test_id)
        if o is None or test_id in outcomes:
            continue
        outcomes[test_id] = got = _outcome(o, part, blamed, view, ladder, lone_fail)
        node = part.suspects[0] if part.suspects else ""
        if got is PartOutcome.UNSETTLED:
            unsettled.add(node)
        elif got is PartOutcome.CONFIRM:
            lone_fail[node] = test_id
        elif got is PartOutcome.CULPRIT:
            first = lone_fail.get(node)
            chain = (part.origin, first, test_id) if first else (part.origin, test_id)
            culprits[node] = (*culprits.get(node, ()), *chain)
    return BisectVerdicts(culprits, frozenset(unsettled), lone_fail, outcomes)

