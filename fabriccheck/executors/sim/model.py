"""The simulator's bandwidth model: capacities under faults, flow paths, and contention.

Model (what a test measures, before noise):

- **Resources** are *directed* links (links are full duplex, so the two directions do not
  compete). A NIC's attachment link carries the NIC's own capacity too:
  ``min(link.gbps × link factor, nic.gbps × nic factor × node factor)``; a down NIC or link has
  capacity 0. ``node_slow`` therefore slows every network test of the node, and its intra-node
  (NVLink / CPU) bound for single-node tests. ``gpu_link_degraded`` touches no link: it
  only lowers the node's GPU-interconnect factor (:attr:`Capacities.gpu_factor`), which the
  executor applies to collectives (fully at 1x, :data:`~.executor.GPU_LINK_SHARE` of it beyond).
- **Paths**: on InfiniBand a flow takes ``topology.route`` (deterministic); on RoCE it takes ONE
  of its ECMP ``topology.paths``, chosen by a hash the planner cannot see: of (seed, test id,
  flow) for an unpinned flow (its source port is whatever the NIC picked), of (seed, the
  5-tuple) for a flow pinned by ``params.sport``/``dport`` — so a traceroute on the same
  5-tuple takes the same path, as on a real ECMP fabric. The hash picks one whole equal-cost
  path (equivalent to one hash per switch over that switch's next hops).
- **Contention** is *max-min fair* over all tests of a round (progressive filling). The unit of
  allocation is a test: all its flows run at the same per-flow rate, because a ring moves at
  its slowest edge and NCCL splits traffic evenly over rails/channels. A resource used by ``m``
  flows of a test counts ``m`` times. Two tests whose flows share one direction of one link
  therefore get half of it each; capacity a slow test cannot use goes to the others.
- Tests that fail (a down component, a flapping link that fires), hang or are unreachable send
  no traffic and take no share.
- **Misconfigurations** (:data:`~fabriccheck.faults.CONFIG_NODE_KINDS` and ``pfc_disabled``) leave
  every link's capacity alone: they slow a node's *NCCL* traffic only (the GPU-NIC path, the
  transport NCCL picks, RoCE incast), so :class:`Capacities` lists them for the executor, which
  applies them to collectives (``executor._busbw``) and to GPU-memory ``ib_write_bw``.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from fabriccheck.faults import FaultSet
from fabriccheck.models import Flow, LinkKey, link_key, nic_node
from fabriccheck.topology.model import Path, Topology

Hop = tuple[str, str]  # a directed link: (from, to)
_MISSING = object()


_blake2b = hashlib.blake2b
_from_bytes = int.from_bytes


def stable_hash(*parts: object) -> int:
    """A 64-bit hash of ``parts`` that is the same in every process (unlike ``hash``): blake2b
    (8 bytes, big-endian) of the parts' ``str`` joined by ``\x1f``.

    >>> stable_hash(1, "t-1") == stable_hash(1, "t-1")
    True
    """
    return _from_bytes(_blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest(),
                       "big")


def unit_float(*parts: object) -> float:
    """A uniform number in [0, 1) derived from ``parts`` (deterministic)."""
    return _from_bytes(_blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest(),
                       "big") / 2.0**64


class KeyedHash:
    """:func:`stable_hash` / :func:`unit_float` of ``(*prefix, *parts)`` with the prefix's text
    joined once (the same numbers, for the many draws of one node or NIC). ``parts`` must not be
    empty (``stable_hash(*prefix)`` has no trailing separator).

    >>> h = KeyedHash(1, "node-001")
    >>> h.hash("uptime") == stable_hash(1, "node-001", "uptime")
    True
    >>> h.unit("symbols", "mlx5_0") == unit_float(1, "node-001", "symbols", "mlx5_0")
    True
    """

    __slots__ = ("_head",)

    def __init__(self, *prefix: object) -> None:
        self._head = "".join(str(p) + "\x1f" for p in prefix)

    def hash(self, *parts: object) -> int:
        data = (self._head + "\x1f".join(map(str, parts))).encode()
        return _from_bytes(_blake2b(data, digest_size=8).digest(), "big")

    def unit(self, *parts: object) -> float:
        data = (self._head + "\x1f".join(map(str, parts))).encode()
        return _from_bytes(_blake2b(data, digest_size=8).digest(), "big") / 2.0**64


@dataclass
class Capacities:
    """Effective capacities (Gb/s) of links, NICs and nodes under a fault set."""

    link_gbps: dict[LinkKey, float]
    node_factor: dict[str, float]
    flapping: dict[LinkKey, float]  # link -> probability a test crossing it fails
    hung: frozenset[str]
    unreachable: frozenset[str]
    down_nics: frozenset[str]
    down_links: frozenset[LinkKey]
    #: node -> share of its GPU interconnect (NVLink/PCIe) left (``gpu_link_degraded``)
    gpu_factor: dict[str, float] = field(default_factory=dict)
    #: NIC -> its own speed factor (a loopback test sees it without the cable)
    nic_factor: dict[str, float] = field(default_factory=dict)
    #: NICs with ``port_errors``: their tests now and then come out low
    error_nics: frozenset[str] = frozenset()
    #: node -> what its NCCL falls back to (``transport_fallback``: ``socket`` | ``host_memory``)
    fallback: dict[str, str] = field(default_factory=dict)
    #: nodes with PCIe ACS on (GPUDirect traffic detours through the root complex)
    acs_nodes: frozenset[str] = frozenset()
    #: nodes whose GPU-NIC pairs cross NUMA sockets
    numa_nodes: frozenset[str] = frozenset()
    #: RoCE NICs without PFC/ECN: pairs pass, incast (collectives of 4+ nodes) collapses
    pfc_off_nics: frozenset[str] = frozenset()

    @classmethod
    def build(cls, topology: Topology, faults: FaultSet) -> Capacities:
        """Apply ``faults`` to ``topology``'s nominal capacities."""
        link_f: dict[LinkKey, float] = {}
        nic_f: dict[str, float] = {}
        node_f: dict[str, float] = {}
        gpu_f: dict[str, float] = {}
        flapping: dict[LinkKey, float] = {}
        down_nics: set[str] = set()
        down_links: set[LinkKey] = set()
        for f in faults.faults:
            if f.kind == "nic_degraded":
                nic_f[f.nic] = nic_f.get(f.nic, 1.0) * f.factor  # type: ignore[index,operator]
            elif f.kind == "pcie_downtrained":  # x8 of x16: half the lanes, half the rate
                nic_f[f.nic] = nic_f.get(f.nic, 1.0) * min(1.0, f.width / 16)  # type: ignore[index,operator]
            elif f.kind == "nic_down":
                nic_f[f.nic] = 0.0  # type: ignore[index]
                down_nics.add(f.nic)  # type: ignore[arg-type]
            elif f.kind == "node_slow":
                node_f[f.node] = node_f.get(f.node, 1.0) * f.factor  # type: ignore[index,operator]
            elif f.kind == "gpu_link_degraded":
                gpu_f[f.node] = gpu_f.get(f.node, 1.0) * f.factor  # type: ignore[index,operator]
            elif f.kind == "link_degraded":
                link_f[f.link] = link_f.get(f.link, 1.0) * f.factor  # type: ignore[index,operator]
            elif f.kind == "link_down":
                link_f[f.link] = 0.0  # type: ignore[index]
                down_links.add(f.link)  # type: ignore[arg-type]
            elif f.kind == "link_flapping":
                p = flapping.get(f.link, 0.0)  # type: ignore[arg-type]
                flapping[f.link] = 1 - (1 - p) * (1 - f.probability)  # type: ignore[index,operator]
        att = topology.attachment
        link_gbps: dict[LinkKey, float] = {}
        for key, link in topology.links.items():
            cap = link.gbps * link_f.get(key, 1.0)
            for end in key:
                nic = topology.nics.get(end)
                if nic is not None and att.get(end) is not None:
                    node = nic_node(end)
                    cap = min(cap, nic.gbps * nic_f.get(end, 1.0) * node_f.get(node, 1.0))
            link_gbps[key] = cap
        return cls(
            link_gbps=link_gbps,
            node_factor=node_f,
            flapping=flapping,
            hung=frozenset(faults.hung_nodes()),
            unreachable=frozenset(faults.unreachable_nodes()),
            down_nics=frozenset(down_nics),
            down_links=frozenset(down_links),
            gpu_factor=gpu_f,
            nic_factor=nic_f,
            error_nics=frozenset(f.nic for f in faults.of_kind("port_errors") if f.nic),
            fallback={f.node: str(f.to) for f in faults.of_kind("transport_fallback") if f.node},
            acs_nodes=frozenset(f.node for f in faults.of_kind("acs_enabled") if f.node),
            numa_nodes=frozenset(f.node for f in faults.of_kind("numa_misaligned") if f.node),
            pfc_off_nics=frozenset(f.nic for f in faults.of_kind("pfc_disabled") if f.nic),
        )


class Router:
    """Chooses each flow's path and names every directed link by a small integer (hop id).

    Routing answers are cached across rounds: IB routes per (src, dst); on RoCE the ECMP set's
    switch-level part per (source switch, destination switch), of which a flow takes one.
    """

    def __init__(self, topology: Topology, seed: int = 0) -> None:
        self.topology = topology
        self.seed = seed
        self.hop_ids: dict[Hop, int] = {}
        self.hop_list: list[Hop] = []
        self._ib: dict[tuple[str, str], tuple[int, ...] | None] = {}
        self._mid: dict[tuple[str, str], tuple[tuple[int, ...], ...]] = {}
        self._ib_fabric = topology.fabric == "infiniband"
        self._walks: dict[tuple[str, ...], tuple[int, ...]] = {}  # switch walk -> its hop ids
        self._up: dict[str, tuple[str, int]] = {}  # NIC -> (its switch, hop id NIC -> switch)
        self._down: dict[str, tuple[str, int]] = {}  # NIC -> (its switch, hop id switch -> NIC)
        self._att = topology.attachment
        self._switch_walk = topology.switch_walk
        #: the topology routes as :meth:`Topology.route` does (not a subclass's or a patched
        #: route): its hops are the switch walk's
        self._plain_route = ("route" not in vars(topology)
                             and getattr(type(topology), "route", None) is Topology.route)

    def hop_id(self, hop: Hop) -> int:
        i = self.hop_ids.get(hop)
        if i is None:
            i = self.hop_ids[hop] = len(self.hop_list)
            self.hop_list.append(hop)
        return i

    def _ids(self, hops: Iterable[Hop]) -> tuple[int, ...]:
        return tuple(self.hop_id(h) for h in hops)

    def n_paths(self, src: str, dst: str) -> int:
        """How many paths the flow may take (1 on IB, the ECMP width on RoCE, 0 without)."""
        if self.topology.fabric == "infiniband":
            return 0 if self._ib_ids(src, dst) is None else 1
        return len(self._middles(src, dst) or ())

    def _ib_ids(self, src: str, dst: str) -> tuple[int, ...] | None:
        key = (src, dst)
        ids = self._ib.get(key, _MISSING)
        if ids is _MISSING:
            ids = self._ib[key] = self._route_ids(src, dst)
        return ids

    def _route_ids(self, src: str, dst: str) -> tuple[int, ...] | None:
        """Hop ids of ``topology.route(src, dst)``: straight from its switch walk when the route
        is the model's own (``(src, *switch_walk, dst)``, no link keys built and re-oriented)."""
        topo = self.topology
        if src == dst or not self._plain_route:
            r = topo.route(src, dst)
            return None if r is None else self._ids(directed(src, r))
        s_sw = self._att.get(src)
        walk = None if s_sw is None else self._switch_walk(s_sw, dst)
        if walk is None:
            return None
        # the NIC's own hops (up from src, down to dst) by endpoint; the switch part by walk
        up = self._up.get(src)
        if up is None or up[0] != walk[0]:
            up = self._up[src] = (walk[0], self.hop_id((src, walk[0])))
        mid = self._walks.get(walk)
        if mid is None:
            mid = self._walks[walk] = tuple(
                self.hop_id(h) for h in zip(walk, walk[1:], strict=False))
        down = self._down.get(dst)
        if down is None or down[0] != walk[-1]:
            down = self._down[dst] = (walk[-1], self.hop_id((walk[-1], dst)))
        return (up[1], *mid, down[1])

    def _middles(self, src: str, dst: str) -> tuple[tuple[int, ...], ...] | None:
        att = self.topology.attachment
        s_sw, d_sw = att.get(src), att.get(dst)
        if s_sw is None or d_sw is None:
            return None
        key = (s_sw, d_sw)
        mids = self._mid.get(key)
        if mids is None:
            paths = self.topology.paths(src, dst)
            mids = self._mid[key] = tuple(self._ids(directed(s_sw, p[1:-1])) for p in paths)
        return mids

    def flow_ids(self, flow: Flow, test_id: str, ports: tuple[int, int] | None = None
                 ) -> tuple[int, ...] | None:
        """Hop ids ``flow`` of test ``test_id`` crosses, in order; None when there is no path.

        ``ports``: the flow's pinned (source, destination) ports; its path then follows the
        5-tuple, not the test.
        """
        src, dst = flow.src, flow.dst
        if src == dst:
            return ()
        if self._ib_fabric:
            key = (src, dst)
            ids = self._ib.get(key, _MISSING)
            if ids is _MISSING:
                ids = self._ib[key] = self._route_ids(src, dst)
            return ids
        mids = self._middles(src, dst)
        if not mids:
            return None
        key = (test_id,) if ports is None else ("5-tuple", *ports)
        mid = mids[0] if len(mids) == 1 else mids[
            stable_hash(self.seed, *key, src, dst) % len(mids)]
        att = self.topology.attachment
        return (self.hop_id((src, att[src])), *mid, self.hop_id((att[dst], dst)))

    def hops(self, flow: Flow, test_id: str, ports: tuple[int, int] | None = None
             ) -> tuple[Hop, ...] | None:
        """The directed links ``flow`` of test ``test_id`` crosses; None when there is no path."""
        ids = self.flow_ids(flow, test_id, ports)
        return None if ids is None else tuple(self.hop_list[i] for i in ids)

    def path(self, flow: Flow, test_id: str, ports: tuple[int, int] | None = None
             ) -> Path | None:
        """Like :meth:`hops` but as link keys (the topology's ``Path`` form)."""
        hops = self.hops(flow, test_id, ports)
        return None if hops is None else tuple(link_key(a, b) for a, b in hops)


def directed(src: str, path: Path) -> tuple[Hop, ...]:
    """Orient a path of link keys starting at endpoint ``src``.

    >>> directed("n1/m0", (("leaf-0", "n1/m0"), ("leaf-0", "n2/m0")))
    (('n1/m0', 'leaf-0'), ('leaf-0', 'n2/m0'))
    """
    out = []
    cur = src
    for a, b in path:
        nxt = b if a == cur else a
        out.append((cur, nxt))
        cur = nxt
    return tuple(out)


def max_min_rates(units: Sequence[Sequence[int]], capacity: Sequence[float]) -> list[float]:
    """Max-min fair per-flow rates by progressive filling (vectorized; batched by level).

    Parameters
    ----------
    units : sequence of sequences of int
        One entry per allocation unit (a test): the hop id of every hop of every flow of the
        unit; a hop listed ``m`` times is used by ``m`` of its flows.
    capacity : sequence of float
        Capacity (Gb/s) by hop id.

    Returns
    -------
    list of float
        Per-flow rate of each unit (``inf`` for a unit with no hops).

    Examples
    --------
    >>> max_min_rates([[0], [0, 1]], [10.0, 2.0])
    [8.0, 2.0]
    >>> max_min_rates([[0, 0], [0]], [9.0])  # the first unit has two flows on hop 0
    [3.0, 3.0]
    """
    n_units = len(units)
    rate = np.full(n_units, np.inf)
    lengths = np.fromiter((len(u) for u in units), dtype=np.int64, count=n_units)
    if lengths.sum() == 0:
        return rate.tolist()
    flat = np.fromiter(itertools.chain.from_iterable(units), dtype=np.int64,
                       count=int(lengths.sum()))
    used, hop = np.unique(flat, return_inverse=True)  # local ids 0..R-1
    unit = np.repeat(np.arange(n_units), lengths)
    n_res = len(used)
    rem = np.asarray(capacity, dtype=float)[used].copy()
    load = np.bincount(hop, minlength=n_res).astype(float)
    live = np.ones(len(hop), dtype=bool)
    while live.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            level = np.where(load > 0, np.maximum(rem, 0.0) / load, np.inf)
        m = level.min()
        bottleneck = level <= m * (1 + 1e-9) + 1e-12
        hit = live & bottleneck[hop]
        frozen = np.zeros(n_units, dtype=bool)
        frozen[unit[hit]] = True
        rate[frozen] = m
        edges = live & frozen[unit]
        freed = np.bincount(hop[edges], minlength=n_res)
        rem -= freed * m
        load -= freed
        live &= ~edges
    return rate.tolist()
