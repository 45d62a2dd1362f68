"""The ``nvl72`` generator: GB200/GB300 NVL72 racks as NVLink domains, joined by a scale-out fabric.

``generator: {kind: nvl72, racks: N}`` makes N racks of ``trays_per_rack`` compute trays
(nodes ``node-001`` … in rack order, ``gpus_per_tray`` GPUs and ``nics_per_tray`` NICs each)
and one NVLink domain per rack (``rack-0`` …: ``switch_trays`` NVSwitch trays of
``chips_per_switch_tray`` chips, ``nvlink_ports`` ports per GPU, wired by rule:
:mod:`.nvlink`). The scale-out part is the rail-optimized generator's fabric over the trays
(one leaf per rail per ``trays_per_leaf`` trays, default one rack; ``spines`` default
``trays_per_leaf``: as many uplinks as downlinks, non-blocking).
"""

from __future__ import annotations

from collections.abc import Callable

from fabriccheck.topology.fields import Fields
from fabriccheck.topology.model import Topology
from fabriccheck.topology.nvlink import NvlDomain


def nvl72(f: Fields, name: str, fabric: str,
          rail_optimized: Callable[[Fields, str, str], Topology]) -> Topology:
    """Build the racks (``f``: the generator block, checked by the schema); ``rail_optimized``
    builds the scale-out fabric.

    >>> from fabriccheck.topology.generators import generate
    >>> t = generate({"kind": "nvl72", "racks": 2}, name="t", fabric="infiniband")
    >>> len(t.nodes), t.gpus_per_node, t.rails, sorted(t.domains)
    (36, 4, 4, ['rack-0', 'rack-1'])
    >>> t.domain_of("node-019").name, t.domains["rack-1"].trays[0]
    ('rack-1', 'node-019')
    """
    racks = f.int("racks")
    per_rack = f.int("trays_per_rack", 18)
    gpus = f.int("gpus_per_tray", 4)
    chips_per = f.int("chips_per_switch_tray", 2)
    switch_trays = f.int("switch_trays", 9)
    ports = f.int("nvlink_ports", 18)
    per_leaf = f.int("trays_per_leaf", per_rack)
    scale_out = {"kind": "rail-optimized", "nodes": racks * per_rack, "gpus_per_node": gpus,
                 "rails": f.int("nics_per_tray", 4), "nodes_per_leaf": per_leaf,
                 "spines": f.int("spines", per_leaf, minimum=0),
                 "nic_gbps": f.number("nic_gbps", 400.0),
                 "uplink_gbps": f.number("uplink_gbps", f.number("nic_gbps", 400.0))}
    topo = rail_optimized(Fields(scale_out, f.source, f.path), name, fabric)
    trays = sorted(topo.nodes)  # node-001 … in order: rack r holds the r-th run of trays
    for r in range(racks):
        d = NvlDomain(f"rack-{r}", tuple(trays[r * per_rack:(r + 1) * per_rack]), gpus,
                      switch_trays, chips_per, ports)
        topo.domains[d.name] = d
    return topo
