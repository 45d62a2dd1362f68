"""The executor contract: run one round of tests, return raw text per test. Never parse."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from fabriccheck.models import RawResult, Test


@runtime_checkable
class Executor(Protocol):
    """Runs a round of tests on disjoint nodes at the same time.

    ``run_round`` returns one :class:`RawResult` per test, in the order given. A failed, hung or
    unreachable test is a result (``timed_out``, ``unreachable``, ``exit_code``), not an
    exception; exceptions (:class:`fabriccheck.errors.ExecutorError`) mean the executor itself
    cannot go on. Every command has a timeout (``Test.timeout_s``); on timeout the remote process
    tree is killed.
    """

    name: str

    def run_round(self, tests: Sequence[Test]) -> list[RawResult]: ...

    def close(self) -> None: ...
