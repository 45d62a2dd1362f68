"""Topology generators: rail-optimized and fat-tree (2- and 3-tier) fabrics from a few parameters,
and GB200/GB300 NVL72 racks (:mod:`.nvl72`: NVLink domains over a rail-optimized fabric).

Names follow the shared conventions: nodes ``node-001`` (zero-padded to the width of the node
count, at least 3 digits), NICs ``mlx5_<rail>``, switches ``leaf-<group>-<rail>`` / ``spine-<i>``
(rail-optimized), ``leaf-<i>`` / ``spine-<i>`` (2-tier fat-tree) and ``leaf-<pod>-<i>`` /
``spine-<pod>-<j>`` / ``core-<k>`` (3-tier fat-tree).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fabriccheck.models import link_key
from fabriccheck.topology.fields import Fields
from fabriccheck.topology.model import FABRICS, Link, Nic, Node, Switch, Topology

#: parameters each generator kind accepts (``kind`` itself is always allowed)
PARAMS: dict[str, tuple[str, ...]] = {
    "rail-optimized": (
        "nodes", "gpus_per_node", "rails", "nodes_per_leaf", "spines", "nic_gbps", "uplink_gbps",
    ),
    "fat-tree": (
        "tiers", "nodes", "gpus_per_node", "rails", "nodes_per_leaf", "spines", "leaves_per_pod",
        "spines_per_pod", "pods", "cores", "nic_gbps", "uplink_gbps", "core_gbps",
    ),
    "nvl72": (
        "racks", "trays_per_rack", "gpus_per_tray", "switch_trays", "chips_per_switch_tray",
        "nvlink_ports", "nics_per_tray", "trays_per_leaf", "spines", "nic_gbps", "uplink_gbps",
    ),
}
KINDS = tuple(PARAMS)


def node_names(count: int) -> list[str]:
    """``node-001`` … zero-padded to the width of ``count``, at least 3 digits.

    >>> node_names(2)
    ['node-001', 'node-002']
    >>> node_names(10000)[-1]
    'node-10000'
    """
    width = max(3, len(str(count)))
    return [f"node-{i:0{width}d}" for i in range(1, count + 1)]


class _Builder:
    """Collects nodes, switches and links; the generators are straight-line code over it."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.switches: dict[str, Switch] = {}
        self.links: dict = {}

    def node(self, name: str, rails: int, gpus: int, nic_gbps: float) -> list[str]:
        nics = tuple(Nic(name, f"mlx5_{r}", r, nic_gbps) for r in range(rails))
        self.nodes[name] = Node(name, nics, gpus)
        return [nic.endpoint for nic in nics]

    def switch(self, name: str, tier: str) -> str:
        self.switches[name] = Switch(name, tier)
        return name

    def link(self, a: str, b: str, gbps: float) -> None:
        self.links[link_key(a, b)] = Link(a, b, gbps)

    def build(self, name: str, fabric: str, gpus_per_node: int) -> Topology:
        return Topology(
            name=name,
            fabric=fabric,
            nodes=self.nodes,
            switches=self.switches,
            links=self.links,
            gpus_per_node=gpus_per_node,
        )


def _common(f: Fields) -> tuple[int, int, int, float, float]:
    nodes = f.int("nodes")
    gpus = f.int("gpus_per_node", 8, minimum=0)
    rails = f.int("rails", max(gpus, 1))
    nic_gbps = f.number("nic_gbps", 400.0)
    uplink_gbps = f.number("uplink_gbps", nic_gbps)
    return nodes, gpus, rails, nic_gbps, uplink_gbps


def _rail_optimized(f: Fields, name: str, fabric: str) -> Topology:
    nodes, gpus, rails, nic_gbps, uplink_gbps = _common(f)
    per_leaf = f.int("nodes_per_leaf", min(nodes, 32))
    spines = f.int("spines", 0, minimum=0)
    groups = -(-nodes // per_leaf)
    if spines == 0 and groups * rails > 1:
        raise f.error(
            f"{groups * rails} leaves need at least one spine to be connected", "spines"
        )
    b = _Builder()
    spine_names = [b.switch(f"spine-{i}", "spine") for i in range(spines)]
    for g in range(groups):
        for r in range(rails):
            leaf = b.switch(f"leaf-{g}-{r}", "leaf")
            for spine in spine_names:
                b.link(leaf, spine, uplink_gbps)
    for i, node in enumerate(node_names(nodes)):
        g = i // per_leaf
        for r, nic in enumerate(b.node(node, rails, gpus, nic_gbps)):
            b.link(nic, f"leaf-{g}-{r}", nic_gbps)
    return b.build(name, fabric, gpus)


def _fat_tree_2(f: Fields, name: str, fabric: str) -> Topology:
    nodes, gpus, rails, nic_gbps, uplink_gbps = _common(f)
    for key in ("leaves_per_pod", "spines_per_pod", "pods", "cores", "core_gbps"):
        if f.has(key):
            raise f.error("only for a 3-tier fat-tree", key, hint="add 'tiers: 3' or remove it")
    per_leaf = f.int("nodes_per_leaf", min(nodes, 16))
    leaves = -(-nodes // per_leaf)
    spines = f.int("spines", 0 if leaves == 1 else None, minimum=0)
    if spines == 0 and leaves > 1:
        raise f.error(f"{leaves} leaves need at least one spine to be connected", "spines")
    b = _Builder()
    spine_names = [b.switch(f"spine-{i}", "spine") for i in range(spines)]
    for li in range(leaves):
        leaf = b.switch(f"leaf-{li}", "leaf")
        for spine in spine_names:
            b.link(leaf, spine, uplink_gbps)
    for i, node in enumerate(node_names(nodes)):
        for nic in b.node(node, rails, gpus, nic_gbps):
            b.link(nic, f"leaf-{i // per_leaf}", nic_gbps)
    return b.build(name, fabric, gpus)


def _fat_tree_3(f: Fields, name: str, fabric: str) -> Topology:
    nodes, gpus, rails, nic_gbps, uplink_gbps = _common(f)
    if f.has("spines"):
        raise f.error("a 3-tier fat-tree takes spines_per_pod", "spines")
    per_leaf = f.int("nodes_per_leaf")
    leaves_per_pod = f.int("leaves_per_pod")
    spines_per_pod = f.int("spines_per_pod")
    cores = f.int("cores")
    core_gbps = f.number("core_gbps", uplink_gbps)
    per_pod = per_leaf * leaves_per_pod
    pods = f.int("pods", -(-nodes // per_pod))
    if pods * per_pod < nodes:
        raise f.error(
            f"{pods} pods x {leaves_per_pod} leaves x {per_leaf} nodes hold fewer than {nodes}",
            "pods",
        )
    if cores % spines_per_pod:
        raise f.error(
            f"must be a multiple of spines_per_pod ({spines_per_pod}): spine j of every pod "
            "connects to core group j",
            "cores",
        )
    group = cores // spines_per_pod
    b = _Builder()
    core_names = [b.switch(f"core-{k}", "core") for k in range(cores)]
    for p in range(pods):
        spines = [b.switch(f"spine-{p}-{j}", "spine") for j in range(spines_per_pod)]
        for j, spine in enumerate(spines):
            for core in core_names[j * group : (j + 1) * group]:
                b.link(spine, core, core_gbps)
        for li in range(leaves_per_pod):
            leaf = b.switch(f"leaf-{p}-{li}", "leaf")
            for spine in spines:
                b.link(leaf, spine, uplink_gbps)
    for i, node in enumerate(node_names(nodes)):
        p, li = divmod(i // per_leaf, leaves_per_pod)
        for nic in b.node(node, rails, gpus, nic_gbps):
            b.link(nic, f"leaf-{p}-{li}", nic_gbps)
    return b.build(name, fabric, gpus)


def _fat_tree(f: Fields, name: str, fabric: str) -> Topology:
    tiers = f.int("tiers", 2)
    if tiers not in (2, 3):
        raise f.error(f"unsupported number of tiers {tiers}", "tiers", hint="2 or 3")
    return (_fat_tree_2 if tiers == 2 else _fat_tree_3)(f, name, fabric)


def _nvl72(f: Fields, name: str, fabric: str) -> Topology:
    from fabriccheck.topology.nvl72 import nvl72

    return nvl72(f, name, fabric, _rail_optimized)


_GENERATORS: dict[str, Callable[[Fields, str, str], Topology]] = {
    "rail-optimized": _rail_optimized,
    "fat-tree": _fat_tree,
    "nvl72": _nvl72,
}


def generate(
    gen: dict[str, Any],
    *,
    name: str,
    fabric: str,
    source: str = "<generator>",
    field: str = "generator",
) -> Topology:
    """Build a topology from a generator mapping (the ``generator:`` block of a topology file).

    Parameters
    ----------
    gen
        ``{"kind": "rail-optimized" | "fat-tree" | "nvl72", ...parameters}`` as in
        docs/design.md (nvl72: docs/nvl72.md).
    name, fabric
        The topology's name and fabric (``roce`` or ``infiniband``).
    source, field
        Where the mapping came from, for error messages.

    Returns
    -------
    Topology
        Not yet validated structurally; :func:`fabriccheck.topology.load_topology` does that.

    Raises
    ------
    ConfigError
        Unknown kind, unknown or missing parameter, or parameters that cannot make a fabric.

    Examples
    --------
    >>> t = generate({"kind": "rail-optimized", "nodes": 4, "rails": 2, "nodes_per_leaf": 2,
    ...               "spines": 1}, name="t", fabric="infiniband")
    >>> sorted(t.switches)
    ['leaf-0-0', 'leaf-0-1', 'leaf-1-0', 'leaf-1-1', 'spine-0']
    """
    if fabric not in FABRICS:
        raise Fields({}, source, "").error(
            f"unknown fabric {fabric!r}", "fabric", hint="one of: " + ", ".join(FABRICS)
        )
    from fabriccheck.schema.base import check_type
    from fabriccheck.schema.topology import Generator

    check_type(Generator, gen, source=source, prefix=field)
    head = Fields(gen, source, field)
    kind = head.str("kind", choices=KINDS)
    f = Fields(gen, source, field, allowed=("kind", *PARAMS[kind]))
    return _GENERATORS[kind](f, name, fabric)
