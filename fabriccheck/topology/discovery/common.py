"""Assembling a discovered fabric (hosts, NICs, switches, cables) into a validated topology."""

from __future__ import annotations

import re
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

from fabriccheck.errors import ConfigError
from fabriccheck.models import LinkKey, link_key
from fabriccheck.topology.dump import topology_to_yaml
from fabriccheck.topology.fields import parse_yaml
from fabriccheck.topology.load import check_structure, topology_from_dict
from fabriccheck.topology.model import TIERS, Link, Nic, Node, Switch, Topology

#: the largest discovery dump read (a 16k-node fabric's ibnetdiscover is ~20 MB)
MAX_DUMP_BYTES = 256 * 2**20


def natural_key(text: str) -> tuple:
    """Sort key that orders ``mlx5_10`` after ``mlx5_9``.

    >>> sorted(["mlx5_10", "mlx5_9", "HCA-1"], key=natural_key)
    ['HCA-1', 'mlx5_9', 'mlx5_10']
    """
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", text) if p)


@dataclass
class FabricBuild:
    """A fabric being discovered: NICs per host, switches (name -> tier or None) and cables.

    Parallel cables between the same two ends are merged into one link with ``count`` and the
    summed speed. Tiers left as None come from the graph (:func:`tiers_from_hosts`): hop
    distance from the nearest host NIC, 1 leaf, 2 spine, 3 or more core. ``gpus_per_node``
    None means unknown (discovery cannot see GPUs): written as 0.
    """

    name: str
    fabric: str
    switches: dict[str, str | None] = field(default_factory=dict)
    host_nics: dict[str, list[str]] = field(default_factory=dict)
    cables: dict[LinkKey, list] = field(default_factory=dict)  # key -> [count, [gbps...]]
    warnings: list[str] = field(default_factory=list)
    tiers: dict[str, str] = field(default_factory=dict)
    gpus_per_node: int | None = None
    #: (link key, end) -> port numbers of its cables at that end (ibnetdiscover)
    ports: dict[tuple[LinkKey, str], list[int]] = field(default_factory=dict)

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def nic(self, host: str, nic: str) -> str:
        """Register ``host``'s NIC and return its endpoint ``host/nic``."""
        host = re.sub(r"[\s/]+", "-", host)
        nics = self.host_nics.setdefault(host, [])
        if nic not in nics:
            nics.append(nic)
        return f"{host}/{nic}"

    def cable(self, a: str, b: str, gbps: float | None,
              ports: tuple[int | None, int | None] = (None, None)) -> None:
        """One cable ``a`` - ``b``; ``ports`` are its port numbers at ``a`` and ``b`` if known."""
        if "/" in a and "/" in b:
            self.warn(f"skipped host-to-host cable {a} - {b} (no switch between)")
            return
        key = link_key(a, b)
        entry = self.cables.setdefault(key, [0, []])
        entry[0] += 1
        entry[1].append(gbps)
        for end, port in zip((a, b), ports, strict=True):
            if port is not None:
                self.ports.setdefault((key, end), []).append(port)

    # ---- assembly -----------------------------------------------------------------------
    def topology(self, *, largest_component: bool = False) -> tuple[Topology, dict]:
        """The assembled topology and the parallel-cable counts of its links."""
        speeds = Counter(g for _, gs in self.cables.values() for g in gs if g is not None)
        default_gbps = speeds.most_common(1)[0][0] if speeds else 100.0
        adj: dict[str, set[str]] = {}
        for a, b in self.cables:
            adj.setdefault(a, set()).add(b)
            adj.setdefault(b, set()).add(a)
        linked = {s for s in self.switches if s in adj}
        unlinked = sorted(set(self.switches) - linked)
        if unlinked:
            shown = ", ".join(unlinked[:4])
            self.warn(f"dropped {len(unlinked)} switch(es) with no cable: {shown}")
        if largest_component:
            keep = _largest_component(adj)
            dropped = {v for v in adj if v not in keep}
            if dropped:
                self.warn(f"kept the largest connected part; dropped {len(dropped)} device(s)")
            adj = {v: n for v, n in adj.items() if v in keep}
            linked &= keep
        tiers = tiers_from_hosts(adj, {s: t for s, t in self.switches.items() if t})
        tiers = {s: tiers.get(s, "core") for s in linked}
        names = sorted({n for nics in self.host_nics.values() for n in nics}, key=natural_key)
        rail_of = {n: i for i, n in enumerate(names)}
        links: dict[LinkKey, Link] = {}
        counts: dict[LinkKey, int] = {}
        nic_gbps: dict[str, float] = {}
        for key, (count, gs) in self.cables.items():
            if key[0] not in adj or key[1] not in adj:
                continue
            gbps = sum(g if g is not None else default_gbps for g in gs)
            links[key] = Link(key[0], key[1], gbps,
                              tuple(sorted(self.ports.get((key, key[0]), ()))),
                              tuple(sorted(self.ports.get((key, key[1]), ()))))
            counts[key] = count
            for end in key:
                if "/" in end:
                    nic_gbps[end] = gbps
        nodes = {}
        for host in sorted(self.host_nics, key=natural_key):
            nics = tuple(
                Nic(host, n, rail_of[n], nic_gbps[f"{host}/{n}"])
                for n in sorted(self.host_nics[host], key=natural_key)
                if f"{host}/{n}" in nic_gbps
            )
            if nics:
                nodes[host] = Node(host, nics, self.gpus_per_node or 0)
        switches = {s: Switch(s, tiers[s]) for s in sorted(linked)}
        topo = Topology(self.name, self.fabric, nodes, switches, links,
                        gpus_per_node=self.gpus_per_node or 0)
        return topo, counts

    def to_yaml(
        self,
        *,
        source: str,
        spec: str | None = None,
        header: list[str] | None = None,
        largest_component: bool = False,
    ) -> tuple[str, list[str]]:
        """Validated explicit-form YAML of the discovered fabric, and the warnings gathered.

        Raises
        ------
        ConfigError
            The discovered fabric is not a valid topology (names the problem and the source).
        """
        if not self.host_nics:
            raise ConfigError("no hosts found", source=source, hint="is this the right file?")
        topo, counts = self.topology(largest_component=largest_component)
        topo.spec = spec
        try:
            check_structure(topo, source=source)
        except ConfigError as exc:
            raise ConfigError(
                exc.message.split(": ", 1)[-1],
                source=source,
                hint="partial output? --largest-component keeps the biggest part"
                + ("; LLDP: add --spines N or --uplinks FILE" if self.fabric == "roce" else ""),
            ) from exc
        tier_counts = Counter(s.tier for s in topo.switches.values())
        tiers = ", ".join(f"{tier_counts[t]} {t}" for t in TIERS if tier_counts[t])
        lines = list(header or []) + [
            f"{len(topo.nodes)} nodes, {len(topo.nics)} NICs, {tiers}, "
            f"{len(topo.links)} links ({sum(counts.values())} cables)",
        ]
        if not self.gpus_per_node:
            lines.append("GPUs per node unknown (discovery cannot see them): written as 0; "
                         "set gpus_per_node: N here")
        text = topology_to_yaml(topo, header=lines, link_counts=counts)
        topology_from_dict(parse_yaml(text, source), source=source)  # round-trip check
        return text, self.warnings


def tiers_from_hosts(adj: dict[str, set[str]], fixed: dict[str, str] | None = None,
                     ) -> dict[str, str]:
    """Switch tiers from the graph: hop distance from the nearest host NIC (``node/nic``
    vertices) -- 1 leaf, 2 spine, 3 or more core. ``fixed`` tiers are kept; switches no host
    reaches are left out.

    >>> adj = {"h/0": {"l1"}, "l1": {"h/0", "s1"}, "s1": {"l1", "c1"}, "c1": {"s1"}}
    >>> tiers_from_hosts(adj)
    {'l1': 'leaf', 's1': 'spine', 'c1': 'core'}
    """
    import networkx as nx

    g = nx.Graph()
    g.add_edges_from((a, b) for a, ns in adj.items() for b in ns)
    hosts = [v for v in g if "/" in v]
    if not hosts:
        return dict(fixed or {})
    g.add_edges_from(("\0hosts", h) for h in hosts)
    dist = nx.single_source_shortest_path_length(g, "\0hosts")
    tiers = {v: ("leaf" if d == 2 else "spine" if d == 3 else "core")
             for v, d in dist.items() if d >= 2 and "/" not in v}
    tiers.update(fixed or {})
    return tiers


def read_bounded(path: Path, *, max_bytes: int = MAX_DUMP_BYTES) -> str:
    """A discovery file's text, read like every tool output (:mod:`.bounded_read`):
    at most ``max_bytes``, pipes and devices as streams with a deadline, binary data refused,
    UTF-16 decoded.

    Raises
    ------
    ConfigError
        Missing, unreadable, too large, endless or binary (one line naming the file).
    """
    from fabriccheck.topology.discovery.bounded_read import read_tool_output

    return read_tool_output(path, max_bytes=max_bytes)


def _largest_component(adj: dict[str, set[str]]) -> set[str]:
    best: set[str] = set()
    seen: set[str] = set()
    for start in sorted(adj):
        if start in seen:
            continue
        comp = {start}
        queue = deque([start])
        while queue:
            for nxt in adj[queue.popleft()]:
                if nxt not in comp:
                    comp.add(nxt)
                    queue.append(nxt)
        seen |= comp
        if sum("/" in v for v in comp) > sum("/" in v for v in best):
            best = comp
    return best
