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

    hops:                            # optional (RoCE/ECMP): router interface address -> switch
      10.200.0.1: spine-1            # maps traceroute hops to switches (learned flow paths)

``nics`` may also be written as ``{eth0: 192.168.100.1}`` (rail = position in the mapping).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    #: router interface address -> switch (``hops:``): maps traceroute hops to switches
    hops: Mapping[str, str] = field(default_factory=dict)
    #: the Ray cluster's GCS address a ``lab up --ray`` wrote (``lab: ray_address``); "" if none
    ray_address: str = ""

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
    from fabriccheck.schema.base import check
    from fabriccheck.schema.inventory import InventoryFile

    base = base or Path.cwd()
    model = check(InventoryFile, data, source=source)
    ssh = model.ssh
    hosts = {
        name: HostEntry(
            name=name,
            address=h.address,
            port=h.port if h.port is not None else ssh.port,
            user=h.user if h.user is not None else ssh.user,
            nics=tuple(NicAddress(n, nic.ip, nic.rail) for n, nic in h.nics.items()),
        )
        for name, h in model.hosts.items()
    }
    return Inventory(
        hosts=hosts,
        key_path=_path(ssh.key, base),
        known_hosts_path=_path(ssh.known_hosts, base),
        connect_timeout_s=ssh.connect_timeout_s,
        python=model.python,
        env=dict(model.env),
        probe_options=model.probes.model_dump(exclude_unset=True),
        name=model.name,
        source=source,
        hops=dict(model.hops),
        ray_address=(model.lab.ray_address or "") if model.lab is not None else "",
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
    from fabriccheck.schema.yamlio import read_yaml

    p = Path(path)
    data = read_yaml(p, what="inventory")
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
