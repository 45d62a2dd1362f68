"""The routed lab plan: switches as routing namespaces with ECMP over /31 links (pure).

Chosen by ``lab: {mode: routed}`` in the topology file. Layout of a routed lab named ``N``:

- hosts as in the bridged lab (``fclab-N-<host>``, ``mgmt0`` + sshd), one data NIC each, with a
  /31 to its leaf: the leaf's ``k``-th host port is ``10.<j+1>.<k>.0/31`` (leaf number ``j``),
  the host ``.1``; the host routes ``10.0.0.0/9`` via its leaf;
- one namespace per switch, ``fclab-N.sw<s>``, forwarding IPv4 with layer-4 multipath hashing
  (``net.ipv4.fib_multipath_hash_policy=1``) and ICMP errors sent from the inbound interface
  (so a traceroute hop names the link the probe came in on);
- a veth per switch-to-switch link, ``t<k>a`` in ``a``'s namespace and ``t<k>b`` in ``b``'s,
  on ``10.200.<k // 128>.<2 (k % 128)>/31``;
- on every switch, a route to each leaf's host block ``10.<j+1>.0.0/16`` through every
  neighbour on a shortest switch path to that leaf: ``nexthop via A nexthop via B`` on a leaf
  with two spines, so a flow's spine is chosen by the hash of its 5-tuple. Routes are computed
  without the links that are down (as a routing protocol would converge), and reinstalled
  whenever faults change.

Rates and faults are as in the bridged lab: tbf on both ends of every link.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabriccheck.errors import ConfigError
from fabriccheck.models import LinkKey
from fabriccheck.topology.model import Topology

#: every host reaches every other host's block through its leaf
HOST_ROUTE = "10.0.0.0/9"
MAX_LEAVES = 120
MAX_PORTS = 256
MAX_TRUNKS = 128 * 256


@dataclass(frozen=True)
class Route:
    prefix: str
    nexthops: tuple[str, ...]  # addresses; several: equal-cost multipath


@dataclass(frozen=True)
class RouterPlan:
    """One L3 switch: its namespace, interface addresses and routes."""

    name: str
    netns: str
    addresses: tuple[tuple[str, str], ...]  # (interface, address/prefix)
    routes: tuple[Route, ...]


def leaf_block(j: int) -> str:
    """The host block of leaf number ``j`` (0-based, sorted by name)."""
    return f"10.{j + 1}.0.0/16"


def host_link_ips(j: int, k: int) -> tuple[str, str]:
    """(leaf address, host address) of the ``k``-th host port of leaf ``j``."""
    return f"10.{j + 1}.{k}.0", f"10.{j + 1}.{k}.1"


def trunk_ips(k: int) -> tuple[str, str]:
    """(a end, b end) addresses of switch-to-switch link number ``k``."""
    base = 2 * (k % 128)
    return f"10.200.{k // 128}.{base}", f"10.200.{k // 128}.{base + 1}"


def check_routable(topo: Topology) -> None:
    """Refuse topologies the routed lab cannot build (one NIC per host, NICs on leaves)."""
    src = topo.source or topo.name
    leaves = {topo.attachment[n.endpoint] for node in topo.nodes.values() for n in node.nics}
    for node in topo.nodes.values():
        if len(node.nics) != 1:
            raise ConfigError(f"{node.name} has {len(node.nics)} NICs; the routed lab supports "
                              "one data NIC per host", source=src, field="nodes",
                              hint="give each host one NIC, or use lab mode bridged")
    if len(leaves) > MAX_LEAVES:
        raise ConfigError(f"the routed lab supports at most {MAX_LEAVES} leaves", source=src)
    trunks = sum(1 for lk in topo.links.values() if lk.a in topo.switches and lk.b in topo.switches)
    if trunks > MAX_TRUNKS:
        raise ConfigError(f"the routed lab supports at most {MAX_TRUNKS} switch links", source=src)


def leaf_numbers(topo: Topology) -> dict[str, int]:
    """Leaf switch -> its number ``j`` (switches that hold NICs, sorted by name)."""
    leaves = sorted({topo.attachment[n.endpoint] for node in topo.nodes.values()
                     for n in node.nics})
    return {leaf: j for j, leaf in enumerate(leaves)}


def switch_graph(topo: Topology, down: frozenset[LinkKey] = frozenset()) -> dict[str, set[str]]:
    """Switch -> neighbouring switches (over links that are not ``down``)."""
    adj: dict[str, set[str]] = {sw: set() for sw in topo.switches}
    for key, lk in topo.links.items():
        if lk.a in topo.switches and lk.b in topo.switches and key not in down:
            adj[lk.a].add(lk.b)
            adj[lk.b].add(lk.a)
    return adj


def _distances(adj: dict[str, set[str]], source: str) -> dict[str, int]:
    dist = {source: 0}
    frontier = [source]
    while frontier:
        nxt = []
        for u in frontier:
            for v in sorted(adj[u]):
                if v not in dist:
                    dist[v] = dist[u] + 1
                    nxt.append(v)
        frontier = nxt
    return dist


def plan_routes(
    topo: Topology, trunk_ends: dict[LinkKey, tuple[str, str]],
    down: frozenset[LinkKey] = frozenset(),
) -> dict[str, tuple[Route, ...]]:
    """Switch -> its routes to every other leaf's block (ECMP over shortest switch paths).

    ``trunk_ends`` maps a switch link to its (a, b) addresses. A leaf's own block is connected.
    Links in ``down`` carry no route: the routes are what a routing protocol converges to once
    it withdrew them (a spine that lost its link to a leaf no longer offers that leaf's block).
    """
    adj = switch_graph(topo, down)
    leaves = leaf_numbers(topo)
    addr_of: dict[tuple[str, str], str] = {}  # (switch, neighbour) -> neighbour's address
    for (a, b), (ip_a, ip_b) in trunk_ends.items():
        addr_of[(a, b)] = ip_b
        addr_of[(b, a)] = ip_a
    routes: dict[str, list[Route]] = {sw: [] for sw in topo.switches}
    for leaf, j in sorted(leaves.items(), key=lambda kv: kv[1]):
        dist = _distances(adj, leaf)
        for sw in sorted(topo.switches):
            if sw == leaf or sw not in dist:
                continue
            hops = tuple(addr_of[(sw, n)] for n in sorted(adj[sw])
                         if dist.get(n, -1) == dist[sw] - 1)
            routes[sw].append(Route(leaf_block(j), hops))
    return {sw: tuple(r) for sw, r in routes.items()}


def route_argv(ns: str, route: Route) -> list[str]:
    """``ip route replace`` for ``route`` in namespace ``ns`` (multipath when several hops).

    >>> route_argv("x", Route("10.2.0.0/16", ("10.200.0.1", "10.200.0.3")))[5:]
    ['10.2.0.0/16', 'nexthop', 'via', '10.200.0.1', 'nexthop', 'via', '10.200.0.3']
    """
    argv = ["ip", "-n", ns, "route", "replace", route.prefix]
    if len(route.nexthops) == 1:
        return argv + ["via", route.nexthops[0]]
    for hop in route.nexthops:
        argv += ["nexthop", "via", hop]
    return argv
