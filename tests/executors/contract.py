"""The executor contract, as checks every executor must pass (sim, ssh, ray: one suite).

A :class:`Harness` gives a check an executor over four hosts ``host1..host4`` (lab-4 names)
with the faults it asks for (``node_hang`` / ``node_unreachable``, as in a faults file) and,
for real executors, a way to list processes a test left behind. ``tests/executors/
test_contract.py`` runs every check in :data:`CHECKS` against every harness; another executor
joins by adding a harness there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from fabriccheck.executors.base import Executor
from fabriccheck.models import Flow, RawResult, Test
from fabriccheck.probes.detect import parse_raw

HOSTS = ("host1", "host2", "host3", "host4")


@dataclass
class Harness:
    """How to get an executor with given faults, and how to see what it left on the hosts."""

    name: str
    make: Callable[[list[dict]], Executor]
    strays: Callable[[], object] | None = None  # falsy when nothing is left behind
    hang_timeout_s: float = 3.0


def iperf3(tid: str, src: str, dst: str, timeout_s: float = 30.0) -> Test:
    return Test(tid, "iperf3", (src, dst), (Flow(f"{src}/eth0", f"{dst}/eth0"),),
                timeout_s=timeout_s, params={"duration_s": 1})


def _ok(test: Test, raw: RawResult) -> None:
    assert raw.test_id == test.test_id
    assert raw.exit_code == 0 and not raw.timed_out and not raw.unreachable, raw.error
    parsed = parse_raw(test, raw)
    assert parsed.status == "ok", parsed.reason
    assert parsed.received_gbps and parsed.received_gbps > 0


def check_results_in_order_with_tool_text(h: Harness) -> None:
    tests = [iperf3("z-first", "host4", "host3"), iperf3("a-second", "host1", "host2")]
    ex = h.make([])
    try:
        results = ex.run_round(tests)
    finally:
        ex.close()
    assert [r.test_id for r in results] == ["z-first", "a-second"]
    for t, r in zip(tests, results, strict=True):
        _ok(t, r)
        assert r.duration_s > 0


def check_empty_round(h: Harness) -> None:
    ex = h.make([])
    try:
        assert ex.run_round([]) == []
        assert isinstance(ex.name, str) and ex.name
    finally:
        ex.close()


def check_hang_is_a_result_killed_in_time(h: Harness) -> None:
    ex = h.make([{"kind": "node_hang", "node": "host4"}])
    tests = [iperf3("ok", "host1", "host2"), iperf3("hung", "host3", "host4", h.hang_timeout_s)]
    t0 = time.monotonic()
    try:
        ok, hung = ex.run_round(tests)
    finally:
        ex.close()
    assert time.monotonic() - t0 < max(h.hang_timeout_s + 5.0, 10.0)
    _ok(tests[0], ok)
    assert hung.timed_out and hung.exit_code is None and not hung.unreachable
    if h.strays is not None:
        time.sleep(0.3)
        assert not h.strays(), h.strays()


def check_unreachable_host_is_a_result(h: Harness) -> None:
    ex = h.make([{"kind": "node_unreachable", "node": "host3"}])
    tests = [iperf3("ok", "host1", "host2"), iperf3("down", "host4", "host3")]
    try:
        ok, down = ex.run_round(tests)
    finally:
        ex.close()
    _ok(tests[0], ok)
    assert down.unreachable == ("host3",) and not down.timed_out
    assert down.exit_code is None  # the command never started on the host (not ssh's 255)


def check_close_is_idempotent(h: Harness) -> None:
    ex = h.make([])
    ex.close()
    ex.close()


CHECKS = {
    f.__name__.removeprefix("check_"): f
    for f in (check_results_in_order_with_tool_text, check_empty_round,
              check_hang_is_a_result_killed_in_time, check_unreachable_host_is_a_result,
              check_close_is_idempotent)
}
