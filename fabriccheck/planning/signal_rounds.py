"""Signal rounds: a signal becomes tests at its level (pure).

- level 1, ``per: node``: one test per node; ``per: nic``: one test per NIC of each node
  (``{nic}`` filled). All of them run in one round: they are node-local and short.
- level 2, 4, 8: the nodes are carved into groups of that size, each group spanning leaves
  (nodes sorted by pod and leaf, group ``j`` takes every ``m``-th node); ``per: nic`` adds
  one test per rail of the group.
- a retest repeats one failing reading (same node, NIC and signal) in a later round;
- a closing read repeats each counter reading of the preflight once, with the first round after
  the ladder (its counters are then judged over the run's span: docs/node-checks.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fabriccheck.models import Observation, Purpose, Test
from fabriccheck.specs import SignalSpec
from fabriccheck.topology.view import FabricView


def _test(test_id: str, sig: SignalSpec, nodes: tuple[str, ...], round_no: int, purpose: str,
          gpus: int, nic: str | None, timeout_cap: float | None = None,
          since: str | None = None) -> Test:
    params = {"signal": sig.name, "command": sig.command, "gpus_per_node": gpus}
    if nic is not None:
        params["nic"] = nic
    if since is not None:
        params["since"] = since
    timeout = sig.timeout_s if timeout_cap is None else min(sig.timeout_s, timeout_cap)
    return Test(test_id=test_id, probe="signal", nodes=nodes, round=round_no, purpose=purpose,
                timeout_s=timeout, params=params)


def _nic_names(view: FabricView, node: str) -> list[str]:
    return [nic.name for nic in sorted(view.topology.nodes[node].nics, key=lambda n: n.rail)]


def carve_groups(nodes: Sequence[str], k: int, view: FabricView) -> list[tuple[str, ...]]:
    """Groups of ``k`` nodes spanning leaves: sorted by pod and leaf, group ``j`` takes nodes
    ``j, j+m, j+2m, ...`` (``m`` = number of groups); leftover nodes are not grouped.
    """
    m = len(nodes) // k
    if m == 0:
        return []
    ordered = sorted(nodes, key=lambda n: (view.pod(n), n))
    return [tuple(ordered[j + m * i] for i in range(k)) for j in range(m)]


def plan_signal_tests(signals: Sequence[SignalSpec], nodes: Sequence[str], view: FabricView,
                      round_no: int, gpus_per_node: int, purpose: str = Purpose.PREFLIGHT,
                      timeout_cap: float | None = None,
                      since: Mapping[str, str] | None = None) -> list[Test]:
    """Every test of ``signals`` over ``nodes`` for one round (see the module doc);
    ``timeout_cap`` (the run's test-time budget left) cuts each signal's timeout; ``since``
    (node -> ISO time) goes to each node's judged kernel-log reading (``parser: node-kernel``):
    only what came after the node's last check is judged."""
    since = since or {}
    tests: list[Test] = []
    for sig in signals:
        groups = ([(n,) for n in nodes] if sig.level == 1
                  else carve_groups(nodes, sig.level, view))
        for group in groups:
            nics: list[str | None] = (list(_nic_names(view, group[0])) if sig.per == "nic"
                                      else [None])
            for nic in nics:
                tid = f"r{round_no}-sig-{sig.name}-{'+'.join(group)}" + (f"-{nic}" if nic else "")
                when = since.get(group[0]) if sig.parser == "node-kernel" else None
                tests.append(_test(tid, sig, group, round_no, purpose, gpus_per_node, nic,
                                   timeout_cap, when))
    return tests


def plan_signal_retests(failing: Sequence[Observation], round_no: int,
                        timeout_cap: float | None = None) -> list[Test]:
    """One retest per failing reading, same signal, nodes and NIC, in round ``round_no``."""
    out = []
    for o in failing:
        t = o.test
        timeout = t.timeout_s if timeout_cap is None else min(t.timeout_s, timeout_cap)
        out.append(Test(test_id=f"r{round_no}-re-{t.test_id.split('-', 1)[1]}", probe=t.probe,
                        nodes=t.nodes, round=round_no, purpose=Purpose.CONFIRM,
                        timeout_s=timeout, params=t.params))
    return out


class SignalPhases:
    """The planner's signal phases: the preflight (level-1 signals, before any traffic), one
    retest round for readings within noise of their bound, and the group signals (levels 2,
    4, 8) after the traffic sweep. Each returns the next round's tests, or ``[]``."""

    def __init__(self, signals: Sequence[SignalSpec], gpus_per_node: int,
                 since: Mapping[str, str] | None = None) -> None:
        self.since = dict(since or {})
        self.level1 = tuple(s for s in signals if s.level == 1)
        self.groups = tuple(s for s in signals if s.level > 1)
        self.gpus = gpus_per_node
        self.by_name = {s.name: s for s in signals}
        self.preflight_done = False
        self.retest_done = False
        self.groups_done = False
        self.closing_done = False

    def before_traffic(self, nodes: Sequence[str], view: FabricView, round_no: int,
                       retests: Sequence[Observation], timeout_cap: float | None = None
                       ) -> list[Test]:
        """The preflight tests, then (once) the retests ``retests`` asks for."""
        if not self.preflight_done:
            self.preflight_done = True
            tests = plan_signal_tests(self.level1, nodes, view, round_no, self.gpus,
                                      timeout_cap=timeout_cap, since=self.since)
            if tests:
                return tests
        if not self.retest_done:
            self.retest_done = True
            return plan_signal_retests(retests, round_no, timeout_cap)
        return []

    def closing(self, nodes: Sequence[str], history_preflight: Sequence[Test], round_no: int,
                timeout_cap: float | None = None) -> list[Test]:
        """Once: each counter reading of the preflight (``parser: node-counters``) read again,
        on ``nodes`` (those still in play), so its counters are judged over the run's span (the
        ladder's traffic included), not only over the preflight's window."""
        if self.closing_done:
            return []
        self.closing_done = True
        out = []
        live = set(nodes)
        for t in history_preflight:
            sig = self.by_name.get(str(t.params.get("signal")))
            if sig is None or sig.parser != "node-counters" or t.nodes[0] not in live:
                continue
            timeout = t.timeout_s if timeout_cap is None else min(t.timeout_s, timeout_cap)
            params = {**dict(t.params), "span_of": t.test_id}
            out.append(Test(test_id=f"r{round_no}-span-{t.test_id.split('-', 1)[1]}",
                            probe=t.probe, nodes=t.nodes, round=round_no,
                            purpose=Purpose.CONFIRM, timeout_s=timeout, params=params))
        return out

    def after_traffic(self, nodes: Sequence[str], view: FabricView, round_no: int,
                      timeout_cap: float | None = None) -> list[Test]:
        """The group signals, once, over the nodes still in play."""
        if self.groups_done:
            return []
        self.groups_done = True
        return plan_signal_tests(self.groups, nodes, view, round_no, self.gpus,
                                 purpose=Purpose.SCALE, timeout_cap=timeout_cap)
