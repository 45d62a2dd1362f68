"""The one record of what a run has seen: its rounds, each with the observations it judged.

A :class:`RunHistory` is frozen: the loop makes a new one per round (:meth:`RunHistory.with_round`)
and hands it to planning, inference, the report and the store, which only read it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from fabriccheck.models import PASS, Observation, Probe, Purpose, RoundKind, Test


@dataclass(frozen=True)
class RoundRecord:
    """One executed round: what ran, how it was judged, how long it took (the links a test's
    flows crossed are asked of the fabric view when inference needs them, not kept here)."""

    number: int
    kind: RoundKind
    observations: tuple[Observation, ...]
    seconds: float = 0.0
    warnings: tuple[str, ...] = ()

    @property
    def failed(self) -> int:
        return sum(o.status != PASS for o in self.observations)


@dataclass(frozen=True)
class RunHistory:
    """Every round a run executed so far, oldest first."""

    rounds: tuple[RoundRecord, ...] = ()

    def with_round(self, record: RoundRecord) -> RunHistory:
        return RunHistory((*self.rounds, record))

    @cached_property
    def observations(self) -> tuple[Observation, ...]:
        """Every traffic observation (signal readings apart: :attr:`signal_observations`; the
        NVLink-domain tests apart: :attr:`domain_observations`).

        A signal reading is node-local evidence with no partner and no path: it must not
        exonerate a node in attribution nor count as a peer of a bandwidth test.
        """
        return tuple(o for r in self.rounds for o in r.observations
                     if o.test.probe != Probe.SIGNAL and o.test.purpose != Purpose.DOMAIN)

    @cached_property
    def domain_observations(self) -> tuple[Observation, ...]:
        """Every NVLink-domain test (purpose ``domain``): judged apart from the scale-out
        traffic (no NIC, no switch link on its path; docs/nvl72.md), oldest first."""
        return tuple(o for r in self.rounds for o in r.observations
                     if o.test.purpose == Purpose.DOMAIN)

    @cached_property
    def signal_observations(self) -> tuple[Observation, ...]:
        """Every signal reading (probe ``signal``), oldest first."""
        return tuple(o for r in self.rounds for o in r.observations
                     if o.test.probe == Probe.SIGNAL)

    @cached_property
    def preflight_signal_tests(self) -> tuple[Test, ...]:
        """The tests of the preflight's signal readings (purpose ``preflight``), oldest first."""
        return tuple(o.test for o in self.signal_observations
                     if o.test.purpose == Purpose.PREFLIGHT)

    @cached_property
    def by_test_id(self) -> Mapping[str, Observation]:
        return {o.test.test_id: o for o in self.observations}

    @property
    def round_count(self) -> int:
        return len(self.rounds)

    @property
    def traffic_rounds(self) -> int:
        """Rounds that sent traffic (signal rounds apart: they do not use up ``max_rounds``)."""
        return sum(1 for r in self.rounds
                   if r.kind not in (RoundKind.PREFLIGHT, RoundKind.SIGNALS))

    @property
    def tests(self) -> int:
        return sum(len(r.observations) for r in self.rounds)

    @property
    def test_seconds(self) -> float:
        return sum(r.seconds for r in self.rounds)

    @property
    def warnings(self) -> list[str]:
        return [f"round {r.number}: {w}" for r in self.rounds for w in r.warnings]

    @property
    def last(self) -> RoundRecord | None:
        return self.rounds[-1] if self.rounds else None

    def anything_failed(self) -> bool:
        return any(r.failed for r in self.rounds)

    @cached_property
    def partners(self) -> Mapping[str, frozenset[str]]:
        """node -> every node it shared a test with (itself included)."""
        met: dict[str, set[str]] = defaultdict(set)
        for o in self.observations:
            for n in o.test.nodes:
                met[n].update(o.test.nodes)
        return {n: frozenset(s) for n, s in met.items()}
