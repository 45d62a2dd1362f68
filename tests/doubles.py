"""Pass-through executors tests wrap around a real executor: count, watch or stall its rounds."""

from __future__ import annotations

import time


class PassThrough:
    """Runs every round on ``inner``; a subclass sees each round first (:meth:`before_round`)."""

    def __init__(self, inner):
        self.inner, self.name = inner, inner.name

    def before_round(self, tests) -> None:
        """Called with each round's tests before ``inner`` runs them."""

    def run_round(self, tests):
        self.before_round(tests)
        return self.inner.run_round(tests)

    def close(self) -> None:
        self.inner.close()


class CountingExecutor(PassThrough):
    """Counts the tests the real executor was asked to run (``ran``)."""

    def __init__(self, inner):
        super().__init__(inner)
        self.ran = 0

    def before_round(self, tests) -> None:
        self.ran += len(tests)


class StallingExecutor(PassThrough):
    """Prints ``stalled in round K`` and sleeps in round ``at`` (1-based): a process to kill."""

    def __init__(self, inner, at: int, stall_s: float = 120.0):
        super().__init__(inner)
        self.at, self.stall_s, self.rounds = at, stall_s, 0

    def before_round(self, tests) -> None:
        self.rounds += 1
        if self.rounds == self.at:
            print("stalled in round", self.rounds, flush=True)
            time.sleep(self.stall_s)
