"""Importing an InfiniBand fabric from ``ibnetdiscover`` output (plain topology or ``-p`` ports).

The parser (:func:`parse_ibnetdiscover`) reads devices and cables as printed; the builder
(:func:`fabric_to_topology`) turns them into a :class:`Topology`: SHARP aggregation nodes are
skipped, host names come from CA node descriptions (``"a08-p1-dgx-04-c01 mlx5_5"``), CAs with a
generic description (``"MT4129 ConnectX7 Mellanox Technologies"``) become nodes named after
their system GUID, parallel cables are merged (``count``, summed ``gbps``), switch tiers are
inferred from the graph (switches with hosts are leaves, then spine/core by distance).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from fabriccheck.errors import ConfigError, ParseError
from fabriccheck.topology.discovery.common import FabricBuild

#: Gb/s per lane by InfiniBand speed name (signalling rate, as vendors quote port speeds)
LANE_GBPS = {
    "SDR": 2.5, "DDR": 5.0, "QDR": 10.0, "FDR10": 10.0, "FDR": 14.0, "EDR": 25.0, "HDR": 50.0,
    "NDR": 100.0, "XDR": 200.0,
}
_NODE = re.compile(r'^(Switch|Ca|Rt)\s+(\d+)\s+"([^"]+)"\s*(?:#\s*"([^"]*)")?')
_PORT = re.compile(
    r'^\[(\d+)\](?:\([0-9a-fA-F]+\))?\s+"([^"]+)"\[(\d+)\](?:\([0-9a-fA-F]+\))?\s*(?:#\s*(.*))?$'
)
_SPEED = re.compile(r"\b(\d+)x\s*([A-Z0-9]+)\s*$")
_PPORT = re.compile(
    r"^(CA|SW)\s+\d+\s+(\d+)\s+(0x[0-9a-fA-F]+)\s+(\d+)x\s*(\S+)\s+-\s+(CA|SW)\s+\d+\s+(\d+)\s+"
    r"(0x[0-9a-fA-F]+)\s+\(\s*'(.*)'\s+-\s+'(.*)'\s*\)\s*$"
)
_PPORT_UNLINKED = re.compile(r"^(CA|SW)\s+\d+\s+\d+\s+(0x[0-9a-fA-F]+)\s+\d+x\s*\S+\s+'(.*)'\s*$")
AGGREGATION = "Aggregation Node"


@dataclass
class IbDevice:
    """A switch or CA as ibnetdiscover names it (``id`` is its quoted id or GUID)."""

    id: str
    kind: str  # switch | ca
    desc: str
    sysimgguid: str = ""


@dataclass
class IbCable:
    """One cable: device ids and port numbers of both ends, and its speed."""

    a: str
    a_port: int
    b: str
    b_port: int
    gbps: float | None


@dataclass
class IbFabric:
    """What an ibnetdiscover file says: devices by id and cables (each listed once)."""

    devices: dict[str, IbDevice] = field(default_factory=dict)
    cables: list[IbCable] = field(default_factory=list)
    format: str = "topology"

    def add_cable(self, cable: IbCable, seen: set) -> None:
        key = tuple(sorted(((cable.a, cable.a_port), (cable.b, cable.b_port))))
        if key not in seen:
            seen.add(key)
            self.cables.append(cable)


def link_gbps(width: str, speed: str) -> float | None:
    """Cable speed from ``4x`` + ``NDR`` (None when unknown, e.g. ``???``).

    >>> link_gbps("4", "NDR"), link_gbps("4", "QDR"), link_gbps("4", "???")
    (400.0, 40.0, None)
    """
    lane = LANE_GBPS.get(speed.upper())
    return None if lane is None else int(width) * lane


def parse_ibnetdiscover(text: str) -> IbFabric:
    """Parse ``ibnetdiscover`` output, plain or ``-p`` (ports) format.

    Raises
    ------
    ParseError
        The text holds no device at all.
    """
    lines = [ln.rstrip() for ln in text.splitlines()]
    if any(_PPORT.match(ln) or _PPORT_UNLINKED.match(ln) for ln in lines[:50]):
        fabric = _parse_ports(lines)
    else:
        fabric = _parse_topology(lines)
    if not fabric.devices:
        raise ParseError(
            "no Switch or Ca records found", tool="ibnetdiscover", excerpt=text[:200],
            hint="give the output of 'ibnetdiscover' or 'ibnetdiscover -p'",
        )
    return fabric


def _parse_topology(lines: list[str]) -> IbFabric:
    fabric = IbFabric(format="topology")
    seen: set = set()
    current: IbDevice | None = None
    sysimg = ""
    for line in lines:
        if line.startswith("sysimgguid="):
            sysimg = line.split("=", 1)[1].strip().removeprefix("0x")
            continue
        m = _NODE.match(line)
        if m:
            kind = "switch" if m.group(1) == "Switch" else "ca"
            current = IbDevice(m.group(3), kind, (m.group(4) or m.group(3)).strip(), sysimg)
            fabric.devices[current.id] = current
            sysimg = ""
            continue
        m = _PORT.match(line)
        if m and current is not None:
            comment = m.group(4) or ""
            speed = _SPEED.search(comment)
            gbps = link_gbps(speed.group(1), speed.group(2)) if speed else None
            cable = IbCable(current.id, int(m.group(1)), m.group(2), int(m.group(3)), gbps)
            fabric.add_cable(cable, seen)
    return fabric


def _parse_ports(lines: list[str]) -> IbFabric:
    fabric = IbFabric(format="ports")
    seen: set = set()
    for line in lines:
        m = _PPORT.match(line)
        if m:
            ends = ((m.group(1), m.group(3), m.group(9)), (m.group(6), m.group(8), m.group(10)))
            for kind, guid, desc in ends:
                fabric.devices.setdefault(
                    guid, IbDevice(guid, "switch" if kind == "SW" else "ca", desc.strip())
                )
            gbps = link_gbps(m.group(4), m.group(5))
            cable = IbCable(m.group(3), int(m.group(2)), m.group(8), int(m.group(7)), gbps)
            fabric.add_cable(cable, seen)
            continue
        m = _PPORT_UNLINKED.match(line)
        if m:
            kind = "switch" if m.group(1) == "SW" else "ca"
            fabric.devices.setdefault(m.group(2), IbDevice(m.group(2), kind, m.group(3).strip()))
    return fabric


# ---- fabric -> topology ---------------------------------------------------------------------
_HOST_NIC = re.compile(r"^(\S+)\s+((?:mlx\d+_|HCA-|hfi\d+_|qib|ibp|ib)\S*)$")


def _clean(name: str) -> str:
    """A usable name: ``MF0;A09-P1-IBLEAF-04-04:MQM9701/U1`` -> ``A09-P1-IBLEAF-04-04``."""
    name = name.strip()
    if name.startswith("MF0;"):
        name = name[4:].split(":", 1)[0]
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "switch"


def fabric_to_topology_build(fabric: IbFabric, *, name: str) -> FabricBuild:
    """Turn a parsed fabric into a :class:`FabricBuild` (nodes, switches, merged links)."""
    build = FabricBuild(name=name, fabric="infiniband")
    devices = fabric.devices
    skipped = {d.id for d in devices.values() if d.kind == "ca" and AGGREGATION in d.desc}
    if skipped:
        build.warn(f"skipped {len(skipped)} SHARP aggregation node(s)")
    switch_names = _switch_names([d for d in devices.values() if d.kind == "switch"])
    for sw in switch_names.values():
        build.switches[sw] = None
    ca_ports: dict[str, list[int]] = {}
    for c in fabric.cables:
        for dev, port in ((c.a, c.a_port), (c.b, c.b_port)):
            if devices.get(dev) and devices[dev].kind == "ca" and dev not in skipped:
                ca_ports.setdefault(dev, []).append(port)
    generic = 0
    for c in fabric.cables:
        if c.a in skipped or c.b in skipped:
            continue
        ends = []
        for dev, port in ((c.a, c.a_port), (c.b, c.b_port)):
            d = devices.get(dev)
            if d is None:
                raise ConfigError(
                    f"cable to unknown device {dev!r} (port {port})", field="cables",
                    source=name, hint="is the ibnetdiscover output truncated?",
                )
            if d.kind == "switch":
                ends.append(switch_names[dev])
                continue
            m = _HOST_NIC.match(d.desc)
            if m:
                host, nic = m.group(1), m.group(2)
            else:
                guid = (d.sysimgguid or dev).removeprefix("H-").removeprefix("0x")
                host, nic = f"ca-{guid}", "hca"
                generic += 1
            if len(ca_ports[dev]) > 1:
                nic = f"{nic}-p{port}"
            ends.append(build.nic(host, nic))
        if c.gbps is None:
            build.warn(f"cable {ends[0]} - {ends[1]} has no known speed; assumed the most common")
        build.cable(ends[0], ends[1], c.gbps)
    if generic:
        build.warn(f"{generic} CA port(s) have a generic description; named ca-<system GUID>")
    return build


def _switch_names(switches: list[IbDevice]) -> dict[str, str]:
    """Device id -> unique, slash-free switch name (GUID suffix when descriptions repeat)."""
    names = {d.id: _clean(d.desc) for d in switches}
    counts: dict[str, int] = {}
    for n in names.values():
        counts[n] = counts.get(n, 0) + 1
    return {
        dev: (n if counts[n] == 1 else f"{n}-{dev.removeprefix('S-').removeprefix('0x')[-6:]}")
        for dev, n in names.items()
    }


def import_ibnetdiscover(
    path: str | Path,
    *,
    name: str | None = None,
    spec: str | None = None,
    largest_component: bool = False,
) -> tuple[str, list[str]]:
    """Read an ibnetdiscover file and return (explicit-form topology YAML, warnings).

    Raises
    ------
    ConfigError
        The file cannot be read, has no switches, or does not make a valid fabric.
    ParseError
        The file is not ibnetdiscover output.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror}", source=source) from exc
    fabric = parse_ibnetdiscover(text)
    if not any(d.kind == "switch" for d in fabric.devices.values()):
        cas = sorted(d.desc for d in fabric.devices.values())
        raise ConfigError(
            f"no switches: the output shows only {len(cas)} CA(s) ({', '.join(cas[:3])})",
            source=source,
            hint="run ibnetdiscover on a host cabled to the fabric (is the port up?)",
        )
    build = fabric_to_topology_build(fabric, name=name or Path(path).stem)
    header = [
        f"imported from {Path(path).name} ({fabric.format} format) by fabriccheck topology import",
        "switch tiers inferred: switches with hosts = leaf, then spine/core by distance",
    ]
    return build.to_yaml(source=source, spec=spec, header=header,
                         largest_component=largest_component)
