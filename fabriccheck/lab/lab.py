"""The namespace lab's life cycle: up (build + sshd + client files), apply faults, status, down.

``up`` first removes anything left over by a lab of the same name (prefix scan), builds the
plan's namespaces, bridges, veths and tc rates, starts one sshd per reachable host and writes
into the lab directory what a client needs: ``id_ed25519`` (client key), ``known_hosts`` (every
host key), ``inventory.yaml`` (see :mod:`fabriccheck.inventory.file`) and ``ssh_config`` (for a
human: ``ssh -F DIR/ssh_config host1``). ``state.json`` there, and a pointer in
``/run/fabriccheck-lab/<name>``, let ``down`` and ``status`` find it again.

``up(..., ray=True)`` (``lab up --ray``) also starts a real Ray cluster over the lab
(:mod:`fabriccheck.lab.raylets`: a head on the management gateway, a raylet inside each
reachable host) and writes its address into the inventory (``lab: ray_address``), so
``fabriccheck sweep --executor ray --inventory DIR/inventory.yaml`` finds it; ``down`` stops it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from fabriccheck.errors import ConfigError, ExecutorError
from fabriccheck.faults import FaultSet, load_faults
from fabriccheck.lab import netns, raylets, sshd
from fabriccheck.lab.plan import LabPlan, check_name, plan_lab
from fabriccheck.topology.load import load_topology
from fabriccheck.topology.model import Topology

REGISTRY = Path("/run/fabriccheck-lab")


@dataclass(frozen=True)
class LabInfo:
    """What ``lab up`` reports: where the client files are and what was built."""

    name: str
    dir: str
    inventory: str
    topology: str
    hosts: dict[str, str]  # host -> management address
    netns: dict[str, str]  # host -> namespace
    faults: tuple[str, ...]
    sshd_pids: dict[str, int]
    gateway: str = ""  # the root namespace's address on the management bridge (a Ray head)
    #: ``lab up --ray``: address, root, head and per-host raylet (see fabriccheck.lab.raylets)
    ray: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"dir": self.dir, "inventory": self.inventory, **{
            k: v for k, v in asdict(self).items() if k not in ("dir", "inventory")}}


def require_root() -> None:
    if sys.platform != "linux" or os.geteuid() != 0:
        raise ConfigError("the lab needs root on Linux (network namespaces, bridges, tc)",
                          hint="run `sudo fabriccheck lab ...` or use the simulator")


def default_dir(name: str) -> Path:
    return Path(f"/tmp/fabriccheck-lab-{name}")


def _pointer(name: str) -> Path:
    return REGISTRY / name


def lab_dir(name: str) -> Path | None:
    """The directory of lab ``name`` if one is registered."""
    p = _pointer(name)
    if p.exists():
        return Path(p.read_text().strip())
    d = default_dir(name)
    return d if (d / "state.json").exists() else None


def _write_client_files(d: Path, plan: LabPlan, host_pubs: dict[str, str]) -> Path:
    """Client key, known_hosts, ssh_config and the inventory; returns the inventory's path."""
    client_pub = sshd.write_key(d / "id_ed25519", comment=f"fabriccheck-lab-{plan.name}")
    (d / "authorized_keys").write_text(client_pub + "\n")
    (d / "known_hosts").write_text("".join(
        f"{h.mgmt_ip} {host_pubs[h.name]}\n" for h in plan.hosts))
    (d / "ssh_config").write_text("".join(
        f"Host {h.name}\n  HostName {h.mgmt_ip}\n  User root\n  IdentityFile {d / 'id_ed25519'}\n"
        f"  UserKnownHostsFile {d / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
        for h in plan.hosts))
    return write_inventory(d, plan)


def write_inventory(d: Path, plan: LabPlan, ray_address: str | None = None) -> Path:
    """``DIR/inventory.yaml`` (see :mod:`fabriccheck.inventory.file`); with the Ray address."""
    lab_info: dict[str, Any] = {"name": plan.name, "gateway": plan.gateway_ip}
    if ray_address:
        lab_info["ray_address"] = ray_address
    inv = {
        "name": plan.topology,
        "ssh": {"user": "root", "port": 22, "key": "id_ed25519", "known_hosts": "known_hosts",
                "connect_timeout_s": 3},
        "python": "python3",
        "lab": lab_info,
        **({"hops": plan.hop_names()} if plan.mode == "routed" else {}),
        "hosts": {
            h.name: {"address": h.mgmt_ip, "netns": h.netns,
                     "nics": {n.name: {"ip": n.ip, "rail": n.rail} for n in h.nics}}
            for h in plan.hosts
        },
    }
    path = d / "inventory.yaml"
    path.write_text("# written by `fabriccheck lab up`\n" + yaml.safe_dump(inv, sort_keys=False))
    return path


def _save_state(d: Path, state: dict[str, Any]) -> None:
    (d / "state.json").write_text(json.dumps(state, indent=2))
    REGISTRY.mkdir(parents=True, exist_ok=True)
    _pointer(state["name"]).write_text(str(d))


def load_state(name: str) -> dict[str, Any]:
    """The saved state of lab ``name`` (raises ConfigError when no such lab is up)."""
    d = lab_dir(check_name(name))
    if d is None or not (d / "state.json").exists():
        raise ConfigError(f"no lab named {name!r} is up", hint="run `fabriccheck lab up TOPOLOGY`")
    return json.loads((d / "state.json").read_text())


@contextmanager
def _subnet_lock() -> Iterator[None]:
    REGISTRY.mkdir(parents=True, exist_ok=True)
    with open(REGISTRY / ".subnet.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _faults(faults: str | Path | FaultSet | None) -> FaultSet:
    if faults is None:
        return FaultSet()
    return faults if isinstance(faults, FaultSet) else load_faults(faults)


def up(
    topology: str | Path,
    *,
    faults: str | Path | FaultSet | None = None,
    name: str = "lab",
    directory: str | Path | None = None,
    rate_scale: float = 1.0,
    ray: bool = False,
    ray_port: int = 0,
    ray_timeout_s: float = raylets.START_TIMEOUT_S,
) -> LabInfo:
    """Build the lab for ``topology`` (see the module docstring) and return where its files are.

    With ``ray``, also start a Ray cluster over it (:mod:`fabriccheck.lab.raylets`); its GCS
    listens on ``ray_port`` (0: a free port) and must be up within ``ray_timeout_s``.

    Raises
    ------
    ConfigError
        Not root, a bad topology/faults file, a topology that is not a tree; with ``ray``:
        Ray not installed, ``ray_port`` busy.
    ExecutorError
        A kernel command, sshd or ``ray start`` failed (everything built so far is removed).
    """
    topo, fault_set, d = _check_up(topology, faults, name, directory, rate_scale, ray, ray_port)
    down(name)
    plan = _plan_on_free_subnet(topo, fault_set, name, rate_scale)
    state = {"name": name, "dir": str(d), "topology": str(Path(topo.source).resolve()),
             "mgmt_octet": int(plan.mgmt_net.split(".")[2]), "rate_scale": rate_scale,
             "faults": None, "sshd_pids": {}, "creator_pid": os.getpid()}
    try:
        _new_lab_dir(d, state)
        inventory = _write_keys_and_client_files(d, plan)
        _build_network(plan)
        pids = {h.name: sshd.start_sshd(d, h) for h in plan.hosts if h.sshd}
        state.update(sshd_pids=pids, faults=_faults_to_dict(fault_set), inventory=str(inventory))
        _save_state(d, state)
        if ray:
            state["ray"] = raylets.start(plan, d, pids, port=ray_port, timeout_s=ray_timeout_s)
            _save_state(d, state)
            inventory = write_inventory(d, plan, state["ray"]["address"])
    except BaseException:
        down(name)
        raise
    return _info(plan, d, inventory, pids, state.get("ray"))


def _check_up(topology: str | Path, faults: str | Path | FaultSet | None, name: str,
              directory: str | Path | None, rate_scale: float, ray: bool,
              ray_port: int) -> tuple[Topology, FaultSet, Path]:  # fmt: skip
    """``up``'s checks, before anything is built or removed: root, name, topology, faults, Ray,
    the lab directory; returns the topology, the faults and the directory."""
    require_root()
    check_name(name)
    topo = _load(topology)
    fault_set = _faults(faults)
    if ray:  # fail before anything is built or removed
        raylets.ray_bin()
        if ray_port:
            raylets.check_port(ray_port)
    d = Path(directory) if directory else default_dir(name)
    if d.exists() and any(d.iterdir()) and not (d / "state.json").exists():
        raise ConfigError(f"{d} exists and is not a lab directory", field="--dir",
                          hint="give a new or empty directory")
    plan_lab(topo, fault_set, name=name, rate_scale=rate_scale)  # bad faults: fail before down
    return topo, fault_set, d


def _plan_on_free_subnet(topo: Topology, fault_set: FaultSet, name: str,
                         rate_scale: float) -> LabPlan:  # fmt: skip
    """Plan the lab on the lowest free management subnet and claim it (its management bridge)."""
    with _subnet_lock():  # two labs going up at once must not pick the same subnet
        octets = set(range(256)) - netns.used_mgmt_octets()
        if not octets:
            raise ExecutorError("lab: no free management subnet 10.220.x.0/24")
        plan = plan_lab(topo, fault_set, name=name, mgmt_octet=min(octets),
                        rate_scale=rate_scale)
        netns.build_mgmt(plan)  # claims the subnet (removed by down's prefix scan)
    return plan


def _new_lab_dir(d: Path, state: dict[str, Any]) -> None:
    """Empty (or create) the lab directory, private to its owner, and save ``state`` in it."""
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    d.chmod(0o700)
    _save_state(d, state)  # before building: a crash mid-way can still be cleaned up


def _write_keys_and_client_files(d: Path, plan: LabPlan) -> Path:
    """Write every host's sshd key, the client files and the hang helper; return the inventory."""
    pubs = {}
    for h in plan.hosts:
        (d / "hosts" / h.name).mkdir(parents=True, exist_ok=True)
        pubs[h.name] = sshd.write_key(d / "hosts" / h.name / "ssh_host_ed25519_key", h.name)
    inventory = _write_client_files(d, plan, pubs)
    sshd.write_hang_bin(d)
    return inventory


def _build_network(plan: LabPlan) -> None:
    """Build the plan's routers or switches, its hosts, the routers' routes and the flappers."""
    if plan.mode == "routed":
        netns.build_routers(plan)
    else:
        netns.build_switches(plan)
    for h in plan.hosts:
        netns.build_host(plan, h)
    if plan.mode == "routed":
        netns.router_routes(plan)
    netns.start_flappers(plan)


def _faults_to_dict(fs: FaultSet) -> dict[str, Any]:
    out = []
    for f in fs.faults:
        item = {k: v for k, v in asdict(f).items() if v is not None}
        if "link" in item:
            item["link"] = list(item["link"])
        out.append(item)
    return {"faults": out}


def _info(plan: LabPlan, d: Path, inventory: Path, pids: dict[str, int],
          ray: dict[str, Any] | None = None) -> LabInfo:  # fmt: skip
    return LabInfo(
        name=plan.name, dir=str(d), inventory=str(inventory), topology=plan.topology,
        hosts={h.name: h.mgmt_ip for h in plan.hosts},
        netns={h.name: h.netns for h in plan.hosts},
        faults=plan.faults, sshd_pids=pids, gateway=plan.gateway_ip, ray=ray,
    )


def _load(topology: str | Path) -> Topology:
    """The topology of a lab: a tree for a bridged lab (bridges would loop), any for routed."""
    topo = load_topology(topology)
    if topo.lab_mode == "bridged":
        topo = load_topology(topology, require_tree=True)
    return topo


def _plan_from_state(state: dict[str, Any], fault_set: FaultSet) -> LabPlan:
    topo = _load(state["topology"])
    return plan_lab(topo, fault_set, name=state["name"], mgmt_octet=state["mgmt_octet"],
                    rate_scale=state["rate_scale"])


def apply_faults(name: str, faults: str | Path | FaultSet | None) -> LabInfo:
    """Replace the faults of a running lab (None: heal it): rates, link states, sshd, PATH."""
    require_root()
    state = load_state(name)
    d = Path(state["dir"])
    old = _plan_from_state(state, FaultSet.from_dict(state.get("faults")))
    fault_set = _faults(faults)
    plan = _plan_from_state(state, fault_set)
    netns.stop_flappers(old)
    for t in plan.trunks:
        for port in (t.port_a, t.port_b):
            netns.sh(netns._tbf(plan.port_ns(port), port, t.rate_mbit))
            netns.sh(["ip", "-n", plan.port_ns(port), "link", "set", port,
                      "down" if t.down else "up"])
    pids = dict(state.get("sshd_pids") or {})
    for h, h_old in zip(plan.hosts, old.hosts, strict=True):
        for nic in h.nics:
            netns.sh(netns._tbf(plan.port_ns(nic.port), nic.port, nic.port_rate_mbit))
            netns.sh(["ip", "-n", plan.port_ns(nic.port), "link", "set", nic.port,
                      "down" if nic.link_down else "up"])
            netns.sh(netns._tbf(h.netns, nic.name, nic.rate_mbit))
            netns.sh(["ip", "-n", h.netns, "link", "set", nic.name, "down" if nic.down else "up"])
        if plan.mode == "routed":
            netns.host_routes(h)  # a link that was down took its routes with it
        sshd_gone = h.name not in pids or not _pid_alive(pids[h.name])
        if (h.sshd, h.hang) != (h_old.sshd, h_old.hang) or (h.sshd and sshd_gone):
            sshd.stop_sshd(d, h)
            # open sessions too: their sshd children keep the old PATH and would stay reachable
            netns.kill_netns_processes(h.netns)
            pids.pop(h.name, None)
            if h.sshd:
                pids[h.name] = sshd.start_sshd(d, h)
    if plan.mode == "routed":
        netns.router_routes(plan)
    netns.start_flappers(plan)
    state.update(sshd_pids=pids, faults=_faults_to_dict(fault_set))
    _save_state(d, state)
    if state.get("ray"):
        state["ray"] = _heal_raylets(plan, d, pids, state["ray"])
        _save_state(d, state)
    return _info(plan, d, Path(state["inventory"]), pids, state.get("ray"))


def _heal_raylets(plan: LabPlan, d: Path, pids: dict[str, int],
                  ray: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """After faults changed: every reachable host without a live raylet gets a new one (with
    its new PATH); an unreachable host has none. Waits for the new raylets."""
    ray = {**ray, "raylets": dict(ray.get("raylets") or {})}
    fresh = []
    for h in plan.hosts:
        entry = ray["raylets"].get(h.name)
        if not h.sshd or h.name not in pids:
            if entry:
                raylets.stop_group(entry)
            ray["raylets"].pop(h.name, None)
        elif not raylets.raylet_alive(entry):
            ray["raylets"][h.name] = raylets.start_raylet(plan, d, h, pids[h.name],
                                                          ray["address"])
            fresh.append(h)
    deadline = time.monotonic() + raylets.START_TIMEOUT_S
    for h in fresh:
        e = ray["raylets"][h.name]
        raylets.wait_ready(f"raylet of {h.name}", int(e["pgid"]), Path(e["log"]), deadline)
    return ray


def _pid_alive(pid: int | str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError):
        return False
    return True


def registered_labs() -> dict[str, dict[str, Any]]:
    """Every lab with a registry pointer: name -> its saved state ({} when unreadable)."""
    out: dict[str, dict[str, Any]] = {}
    if not REGISTRY.is_dir():
        return out
    for p in REGISTRY.iterdir():
        if p.name.startswith("."):
            continue
        try:
            out[p.name] = json.loads((Path(p.read_text().strip()) / "state.json").read_text())
        except (OSError, ValueError):
            out[p.name] = {}
    return out


def enter_argv(name: str, host: str) -> list[str]:
    """The argv prefix that runs a command *on* lab host ``host`` without SSH (for Ray raylets).

    It enters the namespaces of the host's sshd (network, hostname, mounts), so the command sees
    what an SSH session sees. A host without sshd (``node_unreachable``) gets its network
    namespace and a fresh UTS namespace with its hostname.

    >>> enter_argv("lab", "host1") + ["ray", "start", "..."]  # doctest: +SKIP
    """
    state = load_state(name)
    pid = (state.get("sshd_pids") or {}).get(host)
    ns = f"fclab-{name}-{host}"
    if pid:
        return ["nsenter", "-t", str(pid), "-n", "-u", "-m", "--"]
    return ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
            'hostname "$0" && exec "$@"', host]


def down(name: str = "lab") -> list[str]:
    """Remove lab ``name``: its processes, namespaces, root interfaces, directory pointer.

    Works from a prefix scan, so it also cleans up after a crash. Returns what was removed.
    """
    require_root()
    check_name(name)
    ray_state = None
    d = lab_dir(name)
    if d is not None:
        try:
            ray_state = json.loads((d / "state.json").read_text()).get("ray")
        except (OSError, ValueError):
            ray_state = None  # lost: raylets.stop finds the processes by their Ray root
    removed = raylets.stop(name, ray_state)
    removed += netns.remove_lab(name)
    p = _pointer(name)
    if p.exists():
        p.unlink()
        removed.append(f"registry {p}")
    return removed


def status(name: str = "lab") -> dict[str, Any]:
    """What of lab ``name`` exists now: namespaces, sshd per host, directory and inventory."""
    require_root()
    check_name(name)
    namespaces = netns.lab_netns(name)
    d = lab_dir(name)
    out: dict[str, Any] = {"name": name, "up": bool(namespaces), "netns": namespaces,
                           "root_links": netns.root_links(name), "dir": str(d) if d else None}
    if d is not None and (d / "state.json").exists():
        state = json.loads((d / "state.json").read_text())
        out["inventory"] = state.get("inventory")
        out["topology"] = state.get("topology")
        out["faults"] = (state.get("faults") or {}).get("faults", [])
        alive = {}
        for host, pid in (state.get("sshd_pids") or {}).items():
            try:
                os.kill(int(pid), 0)
                alive[host] = True
            except (ProcessLookupError, ValueError):
                alive[host] = False
        out["sshd"] = alive
        if state.get("ray"):
            out["ray"] = raylets.status(state["ray"])
    return out
