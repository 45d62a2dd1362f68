"""SimExecutor: the embedded fabric simulator behind ``--executor sim``.

It runs a round of tests against a :class:`~fabriccheck.topology.model.Topology` with injected
faults (:mod:`fabriccheck.faults`) and returns what the real tools would have printed, so the
real parsers are on the path. The bandwidth model (paths, faults, max-min contention) is in
:mod:`.model`; the text in :mod:`.tools` / :mod:`.render`.

Measured values: a collective over R rails reaches busbw ``R × rate/8 × efficiency`` (rate = the
test's per-flow Gb/s after contention; efficiency ~0.94 for all_reduce, so 8 × 400G gives ~376
GB/s on 2 nodes, 1.3% less per doubling of the ring beyond that); a 1-node collective runs at
the spec's ``intra_node_busbw_gbps`` (NVLink); ib_write_bw reports 0.98 × rate; iperf3 0.94 ×
rate; host-bound probes (iperf3, allreduce-cpu) are capped by the spec's ``expected`` value.
A node's degraded GPU interconnect (``gpu_link_degraded``, factor f) scales its 1x
collective by f; a collective over >= 2 nodes containing it by ``1 - GPU_LINK_SHARE × (1 - f)``
(f = 0.5: 5% slower). Why so little: across nodes the NIC (~50 GB/s per rail) is the ring's
bottleneck and NVLink (~450 GB/s per GPU) has several times that in headroom, so only the
intra-node part of each step that is not overlapped with the network (chunk hand-offs, the
NVLS/tree reduce inside the node, about a tenth of a step) shows the slower path; ib_write_bw
(host memory, NIC to NIC) does not touch it at all.
Every measurement is × (1 + N(0, jitter)); with probability ``glitch_rate`` a test is also
× U(0.3, 0.7) (transient: a retest draws again).

Misconfigurations touch NCCL's inter-node traffic, never a 1x test nor host-memory ib_write_bw:
``transport_fallback`` (to ``socket``: the node's ranks print ``NET/Socket`` and every
collective it is in runs at :data:`SOCKET_BUSBW_GBPS`; to ``host_memory``: its NET channels lack
``GDRDMA``, :data:`HOST_MEMORY_FACTOR`), ``acs_enabled`` (:data:`ACS_FACTOR`, and ib_write_bw
from GPU memory, ``use_cuda``, halves), ``numa_misaligned`` (:data:`NUMA_FACTOR`) and, on RoCE,
``pfc_disabled`` (collectives of :data:`INCAST_MIN_NODES` or more through the NIC:
:data:`INCAST_FACTOR`; pairs pass). A ring moves at its slowest member: the lowest factor of the
test's nodes applies. Every collective prints the NCCL INFO lines of ``NCCL_DEBUG_SUBSYS=INIT,NET``
(``tools.nccl_info_lines``) that say the transport each rank used.
"""

from __future__ import annotations

import gc
import math
import operator
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

from fabriccheck.errors import ConfigError
from fabriccheck.executors.sim import nvl_nccl, preflight, render, tools
from fabriccheck.executors.sim.model import Capacities, Router, max_min_rates, stable_hash
from fabriccheck.faults import FaultSet
from fabriccheck.faults_nvl import nvlink_bandwidth
from fabriccheck.models import (
    PROBES,
    Flow,
    LinkKey,
    ProbeParams,
    Purpose,
    RawResult,
    Test,
    link_key,
    nic_node,
)
from fabriccheck.probes.commands import DEFAULT_PORT, CommandOptions, build_launch
from fabriccheck.specs import ProbeSpec, TestSpec
from fabriccheck.topology.model import Topology

#: GPU name printed in nccl-tests rank lines, by SKU keyword
GPU_NAMES = {"gb200": "NVIDIA GB200", "b200": "NVIDIA B200", "h200": "NVIDIA H200",
             "h100": "NVIDIA H100 80GB HBM3", "a100": "NVIDIA A100-SXM4-80GB"}
#: single-node all_reduce busbw (GB/s, NVLS) when the spec does not say
INTRA_BUSBW_GBPS = {"gb200": 800.0, "b200": 800.0, "h200": 480.0, "h100": 480.0, "a100": 235.0}
#: busbw per NIC as a fraction of line rate / 8 (tool-formats.md §5: 0.92-0.96)
NCCL_EFFICIENCY = {"all_reduce": 0.94, "all_gather": 0.94, "reduce_scatter": 0.94,
                   "alltoall": 0.85, "sendrecv": 0.92}
#: single-node busbw of a collective relative to all_reduce (NVLS all_reduce ~480, ring ~370)
ONE_NODE_RATIO = {"all_reduce": 1.0, "all_gather": 0.77, "reduce_scatter": 0.77,
                  "alltoall": 0.77, "sendrecv": 0.77}
#: busbw lost per doubling of a ring beyond 2 nodes (tool-formats.md §5: 2 nodes ~370, large ~365)
NCCL_LOSS_PER_DOUBLING = 0.013
#: share of a multi-node collective's step time exposed to the node's GPU interconnect
GPU_LINK_SHARE = 0.1
IB_WRITE_BW_EFFICIENCY = 0.98
IPERF3_EFFICIENCY = 0.94
CPU_EFFICIENCY = 0.90
CPU_INTRA_BUSBW_GBPS = 10.0
SSH_CONNECT_TIMEOUT_S = 10.0
#: chance a test through a NIC with ``port_errors`` comes out low (link-level retransmissions)
PORT_ERROR_GLITCH = 0.15
#: NCCL over TCP sockets (``transport_fallback`` to socket): a few GB/s of busbw whatever the
#: rails (NVIDIA/nccl-tests#188: with NCCL_IB_DISABLE=1 "much faster than 100MB/s yet slower
#: than IB's 20GB/s"; NVIDIA/nccl#1591: "works ... but the throughput is terrible")
SOCKET_BUSBW_GBPS = 3.0
#: NET traffic staged through host memory (no GPUDirect RDMA: ``nvidia_peermem`` not loaded):
#: every chunk crosses PCIe twice more and the host's memory; about a third of the busbw goes
#: (NVIDIA/nccl#1412: two HDR nodes without GDRDMA averaged 33 GB/s, 93 GB/s at 1 GB with it;
#: NVIDIA/nccl#307: NCCL 2.6.2 not using GDR for reads kept rings well below the 47 GB/s of
#: DGX-1 nodes). The size of the loss depends on the host's PCIe and memory bandwidth.
HOST_MEMORY_FACTOR = 0.65
#: PCIe ACS on: GPU-NIC peer-to-peer traffic is redirected up to the CPU's root complex (NCCL
#: troubleshooting guide, section "PCI Access Control Services (ACS)"; NVIDIA/nccl#199: P2P
#: "just running at a very low speed" until ACS was disabled; NVIDIA/nccl-tests#252); modelled
#: at half
ACS_FACTOR = 0.5
#: GPU and NIC across NUMA sockets (``nvidia-smi topo -m`` SYS instead of PIX/PXB): the
#: traffic crosses the inter-socket link
NUMA_FACTOR = 0.8
#: RoCE without PFC/ECN: loss under incast (many senders into one receiver) and go-back-N
#: retransmission collapse a collective's throughput; pairs (one sender) do not lose
INCAST_FACTOR = 0.3
INCAST_MIN_NODES = 4
DEFAULT_SIZE = {"nccl": 1 << 30, "allreduce-cpu": 1 << 26, "ib_write_bw": 65536, "iperf3": 131072}


TRACE_PROBE = "traceroute"  # path learning (fabriccheck.learn_paths), not a measurement
#: every field of a test's parameters, in order (the key of a filled parameter set)
_param_values = operator.attrgetter(*(f.name for f in fields(ProbeParams)))
#: Test's fields are the ones _fill passes positionally (else it falls back to ``replace``)
_TEST_FIELDS_KNOWN = tuple(f.name for f in fields(Test)) == (
    "test_id", "probe", "nodes", "flows", "round", "purpose", "timeout_s", "params")


def pinned_ports(test: Test) -> tuple[int, int] | None:
    """(sport, dport) when the test pins its flows' 5-tuple, else None."""
    p = test.params
    if p.sport is None or p.dport is None:
        return None
    return int(p.sport), int(p.dport)


@dataclass
class _Prep:
    """One test on its way through a round (internal)."""

    test: Test
    flows: tuple[Flow, ...] = ()
    hops: list[tuple[int, ...]] = field(default_factory=list)  # hop ids per running flow
    state: str = "run"  # run | fail | hang | unreachable
    unreachable: tuple[str, ...] = ()
    broken: list[Flow] = field(default_factory=list)
    rate_gbps: float = float("inf")
    trace: tuple[tuple[str, ...], bool] | None = None  # traceroute: switches answering, reached


class SimExecutor:
    """Runs rounds of tests on a simulated fabric and returns the tools' real output formats.

    Parameters
    ----------
    topology : Topology
        The fabric.
    spec : TestSpec, optional
        Gives message sizes, GPUs per node, the NVLink busbw and host-bound caps.
    faults : FaultSet, optional
        Injected faults and noise; validated against ``topology`` unless ``validate=False``.
    seed : int
        Every random choice (ECMP hashing, noise, glitches, flapping) derives from it: same seed
        and same rounds of tests give the same text.
    use_cuda : int, optional
        ib_write_bw runs ``--use_cuda=<gpu>`` (GPU memory: ``acs_enabled`` halves it).
    """

    name = "sim"

    def __init__(self, topology: Topology, spec: TestSpec | None = None,
                 faults: FaultSet | None = None, seed: int = 0, *, validate: bool = True,
                 sku: str | None = None, use_cuda: int | None = None) -> None:
        self.topology = topology
        self.spec = spec
        self.faults = faults or FaultSet()
        if validate:
            self.faults.validate(topology)
        self.seed = seed
        self.caps = Capacities.build(topology, self.faults)
        self.router = Router(topology, seed)
        self.round_no = 0
        self.clock_s = 0.0
        self._cap: list[float] = []  # capacity by hop id (Router.hop_list)
        self._zero: set[int] = set()  # hop ids with capacity 0 (down)
        self._flap: set[int] = set()  # hop ids on flapping links
        self._ips: dict[str, str] = {}
        self._lids: dict[str, int] = {}
        self._rail_of: dict[str, int] = {}
        self._node_facts: dict[str, preflight.NodeFacts] = {}
        self._node_idx = {n: i for i, n in enumerate(sorted(topology.nodes))}
        self._filled: dict[tuple, ProbeParams] = {}  # see _fill
        self._quiet_rng = random.Random(0)  # see _noise
        self._by_node: dict[str, list] | None = None  # see _node_faults
        self._nvl_model: nvl_nccl.DomainModel | None = None  # see _domain_model
        self._rails = max(1, topology.rails)  # a property that scans every node: read once
        sku_text = (sku or (spec.sku if spec else "") or "h100").lower()
        key = next((k for k in GPU_NAMES if k in sku_text), "h100")
        self.gpu_name = GPU_NAMES[key]
        intra = getattr(spec, "intra_node_busbw_gbps", 0.0) if spec else 0.0
        self.intra_busbw_gbps = float(intra) if intra and intra > 0 else INTRA_BUSBW_GBPS[key]
        #: ``use_cuda``: ib_write_bw moves GPU memory (``--use_cuda``), as a GPUDirect check does
        self.options = CommandOptions(gid_index=3 if topology.fabric == "roce" else None,
                                      use_cuda=use_cuda)
        #: what a switch answers a traceroute with: 100.64.0.0/10, by sorted index
        self._switch_ips = {sw: f"100.{64 + k // 65536}.{k // 256 % 256}.{k % 256}"
                            for k, sw in enumerate(sorted(topology.switches))}

    def _sync_caps(self) -> None:
        """Extend the per-hop-id capacity tables to the hops the router has named so far."""
        hops = self.router.hop_list
        for i in range(len(self._cap), len(hops)):
            key = link_key(*hops[i])
            cap = self.caps.link_gbps[key]
            self._cap.append(cap)
            if cap <= 0:
                self._zero.add(i)
            if key in self.caps.flapping:
                self._flap.add(i)

    # ---- addresses ---------------------------------------------------------------------------
    def nic_ip(self, endpoint: str) -> str:
        """A stable IPv4 address per NIC: ``10.<rail+1>.<hi>.<lo>`` of the node's index."""
        ip = self._ips.get(endpoint)
        if ip is None:
            i = self._node_idx.get(nic_node(endpoint), 0) + 1
            ip = f"10.{self.nic_rail(endpoint) % 250 + 1}.{i // 256}.{i % 256}"
            self._ips[endpoint] = ip
        return ip

    def nic_rail(self, endpoint: str) -> int:
        rail = self._rail_of.get(endpoint)
        if rail is None:
            nic = self.topology.nics.get(endpoint)
            rail = self._rail_of[endpoint] = nic.rail if nic is not None else 0
        return rail

    def nic_lid(self, endpoint: str) -> int:
        lid = self._lids.get(endpoint)
        if lid is None:
            i = self._node_idx.get(nic_node(endpoint), 0)
            lid = self._lids[endpoint] = (i * self._rails + self.nic_rail(endpoint)) % 0xBFFE + 1
        return lid

    def mgmt_ip(self, node: str) -> str:
        """The node's management address (``172.16.<hi>.<lo>`` of its index): NCCL's
        out-of-band interface, and the interface its sockets use."""
        i = self._node_idx.get(node, 0) + 1
        return f"172.16.{i // 256}.{i % 256}"

    def node_nics(self, node: str) -> tuple[str, ...]:
        n = self.topology.nodes.get(node)
        return tuple(nic.name for nic in n.nics) if n is not None else ()

    # ---- executor contract -------------------------------------------------------------------
    def run_round(self, tests: Sequence[Test]) -> list[RawResult]:
        """Run ``tests`` at the same time; one RawResult per test, in order.

        The cyclic garbage collector is paused while the round is rendered (and switched back
        on after, if it was on): a round makes tens of thousands of objects that all live on as
        its results, so collections during it would only scan them (a quarter to a third of a
        traffic round's time at 4,096 nodes). The simulator makes next to no cyclic garbage;
        its memory is freed by reference counting as usual.
        """
        was_on = gc.isenabled()
        gc.disable()
        try:
            return self._run_round(tests)
        finally:
            if was_on:
                gc.enable()

    def _run_round(self, tests: Sequence[Test]) -> list[RawResult]:
        # the planner's round number when it set one: a resumed run whose first rounds were
        # replayed from history draws the same noise as an uninterrupted one
        planned = max((t.round for t in tests), default=0)
        # (a round run in waves calls this once per wave with the same planned round)
        if not all(t.probe == TRACE_PROBE for t in tests):  # path learning is not a round
            self.round_no = planned if planned >= max(1, self.round_no) else self.round_no + 1
        signal_raws = {i: self._signal(t) for i, t in enumerate(tests) if t.probe == "signal"}
        if signal_raws:
            traffic = [t for t in tests if t.probe != "signal"]
            raws = iter(self._run_traffic(traffic) if traffic else [])
            if not traffic:
                self.clock_s += max(r.duration_s for r in signal_raws.values())
            return [signal_raws[i] if i in signal_raws else next(raws)
                    for i in range(len(tests))]
        return self._run_traffic(tests)

    def _run_traffic(self, tests: Sequence[Test]) -> list[RawResult]:
        preps = [self._prepare(t) for t in tests]
        running = sorted((p for p in preps if p.state == "run" and any(p.hops)),
                         key=lambda p: p.test.test_id)
        units = [[h for ids in p.hops for h in ids] for p in running]
        for p, rate in zip(running, max_min_rates(units, self._cap), strict=True):
            p.rate_gbps = rate
        ctx = tools.ToolContext(
            seed=self.seed, round_no=self.round_no, clock_s=self.clock_s, nic_ip=self.nic_ip,
            nic_lid=self.nic_lid, nic_rail=self.nic_rail,
            link_type="IB" if self.topology.fabric == "infiniband" else "Ethernet",
            gpu_name=self.gpu_name, node_nics=self.node_nics, mgmt_ip=self.mgmt_ip,
            fallback=self.caps.fallback,
        )
        out = [self._finish(p, ctx) for p in preps]
        self.clock_s += max((r.duration_s for r in out), default=0.0)
        return out

    def close(self) -> None:
        """Nothing to release."""

    # ---- signals -------------------------------------------------------------------------------
    def _signal(self, test: Test) -> RawResult:
        """A signal test: its rendered command answered by :mod:`.preflight` (real formats)."""
        node = test.nodes[0]
        if node not in self.topology.nodes:
            raise ConfigError(f"test {test.test_id}: node {node!r} is not in topology "
                              f"{self.topology.name!r}")
        facts = self._node_facts.get(node)
        if facts is None:
            n = self.topology.nodes[node]
            gpus = (self.spec.gpus_per_node if self.spec else 0) or n.gpus
            facts = preflight.node_facts(node, {nic.name: nic.gbps for nic in n.nics}, gpus,
                                         self.gpu_name, self._node_faults(node))
            if self.topology.domains:  # a compute tray: what it sees of its NVLink domain
                from fabriccheck.executors.sim.nvl_world import nvl_facts

                facts = replace(facts, nvl=nvl_facts(self.topology, node, self.faults,
                                                     self.mgmt_ip))
            self._node_facts[node] = facts
        peer_ips = {nic.endpoint: self.nic_ip(nic.endpoint) for n in test.nodes[1:2]
                    for nic in self.topology.nodes[n].nics}
        return preflight.run_signal(
            test, facts, peer_ips, seed=self.seed, fabric=self.topology.fabric,
            clock_s=self.clock_s, unreachable=node in self.caps.unreachable,
            hung=node in self.caps.hung, connect_timeout_s=SSH_CONNECT_TIMEOUT_S)

    def _node_faults(self, node: str) -> FaultSet:
        """The faults :func:`~.node_world.node_facts` would pick for ``node`` (on it or on one
        of its NICs), in their order, with the run's noise: grouped once, not scanned per node."""
        if self._by_node is None:
            by: dict[str, list] = {}
            for f in self.faults.faults:
                for n in {f.node, (f.nic or "").split("/", 1)[0]} - {None}:
                    by.setdefault(n, []).append(f)
            self._by_node = by
        return replace(self.faults, faults=tuple(self._by_node.get(node, ())))

    # ---- per test ----------------------------------------------------------------------------
    def _probe_spec(self, probe: str, k: int, collective: str | None) -> ProbeSpec | None:
        if self.spec is None:
            return None
        try:
            return self.spec.lookup(probe, k, collective)
        except ConfigError:
            return None

    def _fill(self, test: Test) -> Test:
        """The test with every parameter the tools need made explicit."""
        if test.probe not in PROBES:
            raise ConfigError(f"test {test.test_id}: unknown probe {test.probe!r}",
                              hint=f"use one of {', '.join(PROBES)}")
        nodes = self.topology.nodes
        missing = [n for n in test.nodes if n not in nodes]
        if missing:
            raise ConfigError(f"test {test.test_id}: node {missing[0]!r} is not in topology "
                              f"{self.topology.name!r}")
        pp = test.params
        # the filled parameters depend on these alone: many tests of a round share them (values
        # and their types in the key: 5 and 5.0 are equal but print apart)
        vals = _param_values(pp)
        key = (test.probe, len(test.nodes), nodes[test.nodes[0]].gpus if test.nodes else None,
               vals, tuple(map(type, vals)),
               tuple(map(type, pp.rails)) if pp.rails is not None else None)
        try:
            params = self._filled.get(key)
        except TypeError:  # an unhashable value
            key, params = None, None
        if params is None:
            params = self._fill_params(test)
            if key is not None:
                if len(self._filled) >= 4096:
                    self._filled.clear()
                self._filled[key] = params
        flows = test.flows or self._default_flows(test, params)
        if _TEST_FIELDS_KNOWN:
            return Test(test.test_id, test.probe, test.nodes, flows, test.round, test.purpose,
                        test.timeout_s, params)
        return replace(test, params=params, flows=flows)

    def _fill_params(self, test: Test) -> ProbeParams:
        p = dict(test.params)
        collective = p.setdefault("collective", "all_reduce")
        if test.probe in ("nccl", "allreduce-cpu") and collective not in render.BUSBW_FACTOR:
            raise ConfigError(f"test {test.test_id}: unknown collective {collective!r}",
                              hint=f"use one of {', '.join(render.BUSBW_FACTOR)}")
        ps = self._probe_spec(test.probe, len(test.nodes),
                              collective if test.probe == "nccl" else None)
        if "size_bytes" not in p:
            p["size_bytes"] = ps.size_bytes if ps else DEFAULT_SIZE[test.probe]
        if test.probe == "allreduce-cpu":
            p.setdefault("gpus_per_node", 1)
        elif "gpus_per_node" not in p:
            spec_g = self.spec.gpus_per_node if self.spec else 0
            p["gpus_per_node"] = spec_g or self.topology.nodes[test.nodes[0]].gpus or 8
        return ProbeParams.of(p)

    def _default_flows(self, test: Test, params: dict) -> tuple[Flow, ...]:
        """Convention flows when a planner gave none: ring edges per rail, or one NIC pair."""
        k = len(test.nodes)
        if k < 2:
            return ()
        first = self.topology.nodes[test.nodes[0]]
        rails = tuple(params.get("rails") or sorted(n.rail for n in first.nics))
        nic = self.topology.nic
        if test.probe in ("ib_write_bw", "iperf3"):
            return (Flow(nic(test.nodes[0], rails[0]), nic(test.nodes[1], rails[0])),)
        if k == 2:
            return tuple(f for r in rails for f in (
                Flow(nic(test.nodes[0], r), nic(test.nodes[1], r)),
                Flow(nic(test.nodes[1], r), nic(test.nodes[0], r))))
        return tuple(Flow(nic(test.nodes[i], r), nic(test.nodes[(i + 1) % k], r))
                     for r in rails for i in range(k))

    def _prepare(self, test: Test) -> _Prep:
        if test.probe == TRACE_PROBE:
            return self._prepare_trace(test)
        if test.purpose == Purpose.DOMAIN:  # NVLink only: no flow, no link (nvl_nccl)
            return self._prepare_domain(test)
        test = self._fill(test)
        prep = _Prep(test=test, flows=test.flows)
        caps = self.caps
        if caps.unreachable:
            prep.unreachable = tuple(n for n in test.nodes if n in caps.unreachable)
            if prep.unreachable:
                prep.state = "unreachable"
                return prep
        if caps.hung and any(n in caps.hung for n in test.nodes):
            prep.state = "hang"
            return prep
        flap_fired: dict[LinkKey, bool] = {}
        ports = pinned_ports(test)
        for flow in prep.flows:
            if flow.src == flow.dst and flow.src in caps.down_nics:
                prep.broken.append(flow)  # HCA loopback: the NIC itself, not its cable
                continue
            ids = self.router.flow_ids(flow, test.test_id, ports)
            if ids is None:
                prep.broken.append(flow)
                continue
            if len(self._cap) < len(self.router.hop_list):
                self._sync_caps()
            broken = not self._zero.isdisjoint(ids) if self._zero else False
            if self._flap and not self._flap.isdisjoint(ids):
                for i in self._flap.intersection(ids):
                    key = link_key(*self.router.hop_list[i])
                    if key not in flap_fired:
                        u = stable_hash(self.seed, self.round_no, test.test_id, "flap", *key)
                        flap_fired[key] = u / 2.0**64 < caps.flapping[key]
                    broken = broken or flap_fired[key]
            if broken:
                prep.broken.append(flow)
            else:
                prep.hops.append(ids)
        if prep.broken:
            prep.state = "fail"
            prep.hops = []
        return prep

    def _prepare_domain(self, test: Test) -> _Prep:
        prep = _Prep(test=test)
        prep.unreachable = tuple(n for n in test.nodes if n in self.caps.unreachable)
        if prep.unreachable:
            prep.state = "unreachable"
        elif any(n in self.caps.hung for n in test.nodes):
            prep.state = "hang"
        return prep

    def _domain_model(self) -> nvl_nccl.DomainModel:
        """The NVLink model of the domain tests (the faults do not change during a run)."""
        if self._nvl_model is None:
            fs = self.faults.faults
            self._nvl_model = nvl_nccl.DomainModel(
                nvlink_bandwidth(fs, self.topology),
                frozenset(str(f.node) for f in fs if f.kind == "imex_missing"),
                frozenset(str(f.node) for f in fs if f.kind == "clique_mismatch"),
                dict(self.caps.node_factor), self.intra_busbw_gbps,
                frozenset(str(f.node) for f in fs if f.kind == "fabric_unregistered"))
        return self._nvl_model

    def _prepare_trace(self, test: Test) -> _Prep:
        """A traceroute on the pinned 5-tuple of the test's flow: the switches that answer.

        Probes die at a down link (the hops behind it stay silent); a slow or flapping link
        forwards them. A trace sends no measurable traffic: it takes no share of any link.
        """
        if not test.flows or pinned_ports(test) is None:
            raise ConfigError(f"test {test.test_id}: a traceroute needs a flow and params "
                              "sport and dport", hint="pin the flow's 5-tuple first")
        prep = _Prep(test=test, flows=test.flows[:1])
        prep.unreachable = tuple(n for n in test.nodes[:1] if n in self.caps.unreachable)
        if prep.unreachable:
            prep.state = "unreachable"
            return prep
        if test.nodes[0] in self.caps.hung:
            prep.state = "hang"
            return prep
        ids = self.router.flow_ids(prep.flows[0], test.test_id, pinned_ports(test)) or ()
        self._sync_caps()
        answered: list[str] = []
        reached = bool(ids)
        for i in ids:
            if i in self._zero:
                reached = False
                break
            to = self.router.hop_list[i][1]
            if to in self.topology.switches:
                answered.append(to)
        prep.trace = (tuple(answered), reached)
        return prep

    def hop_names(self) -> dict[str, str]:
        """Every switch's address (what the simulated traceroute prints) -> the switch."""
        return {ip: sw for sw, ip in self._switch_ips.items()}

    def _noise(self, test: Test) -> tuple[float, random.Random]:
        noise = self.faults.noise
        if not noise.jitter and not noise.glitch_rate:
            # no noise: the test's generator would only ever draw gauss(0, 0) == 0 (the tools'
            # wobble), so no test-seeded one is needed: any generator gives the same text
            return 1.0, self._quiet_rng
        rng = random.Random(stable_hash(self.seed, self.round_no, test.test_id, "noise"))
        m = max(0.05, 1.0 + rng.gauss(0.0, noise.jitter)) if noise.jitter else 1.0
        if noise.glitch_rate and rng.random() < noise.glitch_rate:
            m *= rng.uniform(0.3, 0.7)
        return m, rng

    def _node_factor(self, nodes: Sequence[str]) -> float:
        return min((self.caps.node_factor.get(n, 1.0) for n in nodes), default=1.0)

    def _gpu_factor(self, nodes: Sequence[str]) -> float:
        """The slowest GPU interconnect among ``nodes`` (``gpu_link_degraded``; 1.0: healthy)."""
        return min((self.caps.gpu_factor.get(n, 1.0) for n in nodes), default=1.0)

    def _host_cap(self, test: Test) -> float:
        """Host-side bound (CPU, TCP stack) of iperf3 / allreduce-cpu: the spec's expected."""
        ps = self._probe_spec(test.probe, len(test.nodes), None)
        if ps is not None and ps.expected:
            return ps.expected * self._node_factor(test.nodes)
        return float("inf")

    def _rate(self, prep: _Prep) -> float:
        if prep.rate_gbps != float("inf"):
            return prep.rate_gbps
        nf = self.caps.nic_factor  # flows that cross no link (HCA loopback): the NIC bounds
        nics = [self.topology.nics[e].gbps * nf.get(e, 1.0)
                for f in prep.flows for e in (f.src, f.dst)]
        return min(nics, default=0.0) * self._node_factor(prep.test.nodes)

    def _finish(self, prep: _Prep, ctx: tools.ToolContext) -> RawResult:
        test = prep.test
        port = DEFAULT_PORT + stable_hash(test.test_id) % 2000
        known, nic_ip = self._ips, self.nic_ip
        ips = {e: known.get(e) or nic_ip(e) for f in prep.flows for e in (f.src, f.dst)}
        commands = build_launch(test, ips, port=port, options=self.options).rendered
        if prep.state == "unreachable":
            stderr = "".join(f"ssh: connect to host {h} port 22: No route to host\n"
                             for h in prep.unreachable)
            # ssh never started the command: no exit code (RawResult: None = never ran)
            return RawResult(test.test_id, stderr=stderr, exit_code=None,
                             duration_s=SSH_CONNECT_TIMEOUT_S, unreachable=prep.unreachable,
                             commands=commands)
        if prep.state == "hang":
            return RawResult(test.test_id, exit_code=None, duration_s=test.timeout_s,
                             timed_out=True, commands=commands)
        if prep.trace is not None:
            answered, reached = prep.trace
            run = tools.run_traceroute(
                ctx, prep.flows[0], tuple(self._switch_ips[sw] for sw in answered), reached,
                max_hops=self.options.traceroute_max_hops)
        else:
            run = self._run_tool(prep, ctx, port)
        if run.duration_s > test.timeout_s and not run.timed_out:
            # killed at the timeout: iperf3 -J prints nothing before it ends; perftest has
            # printed its header (its errors on stderr would have come later)
            stdout = "" if test.probe == "iperf3" else run.stdout
            run = tools.ToolRun(stdout, exit_code=None, duration_s=test.timeout_s,
                                timed_out=True)
        return RawResult(test.test_id, stdout=run.stdout, stderr=run.stderr,
                         exit_code=run.exit_code, duration_s=run.duration_s,
                         timed_out=run.timed_out, commands=commands)

    def _run_tool(self, prep: _Prep, ctx: tools.ToolContext, port: int) -> tools.ToolRun:
        test, p = prep.test, prep.test.params
        failed = prep.state == "fail"
        noise, rng = (1.0, random.Random(0)) if failed else self._noise(test)
        if not failed and self.caps.error_nics and any(
                e in self.caps.error_nics for f in prep.flows for e in (f.src, f.dst)):
            u = stable_hash(self.seed, self.round_no, test.test_id, "port-errors") / 2.0**64
            if u < PORT_ERROR_GLITCH:
                noise *= 0.5 + 0.3 * u / PORT_ERROR_GLITCH
        jitter = self.faults.noise.jitter
        # the parameters as attributes (p.get(k, d) is p.k, or d when p.k is None; p[k] is p.k,
        # set by _fill for collective, size_bytes and gpus_per_node)
        if test.purpose == Purpose.DOMAIN:
            return nvl_nccl.run_domain(test, ctx, self._domain_model(), noise=noise, rng=rng,
                                       jitter=jitter)
        if test.probe in ("nccl", "allreduce-cpu"):
            cpu = test.probe == "allreduce-cpu"
            coll = p["collective"]
            shape = tools.NcclShape(
                collective=coll, gpus_per_node=int(p["gpus_per_node"]),
                min_bytes=int(p.min_bytes if p.min_bytes is not None else p["size_bytes"]),
                max_bytes=int(p["size_bytes"]), iters=int(p.iters if p.iters is not None else 20),
            )
            if failed:
                return tools.run_nccl_failure(test, ctx, shape, prep.broken, cpu=cpu)
            return tools.run_nccl(test, ctx, shape, busbw_gbps=self._busbw(prep) * noise,
                                  jitter=jitter, rng=rng, cpu=cpu)
        flow = prep.flows[0]
        if test.probe == "ib_write_bw":
            bw = None if failed else (self._rate(prep) * IB_WRITE_BW_EFFICIENCY * noise
                                      * self._cuda_factor(flow))
            duration = float(p.duration_s) if p.duration_s is not None else None
            return tools.run_ib_write_bw(test, ctx, flow, bw_gbps=bw,
                                         size_bytes=int(p["size_bytes"]), duration_s=duration,
                                         iters=int(p.iters if p.iters is not None else 5000))
        bw = None
        if not failed:
            bw = min(self._rate(prep) * IPERF3_EFFICIENCY, self._host_cap(test)) * noise
        return tools.run_iperf3(test, ctx, flow, bw_gbps=bw,
                                duration_s=float(p.get("duration_s", 5.0)),
                                streams=int(p.get("streams", 1)), jitter=jitter, rng=rng,
                                port=port)

    def _busbw(self, prep: _Prep) -> float:
        """Noise-free asymptotic busbw (GB/s) of a collective test."""
        test = prep.test
        coll = test.params["collective"]
        if test.probe == "allreduce-cpu":
            if len(test.nodes) == 1:
                cap = self._host_cap(test)
                return (cap if cap != float("inf") else
                        CPU_INTRA_BUSBW_GBPS * self._node_factor(test.nodes))
            rails = len({self.nic_rail(f.src) for f in prep.flows}) or 1
            return min(rails * self._rate(prep) / 8 * CPU_EFFICIENCY, self._host_cap(test))
        gpu = self._gpu_factor(test.nodes)
        if len(test.nodes) == 1:
            return (self.intra_busbw_gbps * ONE_NODE_RATIO[coll] * self._node_factor(test.nodes)
                    * gpu)
        rails = len({self.nic_rail(f.src) for f in prep.flows}) or 1
        scale = 1.0 - NCCL_LOSS_PER_DOUBLING * math.log2(len(test.nodes) / 2)
        exposed = 1.0 - GPU_LINK_SHARE * (1.0 - gpu)
        busbw = (rails * self._rate(prep) / 8 * NCCL_EFFICIENCY[coll] * scale * exposed
                 * self._config_factor(prep))
        if any(self.caps.fallback.get(n) == "socket" for n in test.nodes):
            busbw = min(busbw, SOCKET_BUSBW_GBPS)
        return busbw

    def _config_factor(self, prep: _Prep) -> float:
        """What misconfigured members leave of a multi-node collective's busbw: the slowest
        node's GPU-NIC path (host-memory staging, ACS, NUMA), times the incast collapse of a
        RoCE NIC without PFC in a collective of :data:`INCAST_MIN_NODES` or more."""
        caps = self.caps
        factor = 1.0
        for n in prep.test.nodes:
            f = HOST_MEMORY_FACTOR if caps.fallback.get(n) == "host_memory" else 1.0
            f *= ACS_FACTOR if n in caps.acs_nodes else 1.0
            f *= NUMA_FACTOR if n in caps.numa_nodes else 1.0
            factor = min(factor, f)
        if (caps.pfc_off_nics and self.topology.fabric == "roce"
                and len(prep.test.nodes) >= INCAST_MIN_NODES
                and any(e in caps.pfc_off_nics for f in prep.flows for e in (f.src, f.dst))):
            factor *= INCAST_FACTOR
        return factor

    def _cuda_factor(self, flow: Flow) -> float:
        """ib_write_bw from GPU memory (``use_cuda``) through a node with ACS on: half."""
        if self.options.use_cuda is None or not self.caps.acs_nodes:
            return 1.0
        ends = {nic_node(flow.src), nic_node(flow.dst)}
        return ACS_FACTOR if ends & self.caps.acs_nodes else 1.0
