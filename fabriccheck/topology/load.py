"""Loading and validating topology files (explicit form or generator form, docs/design.md contract).

Explicit form::

    name: lab-4
    fabric: roce                      # roce | infiniband
    spec: lab-tcp                     # optional: the default test spec for this cluster
    gpus_per_node: 0                  # optional (default 8)
    nodes:
      - name: host1
        gpus: 0                       # optional, default gpus_per_node
        nics: [{name: eth0, rail: 0, gbps: 1}]     # or just [eth0]: rail = position, gbps = link
    switches:
      - {name: leaf-1, tier: leaf}    # leaf | spine | core
    links:
      - {a: host1/eth0, b: leaf-1, gbps: 1}        # count: N optional (parallel cables merged)

Generator form: ``generator: {kind: rail-optimized | fat-tree | nvl72, ...}`` instead of the three
lists. Either form may add ``nvlink_domains:`` (NVLink domains over its nodes: docs/nvl72.md;
the nvl72 generator makes its own).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fabriccheck.errors import ConfigError
from fabriccheck.models import LinkKey, link_key
from fabriccheck.topology.fields import Fields, join, read_yaml, type_name
from fabriccheck.topology.generators import generate
from fabriccheck.topology.model import FABRICS, TIERS, Link, Nic, Node, Switch, Topology

TOP_FIELDS = (
    "name", "fabric", "spec", "gpus_per_node", "description", "generator", "nodes", "switches",
    "links", "routes", "lab", "nvlink_domains",
)
LAB_MODES = ("bridged", "routed")

#: the repository's bundled topology files (editable install / source checkout)
TOPOLOGY_DIR = Path(__file__).resolve().parents[1] / "_bundled" / "topologies"


def resolve_topology_path(path_or_name: str | Path) -> Path:
    """A topology file path: an existing path as is, else a bundled name (``roce-rail-64``).

    Raises
    ------
    ConfigError
        Neither a file nor a bundled topology name.
    """
    path = Path(path_or_name)
    if path.exists():
        return path
    name = str(path_or_name)
    for base in (TOPOLOGY_DIR, Path.cwd() / "topologies"):
        for cand in (base / name, base / f"{name}.yaml", base / f"{name}.yml"):
            if cand.is_file():
                return cand
    bundled = ", ".join(bundled_topologies()) or "none found"
    raise ConfigError(
        "no such file or bundled topology",
        source=name,
        hint=f"give a path or one of: {bundled}",
    )


def bundled_topologies() -> list[str]:
    """Names of the topology files shipped in ``topologies/``."""
    if not TOPOLOGY_DIR.is_dir():
        return []
    return sorted(p.stem for p in TOPOLOGY_DIR.glob("*.yaml"))


def load_topology(path_or_name: str | Path, *, require_tree: bool = False) -> Topology:
    """Read, build and validate a topology file.

    Parameters
    ----------
    path_or_name
        A file path, or the name of a bundled topology (``roce-rail-64`` → ``topologies/…yaml``).
    require_tree
        Refuse a fabric with a cycle (the namespace lab bridges switches; a loop would storm).

    Returns
    -------
    Topology

    Raises
    ------
    ConfigError
        One line naming the file, the field and the problem.
    """
    path = resolve_topology_path(path_or_name)
    source = str(path)
    data = read_yaml(path)
    return topology_from_dict(data, source=source, require_tree=require_tree)


def topology_from_dict(data: Any, *, source: str, require_tree: bool = False) -> Topology:
    """Build and validate a topology from a parsed document (see :func:`load_topology`)."""
    from fabriccheck.schema.base import check
    from fabriccheck.schema.topology import TopologyFile

    check(TopologyFile, data, source=source)
    top = Fields(data, source, "", allowed=TOP_FIELDS)
    name = top.str("name")
    fabric = top.str("fabric", choices=FABRICS)
    spec = top.str("spec") if top.has("spec") else None
    lab_mode = _lab_mode(top)
    gpus = top.int("gpus_per_node", 8, minimum=0)
    if top.has("generator"):
        for key in ("nodes", "switches", "links"):
            if key in top.data:
                raise top.error(
                    "a generator file cannot also list nodes/switches/links", key,
                    hint="use either 'generator:' or the explicit form",
                )
        topo = generate(top.data["generator"], name=name, fabric=fabric, source=source)
        if "gpus_per_node" not in top.data:
            gpus = topo.gpus_per_node
        elif gpus != topo.gpus_per_node and "gpus_per_node" in top.data["generator"]:
            raise top.error(
                f"{gpus} differs from generator.gpus_per_node ({topo.gpus_per_node})",
                "gpus_per_node", hint="give it once",
            )
    else:
        topo = _explicit(top, name, fabric, gpus)
    topo.spec, topo.gpus_per_node, topo.source = spec, gpus, source
    topo.lab_mode = lab_mode
    if top.has("nvlink_domains"):
        _domains(top, topo)
    check_structure(topo, source=source, require_tree=require_tree)
    if top.has("routes"):
        _attach(top, topo)
    return topo


def _attach(top: Fields, topo: Topology) -> None:
    """``routes: FILE`` (or a list): forwarding-table dumps, relative to the topology file."""
    from fabriccheck.topology.routes import attach_routes

    if topo.fabric != "infiniband":
        raise top.error("forwarding tables are for infiniband (RoCE paths are ECMP)", "routes")
    raw = top.data["routes"]
    base = Path(top.source).parent if Path(top.source).is_file() else Path.cwd()
    paths = [base / p for p in (raw if isinstance(raw, list) else [raw])]
    for p in paths:
        if not p.is_file():
            raise top.error(f"no such routes file {str(p)!r}", "routes",
                            hint="a path relative to the topology file")
    attach_routes(topo, paths)


def _domains(top: Fields, topo: Topology) -> None:
    """``nvlink_domains:`` (optional; the nvl72 generator makes its own)."""
    from fabriccheck.topology.nvlink_load import read_domains

    if topo.domains:
        raise top.error("the nvl72 generator makes the NVLink domains", "nvlink_domains",
                        hint="remove nvlink_domains, or use the explicit form")
    topo.domains = read_domains(top, topo)


def _lab_mode(top: Fields) -> str:
    """``lab: {mode: bridged | routed}`` (optional; how ``fabriccheck lab up`` builds it)."""
    if not top.has("lab"):
        return "bridged"
    lab = Fields(top.data["lab"], top.source, "lab", allowed=("mode",))
    return lab.str("mode", choices=LAB_MODES) if lab.has("mode") else "bridged"


# ---- explicit form ------------------------------------------------------------------------
def _explicit(top: Fields, name: str, fabric: str, gpus: int) -> Topology:
    """The explicit form: switches, then nodes (their NICs read once the links give their
    speeds), then links; every link end must name a switch or one of its node's NICs."""
    switches = _switches(top)
    node_raw = _node_entries(top, switches)
    links, link_fields, nic_gbps = _links(top, switches, node_raw)
    nodes: dict[str, Node] = {}
    for node, (f, raw_nics) in node_raw.items():
        nodes[node] = Node(node, _nics(f, node, raw_nics, nic_gbps), f.int("gpus", gpus, minimum=0))
    known = {nic.endpoint for n in nodes.values() for nic in n.nics}
    for key, link in links.items():
        for end_key, end in (("a", link.a), ("b", link.b)):
            if end not in switches and end not in known:
                node, _, nic = end.partition("/")
                raise ConfigError(
                    f"node {node!r} has no NIC {nic!r}",
                    source=top.source,
                    field=join(link_fields[key], end_key),
                )
    return Topology(name=name, fabric=fabric, nodes=nodes, switches=switches, links=links)


def _switches(top: Fields) -> dict[str, Switch]:
    """``switches:``, by name (unique, no '/')."""
    switches: dict[str, Switch] = {}
    for i, raw in enumerate(top.list("switches")):
        f = Fields(raw, top.source, join("switches", i), allowed=("name", "tier"))
        sw = f.str("name")
        if sw in switches:
            raise f.error(f"duplicate switch name {sw!r}", "name")
        if "/" in sw:
            raise f.error(f"switch name {sw!r} must not contain '/'", "name")
        switches[sw] = Switch(sw, f.str("tier", choices=TIERS))
    return switches


def _node_entries(top: Fields, switches: dict[str, Switch]) -> dict[str, tuple[Fields, list]]:
    """``nodes:``, by name (unique, not a switch's, no '/'): each entry's fields and its raw
    NIC list (not empty), read into NICs once the links are known."""
    node_raw: dict[str, tuple[Fields, list]] = {}
    for i, raw in enumerate(top.list("nodes")):
        f = Fields(raw, top.source, join("nodes", i), allowed=("name", "nics", "gpus"))
        node = f.str("name")
        if node in node_raw:
            raise f.error(f"duplicate node name {node!r}", "name")
        if node in switches:
            raise f.error(f"{node!r} is both a node and a switch", "name")
        if "/" in node:
            raise f.error(f"node name {node!r} must not contain '/'", "name")
        nics = f.list("nics")
        if not nics:
            raise f.error("a node needs at least one NIC", "nics")
        node_raw[node] = (f, nics)
    return node_raw


def _links(top: Fields, switches: dict[str, Switch], node_raw: dict[str, tuple[Fields, list]]
           ) -> tuple[dict[LinkKey, Link], dict[LinkKey, str], dict[str, float]]:
    """``links:`` by link key, each one's field path (for later messages), and the speed of
    each NIC end (its first link's gbps). A link joins a switch to a switch or to a known
    node's NIC, once."""
    links: dict[LinkKey, Link] = {}
    link_fields: dict[LinkKey, str] = {}
    nic_gbps: dict[str, float] = {}
    for i, raw in enumerate(top.list("links")):
        f = Fields(raw, top.source, join("links", i),
                   allowed=("a", "b", "gbps", "count", "a_port", "b_port"))
        a, b = f.str("a"), f.str("b")
        gbps = f.number("gbps")
        f.int("count", 1)
        for key, end in (("a", a), ("b", b)):
            if end in switches:
                continue
            node, sep, _ = end.partition("/")
            if not sep:
                raise f.error(f"unknown switch {end!r}", key, hint="NIC ends are written node/nic")
            if node not in node_raw:
                raise f.error(f"unknown node {node!r} in {end!r}", key)
            nic_gbps.setdefault(end, gbps)
        if a == b:
            raise f.error(f"link from {a!r} to itself", "b")
        if a not in switches and b not in switches:
            raise f.error(f"link {a} - {b} joins two NICs", "b", hint="a NIC links to a switch")
        key = link_key(a, b)
        if key in links:
            raise f.error(
                f"duplicate link {a} - {b} (also {link_fields[key]})", None,
                hint="merge parallel cables into one link with 'count' and the summed gbps",
            )
        links[key] = Link(a, b, gbps, _ports(raw, "a_port"), _ports(raw, "b_port"))
        link_fields[key] = f.path
    return links, link_fields, nic_gbps


def _nics(f: Fields, node: str, raw_nics: list, link_gbps: dict[str, float]) -> tuple[Nic, ...]:
    out: list[Nic] = []
    names: set[str] = set()
    rails: set[int] = set()
    for j, raw in enumerate(raw_nics):
        path = join(join(f.path, "nics"), j)
        if isinstance(raw, str):
            nic_name, rail = raw, j
            gbps = link_gbps.get(f"{node}/{raw}")
            if gbps is None:
                raise f.error(f"NIC {raw!r} is on no switch", join(join("nics", j), "name"))
        else:
            nf = Fields(raw, f.source, path, allowed=("name", "rail", "gbps"))
            nic_name = nf.str("name")
            rail = nf.int("rail", j, minimum=0)
            gbps = nf.number("gbps", link_gbps.get(f"{node}/{nic_name}"))
        if not isinstance(nic_name, str) or not nic_name or "/" in nic_name:
            raise f.error(f"bad NIC name {type_name(nic_name)}", join("nics", j))
        if nic_name in names:
            raise f.error(f"duplicate NIC name {nic_name!r}", join(join("nics", j), "name"))
        if rail in rails:
            raise f.error(f"two NICs on rail {rail}", join(join("nics", j), "rail"))
        names.add(nic_name)
        rails.add(rail)
        out.append(Nic(node, nic_name, rail, gbps))
    return tuple(out)


# ---- structure ----------------------------------------------------------------------------
def check_structure(topo: Topology, *, source: str, require_tree: bool = False) -> None:
    """Check what makes routing possible: every NIC on exactly one switch, one connected fabric.

    With ``require_tree`` a cycle (more links than vertices − 1) is refused as well.

    Raises
    ------
    ConfigError
        The first problem found, naming the NIC, switch or link.
    """
    if not topo.nodes:
        raise ConfigError("a topology needs at least one node", source=source, field="nodes")
    nics = topo.nics
    _check_cabling(topo, nics, source=source)
    find, cycle = _join_links(topo)
    vertices = list(nics) + list(topo.switches)
    roots = {find(v) for v in vertices}
    if len(roots) > 1:
        groups: dict[str, list[str]] = {}
        for v in vertices:
            groups.setdefault(find(v), []).append(v)
        parts = sorted(groups.values(), key=len)
        raise ConfigError(
            f"fabric is disconnected: {len(parts)} parts; e.g. {sorted(parts[0])[0]} cannot "
            f"reach {sorted(parts[-1])[0]}",
            source=source,
            field="links",
            hint="add the missing uplinks",
        )
    if require_tree and cycle is not None:
        raise ConfigError(
            f"cycle through link {cycle.a} - {cycle.b}; this fabric must be a tree",
            source=source,
            field="links",
            hint="the lab bridges switches: remove redundant uplinks",
        )


def _check_cabling(topo: Topology, nics: dict[str, Nic], *, source: str) -> None:
    """Every NIC is on exactly one switch (the first NIC on two, in link order, then the first
    on none, is refused)."""
    attached: dict[str, str] = {}
    for link in topo.links.values():
        for nic, other in ((link.a, link.b), (link.b, link.a)):
            if nic in nics:
                if nic in attached:
                    raise ConfigError(
                        f"NIC {nic} is on two switches ({attached[nic]} and {other})",
                        source=source,
                        field="links",
                        hint="a NIC has exactly one cable",
                    )
                attached[nic] = other
    for nic in nics:
        if nic not in attached:
            raise ConfigError(
                f"NIC {nic} is on no switch", source=source, field="links",
                hint=f"add a link from {nic} to its leaf",
            )


def _join_links(topo: Topology) -> tuple[Callable[[str], str], Link | None]:
    """Union-find over the links: the root of each vertex's connected part, and the first
    link (in link order) that closes a cycle (None for a forest)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:
            parent[x], x = root, parent[x]
        return root

    cycle: Link | None = None
    for link in topo.links.values():
        ra, rb = find(link.a), find(link.b)
        if ra == rb:
            cycle = cycle or link
        else:
            parent[ra] = rb
    return find, cycle


def _ports(raw: dict, key: str) -> tuple[int, ...]:
    """Port number(s) of a link end (``a_port: 17`` or ``[17, 18]``; shape-checked by the
    schema), as a tuple; empty when not given."""
    value = raw.get(key)
    if value is None:
        return ()
    return tuple(int(v) for v in (value if isinstance(value, list) else [value]))
