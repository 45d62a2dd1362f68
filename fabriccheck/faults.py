"""Injected faults: the faults file (docs/design.md "Faults file"), validated, plus its ground
truth.

The same :class:`FaultSet` drives the simulator (``executors/sim``) and the namespace lab (which
turns the kinds into real ``tc`` / ``ip link`` faults), so nothing here is executor-specific.

A file looks like::

    noise: {jitter: 0.03, glitch_rate: 0.01, background: default}
    faults:
      - {kind: nic_degraded, nic: node-017/mlx5_3, factor: 0.25}
      - {kind: node_hang, node: node-033}
      - {kind: link_flapping, link: [leaf-1-2, spine-3], probability: 0.5}
      - {kind: xid, node: node-021, xid: 79}
      - {kind: port_flap, nic: node-022/mlx5_1, per_hour: 6}

``noise.background`` (``default`` or ``none``) gives healthy simulated nodes the harmless
oddities real ones show in their node-local tools (listed in docs/signals.md and in
``executors/sim/node_world.py``); ``none`` makes them spotless.

Bad input raises one :class:`~fabriccheck.errors.ConfigError` naming the file, the field
(``faults[3].nic``) and what to do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabriccheck.errors import ConfigError
from fabriccheck.models import LinkKey, link_key, nic_node

if TYPE_CHECKING:  # pragma: no cover
    from fabriccheck.topology.model import Topology

#: every fault kind and the fields it takes besides ``kind`` (all required)
KINDS: dict[str, tuple[str, ...]] = {
    "nic_degraded": ("nic", "factor"),
    "nic_down": ("nic",),
    "node_slow": ("node", "factor"),
    "gpu_link_degraded": ("node", "factor"),
    "node_hang": ("node",),
    "node_unreachable": ("node",),
    "link_degraded": ("link", "factor"),
    "link_down": ("link",),
    "link_flapping": ("link", "probability"),
    # found by the preflight signals (planning/preflight.py)
    "gpu_missing": ("node",),
    "pcie_downtrained": ("nic", "width"),
    "port_errors": ("nic", "rate"),
    "gpu_throttle": ("node", "reason"),
    "row_remap_pending": ("node",),
    "nvlink_down": ("node", "links"),
    "port_flap": ("nic", "per_hour"),
    # a kernel-log event: whether it drains depends on the catalogue's severity for the number
    "xid": ("node", "xid"),
    # silent misconfiguration (docs/config-checks.md): nothing breaks, the job runs wrong
    "transport_fallback": ("node", "to"),
    "acs_enabled": ("node",),
    "numa_misaligned": ("node",),
    "pfc_disabled": ("nic",),
    "gid_mismatch": ("nic",),
    "mtu_mismatch": ("nic", "mtu"),
    "firmware_drift": ("nic", "version"),
    # NVLink domains (docs/nvl72.md; names checked by fabriccheck.faults_nvl)
    "nvlink_port_down": ("node", "gpu", "port"),
    "nvswitch_down": ("rack", "tray"),
    "imex_missing": ("node",),
    "clique_mismatch": ("node",),
    "nvlink_degraded": ("node", "gpu", "factor"),
    "fabric_unregistered": ("node",),
}
NIC_KINDS = ("nic_degraded", "nic_down")
NODE_KINDS = ("node_slow", "gpu_link_degraded", "node_hang", "node_unreachable")
LINK_KINDS = ("link_degraded", "link_down", "link_flapping")
#: node-local faults the preflight finds: a node's GPUs, a NIC's PCIe link or port counters
PREFLIGHT_NODE_KINDS = ("gpu_missing", "gpu_throttle", "row_remap_pending", "nvlink_down")
PREFLIGHT_NIC_KINDS = ("pcie_downtrained", "port_errors")
#: NIC faults the preflight lists as warnings, never drains: a flapping port shows as a link-down
#: rate since boot (a lifetime count may be old: docs/node-checks.md), drifted firmware
WARN_NIC_KINDS = ("port_flap", "firmware_drift")
#: misconfigurations that make a job run wrong (a fault: drained); firmware_drift is a warning
CONFIG_NODE_KINDS = ("transport_fallback", "acs_enabled", "numa_misaligned")
CONFIG_NIC_KINDS = ("pfc_disabled", "gid_mismatch", "mtu_mismatch")
#: NVLink-domain faults (:mod:`fabriccheck.faults_nvl`); the tray itself is at fault in these
NVL_NODE_KINDS = ("nvlink_port_down", "imex_missing", "clique_mismatch", "nvlink_degraded",
                  "fabric_unregistered")
NVL_KINDS = (*NVL_NODE_KINDS, "nvswitch_down")


@dataclass(frozen=True)
class Noise:
    """Measurement noise: ``jitter`` is the relative std-dev of every measurement,
    ``glitch_rate`` the chance that one test is spuriously low (transient: a retest passes),
    ``background`` whether healthy nodes' preflight outputs carry real-world harmless oddities
    (``default``) or are spotless (``none``)."""

    jitter: float = 0.0
    glitch_rate: float = 0.0
    background: str = "default"


@dataclass(frozen=True)
class Fault:
    """One injected fault. Only the fields of its ``kind`` (see :data:`KINDS`) are set."""

    kind: str
    nic: str | None = None
    node: str | None = None
    link: LinkKey | None = None
    factor: float | None = None
    probability: float | None = None
    width: int | None = None
    rate: float | None = None
    reason: str | None = None
    links: int | None = None
    per_hour: float | None = None
    xid: int | None = None
    to: str | None = None
    mtu: int | None = None
    version: str | None = None
    gpu: int | None = None
    port: int | None = None
    rack: str | None = None
    tray: int | None = None

    @property
    def target(self) -> str | LinkKey:
        """The component the fault sits on: a NIC endpoint, a node, a link key or an NVSwitch
        tray (``rack-0-nvsw-3``)."""
        if self.rack is not None:
            return f"{self.rack}-nvsw-{self.tray}"
        return self.nic or self.node or self.link  # type: ignore[return-value]


@dataclass(frozen=True)
class FaultSet:
    """Noise plus the list of injected faults; ``source`` names the file it came from."""

    noise: Noise = Noise()
    faults: tuple[Fault, ...] = ()
    source: str = ""

    # ---- loading ---------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, *, source: str = "<faults>") -> FaultSet:
        """Build a fault set from the parsed faults-file mapping (validates field shapes).

        Parameters
        ----------
        data : mapping or None
            ``{"noise": {...}, "faults": [...]}``; None or ``{}`` means no noise and no faults.
        source : str
            Where the data came from, for error messages.

        Examples
        --------
        >>> fs = FaultSet.from_dict({"faults": [{"kind": "node_hang", "node": "node-003"}]})
        >>> fs.hung_nodes()
        ('node-003',)
        """
        if data is None:
            return cls(source=source)
        from fabriccheck.schema.base import check
        from fabriccheck.schema.faults import FaultsFile

        model = check(FaultsFile, data, source=source)
        noise = Noise(jitter=model.noise.jitter, glitch_rate=model.noise.glitch_rate,
                      background=model.noise.background)
        faults = tuple(_fault(f) for f in model.faults)
        return cls(noise=noise, faults=faults, source=source)

    def to_dict(self) -> dict[str, Any]:
        """The faults-file mapping (inverse of :meth:`from_dict`; links as ``[a, b]`` lists).

        >>> FaultSet.from_dict({"faults": [{"kind": "link_down", "link": ["s", "l"]}]}).to_dict()
        {'noise': {'jitter': 0.0, 'glitch_rate': 0.0, 'background': 'default'}, \
'faults': [{'kind': 'link_down', 'link': ['l', 's']}]}
        """
        faults = []
        for f in self.faults:
            item: dict[str, Any] = {"kind": f.kind}
            for name in KINDS[f.kind]:
                value = getattr(f, name)
                item[name] = list(value) if name == "link" else value
            faults.append(item)
        noise = {"jitter": self.noise.jitter, "glitch_rate": self.noise.glitch_rate,
                 "background": self.noise.background}
        return {"noise": noise, "faults": faults}

    # ---- checks ----------------------------------------------------------------------------
    def validate(self, topology: Topology) -> FaultSet:
        """Check that every node, NIC and link named exists in ``topology``; return self.

        Raises
        ------
        ConfigError
            On the first unknown name, naming the file and the field (``faults[3].nic``).
        """
        for i, f in enumerate(self.faults):
            if f.nic is not None and f.nic not in topology.nics:
                node = nic_node(f.nic)
                hint = (
                    f"{node} has NICs {', '.join(n.name for n in topology.nodes[node].nics)}"
                    if node in topology.nodes
                    else "write a NIC as node/nic, e.g. node-001/mlx5_0"
                )
                raise ConfigError(f"unknown NIC {f.nic!r}", source=self.source,
                                  field=f"faults[{i}].nic", hint=hint)
            if f.node is not None and f.node not in topology.nodes:
                raise ConfigError(f"unknown node {f.node!r}", source=self.source,
                                  field=f"faults[{i}].node",
                                  hint="use a node name from the topology (topology show)")
            if f.link is not None and f.link not in topology.links:
                raise ConfigError(f"no link between {f.link[0]!r} and {f.link[1]!r}",
                                  source=self.source, field=f"faults[{i}].link",
                                  hint="name a link as [a, b] with both ends from the topology")
            if f.kind in NVL_KINDS:
                from fabriccheck.faults_nvl import validate_nvl

                validate_nvl(f, i, topology, self.source)
        return self

    # ---- queries ---------------------------------------------------------------------------
    def of_kind(self, *kinds: str) -> tuple[Fault, ...]:
        return tuple(f for f in self.faults if f.kind in kinds)

    def __bool__(self) -> bool:
        return bool(self.faults) or self.noise != Noise()

    # ---- ground truth (what a perfect tool would report) -------------------------------------
    def bad_nodes(self) -> tuple[str, ...]:
        """Nodes that are bad themselves: ``node_slow``, ``gpu_link_degraded``, ``node_hang``,
        ``gpu_missing``, ``gpu_throttle``, ``row_remap_pending``, ``nvlink_down`` and the node
        misconfigurations (``transport_fallback``, ``acs_enabled``, ``numa_misaligned``). Not
        ``xid``: whether a Xid drains depends on its number (see :meth:`xids`)."""
        return _sorted(f.node for f in self.of_kind("node_slow", "gpu_link_degraded", "node_hang",
                                                    *PREFLIGHT_NODE_KINDS, *CONFIG_NODE_KINDS))

    def bad_nics(self) -> tuple[str, ...]:
        """NIC endpoints with ``nic_degraded``, ``nic_down``, ``pcie_downtrained``,
        ``port_errors``, ``pfc_disabled``, ``gid_mismatch`` or ``mtu_mismatch`` (``port_flap`` and
        ``firmware_drift`` are warnings: see :meth:`warned_nics`)."""
        return _sorted(f.nic for f in self.of_kind(*NIC_KINDS, *PREFLIGHT_NIC_KINDS,
                                                   *CONFIG_NIC_KINDS))

    def bad_links(self) -> tuple[LinkKey, ...]:
        """Links with ``link_degraded``, ``link_down`` or ``link_flapping``."""
        return tuple(sorted({f.link for f in self.of_kind(*LINK_KINDS) if f.link}))

    def warned_nics(self) -> tuple[str, ...]:
        """NIC endpoints with ``port_flap`` or ``firmware_drift``: listed as warnings on that NIC,
        never drained."""
        return _sorted(f.nic for f in self.of_kind(*WARN_NIC_KINDS))

    def xids(self) -> dict[str, list[int]]:
        """The Xid numbers injected per node (``xid`` faults, in file order; ``gpu_missing``'s
        Xid 79 is not listed: that node is bad anyway). Whether one drains its node is the
        caller's judgement (the catalogue's severity for that number).

        >>> FaultSet.from_dict({"faults": [{"kind": "xid", "node": "n2", "xid": 13},
        ...                                {"kind": "xid", "node": "n1", "xid": 79}]}).xids()
        {'n1': [79], 'n2': [13]}
        """
        out: dict[str, list[int]] = {}
        for f in self.of_kind("xid"):
            out.setdefault(f.node or "", []).append(int(f.xid or 0))
        return dict(sorted(out.items()))

    def hung_nodes(self) -> tuple[str, ...]:
        return _sorted(f.node for f in self.of_kind("node_hang"))

    def unreachable_nodes(self) -> tuple[str, ...]:
        return _sorted(f.node for f in self.of_kind("node_unreachable"))

    def drain_nodes(self) -> tuple[str, ...]:
        """Nodes that should not run jobs: bad nodes and nodes with a bad NIC (not unreachable)."""
        return _sorted([*self.bad_nodes(), *(nic_node(n) for n in self.bad_nics())])


def load_faults(path: str | Path) -> FaultSet:
    """Read and shape-check a faults file (YAML). Check names with :meth:`FaultSet.validate`.

    Raises
    ------
    ConfigError
        Missing file, bad YAML, unknown kind or field, bad value.
    """
    from fabriccheck.schema.yamlio import read_yaml

    return FaultSet.from_dict(read_yaml(path, what="faults file"), source=str(path))


# ---- helpers -------------------------------------------------------------------------------
def _sorted(items: Iterable[str | None]) -> tuple[str, ...]:
    return tuple(sorted({i for i in items if i}))


def _fault(model: Any) -> Fault:
    """A validated fault model (:mod:`fabriccheck.schema.faults`) -> a :class:`Fault`."""
    fields = {name: getattr(model, name) for name in KINDS[model.kind]}
    if "link" in fields:
        fields["link"] = link_key(*fields["link"])
    return Fault(kind=model.kind, **fields)
