"""Turning planned pairs and groups into :class:`~fabriccheck.models.Test` values for one round.

A :class:`RoundBuilder` hands out test ids (``r<round>-<n>``) and keeps the round's resources
apart: a NIC runs at most one test at a time and a collective owns its nodes outright.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from fabriccheck.models import Flow, ProbeParams, Purpose, Test
from fabriccheck.planning.pinning import pinned_ports
from fabriccheck.policy import PAIR_PROBES, SweepPolicy
from fabriccheck.specs import TestSpec
from fabriccheck.topology.view import FabricView

T = TypeVar("T")

#: overflow waves a round may add for tests that found their NICs or links taken
OVERFLOW_WAVES = 2

def ring_flows(nodes: Sequence[str], rails: Sequence[int], view: FabricView) -> tuple[Flow, ...]:
    """The ring edges of a collective over ``nodes``: ``n_i/rail -> n_(i+1)/rail`` per rail.

    A 1-node group has no flows (intra-node only).
    """
    k = len(nodes)
    if k < 2:
        return ()
    out = []
    for r in rails:
        for i, n in enumerate(nodes):
            out.append(Flow(view.rails_of[n][r], view.rails_of[nodes[(i + 1) % k]][r]))
    return tuple(out)


class RoundBuilder:
    """Collects one round's tests without double-booking a NIC or a node."""

    def __init__(self, round_no: int, view: FabricView, spec: TestSpec, policy: SweepPolicy):
        self.round_no = round_no
        self.view = view
        self.spec = spec
        self.policy = policy
        self.tests: list[Test] = []
        self.busy_nics: set[str] = set()  # a NIC in a collective, or sending and receiving
        self.busy_tx: set[str] = set()  # NICs sending in a pair test (links are full duplex)
        self.busy_rx: set[str] = set()
        self.busy_nodes: set[str] = set()  # owned by a collective
        self.busy_gpus: set[str] = set()  # nodes running a 1x collective (NVLink only)
        from fabriccheck.planning.pairing import CrossBudget

        #: follow-up flows that cross leaves must not share links either (IB: exact routes)
        self.budget = CrossBudget(view, policy.roce_cross_share)
        #: the round's overflow waves (:meth:`in_later_wave`): builder, wave once it has a test
        self._later: list[tuple[RoundBuilder, int | None]] = []

    def _id(self) -> str:
        return f"r{self.round_no}-{len(self.tests) + 1:05d}"

    def next_wave(self) -> int:
        """The first wave after every wave the round's tests so far run in (``params.wave``;
        the round's own tests are wave 0)."""
        return max((t.params.wave or 0 for t in self.tests), default=0) + 1

    def add_in_wave(self, test: Test, wave: int, **params: object) -> Test:
        """``test``, planned on a builder of its own (its resources apart from the round's),
        as this round's test in ``wave``, with ``params`` set (a wave runs after the one
        before: :func:`fabriccheck.orchestrator.run_waves`)."""
        test = replace(test, test_id=self._id(),
                       params={**dict(test.params), **params, "wave": wave})
        self.tests.append(test)
        return test

    def in_later_wave(self, plan: Callable[[RoundBuilder], T]) -> T | None:
        """``plan`` run on the builder of one of the round's overflow waves, whose tests run
        after the round's tests so far: for a test whose NICs or links the round has given
        away (a second probe of a link whose one free direction a confirmation took, a
        suspect's confirmation when the leaf's only route out is taken). The round's
        inference still sees it, a round sooner than planning it next round. The first
        overflow wave where ``plan`` returns something truthy takes it; each keeps its tests'
        resources apart; at most :data:`OVERFLOW_WAVES` (then None: the next round)."""
        for i in range(OVERFLOW_WAVES):
            if i == len(self._later):
                self._later.append((RoundBuilder(self.round_no, self.view, self.spec,
                                                 self.policy), None))
            sub, wave = self._later[i]
            n = len(sub.tests)
            out = plan(sub)
            if len(sub.tests) > n:
                if wave is None:  # numbered when it gets its first test
                    wave = self.next_wave()
                    self._later[i] = (sub, wave)
                for t in sub.tests[n:]:
                    self.add_in_wave(t, wave)
            if out:
                return out
        return None

    def now_or_later(self, plan: Callable[[RoundBuilder], T]) -> T | None:
        """``plan`` on this round, else (nothing truthy) in one of its overflow waves."""
        return plan(self) or self.in_later_wave(plan)

    @property
    def timeout_s(self) -> float:
        return float(self.policy.timeout_s or self.spec.timeout_s)

    def nic_free(self, nic: str, way: str | None = None) -> bool:
        """Free for a pair test sending (``way="tx"``), receiving (``"rx"``) or at all (None)."""
        if nic in self.busy_nics or nic.split("/", 1)[0] in self.busy_nodes:
            return False
        if way == "tx":
            return nic not in self.busy_tx
        if way == "rx":
            return nic not in self.busy_rx
        return nic not in self.busy_tx and nic not in self.busy_rx

    def node_free(self, node: str) -> bool:
        """No collective owns the node and none of its NICs is busy (a 1x beside is fine)."""
        if node in self.busy_nodes:
            return False
        return all(self.nic_free(n) for n in self.view.rails_of[node].values())

    def add_flow(
        self, client: str, server: str, rail: int, purpose: str = "sweep", *,
        check_links: bool = True, **params: object,
    ) -> Test | None:
        """A per-rail pair test (``ib_write_bw``/``iperf3``) client -> server on ``rail``.

        On RoCE its 5-tuple is pinned (``sport``/``dport``, :mod:`.pinning`), so its ECMP path
        can be learned.

        Returns None when either NIC is busy this round, or (``check_links``) when the flow
        would share a link with another cross-leaf flow of the round.
        """
        probe = self.policy.pair_probe if self.policy.per_rail else "ib_write_bw"
        src, dst = self.view.rails_of[client][rail], self.view.rails_of[server][rail]
        if not (self.nic_free(src, "tx") and self.nic_free(dst, "rx")) or client == server:
            return None
        att = self.view.topology.attachment
        if check_links and att.get(src) != att.get(dst) and not self.budget.fits(
                client, server, rail):
            return None
        ps = self.spec.lookup(probe, 2)
        test_id = self._id()
        if self.view.fabric == "roce" and "sport" not in params:
            params = {**pinned_ports(probe, test_id, self.policy.seed), **params}
        test = Test(
            test_id=test_id,
            probe=probe,
            nodes=(client, server),
            flows=(Flow(src, dst),),
            round=self.round_no,
            purpose=Purpose(purpose),
            timeout_s=self.timeout_s,
            params=ProbeParams.of({
                "size_bytes": ps.size_bytes,
                "rails": (rail,),
                "duration_s": self.policy.duration_s,
                **params,
            }),
        )
        self.busy_tx.add(src)
        self.busy_rx.add(dst)
        self.tests.append(test)
        return test

    def add_solo(self, node: str, probe: str, purpose: str = "sweep",
                 **params: object) -> Test | None:
        """A 1x collective on ``node`` alone (its GPUs over NVLink/PCIe, no NIC): it may run
        beside pair tests of the node's NICs, never beside another collective of the node."""
        if node in self.busy_nodes or node in self.busy_gpus:
            return None
        t = self.add_group((node,), purpose, probe=probe, **params)
        if t is not None:
            self.busy_nodes.discard(node)
            self.busy_gpus.add(node)
        return t

    def add_nic_flow(self, src: str, dst: str, purpose: str = "sweep", *,
                     check_links: bool = True, **params: object) -> Test | None:
        """A pair test between any two NIC endpoints: another rail, another NIC of the same
        node (through the switch), or ``src == dst`` (HCA loopback: the NIC's own path, not its
        cable). For NICs whose rail has no partner; None when a NIC is busy or (``check_links``)
        a cross-leaf flow would share a link."""
        probe = self.policy.pair_probe if self.policy.per_rail else "ib_write_bw"
        if not (self.nic_free(src, "tx") and self.nic_free(dst, "rx")):
            return None
        if src == dst and not self.nic_free(src):
            return None
        att = self.view.topology.attachment
        if check_links and att.get(src) != att.get(dst) and not self.budget.fits_flows(
                [(src, dst)]):
            return None
        nics = self.view.topology.nics
        nodes = tuple(dict.fromkeys((src.split("/", 1)[0], dst.split("/", 1)[0])))
        test_id = self._id()
        if self.view.fabric == "roce" and "sport" not in params and src != dst:
            params = {**pinned_ports(probe, test_id, self.policy.seed), **params}
        test = Test(
            test_id=test_id, probe=probe, nodes=nodes, flows=(Flow(src, dst),),
            round=self.round_no, purpose=Purpose(purpose), timeout_s=self.timeout_s,
            params=ProbeParams.of({
                "size_bytes": self.spec.lookup(probe, 2).size_bytes,
                "rails": tuple(sorted({nics[src].rail, nics[dst].rail})),
                "duration_s": self.policy.duration_s,
                **params,
            }),
        )
        self.busy_tx.add(src)
        self.busy_rx.add(dst)
        self.tests.append(test)
        return test

    def group_fits(self, nodes: Sequence[str]) -> bool:
        """Whether :meth:`add_group` would take ``nodes`` as a ring now (reserves nothing)."""
        nodes = tuple(nodes)
        if len(nodes) < 2 or len(set(nodes)) != len(nodes) or not all(
                self.node_free(n) and n not in self.busy_gpus for n in nodes):
            return False
        rails = sorted(set.intersection(*(set(self.view.rails_of[n]) for n in nodes)))
        att = self.view.topology.attachment
        cross = [(f.src, f.dst) for f in ring_flows(nodes, rails, self.view)
                 if att.get(f.src) != att.get(f.dst)]
        return bool(rails) and (not cross or self.budget.fits_flows(cross, exclusive=True,
                                                                    dry_run=True))

    def add_group(
        self, nodes: Sequence[str], purpose: str = "sweep", probe: str | None = None,
        *, force: bool = False, **params: object,
    ) -> Test | None:
        """A collective over ``nodes`` (all common rails). None when a node is busy, or when
        its ring would share a link with another test of the round (``force``: add it anyway,
        when nothing avoids the sharing)."""
        probe = probe or (self.policy.scale_probe if self.policy.per_rail
                          else self.policy.pair_probe)
        nodes = tuple(nodes)
        if not nodes or len(set(nodes)) != len(nodes) or not all(
                self.node_free(n) and n not in self.busy_gpus for n in nodes):
            return None
        rails = sorted(set.intersection(*(set(self.view.rails_of[n]) for n in nodes)))
        if len(nodes) > 1 and not rails:
            return None  # no rail in common: a collective over them would not use the fabric
        flows = ring_flows(nodes, rails, self.view)
        att = self.view.topology.attachment
        cross = [(f.src, f.dst) for f in flows if att.get(f.src) != att.get(f.dst)]
        if cross and not self.budget.fits_flows(cross, force=force, exclusive=True):
            return None  # its ring would share a link with another test of this round
        ps = self.spec.lookup(probe, len(nodes))
        p: dict[str, object] = {
            "size_bytes": ps.size_bytes,
            "min_bytes": ps.size_bytes,
            "rails": tuple(rails),
            "gpus_per_node": self.view.topology.gpus_per_node,
            **params,
        }
        if probe == "nccl":
            p.setdefault("collective", ps.collective or "all_reduce")
        test = Test(
            test_id=self._id(),
            probe=probe,
            nodes=nodes,
            flows=flows,
            round=self.round_no,
            purpose=Purpose(purpose),
            timeout_s=self.timeout_s,
            params=ProbeParams.of(p),
        )
        self.busy_nodes.update(nodes)
        self.tests.append(test)
        return test

    def add_pair(self, a: str, b: str, purpose: str = "sweep", rails: Sequence[int] | None = None,
                 **params: object) -> list[Test]:
        """Test a node pair with the policy's pair probe: per rail, or one 2-node collective."""
        if self.policy.pair_probe in PAIR_PROBES:
            rails = rails if rails is not None else self.view.common_rails(a, b)
            out = [self.add_flow(a, b, r, purpose, **params) for r in rails]
            return [t for t in out if t is not None]
        t = self.add_group((a, b), purpose, probe=self.policy.pair_probe, **params)
        return [t] if t is not None else []
