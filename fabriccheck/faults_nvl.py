"""NVLink-domain faults (docs/nvl72.md): their names checked against the topology's domains, and
the model values the domain level reads (each GPU's NVLink bandwidth, trays cut off the domain).

The kinds (:data:`fabriccheck.faults.NVL_KINDS`): ``nvlink_port_down {node, gpu, port}``,
``nvswitch_down {rack, tray}``, ``imex_missing {node}``, ``clique_mismatch {node}``,
``nvlink_degraded {node, gpu, factor}``, ``fabric_unregistered {node}``. How each shows in
the node-local tools is the simulator's (``executors/sim/nvl_world.py``); what a perfect tool
would report is :func:`nvl_truth`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from fabriccheck.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from fabriccheck.topology.model import Topology
    from fabriccheck.topology.nvlink import NvlDomain



class Fault(Protocol):
    """The fields of :class:`fabriccheck.faults.Fault` read here (a protocol, so this module
    does not import the one that calls it)."""

    @property
    def kind(self) -> str: ...
    @property
    def node(self) -> str | None: ...
    @property
    def gpu(self) -> int | None: ...
    @property
    def port(self) -> int | None: ...
    @property
    def rack(self) -> str | None: ...
    @property
    def tray(self) -> int | None: ...
    @property
    def factor(self) -> float | None: ...
    @property
    def target(self) -> object: ...


__all__ = ["cut_off_trays", "dead_ports", "nvl_truth", "nvlink_bandwidth", "validate_nvl"]


def validate_nvl(f: Fault, i: int, topology: Topology, source: str) -> None:
    """Check an NVLink fault's names against ``topology``'s domains.

    Raises
    ------
    ConfigError
        ``faults[i].<field>``: a node in no domain, a GPU or port beyond the tray's, an unknown
        rack or switch tray; the hint says what exists.
    """
    def error(field: str, message: str, hint: str) -> ConfigError:
        return ConfigError(message, source=source, field=f"faults[{i}].{field}", hint=hint)

    if not topology.domains:
        field = "rack" if f.rack is not None else "node"
        raise error(field, f"{f.kind} needs NVLink domains; topology {topology.name!r} has none",
                    "use a topology with nvlink_domains, e.g. gb200-nvl72-8 (docs/nvl72.md)")
    if f.rack is not None:
        d = topology.domains.get(f.rack)
        if d is None:
            raise error("rack", f"unknown NVLink domain {f.rack!r}",
                        "one of: " + ", ".join(sorted(topology.domains)[:8]))
        if not 0 <= int(f.tray or 0) < d.switch_trays:
            raise error("tray", f"{f.rack} has no NVSwitch tray {f.tray}",
                        f"0 to {d.switch_trays - 1}")
        return
    d = topology.domain_of(str(f.node))
    if d is None:
        raise error("node", f"{f.node} is a tray of no NVLink domain",
                    "name a compute tray of a domain (topology show --json: nvlink_domains)")
    if f.gpu is not None and not 0 <= f.gpu < d.gpus_per_tray:
        raise error("gpu", f"{f.node} has no GPU {f.gpu}", f"0 to {d.gpus_per_tray - 1}")
    if f.port is not None and not 0 <= f.port < d.ports_per_gpu:
        raise error("port", f"a GPU of {d.name} has no NVLink port {f.port}",
                    f"0 to {d.ports_per_gpu - 1}")


def dead_ports(faults: Iterable[Fault], topology: Topology) -> dict[tuple[str, int], set[int]]:
    """(tray, GPU) -> its NVLink ports that carry nothing: ``nvlink_port_down`` on it, and the
    ports wired to a downed NVSwitch tray on every GPU of that rack."""
    out: dict[tuple[str, int], set[int]] = {}
    for f in faults:
        if f.kind == "nvlink_port_down":
            out.setdefault((str(f.node), int(f.gpu or 0)), set()).add(int(f.port or 0))
        elif f.kind == "nvswitch_down" and f.rack in topology.domains:
            d = topology.domains[f.rack]
            ports = d.ports_of_switch_tray(int(f.tray or 0))
            for tray in d.trays:
                for g in range(d.gpus_per_tray):
                    out.setdefault((tray, g), set()).update(ports)
    return out


def nvlink_bandwidth(faults: Iterable[Fault], topology: Topology) -> dict[tuple[str, int], float]:
    """Each GPU's NVLink bandwidth as a share of its healthy bandwidth, for the GPUs below 1:
    the live share of its ports (a down port or switch tray takes its ports) times every
    ``nvlink_degraded`` factor on it. The domain level's model value (not yet a ladder level).

    >>> from fabriccheck.faults import FaultSet
    >>> from fabriccheck.topology.generators import generate
    >>> t = generate({"kind": "nvl72", "racks": 1}, name="t", fabric="infiniband")
    >>> fs = FaultSet.from_dict({"faults": [
    ...     {"kind": "nvlink_degraded", "node": "node-002", "gpu": 1, "factor": 0.5},
    ...     {"kind": "nvlink_port_down", "node": "node-002", "gpu": 1, "port": 3}]})
    >>> round(nvlink_bandwidth(fs.faults, t)[("node-002", 1)], 4)
    0.4722
    """
    faults = tuple(faults)
    out: dict[tuple[str, int], float] = {}
    for (tray, gpu), ports in dead_ports(faults, topology).items():
        d = topology.domain_of(tray)
        total = d.ports_per_gpu if d is not None else 18
        out[(tray, gpu)] = max(0.0, (total - len(ports)) / total)
    for f in faults:
        if f.kind == "nvlink_degraded":
            key = (str(f.node), int(f.gpu or 0))
            out[key] = out.get(key, 1.0) * float(f.factor or 1.0)
    return {k: v for k, v in sorted(out.items()) if v < 1.0}


def cut_off_trays(faults: Iterable[Fault]) -> tuple[str, ...]:
    """Trays that cannot share NVLink memory with the rest of their domain: ``imex_missing`` (no
    IMEX daemon to import and export it), ``clique_mismatch`` (another clique) and
    ``fabric_unregistered`` (the fabric manager never configured its GPUs)."""
    return tuple(sorted({str(f.node) for f in faults if f.kind in (
        "imex_missing", "clique_mismatch", "fabric_unregistered")}))


def nvl_truth(faults: Iterable[Fault], topology: Topology) -> dict[str, list]:
    """What a perfect tool would report for the NVLink faults: ``trays`` at fault (port down,
    IMEX, clique, degraded GPU, unregistered), ``switch_trays`` (``rack-0-nvsw-3``), ``ports``
    (``node/gpuG/nvlP`` with the chip it goes to) and ``gpus`` (``node/gpuG``, degraded)."""
    faults = tuple(faults)
    trays = sorted({str(f.node) for f in faults if f.kind in (
        "nvlink_port_down", "imex_missing", "clique_mismatch", "nvlink_degraded",
        "fabric_unregistered")})
    switches = sorted({str(f.target) for f in faults if f.kind == "nvswitch_down"})
    ports = []
    for f in faults:
        if f.kind == "nvlink_port_down":
            d: NvlDomain | None = topology.domain_of(str(f.node))
            chip = d.chip_name(int(f.port or 0) % d.chips) if d is not None else "?"
            ports.append(f"{f.node}/gpu{f.gpu}/nvl{f.port} -> {chip}")
    gpus = sorted({f"{f.node}/gpu{f.gpu}" for f in faults if f.kind == "nvlink_degraded"})
    return {"trays": trays, "switch_trays": switches, "ports": sorted(ports), "gpus": gpus}
