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
from pathlib import Path

from fabriccheck.errors import ConfigError, ParseError
from fabriccheck.topology.discovery.common import FabricBuild, read_bounded
from fabriccheck.topology.discovery.ibnet_parse import (
    LANE_GBPS,
    IbCable,
    IbDevice,
    IbFabric,
    IbParseError,
    clean_switch_name,
    link_gbps,
    parse_ibnetdiscover,
)

__all__ = ["LANE_GBPS", "IbCable", "IbDevice", "IbFabric", "fabric_to_topology_build",
           "import_ibnetdiscover", "link_gbps", "parse_ibnetdiscover"]

AGGREGATION = "Aggregation Node"


# ---- fabric -> topology ---------------------------------------------------------------------
_HOST_NIC = re.compile(r"^(\S+)\s+((?:mlx\d+_|HCA-|hfi\d+_|qib|ibp|ib)\S*)$")


_clean = clean_switch_name


def fabric_to_topology_build(fabric: IbFabric, *, name: str,
                             gpus_per_node: int | None = None) -> FabricBuild:
    """Turn a parsed fabric into a :class:`FabricBuild` (nodes, switches, merged links).

    A cable between two ports of one switch (a loopback plug, or a port cabled to itself) is
    no link of the fabric: it is kept as a warning naming the switch, ports and line.
    """
    build = FabricBuild(name=name, fabric="infiniband", gpus_per_node=gpus_per_node)
    for note in fabric.notes:
        build.warn(note)
    devices = fabric.devices
    skipped = {d.id for d in devices.values() if d.kind == "ca" and AGGREGATION in d.desc}
    if skipped:
        build.warn(f"skipped {len(skipped)} SHARP aggregation node(s)")
    switch_names = _switch_names([d for d in devices.values() if d.kind == "switch"])
    for sw in switch_names.values():
        build.switches[sw] = None
    ca_ports: dict[str, set[int]] = {}
    for c in fabric.cables:
        for dev, port in ((c.a, c.a_port), (c.b, c.b_port)):
            if devices.get(dev) and devices[dev].kind == "ca" and dev not in skipped:
                ca_ports.setdefault(dev, set()).add(port)
    generic: set[str] = set()
    for c in fabric.cables:
        if c.a in skipped or c.b in skipped:
            continue
        if c.a == c.b:
            what = switch_names.get(c.a) or devices[c.a].desc
            build.warn(f"line {c.line}: loopback cable on {what} (port {c.a_port} to port "
                       f"{c.b_port}); kept as a warning, not a link")
            continue
        ends = [switch_names[dev] if devices[dev].kind == "switch" else
                _nic_end(build, devices[dev], port, len(ca_ports[dev]) > 1, generic)
                for dev, port in ((c.a, c.a_port), (c.b, c.b_port))]
        if c.gbps is None:
            build.warn(f"line {c.line}: cable {ends[0]} - {ends[1]} has no known speed; "
                       "assumed the most common")
        build.cable(ends[0], ends[1], c.gbps, (c.a_port, c.b_port))
    if generic:
        build.warn(f"{len(generic)} CA(s) have a generic description; named ca-<system GUID>")
    return build


def _nic_end(build: FabricBuild, d: IbDevice, port: int, multi: bool, generic: set[str]) -> str:
    """``host/nic`` of a CA port: host and NIC from ``"host mlx5_0"`` descriptions, else
    ``ca-<system GUID>/hca``; ``-p<port>`` when several ports of the CA are cabled."""
    m = _HOST_NIC.match(d.desc)
    if m:
        host, nic = m.group(1), m.group(2)
    else:
        guid = (d.sysimgguid or d.id).removeprefix("H-").removeprefix("0x")
        host, nic = f"ca-{guid}", "hca"
        generic.add(d.id)
    if multi:
        nic = f"{nic}-p{port}"
    return build.nic(host, nic)


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
    gpus_per_node: int | None = None,
) -> tuple[str, list[str]]:
    """Read an ibnetdiscover file and return (explicit-form topology YAML, warnings).

    ``gpus_per_node`` is written for every node when given; otherwise the GPU count is
    unknown (ibnetdiscover cannot see GPUs) and written as 0.

    Raises
    ------
    ConfigError
        The file cannot be read, is not (complete) ibnetdiscover output, has no switches, or
        does not make a valid fabric; the message names the file and, where one is to blame,
        the line.
    """
    source = str(path)
    text = read_bounded(Path(path))
    if not text.strip():
        raise ConfigError("empty file", source=source,
                          hint="save the output of 'ibnetdiscover' (or 'ibnetdiscover -p') in it")
    try:
        fabric = parse_ibnetdiscover(text)
    except IbParseError as exc:
        where = f"{source}:{exc.line}" if exc.line else source
        raise ConfigError(exc.detail, source=where, hint=exc.hint) from exc
    except ParseError as exc:
        raise ConfigError(exc.message, source=source, hint=exc.hint) from exc
    if not any(d.kind == "switch" for d in fabric.devices.values()):
        cas = sorted(d.desc for d in fabric.devices.values())
        raise ConfigError(
            f"no switches: the output shows only {len(cas)} CA(s) ({', '.join(cas[:3])})",
            source=source,
            hint="run ibnetdiscover on a host cabled to the fabric (is the port up?)",
        )
    build = fabric_to_topology_build(fabric, name=name or Path(path).stem,
                                     gpus_per_node=gpus_per_node)
    header = [
        f"imported from {Path(path).name} ({fabric.format} format) by fabriccheck topology import",
        "switch tiers from the graph: hop distance from the hosts (1 leaf, 2 spine, 3+ core)",
    ]
    return build.to_yaml(source=source, spec=spec, header=header,
                         largest_component=largest_component)
