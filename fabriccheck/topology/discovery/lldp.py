"""Importing a RoCE fabric from per-host LLDP neighbour tables (lldpcli / lldpctl output).

Reads ``lldpcli show neighbors -f json0`` (lists everywhere), ``lldpctl -f json`` (keyed by
interface and system name) and the plain ``lldpcli show neighbors`` text. Each file is one host:
its name is the file stem, or the local chassis name when the file carries ``local-chassis``.
A NIC is the local interface, a switch the neighbour's SysName. Hosts cannot see switch-to-switch
cables, so spines come from ``spines=N`` (each cabled to every leaf) or an uplinks file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabriccheck.errors import ConfigError, ParseError
from fabriccheck.topology.discovery.common import FabricBuild, read_bounded
from fabriccheck.topology.fields import Fields, join, read_yaml


@dataclass(frozen=True)
class Neighbor:
    """One LLDP neighbour seen on a local interface."""

    interface: str
    sysname: str  # the neighbour's SysName, or ``sw-<chassis id>`` when it sends none
    port_id: str = ""
    port_id_type: str = ""
    chassis_id: str = field(default="", compare=False)  # what identifies the switch


@dataclass
class LldpHost:
    """What one host's LLDP table says: its own name when known, and its neighbours."""

    local: str | None = None
    neighbors: list[Neighbor] = field(default_factory=list)


def _first(value: Any, key: str = "value") -> Any:
    """json0 wraps every value in a list of dicts; the keyed format does not."""
    while isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, dict) and key in value and len(value) <= 2:
        return value[key]
    return value


def _text(value: Any) -> str:
    """A JSON scalar as text ("" for anything else: lists, objects, null, booleans)."""
    return str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) \
        else ""


def _dict0(value: Any) -> dict:
    """The first dict of a json0 list, or the dict itself, else an empty one."""
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, dict) else {}


def _neighbor_json(iface: str, body: dict) -> Neighbor | None:
    chassis = body.get("chassis")
    sysname, chassis_id = "", ""
    if isinstance(chassis, list):  # json0
        ch = _dict0(chassis)
        sysname, chassis_id = _text(_first(ch.get("name"))), _text(_first(ch.get("id")))
    elif isinstance(chassis, dict):  # keyed: {"<sysname>": {...}} or {"id": ...} when unnamed
        key, inner = next(iter(chassis.items()), ("", None))
        if len(chassis) == 1 and key != "id" and isinstance(inner, dict):
            sysname, chassis_id = key, _text(_first(inner.get("id")))
        else:
            chassis_id = _text(_first(chassis.get("id")))
    port_id = _dict0(_dict0(body.get("port")).get("id"))
    name = sysname or (f"sw-{chassis_id}" if chassis_id else "")
    if not name:
        return None
    return Neighbor(iface, name, _text(port_id.get("value")), _text(port_id.get("type")),
                    chassis_id)


def _local_name(data: dict) -> str | None:
    chassis = _dict0(data.get("local-chassis")).get("chassis")
    if isinstance(chassis, list):
        return _text(_first(_dict0(chassis).get("name"))) or None
    if isinstance(chassis, dict) and len(chassis) == 1:
        return next(iter(chassis))
    return None


def text_lines_kept(text: str) -> str:
    """``text`` with ``#`` comment lines blanked (line numbers unchanged)."""
    return "\n".join("" if ln.lstrip().startswith("#") else ln for ln in text.splitlines())


def parse_lldp(text: str) -> LldpHost:
    """Parse one host's LLDP neighbours (json0, keyed json, or plain ``lldpcli`` text).

    Raises
    ------
    ParseError
        Not LLDP output.
    """
    kept = text_lines_kept(text)  # so JSON error line numbers are the file's
    body = kept.strip()
    if body.startswith("{"):
        try:
            data = json.loads(kept)
        except json.JSONDecodeError as exc:
            cut = " (cut short?)" if exc.pos >= len(kept.rstrip()) - 1 else ""
            raise ParseError(f"line {exc.lineno}: invalid JSON: {exc.msg}{cut}", tool="lldp",
                             excerpt=body) from exc
        return _parse_json(data, body)
    if "Interface:" in body:
        return _parse_plain(body)
    raise ParseError(
        "not LLDP neighbour output", tool="lldp", excerpt=body,
        hint="use 'lldpcli show neighbors -f json0' or 'lldpctl -f json'",
    )


def _parse_json(data: Any, body: str) -> LldpHost:
    host = LldpHost(local=_local_name(data) if isinstance(data, dict) else None)
    lldp = data.get("lldp") if isinstance(data, dict) else None
    if isinstance(lldp, list):
        lldp = lldp[0] if lldp else {}
    if not isinstance(lldp, dict):
        if host.local:
            return host
        raise ParseError("no 'lldp' section", tool="lldp", excerpt=body)
    ifaces = lldp.get("interface") or []
    if isinstance(ifaces, dict):
        ifaces = [ifaces]
    for item in ifaces if isinstance(ifaces, list) else []:
        if not isinstance(item, dict):
            continue
        if "name" in item and isinstance(item.get("name"), str):  # json0
            pairs = [(item["name"], item)]
        else:  # keyed
            pairs = [(k, v) for k, v in item.items() if isinstance(v, dict)]
        for iface, entry in pairs:
            nb = _neighbor_json(iface, entry)
            if nb:
                host.neighbors.append(nb)
    return host


_PLAIN_IFACE = re.compile(r"^Interface:\s*([^,\s]+)")
_PLAIN_KV = re.compile(r"^\s+(SysName|ChassisID|PortID):(.*)$")  # value stripped in code


def _parse_plain(body: str) -> LldpHost:
    host = LldpHost()
    current: dict[str, str] = {}

    def flush() -> None:
        name = current.get("SysName") or (
            f"sw-{current['ChassisID'].split()[-1]}" if current.get("ChassisID") else ""
        )
        if current.get("iface") and name:
            ptype, _, pid = current.get("PortID", "").partition(" ")
            chassis = current.get("ChassisID", "").split()
            host.neighbors.append(Neighbor(current["iface"], name, pid, ptype,
                                           chassis[-1] if chassis else ""))

    for line in body.splitlines():
        m = _PLAIN_IFACE.match(line)
        if m:
            flush()
            current = {"iface": m.group(1)}
            continue
        m = _PLAIN_KV.match(line)
        if m and current and m.group(1) not in current:
            current[m.group(1)] = m.group(2).strip()
    flush()
    return host


def _files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
        elif p.is_file():
            out.append(p)
        else:
            raise ConfigError("no such file or folder", source=str(p), field="--lldp")
    if not out:
        raise ConfigError("no LLDP files found", source=", ".join(map(str, paths)), field="--lldp")
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._:-]+", "-", name.strip()).strip("-") or "unnamed"


def _read_uplinks(path: Path, build: FabricBuild) -> None:
    source = str(path)
    data = read_yaml(path)
    if isinstance(data, dict):
        data = Fields(data, source, "", allowed=("links",)).list("links")
    if not isinstance(data, list):
        raise ConfigError("expected a list of links {a, b, gbps}", source=source)
    for i, raw in enumerate(data):
        f = Fields(raw, source, join("links", i), allowed=("a", "b", "gbps", "count"))
        a, b, gbps = _safe(f.str("a")), _safe(f.str("b")), f.number("gbps")
        for sw in (a, b):
            build.switches.setdefault(sw, None)
        for _ in range(f.int("count", 1)):
            build.cable(a, b, gbps)


def _switch_names(neighbors: list[Neighbor]) -> dict[str, str]:
    """Chassis id -> switch name: LLDP identifies a switch by its chassis id, so a neighbour
    that sends no SysName joins the named one with the same chassis id, and two chassis that
    share a SysName stay two switches (the name gets the chassis id's tail)."""
    named: dict[str, str] = {}
    for nb in neighbors:
        if nb.chassis_id and not nb.sysname.startswith("sw-"):
            named.setdefault(nb.chassis_id, _safe(nb.sysname))
    for nb in neighbors:
        if nb.chassis_id:
            named.setdefault(nb.chassis_id, _safe(nb.sysname))
    by_name: dict[str, list[str]] = {}
    for cid, name in named.items():
        by_name.setdefault(name, []).append(cid)
    return {cid: (name if len(by_name[name]) == 1 else
                  f"{name}-{re.sub(r'[^0-9A-Za-z]', '', cid)[-6:]}")
            for cid, name in named.items()}


def import_lldp(
    paths: list[Path],
    *,
    name: str | None = None,
    spec: str | None = None,
    spines: int = 0,
    uplinks: Path | None = None,
    uplink_gbps: float = 400.0,
    nic_gbps: float = 400.0,
    largest_component: bool = False,
    gpus_per_node: int | None = None,
) -> tuple[str, list[str]]:
    """Build a RoCE topology YAML from per-host LLDP files; returns (YAML text, warnings).

    Switches are keyed by chassis id (a neighbour without SysName joins the named switch with
    its chassis id). GPUs per node are unknown (written 0) unless ``gpus_per_node`` is given.

    Raises
    ------
    ConfigError
        Unreadable files, a file that is not LLDP output (named ``file:line``), no
        neighbours, or a fabric that is not connected (add spines).
    """
    files = _files([Path(p) for p in paths])
    given = [Path(p) for p in paths]
    default = given[0].name if len(given) == 1 and given[0].is_dir() else "lldp-import"
    build = FabricBuild(name=name or default, fabric="roce", gpus_per_node=gpus_per_node)
    hosts = _read_hosts(files)
    _cable_hosts(build, hosts, nic_gbps)
    if not build.cables:
        raise ConfigError("no switch neighbours in the LLDP files", source=str(files[0]))
    _cable_switches(build, spines, uplinks, uplink_gbps)
    header = [f"imported from LLDP neighbours of {len(hosts)} host(s) by fabriccheck"]
    return build.to_yaml(
        source=str(files[0]) if len(files) == 1 else str(Path(files[0]).parent),
        spec=spec, header=header, largest_component=largest_component,
    )


def _read_hosts(files: list[Path]) -> dict[str, LldpHost]:
    """Parse each LLDP file, keyed by its host (the local SysName, else the file's stem).

    A parse error becomes a ``ConfigError`` at ``file:line``."""
    hosts: dict[str, LldpHost] = {}
    for f in files:
        text = read_bounded(f)
        if not text.strip():
            raise ConfigError("empty file", source=str(f),
                              hint="save 'lldpcli show neighbors -f json0' of the host in it")
        try:
            parsed = parse_lldp(text)
        except ParseError as exc:
            msg = exc.message.removeprefix("lldp: ")
            m = re.match(r"line (\d+): (.*)$", msg)
            where = f"{f}:{m.group(1)}" if m else str(f)
            raise ConfigError(m.group(2) if m else msg, source=where, hint=exc.hint) from exc
        hosts[_safe(parsed.local or f.stem)] = parsed
    return hosts


def _cable_hosts(build: FabricBuild, hosts: dict[str, LldpHost], nic_gbps: float) -> None:
    """Cable each host's NICs to the switches its LLDP neighbours name (warn on and skip a peer
    that looks like a host and a second neighbour on one interface)."""
    names = _switch_names([nb for h in hosts.values() for nb in h.neighbors])
    for host, parsed in hosts.items():
        seen: set[str] = set()
        for nb in parsed.neighbors:
            peer = names.get(nb.chassis_id) or _safe(nb.sysname)
            if peer in hosts or nb.port_id_type == "mac":
                build.warn(f"{host}/{nb.interface}: peer {peer} looks like a host; skipped")
                continue
            if nb.interface in seen:
                build.warn(f"{host}/{nb.interface}: more than one neighbour; kept the first")
                continue
            seen.add(nb.interface)
            build.switches.setdefault(peer, None)
            build.cable(build.nic(host, _safe(nb.interface)), peer, nic_gbps)


def _cable_switches(build: FabricBuild, spines: int, uplinks: Path | None,
                    uplink_gbps: float) -> None:  # fmt: skip
    """Add the switch-to-switch links hosts cannot see: ``spines`` spines cabled to every leaf,
    then the uplinks file; warn which was used."""
    leaves = sorted(build.switches)
    build.warn(
        "switch-to-switch links are not visible from hosts"
        + (f"; assumed {spines} spine(s) cabled to each of the {len(leaves)} leaves" if spines
           else "; used the uplinks file" if uplinks
           else "; add --spines N or --uplinks FILE if the leaves are not one switch")
    )
    for i in range(spines):
        spine = f"spine-{i}"
        build.switches[spine] = "spine"
        for leaf in leaves:
            build.cable(leaf, spine, uplink_gbps)
    if uplinks is not None:
        _read_uplinks(uplinks, build)
