"""Never test a node that stopped being idle: re-check with the scheduler before every round.

:class:`IdleGuardExecutor` wraps any executor. Before each round it asks the inventory
(``recheck_idle``) which of the round's nodes are still idle; a test touching a node that is
not is not run and comes back as an executor-level error (``error`` is "evidence of nothing" to
the evaluator), so a job that grabbed a node mid-sweep is never disturbed and never blamed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from fabriccheck.models import RawResult, Test


class IdleChecker(Protocol):
    def recheck_idle(self, nodes: Sequence[str]) -> list[str]: ...


class IdleGuardExecutor:
    """Runs only tests whose every node the inventory still reports idle."""

    def __init__(self, inner: Any, inventory: IdleChecker) -> None:
        self.inner = inner
        self.inventory = inventory
        self.name = getattr(inner, "name", "executor")
        #: node -> round index at which it was found busy
        self.lost: dict[str, int] = {}
        self._round = 0

    def run_round(self, tests: Sequence[Test]) -> list[RawResult]:
        """Re-check idleness, run the tests still allowed, stand in for the rest."""
        wanted = list(dict.fromkeys(n for t in tests for n in t.nodes))
        still = set(self.inventory.recheck_idle(wanted)) if wanted else set()
        for n in wanted:
            if n not in still:
                self.lost.setdefault(n, self._round)
        self._round += 1
        allowed = [t for t in tests if all(n in still for n in t.nodes)]
        live = iter(self.inner.run_round(allowed) if allowed else [])
        out = []
        for t in tests:
            busy = [n for n in t.nodes if n not in still]
            if busy:
                out.append(RawResult(
                    t.test_id, exit_code=None,
                    error=f"not run: {', '.join(busy)} no longer idle (the scheduler gave it work)",
                ))  # fmt: skip
            else:
                out.append(next(live))
        return out

    def close(self) -> None:
        self.inner.close()
