"""The simulator's bandwidth model: capacities under faults, flow paths, and contention.

Model (what a test measures, before noise):

- **Resources** are *directed* links (links are full duplex, so the two directions do not
  compete). A NIC's attachment link carries the NIC's own capacity too:
  ``min(link.gbps × link factor, nic.gbps × nic factor × node factor)``; a down NIC or link has
  capacity 0. ``node_slow`` therefore slows every network test of the node, and its intra-node
  (NVLink / CPU) bound for single-node tests.
- **Paths**: on InfiniBand a flow takes ``topology.route`` (deterministic); on RoCE it takes ONE
  of its ECMP ``topology.paths``, chosen by a hash of (seed, test id, flow) the planner cannot see.
- **Contention** is *max-min fair* over all tests of a round (progressive filling). The unit of
  allocation is a test: all its flows run at the same per-flow rate, because a ring moves at
  its slowest edge and NCCL splits traffic evenly over rails/channels. A resource used by ``m``
  flows of a test counts ``m`` times. Two tests whose flows share one direction of one link
  therefore get half of it each; capacity a slow test cannot use goes to the others.
- Tests that fail (a down component, a flapping link that fires), hang or are unreachable send
  no traffic and take no share.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from fabriccheck.faults import FaultSet
from fabriccheck.models import Flow, LinkKey, link_key, nic_node
from fabriccheck.topology.model import Path, Topology

Hop = tuple[str, str]  # a directed link: (from, to)


def stable_hash(*parts: object) -> int:
    """A 64-bit hash of ``parts`` that is the same in every process (unlike ``hash``).

    >>> stable_hash(1, "t-1") == stable_hash(1, "t-1")
    True
    """
    data = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def unit_float(*parts: object) -> float:
    """A uniform number in [0, 1) derived from ``parts`` (deterministic)."""
    return stable_hash(*parts) / 2.0**64


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

    @classmethod
    def build(cls, topology: Topology, faults: FaultSet) -> Capacities:
        """Apply ``faults`` to ``topology``'s nominal capacities."""
        link_f: dict[LinkKey, float] = {}
        nic_f: dict[str, float] = {}
        node_f: dict[str, float] = {}
        flapping: dict[LinkKey, float] = {}
        down_nics: set[str] = set()
        down_links: set[LinkKey] = set()
        for f in faults.faults:
            if f.kind == "nic_degraded":
                nic_f[f.nic] = nic_f.get(f.nic, 1.0) * f.factor  # type: ignore[index,operator]
            elif f.kind == "nic_down":
                nic_f[f.nic] = 0.0  # type: ignore[index]
                down_nics.add(f.nic)  # type: ignore[arg-type]
            elif f.kind == "node_slow":
                node_f[f.node] = node_f.get(f.node, 1.0) * f.factor  # type: ignore[index,operator]
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
        )


@dataclass
class Router:
    """Chooses each flow's path; caches the topology's routing answers across rounds."""

    topology: Topology
    seed: int = 0
    _cache: dict[tuple[str, str], tuple[tuple[Hop, ...], ...]] = field(default_factory=dict)

    def candidates(self, src: str, dst: str) -> tuple[tuple[Hop, ...], ...]:
        """The directed hop lists a flow may take: the IB route, or the RoCE ECMP set."""
        key = (src, dst)
        got = self._cache.get(key)
        if got is None:
            topo = self.topology
            if topo.fabric == "infiniband":
                r = topo.route(src, dst)
                paths: tuple[Path, ...] = (r,) if r is not None else ()
            else:
                paths = topo.paths(src, dst)
            got = tuple(directed(src, p) for p in paths)
            self._cache[key] = got
        return got

    def hops(self, flow: Flow, test_id: str) -> tuple[Hop, ...] | None:
        """The directed links ``flow`` of test ``test_id`` crosses; None when there is no path."""
        cands = self.candidates(flow.src, flow.dst)
        if not cands:
            return None
        if len(cands) == 1:
            return cands[0]
        return cands[stable_hash(self.seed, test_id, flow.src, flow.dst) % len(cands)]

    def path(self, flow: Flow, test_id: str) -> Path | None:
        """Like :meth:`hops` but as link keys (the topology's ``Path`` form)."""
        hops = self.hops(flow, test_id)
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


def max_min_rates(
    units: Sequence[Iterable[Hop]], capacity: dict[Hop, float]
) -> list[float]:
    """Max-min fair per-flow rates by progressive filling.

    Parameters
    ----------
    units : sequence of iterables of hops
        One entry per allocation unit (a test): every directed hop of every flow of the unit;
        a hop listed ``m`` times is used by ``m`` of its flows.
    capacity : dict
        Capacity (Gb/s) of each directed hop.

    Returns
    -------
    list of float
        Per-flow rate of each unit (``inf`` for a unit with no hops).

    Examples
    --------
    >>> max_min_rates([[("a", "b")], [("a", "b"), ("b", "c")]], {("a", "b"): 10, ("b", "c"): 2})
    [8.0, 2.0]
    """
    use: list[dict[Hop, int]] = []
    users: dict[Hop, list[int]] = {}
    load: dict[Hop, int] = {}
    for u, hops in enumerate(units):
        m: dict[Hop, int] = {}
        for h in hops:
            m[h] = m.get(h, 0) + 1
        use.append(m)
        for h, k in m.items():
            users.setdefault(h, []).append(u)
            load[h] = load.get(h, 0) + k
    rem = {h: float(capacity[h]) for h in load}
    rate = [float("inf")] * len(use)
    frozen = [not m for m in use]
    heap = [(rem[h] / load[h], h) for h in load]
    heapq.heapify(heap)
    while heap:
        level, h = heapq.heappop(heap)
        if load[h] == 0:
            continue
        now = max(rem[h], 0.0) / load[h]
        if now > level * (1 + 1e-12) + 1e-12:
            heapq.heappush(heap, (now, h))
            continue
        for u in users[h]:
            if frozen[u]:
                continue
            frozen[u] = True
            rate[u] = now
            for h2, k in use[u].items():
                rem[h2] -= now * k
                load[h2] -= k
    return rate
