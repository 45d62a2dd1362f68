"""The planner's view of a topology: pods, rails, uplinks and the links a flow touches.

Access links (a NIC to its leaf) are folded into the NIC: a test cannot tell a NIC from its cable,
so link questions are about switch-to-switch links only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from functools import cached_property
from typing import TypeVar

from fabriccheck.errors import ConfigError
from fabriccheck.models import Flow, LinkKey
from fabriccheck.topology.model import Topology

T = TypeVar("T")


class FabricView:
    """Cached, read-only facts about ``topology`` that planning and inference ask for often."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.fabric = topology.fabric
        self._flow_cache: dict[tuple[str, str], tuple[frozenset[LinkKey], frozenset[LinkKey]]] = {}
        self._hop_cache: dict[tuple[str, str], frozenset[tuple[str, str]]] = {}
        self._users_cache: dict[str, dict[tuple[str, str], tuple[str, ...]]] = {}
        self._walks: dict[tuple[str, str], tuple[str, ...]] = {}

    # ---- nodes, rails, pods ------------------------------------------------------------------
    @cached_property
    def rails_of(self) -> dict[str, dict[int, str]]:
        """node -> {rail: NIC endpoint}."""
        return {
            name: {nic.rail: nic.endpoint for nic in node.nics}
            for name, node in self.topology.nodes.items()
        }

    @cached_property
    def nics_on(self) -> dict[str, tuple[str, ...]]:
        """switch -> the NIC endpoints attached to it."""
        out: dict[str, list[str]] = {}
        for nic, sw in self.topology.attachment.items():
            out.setdefault(sw, []).append(nic)
        return {sw: tuple(v) for sw, v in out.items()}

    def memo(self, key: str, build: Callable[[], T]) -> T:
        """A fact a planning or inference module derives from the topology alone, built once
        per view (``key``: ``module.function``)."""
        facts = self.__dict__.setdefault("_memo", {})
        if key not in facts:
            facts[key] = build()
        return facts[key]

    def by_rail(self, nics: frozenset[str]) -> dict[int, tuple[str, ...]]:
        """``nics`` grouped by rail, each rail's sorted; the last few pools are kept (a link
        probe search asks for the same pool of known-good NICs for every probe of a round)."""
        memo = self.__dict__.setdefault("_by_rail", {})
        got = memo.get(nics)
        if got is None:
            out: dict[int, list[str]] = {}
            for n in sorted(nics):
                out.setdefault(self.topology.nics[n].rail, []).append(n)
            got = {rail: tuple(v) for rail, v in out.items()}
            if len(memo) >= 4:
                memo.pop(next(iter(memo)))
            memo[nics] = got
        return got

    def pod(self, node: str) -> tuple[str, ...]:
        """The leaves a node hangs off (one per rail on rail-optimized fabrics): its "pod"."""
        return self._pods[node]

    @cached_property
    def _pods(self) -> dict[str, tuple[str, ...]]:
        att = self.topology.attachment
        return {
            name: tuple(sorted({att[e] for e in rails.values() if e in att}))
            for name, rails in self.rails_of.items()
        }

    @cached_property
    def rail_optimized(self) -> bool:
        """True when a node's NICs hang off different leaves (one leaf per rail)."""
        return any(len(p) > 1 for p in self._pods.values())

    def common_rails(self, a: str, b: str) -> list[int]:
        ra, rb = self.rails_of[a], self.rails_of[b]
        return sorted(set(ra) & set(rb))

    @cached_property
    def uplinks(self) -> dict[str, int]:
        """switch -> number of switch-to-switch links it has (a leaf's uplinks)."""
        out: dict[str, int] = defaultdict(int)
        sw = self.topology.switches
        for key in self.topology.links:
            if key[0] in sw and key[1] in sw:
                out[key[0]] += 1
                out[key[1]] += 1
        return dict(out)

    def peer_class(self, target: str) -> float | str | None:
        """What a node-local reading of ``target`` is compared with: a NIC (``node/nic``)
        with NICs of its own line rate, a compute tray of an NVLink domain with the trays of
        its domain (the domain's name: a rack's cluster and clique are its own), any other
        node with every node (None).

        >>> from fabriccheck.topology.load import load_topology
        >>> FabricView(load_topology("lab-4")).peer_class("host1/eth0")
        1.0
        """
        nic = self.topology.nics.get(target)
        if nic is None:
            d = self.topology.domain_of(target)
            return None if d is None else d.name
        return nic.gbps

    def check_nodes(self, nodes: list[str], source: str = "--nodes") -> None:
        """Raise a one-line ConfigError when a node is not in the topology."""
        unknown = [n for n in nodes if n not in self.topology.nodes]
        if unknown:
            more = f" (+{len(unknown) - 3} more)" if len(unknown) > 3 else ""
            raise ConfigError(
                f"{', '.join(unknown[:3])}{more} not in topology {self.topology.name!r}",
                source=source,
                hint="list nodes of the topology, e.g. node-[001-016]",
            )

    # ---- flows and links ---------------------------------------------------------------------
    def flow_links(self, flow: Flow) -> tuple[frozenset[LinkKey], frozenset[LinkKey]]:
        """``(certain, possible)`` switch-to-switch links of ``flow``.

        On InfiniBand both are the route's links. On RoCE ``possible`` is the union of the ECMP
        set and ``certain`` the links every equal-cost path shares. A flow whose path was learned
        (``flow.path``, a traceroute on its own 5-tuple) has exactly that path as both; one
        whose trace stopped part-way (``flow.partial``) has those links as ``possible``.
        """
        if flow.path is not None:
            exact = frozenset(flow.path)
            return exact, exact
        if flow.partial is not None:  # a trace that died part-way: nothing is certain
            return frozenset(), frozenset(flow.partial)
        key = (flow.src, flow.dst)
        hit = self._flow_cache.get(key)
        if hit is not None:
            return hit
        if self.fabric == "infiniband":  # the route's switch hops: one walk, no NIC links
            res = self._ib_links(flow.src, flow.dst)
            if len(self._flow_cache) < 2_000_000:
                self._flow_cache[key] = res
            return res
        sw = self.topology.switches
        paths = self.topology.candidate_paths(flow.src, flow.dst)
        sets = [frozenset(lk for lk in p if lk[0] in sw and lk[1] in sw) for p in paths]
        if not sets:
            res: tuple[frozenset[LinkKey], frozenset[LinkKey]] = (frozenset(), frozenset())
        else:
            res = (frozenset.intersection(*sets), frozenset.union(*sets))
        if len(self._flow_cache) < 2_000_000:
            self._flow_cache[key] = res
        return res

    def _ib_links(self, src: str, dst: str
                  ) -> tuple[frozenset[LinkKey], frozenset[LinkKey]]:
        """An InfiniBand route's switch links, from the walk of ``src``'s switch to ``dst``
        (destination-based: every NIC on that switch shares it, so it is kept per switch)."""
        s_sw = self.topology.attachment.get(src)
        if s_sw is None or src == dst or dst not in self.topology.attachment:
            return frozenset(), frozenset()
        walk = self.walk(s_sw, dst)
        hop_link = self.hop_link
        links = frozenset(hop_link[h] for h in zip(walk, walk[1:], strict=False))
        return links, links

    def walk(self, s_sw: str, dst: str) -> tuple[str, ...]:
        """:meth:`Topology.switch_walk` (empty without a path), kept per (switch, destination):
        routes are destination-based, so every NIC on ``s_sw`` shares it."""
        key = (s_sw, dst)
        got = self._walks.get(key)
        if got is None:
            got = self.topology.switch_walk(s_sw, dst) or ()
            if len(self._walks) < 2_000_000:
                self._walks[key] = got
        return got

    def learned_hops(self, flow: Flow) -> frozenset[tuple[str, str]] | None:
        """The directed switch hops of a flow's learned path (None: not learned)."""
        if flow.path is None:
            return None
        cur = self.topology.attachment.get(flow.src)
        out = []
        for a, b in flow.path:
            nxt = b if a == cur else a
            out.append((cur, nxt))
            cur = nxt
        return frozenset(out)

    def directed_hops(self, src: str, dst: str) -> frozenset[tuple[str, str]]:
        """InfiniBand: the switch-to-switch hops of the route ``src -> dst`` with direction
        (links are full duplex: flows in opposite directions do not compete)."""
        key = (src, dst)
        hit = self._hop_cache.get(key)
        if hit is None:
            s_sw = self.topology.attachment.get(src)
            walk = () if s_sw is None or src == dst else self.walk(s_sw, dst)
            hit = frozenset(zip(walk, walk[1:], strict=False))
            if len(self._hop_cache) < 2_000_000:
                self._hop_cache[key] = hit
        return hit

    def hop_users(self, dst: str) -> dict[tuple[str, str], tuple[str, ...]]:
        """InfiniBand: each directed switch hop toward NIC ``dst`` -> the NIC-attached switches
        (sorted) whose route to ``dst`` takes it. Routes are destination-based, so every NIC
        on one switch takes the same walk: one walk per switch, asked once per destination.

        >>> from fabriccheck.topology import generate
        >>> t = generate({"kind": "fat-tree", "nodes": 4, "rails": 1, "nodes_per_leaf": 2,
        ...               "spines": 2}, name="t", fabric="infiniband")
        >>> sorted(FabricView(t).hop_users("node-001/mlx5_0").items())
        [(('leaf-1', 'spine-0'), ('leaf-1',)), (('spine-0', 'leaf-0'), ('leaf-1',))]
        """
        hit = self._users_cache.get(dst)
        if hit is None:
            got: dict[tuple[str, str], list[str]] = {}
            for s_sw in self._nic_switches:
                walk = self.walk(s_sw, dst)
                for hop in zip(walk, walk[1:], strict=False):
                    got.setdefault(hop, []).append(s_sw)
            hit = {hop: tuple(ws) for hop, ws in got.items()}
            if len(self._users_cache) < 200_000:
                self._users_cache[dst] = hit
        return hit

    @cached_property
    def _nic_switches(self) -> list[str]:
        """The switches NICs hang off, sorted."""
        return sorted(set(self.topology.attachment.values()))

    @cached_property
    def hop_link(self) -> dict[tuple[str, str], LinkKey]:
        """Directed switch hop ``(a, b)`` -> its link key (both directions): planning's
        millions of hop-to-link lookups without building a key each time."""
        sw = self.topology.switches
        out: dict[tuple[str, str], LinkKey] = {}
        for k in self.topology.links:
            if k[0] in sw and k[1] in sw:
                out[(k[0], k[1])] = out[(k[1], k[0])] = k
        return out

    def route_links(self, src: str, dst: str) -> frozenset[LinkKey]:
        """The switch links a flow surely or possibly uses (its ``possible`` set)."""
        hit = self._flow_cache.get((src, dst))  # planning asks millions of times: no Flow
        return hit[1] if hit is not None else self.flow_links(Flow(src, dst))[1]

    @cached_property
    def switch_links(self) -> frozenset[LinkKey]:
        """Every switch-to-switch link (leaf-spine, spine-core): what link questions are about."""
        sw = self.topology.switches
        return frozenset(k for k in self.topology.links if k[0] in sw and k[1] in sw)

    def coverage(self, flows: Iterable[Flow]) -> dict:
        """How many switch links ``flows`` surely cross (IB: the route; RoCE: links every
        equal-cost path shares): ``{"exercised", "total", "share", "tiers"}``, where ``tiers``
        gives the same three numbers per tier pair (``"leaf-spine"``, ``"spine-core"``).

        >>> from fabriccheck.topology import generate
        >>> t = generate({"kind": "fat-tree", "nodes": 4, "rails": 1, "nodes_per_leaf": 2,
        ...               "spines": 2}, name="t", fabric="infiniband")
        >>> v = FabricView(t)
        >>> cov = v.coverage([Flow("node-001/mlx5_0", "node-003/mlx5_0")])
        >>> cov["exercised"], cov["total"], cov["tiers"]["leaf-spine"]["share"]
        (2, 4, 0.5)
        """
        crossed: set[LinkKey] = set()
        for f in flows:
            crossed |= self.flow_links(f)[0]
        crossed &= self.switch_links
        tiers: dict[str, dict[str, float]] = {}
        for name, links in sorted(self.links_by_tier.items()):
            tiers[name] = _share(len(crossed & links), len(links))
        return {**_share(len(crossed), len(self.switch_links)), "tiers": tiers}

    @cached_property
    def links_by_tier(self) -> dict[str, frozenset[LinkKey]]:
        """Switch links by tier pair, lower tier first (``"leaf-spine"``, ``"spine-core"``)."""
        order = {"leaf": 0, "spine": 1, "core": 2}
        sw = self.topology.switches
        out: dict[str, set[LinkKey]] = defaultdict(set)
        for a, b in self.switch_links:
            ta, tb = sorted((sw[a].tier, sw[b].tier), key=lambda t: order.get(t, 3))
            out[f"{ta}-{tb}"].add((a, b))
        return {k: frozenset(v) for k, v in out.items()}

    def same_leaf(self, a_nic: str, b_nic: str) -> bool:
        att = self.topology.attachment
        return att.get(a_nic) is not None and att.get(a_nic) == att.get(b_nic)


def _share(got: int, total: int) -> dict[str, float]:
    return {"exercised": got, "total": total, "share": round(got / total, 4) if total else 1.0}
