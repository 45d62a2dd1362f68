"""Ray executor pieces: the HostRunner over agent actors and the grouping of a round's tests."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fabriccheck.errors import ConnectError, TaskTimeout
from fabriccheck.executors.launch_runner import StepOutput
from fabriccheck.executors.ray_session import ray_get
from fabriccheck.models import Test
from fabriccheck.probes.launch import HostCommand

if TYPE_CHECKING:
    from fabriccheck.executors.ray_executor import RayExecutor

def _reach(ref: Any, timeout_s: float, host: str, what: str) -> Any:
    """``ray_get`` on an agent call; an agent that does not answer in time is unreachable."""
    try:
        return ray_get(ref, timeout_s, host=host, what=what)
    except TaskTimeout as exc:
        raise ConnectError(f"{exc.message} (the fabriccheck agent did not answer)",
                           hint=exc.hint) from exc


@dataclass(frozen=True)
class _Handle:
    host: str
    agent: Any
    ref: int


class RayHostRunner:
    """:class:`~fabriccheck.executors.launch_runner.HostRunner` over per-node agent actors."""

    def __init__(self, executor: RayExecutor) -> None:
        self._ex = executor

    def start(self, step: HostCommand, tag: str) -> _Handle:
        agent = self._ex.agent(step.host)
        ref = _reach(agent.start.remote(list(step.argv), dict(step.env), self._ex.guard_s),
                     self._ex.rpc_timeout_s, step.host, f"start {step.argv[0]} ({tag})")
        return _Handle(step.host, agent, int(ref))

    def wait(self, handle: _Handle, timeout_s: float) -> StepOutput:
        out = _reach(handle.agent.wait.remote(handle.ref, timeout_s),
                     timeout_s + self._ex.rpc_timeout_s, handle.host, "wait")
        return StepOutput(out["stdout"], out["stderr"], out["exit_code"], out["finished"])

    def kill(self, handle: _Handle) -> StepOutput:
        out = _reach(handle.agent.kill.remote(handle.ref), self._ex.rpc_timeout_s + 10.0,
                     handle.host, "kill")
        handle.agent.forget.remote(handle.ref)
        if out.get("leftover"):
            self._ex.leftovers.append(f"{handle.host}: {out['leftover']} process(es) survived kill")
        return StepOutput(out["stdout"], out["stderr"], out["exit_code"], True)


def overlapping_groups(tests: Sequence[Test]) -> list[list[Test]]:
    """The round's tests grouped so that tests sharing a node land in one group (input order).

    >>> from fabriccheck.models import Test
    >>> ts = [Test("a", "iperf3", ("n1", "n2")), Test("b", "iperf3", ("n3", "n4")),
    ...       Test("c", "iperf3", ("n2", "n5"))]
    >>> [[t.test_id for t in g] for g in overlapping_groups(ts)]
    [['a', 'c'], ['b']]
    """
    parent = list(range(len(tests)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, test in enumerate(tests):
        for host in test.nodes:
            if host in owner:  # union; the smaller index stays the root
                a, b = find(i), find(owner[host])
                parent[max(a, b)] = min(a, b)
            else:
                owner[host] = i
    groups: dict[int, list[Test]] = {}
    for i, test in enumerate(tests):
        groups.setdefault(find(i), []).append(test)
    return [groups[root] for root in sorted(groups)]  # roots: first index of each group


def wait_reservations_gone(names: Sequence[str], timeout_s: float = 10.0) -> list[str]:
    """Those of ``names`` whose placement group is still not REMOVED after ``timeout_s``."""
    from ray.util.placement_group import placement_group_table

    deadline = time.monotonic() + timeout_s
    while True:
        table = placement_group_table()
        live = [v["name"] for v in table.values()
                if v["name"] in names and v["state"] != "REMOVED"]
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.1)
