"""Reading a topology file's ``nvlink_domains:`` list into :class:`~.nvlink.NvlDomain` values.

Shapes are checked by the schema (:class:`~fabriccheck.schema.topology.NvlDomainModel`); here
what needs the nodes: every tray is a node of the topology, in one domain only, with the
domain's GPUs per tray.
"""

from __future__ import annotations

from fabriccheck.topology.fields import Fields, join
from fabriccheck.topology.model import Topology
from fabriccheck.topology.nvlink import NvlDomain

FIELDS = ("name", "trays", "gpus_per_tray", "switch_trays", "chips_per_switch_tray",
          "ports_per_gpu")


def read_domains(top: Fields, topo: Topology) -> dict[str, NvlDomain]:
    """The domains of ``top["nvlink_domains"]`` over ``topo``'s nodes.

    Raises
    ------
    ConfigError
        A domain named twice or with '/', an unknown tray, a tray in two domains, a tray whose
        GPUs differ from the domain's ``gpus_per_tray``.
    """
    out: dict[str, NvlDomain] = {}
    owner: dict[str, str] = {}
    for i, raw in enumerate(top.list("nvlink_domains")):
        f = Fields(raw, top.source, join("nvlink_domains", i), allowed=FIELDS)
        name = f.str("name")
        if name in out:
            raise f.error(f"duplicate domain name {name!r}", "name")
        if "/" in name:
            raise f.error(f"domain name {name!r} must not contain '/'", "name")
        gpus = f.int("gpus_per_tray", 4)
        trays = tuple(f.list("trays"))
        for j, tray in enumerate(trays):
            where = join("trays", j)
            if tray not in topo.nodes:
                raise f.error(f"unknown node {tray!r}", where,
                              hint="a tray is a node of this topology (topology show)")
            if tray in owner:
                raise f.error(f"{tray} is already a tray of domain {owner[tray]!r}", where,
                              hint="a compute tray belongs to one NVLink domain")
            if topo.nodes[tray].gpus != gpus:
                raise f.error(f"{tray} has {topo.nodes[tray].gpus} GPUs, the domain's trays "
                              f"{gpus}", where, hint="set gpus_per_tray (or the node's gpus)")
            owner[tray] = name
        out[name] = NvlDomain(name, trays, gpus, f.int("switch_trays", 9),
                              f.int("chips_per_switch_tray", 2), f.int("ports_per_gpu", 18))
    return out
