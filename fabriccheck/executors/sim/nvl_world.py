"""One simulated compute tray's view of its NVLink domain (docs/nvl72.md), from the topology's
domains and the NVLink faults.

Every tray of a healthy domain registered with the fabric manager: each GPU's fabric state is
``Completed`` / ``Success`` with the domain's cluster UUID (derived from the domain's name) and
the default clique :data:`DEFAULT_CLIQUE`; every tray runs an IMEX daemon that is ``READY`` and
connected to every other. The faults change that: ``nvlink_port_down`` (that port inactive),
``nvswitch_down`` (the ports wired to that switch tray inactive on every GPU of the rack),
``imex_missing`` (no daemon on the tray: its tools are not found, the others see it
``UNAVAILABLE``), ``clique_mismatch`` (the tray's GPUs in clique :data:`OTHER_CLIQUE`),
``nvlink_degraded`` (that GPU's fabric health: bandwidth degraded), ``fabric_unregistered``
(the rack's fabric manager never configured the tray: every GPU's fabric state ``Not Started``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fabriccheck.executors.sim.model import stable_hash
from fabriccheck.faults import FaultSet
from fabriccheck.faults_nvl import dead_ports
from fabriccheck.topology.model import Topology

#: the clique of the default NVLink partition (the fabric manager's default, 0x7ffe)
DEFAULT_CLIQUE = 32766
#: the clique a ``clique_mismatch`` tray's GPUs registered in
OTHER_CLIQUE = 32765
IMEX_VERSION = "570.172"


@dataclass(frozen=True)
class NvlFacts:
    """What a tray's GPU and IMEX tools see of its domain: ``dead`` per GPU its inactive ports,
    ``degraded`` the GPUs whose fabric bandwidth is degraded, ``imex`` per tray of the domain (in
    domain order) its address and whether its daemon runs; ``tray_index`` is this tray's;
    ``registered`` whether the rack's fabric manager configured the tray's GPUs."""

    domain: str
    tray_index: int
    ports_per_gpu: int
    cluster_uuid: str
    clique_id: int
    dead: dict[int, frozenset[int]] = field(default_factory=dict)
    degraded: frozenset[int] = frozenset()
    imex: tuple[tuple[str, bool], ...] = ()
    registered: bool = True

    @property
    def imex_running(self) -> bool:
        return self.imex[self.tray_index][1]


def cluster_uuid(domain: str) -> str:
    """The domain's cluster UUID as NVML prints it (deterministic per domain name).

    >>> cluster_uuid("rack-0") == cluster_uuid("rack-0") != cluster_uuid("rack-1")
    True
    """
    h = f"{stable_hash('cluster', domain):016x}{stable_hash(domain, 'uuid'):016x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def nvl_facts(topology: Topology, node: str, faults: FaultSet,
              address: Callable[[str], str]) -> NvlFacts | None:
    """The NVLink facts of tray ``node`` (None when it is in no domain); ``address`` gives a
    tray's management address (what the IMEX config lists)."""
    d = topology.domain_of(node)
    if d is None:
        return None
    nvl = faults.of_kind("nvlink_port_down", "nvswitch_down", "imex_missing", "clique_mismatch",
                         "nvlink_degraded", "fabric_unregistered")
    dead = {g: frozenset(p) for (tray, g), p in dead_ports(nvl, topology).items() if tray == node}
    missing = {f.node for f in nvl if f.kind == "imex_missing"}
    mismatch = any(f.kind == "clique_mismatch" and f.node == node for f in nvl)
    degraded = frozenset(int(f.gpu or 0) for f in nvl
                         if f.kind == "nvlink_degraded" and f.node == node)
    unregistered = any(f.kind == "fabric_unregistered" and f.node == node for f in nvl)
    return NvlFacts(d.name, d.tray_index(node), d.ports_per_gpu, cluster_uuid(d.name),
                    OTHER_CLIQUE if mismatch else DEFAULT_CLIQUE, dead, degraded,
                    tuple((address(t), t not in missing) for t in d.trays),
                    registered=not unregistered)
