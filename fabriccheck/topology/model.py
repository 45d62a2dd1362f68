"""The fabric as a graph: nodes with NICs, switches by tier, links with capacities, and routes."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from fabriccheck.models import LinkKey, link_key
from fabriccheck.schema.values import FABRICS, TIERS
from fabriccheck.topology.nvlink import NvlDomain

if TYPE_CHECKING:  # networkx is imported when .graph is first asked for (CLI start-up)
    import networkx as nx

__all__ = ["FABRICS", "TIERS", "Link", "Nic", "Node", "Path", "Switch", "Topology"]


def _hop_distances(adj: dict[str, list[str]], sources: tuple[str, ...]) -> dict[str, int]:
    """Hop distance from every reachable switch to the nearest of ``sources`` (BFS over ``adj``).

    >>> _hop_distances({"a": ["b"], "b": ["a", "c"], "c": ["b"]}, ("a",))
    {'a': 0, 'b': 1, 'c': 2}
    """
    dist = dict.fromkeys(sources, 0)
    queue = deque(sources)
    while queue:
        cur = queue.popleft()
        for nxt in adj[cur]:
            if nxt not in dist:
                dist[nxt] = dist[cur] + 1
                queue.append(nxt)
    return dist


@dataclass(frozen=True)
class Nic:
    """One NIC of a node; ``endpoint`` is how links and flows name it (``node/nic``)."""

    node: str
    name: str
    rail: int
    gbps: float

    @property
    def endpoint(self) -> str:
        return f"{self.node}/{self.name}"


@dataclass(frozen=True)
class Node:
    name: str
    nics: tuple[Nic, ...]
    gpus: int = 8


@dataclass(frozen=True)
class Switch:
    name: str
    tier: str  # leaf | spine | core


@dataclass(frozen=True)
class Link:
    """A cable (or parallel cables merged) between ``a`` and ``b``; ``a_port``/``b_port`` are
    the port numbers at each end when known (ibnetdiscover import; empty otherwise)."""

    a: str
    b: str
    gbps: float
    a_port: tuple[int, ...] = ()
    b_port: tuple[int, ...] = ()

    @property
    def key(self) -> LinkKey:
        return link_key(self.a, self.b)

    def port_at(self, end: str) -> tuple[int, ...]:
        """The port number(s) of this link at switch or NIC ``end`` (empty when unknown)."""
        return self.a_port if end == self.a else self.b_port if end == self.b else ()

    def describe(self) -> str:
        """``a port 17 -- b port 3`` (ports where known): which cable to pull.

        >>> Link("leaf-1", "spine-0", 400.0, (17,), (3,)).describe()
        'leaf-1 port 17 -- spine-0 port 3'
        >>> Link("leaf-1", "spine-0", 800.0, (17, 18), ()).describe()
        'leaf-1 ports 17,18 -- spine-0'
        """
        def end(name: str, ports: tuple[int, ...]) -> str:
            if not ports:
                return name
            word = "port" if len(ports) == 1 else "ports"
            return f"{name} {word} {','.join(map(str, ports))}"

        return f"{end(self.a, self.a_port)} -- {end(self.b, self.b_port)}"


Path = tuple[LinkKey, ...]


@dataclass
class Topology:
    """A validated fabric. Build it with :func:`fabriccheck.topology.load` or a generator.

    Routing (``route`` / ``paths``) assumes every NIC hangs off exactly one switch, which the
    loader checks. On ``infiniband`` a flow has one deterministic route; on ``roce`` it takes one of
    its equal-cost (ECMP) candidate ``paths`` by a hash nobody knows.
    """

    name: str
    fabric: str
    nodes: dict[str, Node]
    switches: dict[str, Switch]
    links: dict[LinkKey, Link]
    _dist_cache: dict[str, dict[str, int]] = field(default_factory=dict, repr=False)
    #: (switch, destination switch) -> next hops on a shortest path (planning asks millions)
    _hop_cache: dict[tuple[str, str], list[str]] = field(default_factory=dict, repr=False)
    _set_dist_cache: dict[tuple[str, ...], dict[str, int]] = field(default_factory=dict, repr=False)
    #: the default test spec for this cluster (``spec:`` in the file), None: choose by fabric
    spec: str | None = None
    gpus_per_node: int = 8
    #: the file this topology was loaded from ("" when built in code)
    source: str = ""
    #: InfiniBand routes read from the switches' forwarding tables: switch -> {destination NIC
    #: -> next hop}; None: the D-mod-K model (see :meth:`route`)
    lft: dict[str, dict[str, str]] | None = field(default=None, repr=False)
    #: where ``lft`` was read from
    routes_source: str = ""
    #: how the namespace lab builds it: "bridged" (Linux bridges, a tree) or "routed" (ECMP)
    lab_mode: str = "bridged"
    #: NVLink domains by name (GB200/GB300 NVL72 racks; :mod:`.nvlink`); empty without them
    domains: dict[str, NvlDomain] = field(default_factory=dict)

    # ---- structure -------------------------------------------------------------------------
    @cached_property
    def graph(self) -> nx.Graph:
        """NIC endpoints and switches as vertices (``kind``), links as edges (``gbps``)."""
        import networkx as nx

        g = nx.Graph(name=self.name, fabric=self.fabric)
        for node in self.nodes.values():
            for nic in node.nics:
                g.add_node(nic.endpoint, kind="nic", node=node.name, rail=nic.rail)
        for sw in self.switches.values():
            g.add_node(sw.name, kind="switch", tier=sw.tier)
        for link in self.links.values():
            g.add_edge(link.a, link.b, gbps=link.gbps)
        return g

    @cached_property
    def nics(self) -> dict[str, Nic]:
        """Every NIC by endpoint name."""
        return {nic.endpoint: nic for n in self.nodes.values() for nic in n.nics}

    @cached_property
    def attachment(self) -> dict[str, str]:
        """NIC endpoint -> the switch it is cabled to."""
        out: dict[str, str] = {}
        for link in self.links.values():
            for nic, other in ((link.a, link.b), (link.b, link.a)):
                if nic in self.nics and other in self.switches:
                    out[nic] = other
        return out

    @cached_property
    def _switch_adj(self) -> dict[str, list[str]]:
        adj: dict[str, list[str]] = {s: [] for s in self.switches}
        for link in self.links.values():
            if link.a in self.switches and link.b in self.switches:
                adj[link.a].append(link.b)
                adj[link.b].append(link.a)
        for s in adj:
            adj[s].sort()
        return adj

    @cached_property
    def _port_index(self) -> dict[str, int]:
        """NIC endpoint -> its destination index for D-mod-K (as LIDs are handed out in port
        order): ``node index x (its node's NICs on that leaf) + its rank among them``. On a
        rail-optimized fabric (one NIC of a node per leaf) that is the node index; where all
        NICs of a node share a leaf, each NIC gets its own uplink, as D-mod-K spreads ports."""
        per_leaf: dict[tuple[str, str], list[str]] = {}
        for node in self.nodes.values():
            for nic in sorted(node.nics, key=lambda x: x.rail):
                sw = self.attachment.get(nic.endpoint)
                if sw is not None:
                    per_leaf.setdefault((node.name, sw), []).append(nic.endpoint)
        out: dict[str, int] = {}
        for (node, _), eps in per_leaf.items():
            for rank, ep in enumerate(eps):
                out[ep] = self._node_index[node] * len(eps) + rank
        return out

    @cached_property
    def _node_index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(sorted(self.nodes))}

    @cached_property
    def _domain_of(self) -> dict[str, NvlDomain]:
        return {tray: d for d in self.domains.values() for tray in d.trays}

    def domain_of(self, node: str) -> NvlDomain | None:
        """The NVLink domain ``node`` is a compute tray of, or None."""
        return self._domain_of.get(node) if self.domains else None

    def nic(self, node: str, rail: int) -> str:
        """The endpoint of ``node``'s NIC on ``rail``."""
        for nic in self.nodes[node].nics:
            if nic.rail == rail:
                return nic.endpoint
        raise KeyError(f"{node} has no NIC on rail {rail}")

    def leaf_of(self, nic_endpoint: str) -> str:
        return self.attachment[nic_endpoint]

    def node_leaves(self, node: str) -> tuple[str, ...]:
        """The switches a node's NICs attach to (one per rail on rail-optimized fabrics)."""
        return tuple(sorted({self.attachment[n.endpoint] for n in self.nodes[node].nics}))

    def link_gbps(self, key: LinkKey) -> float:
        return self.links[key].gbps

    @property
    def rails(self) -> int:
        return max((len(n.nics) for n in self.nodes.values()), default=0)

    # ---- routing ---------------------------------------------------------------------------
    def _dist_to(self, dst_switch: str) -> dict[str, int]:
        """Hop distance from every switch to ``dst_switch`` (BFS over the switch graph, cached)."""
        dist = self._dist_cache.get(dst_switch)
        if dist is None:
            dist = self._dist_cache[dst_switch] = _hop_distances(self._switch_adj, (dst_switch,))
        return dist

    def _next_hops(self, cur: str, dst_switch: str) -> list[str]:
        hit = self._hop_cache.get((cur, dst_switch))
        if hit is not None:
            return hit
        # distances to dst_switch are 1 + distances to its neighbour set, so away from it the
        # next hops depend on that set only (every leaf of a pod, or of a rail-optimized
        # fabric, shares one): cached per (switch, neighbour set), one BFS per set
        adj = self._switch_adj
        if cur == dst_switch:
            hops: list[str] = []
        elif dst_switch in adj[cur]:  # adjacent: the destination is the only closer switch
            hops = [dst_switch]
        else:
            nbrs = self._nbr_set[dst_switch]
            hit = self._hop_cache.get((cur, nbrs))
            if hit is None:
                base = self._set_dist(nbrs)
                here = base.get(cur)
                hit = [] if here is None else [n for n in adj[cur] if base.get(n) == here - 1]
                self._hop_cache[(cur, nbrs)] = hit  # type: ignore[index]
            hops = hit
        self._hop_cache[(cur, dst_switch)] = hops
        return hops

    @cached_property
    def _nbr_set(self) -> dict[str, tuple[str, ...]]:
        """switch -> its neighbour switches (one shared tuple per distinct set)."""
        seen: dict[tuple[str, ...], tuple[str, ...]] = {}
        return {s: seen.setdefault(tuple(n), tuple(n)) for s, n in self._switch_adj.items()}

    def _set_dist(self, sources: tuple[str, ...]) -> dict[str, int]:
        """Hop distance from every switch to the nearest of ``sources`` (multi-source BFS)."""
        dist = self._set_dist_cache.get(sources)
        if dist is None:
            dist = self._set_dist_cache[sources] = _hop_distances(self._switch_adj, sources)
        return dist

    def _switch_walks(self, src_sw: str, dst_sw: str) -> Iterable[tuple[str, ...]]:
        if src_sw == dst_sw:
            yield (src_sw,)
            return
        for nxt in self._next_hops(src_sw, dst_sw):
            for rest in self._switch_walks(nxt, dst_sw):
                yield (src_sw, *rest)

    def paths(self, src: str, dst: str) -> tuple[Path, ...]:
        """Every equal-cost path (as link keys) from NIC ``src`` to NIC ``dst``: the ECMP set.

        Empty when there is no path. On InfiniBand :meth:`route` picks one of these.
        """
        if src == dst:
            return ((),)
        s_sw, d_sw = self.attachment.get(src), self.attachment.get(dst)
        if s_sw is None or d_sw is None:
            return ()
        out = []
        for walk in self._switch_walks(s_sw, d_sw):
            hops = (src, *walk, dst)
            out.append(tuple(link_key(a, b) for a, b in zip(hops, hops[1:], strict=False)))
        return tuple(out)

    @property
    def routing(self) -> str:
        """Where routes come from: ``"lft"`` (forwarding tables), ``"d-mod-k"`` (the model,
        InfiniBand) or ``"ecmp"`` (RoCE: one of the equal-cost paths, by a hash)."""
        if self.fabric != "infiniband":
            return "ecmp"
        return "lft" if self.lft is not None else "d-mod-k"

    def set_lft(self, tables: dict[str, dict[str, str]], source: str = "") -> None:
        """Route by the switches' forwarding tables from now on (see :meth:`route`)."""
        self.lft, self.routes_source = tables, source

    def route(self, src: str, dst: str) -> Path | None:
        """The deterministic route of an InfiniBand flow (destination-based, D-mod-K style).

        Every switch forwards by destination only, as a linear forwarding table does: among the
        next hops on a shortest path it takes ``(index(dst port) // W) mod count`` where ``W`` is
        the product of the fan-outs already used on the way up (D-mod-K), so on a 3-tier tree the
        spine and core choices are independent and destinations spread evenly over every top
        switch. None without a path. With forwarding tables (:meth:`set_lft`) the route follows
        them; a destination a table does not list falls back to the model for that flow.
        """
        if src == dst:
            return ()
        s_sw = self.attachment.get(src)
        walk = None if s_sw is None else self.switch_walk(s_sw, dst)
        if walk is None:
            return None
        hops = (src, *walk, dst)
        return tuple(link_key(a, b) for a, b in zip(hops, hops[1:], strict=False))

    def switch_walk(self, s_sw: str, dst: str) -> tuple[str, ...] | None:
        """The switches the route to NIC ``dst`` passes from switch ``s_sw`` on, in order (both
        ends included): :meth:`route` without the NIC links, cheap enough for planning to ask
        hundreds of thousands of times. None without a path."""
        d_sw = self.attachment.get(dst)
        if d_sw is None or s_sw not in self.switches:
            return None
        if self.lft is not None:
            from fabriccheck.topology.lft_route import lft_walk

            got = lft_walk(self.lft, dst, s_sw, d_sw, len(self.switches))
            if got is not None:
                return got
        k = self._port_index[dst]
        walk = [s_sw]
        cur = s_sw
        while cur != d_sw:
            options = self._next_hops(cur, d_sw)
            if not options:
                return None
            cur = options[k % len(options)]
            k //= len(options)
            walk.append(cur)
        return tuple(walk)

    def candidate_paths(self, src: str, dst: str) -> tuple[Path, ...]:
        """The paths a flow may take as an observer knows them: one on IB, the ECMP set on RoCE."""
        if self.fabric == "infiniband":
            r = self.route(src, dst)
            return (r,) if r is not None else ()
        return self.paths(src, dst)

    # ---- contract --------------------------------------------------------------------------
    def to_contract(self) -> dict:
        """The ``topology show --json`` contract (docs/design.md)."""
        return {
            "name": self.name,
            "fabric": self.fabric,
            "nodes": [
                {"name": n.name, "nics": [nic.name for nic in n.nics]}
                for n in sorted(self.nodes.values(), key=lambda n: n.name)
            ],
            "switches": [
                {"name": s.name, "tier": s.tier}
                for s in sorted(self.switches.values(), key=lambda s: s.name)
            ],
            "links": [_link_json(lk) for lk in self.links.values()],
            **({"nvlink_domains": [d.to_json() for d in self.domains.values()]}
               if self.domains else {}),
        }


def _link_json(link: Link) -> dict:
    """A link in the contract: ``a``, ``b``, ``gbps``; ``a_port``/``b_port`` (lists) when known."""
    out: dict = {"a": link.a, "b": link.b, "gbps": link.gbps}
    if link.a_port:
        out["a_port"] = list(link.a_port)
    if link.b_port:
        out["b_port"] = list(link.b_port)
    return out
