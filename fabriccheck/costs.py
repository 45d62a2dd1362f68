"""What a run's own work costs, per round: planning, running (the executor; the simulator's
CPU when it is the simulator), parsing and judging the outputs, and inference — beside the
round's test time. The orchestrator charges each phase to a :class:`CostMeter` when one is
given (``orchestrator.run(..., meter=...)``); ``bench/bench_cost.py`` prints the table
(docs/performance.md).

Times are CPU seconds of this process (``time.process_time``): what the orchestrator's host
spends, not what the nodes spend running tests.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: the phases a round's cost is split into, in the order a round runs them
PHASES = ("plan", "execute", "parse", "judge", "signals", "infer")


@dataclass
class RoundCost:
    """One round: CPU seconds per phase, its tests and its test time."""

    number: int
    tests: int = 0
    test_seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))

    @property
    def orchestrator_s(self) -> float:
        """What the orchestrator itself spends: everything but running the tests."""
        return sum(v for k, v in self.cpu.items() if k != "execute")


class CostMeter:
    """Accumulates CPU seconds per phase into the round in flight.

    >>> m = CostMeter()
    >>> with m.timed("plan"):
    ...     _ = sum(range(1000))
    >>> m.close_round(tests=4, test_seconds=6.0).number, len(m.rounds)
    (1, 1)
    >>> m.rounds[0].cpu["plan"] >= 0.0
    True
    """

    def __init__(self) -> None:
        self.rounds: list[RoundCost] = []
        self._open = RoundCost(1)

    def add(self, phase: str, seconds: float) -> None:
        self._open.cpu[phase] = self._open.cpu.get(phase, 0.0) + seconds

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        t0 = time.process_time()
        try:
            yield
        finally:
            self.add(phase, time.process_time() - t0)

    def close_round(self, *, tests: int, test_seconds: float) -> RoundCost:
        """End the round in flight (what was charged since the last one ended) and open the
        next; the last planning call (the one that finds nothing left) stays on the open one."""
        done = self._open
        done.tests, done.test_seconds = tests, test_seconds
        self.rounds.append(done)
        self._open = RoundCost(done.number + 1)
        return done

    @property
    def tail(self) -> RoundCost:
        """What was charged after the last round ended (the final planning and inference)."""
        return self._open


class _NoMeter(CostMeter):
    """Charges nothing (the default: a run without a meter pays no bookkeeping)."""

    def add(self, phase: str, seconds: float) -> None:
        return None

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        yield

    def close_round(self, *, tests: int, test_seconds: float) -> RoundCost:
        return self._open


NO_METER: CostMeter = _NoMeter()
