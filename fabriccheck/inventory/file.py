"""Inventory files: which hosts exist, how to reach them over SSH, and their NICs' addresses.

The format (YAML; documented in docs/ssh.md and docs/lab.md)::

    name: lab-4                      # optional, free text
    ssh:                             # defaults for every host
      user: root
      port: 22
      key: id_ed25519                # private key; relative paths are relative to this file
      known_hosts: known_hosts       # strict host-key checking: every host's key must be here
      connect_timeout_s: 5
    python: python3                  # interpreter on the hosts (allreduce-cpu), default python3
    env: {NCCL_DEBUG: WARN}          # extra environment for every probe command (optional)
    probes:                          # probe command settings (probes.commands.CommandOptions)
      nccl_tests_dir: /opt/nccl-tests/build
      launcher: mpirun               # or srun (inside a Slurm allocation)
      gid_index: 3                   # RoCE v2 (perftest -x, NCCL_IB_GID_INDEX); omit on IB
    hosts:
      node-000:
        address: 10.220.0.1          # where SSH connects (management network)
        port: 22                     # optional per-host overrides: port, user
        nics:                        # data-plane NICs: name -> ip (and rail)
          eth0: {ip: 192.168.100.1, rail: 0}

``nics`` may also be written as ``{eth0: 192.168.100.1}`` (rail = position in the mapping).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fabriccheck.errors import ConfigError


@dataclass(frozen=True)
class NicAddress:
    """One data-plane NIC of a host: its name (``eth0``, ``mlx5_0``), IP and rail."""

    name: str
    ip: str
    rail: int


@dataclass(frozen=True)
class HostEntry:
    """One host of an inventory: SSH address and the addresses of its NICs."""

    name: str
    address: str
    port: int = 22
    user: str = "root"
    nics: tuple[NicAddress, ...] = ()

    def nic(self, name: str) -> NicAddress:
        for nic in self.nics:
            if nic.name == name:
                return nic
        raise KeyError(f"{self.name} has no NIC {name!r} in the inventory")


@dataclass(frozen=True)
class Inventory:
    """Hosts plus the SSH settings shared by all of them (see the module docstring)."""

    hosts: Mapping[str, HostEntry]
    key_path: Path | None = None
    known_hosts_path: Path | None = None
    connect_timeout_s: float = 5.0
    python: str = "python3"
    env: Mapping[str, str] = field(default_factory=dict)
    #: CommandOptions fields from the file's ``probes:`` section
    probe_options: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""
    source: str = ""

    def host(self, name: str) -> HostEntry:
        try:
            return self.hosts[name]
        except KeyError:
            where = f" ({self.source})" if self.source else ""
            raise ConfigError(
                f"host {name!r} is not in the inventory{where}",
                hint="add it under hosts: or test only inventory hosts",
            ) from None

    def nic_ips(self) -> dict[str, str]:
        """``node/nic`` endpoint -> IP for every NIC of every host."""
        return {f"{h.name}/{n.name}": n.ip for h in self.hosts.values() for n in h.nics}

    def nodes(self) -> list[str]:
        """Every host name, sorted."""
        return sorted(self.hosts)


def _req(d: Mapping[str, Any], key: str, source: str, where: str) -> Any:
    if key not in d or d[key] in (None, ""):
        raise ConfigError(f"missing {key!r}", source=source, field=f"{where}.{key}".lstrip("."))
    return d[key]


def _int(value: Any, source: str, where: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"expected an integer, got {value!r}", source=source,
                          field=where) from None


def _nics(raw: Any, source: str, where: str) -> tuple[NicAddress, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise ConfigError("expected a mapping NIC name -> {ip, rail}", source=source, field=where)
    out = []
    for i, (name, spec) in enumerate(raw.items()):
        if isinstance(spec, str):
            out.append(NicAddress(str(name), spec, i))
        elif isinstance(spec, Mapping):
            ip = _req(spec, "ip", source, f"{where}.{name}")
            rail = _int(spec.get("rail", i), source, f"{where}.{name}.rail")
            out.append(NicAddress(str(name), str(ip), rail))
        else:
            raise ConfigError(f"expected an IP or {{ip, rail}}, got {spec!r}", source=source,
                              field=f"{where}.{name}")
    return tuple(out)


def _probe_options(raw: Any, source: str) -> dict[str, Any]:
    from dataclasses import fields

    from fabriccheck.probes.commands import CommandOptions

    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("expected a mapping of probe settings", source=source, field="probes")
    allowed = {f.name for f in fields(CommandOptions)} - {"python", "env"}
    for key in raw:
        if key not in allowed:
            raise ConfigError(f"unknown probe setting {key!r}", source=source,
                              field=f"probes.{key}",
                              hint=f"use one of {', '.join(sorted(allowed))}")
    return dict(raw)


def _path(value: Any, base: Path) -> Path | None:
    if value in (None, ""):
        return None
    p = Path(str(value)).expanduser()
    return p if p.is_absolute() else (base / p)


def inventory_from_dict(
    data: Any, *, source: str = "<inventory>", base: Path | None = None
) -> Inventory:
    """Build and validate an :class:`Inventory` from parsed YAML (see the module docstring).

    Relative key/known_hosts paths are resolved against ``base`` (the file's directory).
    Raises :class:`ConfigError` naming the file and field on any problem.
    """
    base = base or Path.cwd()
    if not isinstance(data, Mapping):
        raise ConfigError("an inventory must be a mapping with a 'hosts' key", source=source)
    ssh = data.get("ssh") or {}
    if not isinstance(ssh, Mapping):
        raise ConfigError("expected a mapping", source=source, field="ssh")
    user = str(ssh.get("user", "root"))
    port = _int(ssh.get("port", 22), source, "ssh.port")
    hosts_raw = _req(data, "hosts", source, "")
    if not isinstance(hosts_raw, Mapping) or not hosts_raw:
        raise ConfigError("expected a non-empty mapping host -> {address, ...}", source=source,
                          field="hosts")
    hosts: dict[str, HostEntry] = {}
    for name, spec in hosts_raw.items():
        where = f"hosts.{name}"
        if isinstance(spec, str):
            spec = {"address": spec}
        if not isinstance(spec, Mapping):
            raise ConfigError("expected a mapping with 'address'", source=source, field=where)
        hosts[str(name)] = HostEntry(
            name=str(name),
            address=str(_req(spec, "address", source, where)),
            port=_int(spec.get("port", port), source, f"{where}.port"),
            user=str(spec.get("user", user)),
            nics=_nics(spec.get("nics"), source, f"{where}.nics"),
        )
    env = data.get("env") or {}
    if not isinstance(env, Mapping):
        raise ConfigError("expected a mapping NAME -> value", source=source, field="env")
    probe_options = _probe_options(data.get("probes"), source)
    try:
        timeout_s = float(ssh.get("connect_timeout_s", 5.0))
    except (TypeError, ValueError):
        raise ConfigError("expected seconds", source=source,
                          field="ssh.connect_timeout_s") from None
    return Inventory(
        hosts=hosts,
        key_path=_path(ssh.get("key"), base),
        known_hosts_path=_path(ssh.get("known_hosts"), base),
        connect_timeout_s=timeout_s,
        python=str(data.get("python", "python3")),
        env={str(k): str(v) for k, v in env.items()},
        probe_options=probe_options,
        name=str(data.get("name", "")),
        source=source,
    )


def load_inventory(path: str | Path) -> Inventory:
    """Read an inventory file (YAML, see the module docstring).

    Parameters
    ----------
    path : str or Path
        The inventory file.

    Returns
    -------
    Inventory
        Hosts with their SSH address and NIC IPs; key paths resolved next to the file.

    Raises
    ------
    ConfigError
        The file is missing, not YAML, or a field is wrong (message names file and field).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read inventory: {exc.strerror}", source=str(p)) from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {exc}".splitlines()[0], source=str(p)) from exc
    return inventory_from_dict(data, source=str(p), base=p.resolve().parent)


def inventory_to_dict(inv: Inventory) -> dict[str, Any]:
    """The YAML-able form of ``inv``; :func:`inventory_from_dict` reverses it."""
    ssh: dict[str, Any] = {"connect_timeout_s": inv.connect_timeout_s}
    if inv.key_path is not None:
        ssh["key"] = str(inv.key_path)
    if inv.known_hosts_path is not None:
        ssh["known_hosts"] = str(inv.known_hosts_path)
    out: dict[str, Any] = {"name": inv.name, "ssh": ssh, "python": inv.python}
    if inv.env:
        out["env"] = dict(inv.env)
    if inv.probe_options:
        out["probes"] = dict(inv.probe_options)
    out["hosts"] = {
        h.name: {
            "address": h.address,
            "port": h.port,
            "user": h.user,
            "nics": {n.name: {"ip": n.ip, "rail": n.rail} for n in h.nics},
        }
        for h in inv.hosts.values()
    }
    return out
