"""Writing a topology as an explicit-form YAML file, and summarising one for humans."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from fabriccheck.topology.model import TIERS, Topology
from fabriccheck.topology.nvlink import NvlDomain


def _q(value: str) -> str:
    """A YAML flow scalar for ``value`` (JSON strings are valid YAML)."""
    return json.dumps(value)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def topology_to_yaml(
    topo: Topology,
    *,
    header: list[str] | None = None,
    link_counts: dict[tuple[str, str], int] | None = None,
) -> str:
    """The explicit-form YAML text of ``topo``; :func:`load_topology` reads it back unchanged.

    Parameters
    ----------
    topo
        The topology to write.
    header
        Comment lines written first (without ``#``).
    link_counts
        Parallel-cable counts per link key (written as ``count``; the ``gbps`` is their sum).
    """
    counts = link_counts or {}
    lines = [f"# {h}" if h else "#" for h in (header or [])]
    lines += [f"name: {_q(topo.name)}", f"fabric: {topo.fabric}"]
    if topo.spec:
        lines.append(f"spec: {_q(topo.spec)}")
    lines.append(f"gpus_per_node: {topo.gpus_per_node}")
    lines.append("nodes:")
    for node in sorted(topo.nodes.values(), key=lambda n: n.name):
        nics = ", ".join(
            f"{{name: {_q(n.name)}, rail: {n.rail}, gbps: {_num(n.gbps)}}}" for n in node.nics
        )
        lines.append(f"  - {{name: {_q(node.name)}, gpus: {node.gpus}, nics: [{nics}]}}")
    lines.append("switches:")
    order = {t: i for i, t in enumerate(TIERS)}
    for sw in sorted(topo.switches.values(), key=lambda s: (order.get(s.tier, 9), s.name)):
        lines.append(f"  - {{name: {_q(sw.name)}, tier: {sw.tier}}}")
    lines.append("links:")
    for key in sorted(topo.links):
        link = topo.links[key]
        extra = f", count: {counts[key]}" if counts.get(key, 1) > 1 else ""
        for name, ports in (("a_port", link.a_port), ("b_port", link.b_port)):
            if ports:
                extra += f", {name}: " + (str(ports[0]) if len(ports) == 1 else
                                          "[" + ", ".join(map(str, ports)) + "]")
        lines.append(f"  - {{a: {_q(link.a)}, b: {_q(link.b)}, gbps: {_num(link.gbps)}{extra}}}")
    lines += domains_yaml(topo.domains.values())
    return "\n".join(lines) + "\n"


def domains_yaml(domains: Iterable[NvlDomain]) -> list[str]:
    """The ``nvlink_domains:`` block of ``domains`` (no lines for none); the wiring follows by
    rule (docs/nvl72.md).

    >>> lines = domains_yaml([NvlDomain("rack-0", ("a", "b"))])
    >>> lines[0], lines[1][:38]
    ('nvlink_domains:', '  - {name: "rack-0", trays: ["a", "b"]')
    """
    domains = list(domains)
    if not domains:
        return []
    lines = ["nvlink_domains:"]
    for d in domains:
        trays = ", ".join(_q(t) for t in d.trays)
        lines.append(f"  - {{name: {_q(d.name)}, trays: [{trays}], gpus_per_tray: "
                     f"{d.gpus_per_tray}, switch_trays: {d.switch_trays}, "
                     f"chips_per_switch_tray: {d.chips_per_switch_tray}, "
                     f"ports_per_gpu: {d.ports_per_gpu}}}")
    return lines


def ecmp_width(topo: Topology) -> int:
    """Equal-cost paths between two same-rail NICs on different leaves (1 on a single leaf).

    Takes the first node's first NIC and the farthest-named node with a NIC on the same rail
    behind another leaf (on a 2-tier rail-optimized fabric: the number of spines).
    """
    nodes = sorted(topo.nodes.values(), key=lambda n: n.name)
    if not nodes or not nodes[0].nics:
        return 0
    src = nodes[0].nics[0]
    src_leaf = topo.attachment[src.endpoint]
    for node in reversed(nodes[1:]):
        for nic in node.nics:
            if nic.rail == src.rail and topo.attachment[nic.endpoint] != src_leaf:
                return len(topo.paths(src.endpoint, nic.endpoint))
    return 1


def summary(topo: Topology) -> dict[str, Any]:
    """Counts a human wants from ``topology show``: tiers, rails, NIC speeds, links, ECMP width."""
    tiers = Counter(s.tier for s in topo.switches.values())
    nic_speeds = Counter(n.gbps for n in topo.nics.values())
    attached = set(topo.attachment)
    uplinks = sum(1 for k in topo.links if k[0] not in attached and k[1] not in attached)
    return {
        "name": topo.name,
        "fabric": topo.fabric,
        "spec": topo.spec,
        "nodes": len(topo.nodes),
        "gpus_per_node": topo.gpus_per_node,
        "nics": len(topo.nics),
        "rails": topo.rails,
        "nic_gbps": {_num(k): v for k, v in sorted(nic_speeds.items())},
        "switches": {t: tiers[t] for t in TIERS if tiers[t]},
        "links": len(topo.links),
        "host_links": len(topo.links) - uplinks,
        "switch_links": uplinks,
        "ecmp_width": ecmp_width(topo),
    }
