"""A real Ray cluster over the lab (``lab up --ray``): a head on the gateway, a raylet per host.

Layout for a lab named ``N`` (everything Ray writes lives under ``/tmp/fcray-N/``, short
because Ray's unix socket paths must stay under 108 characters):

- the **head** runs in the root namespace on the lab's management gateway (``10.220.<m>.1``),
  with no CPUs: it serves the GCS and the driver (``fabriccheck sweep`` runs beside it, in the
  root namespace, and every lab host reaches the gateway over its ``mgmt0``). The root namespace
  is shared with everything else on the machine, so every port the head opens is a free one
  picked here (the GCS port too, unless ``--ray-port`` names one);
- one **raylet** per reachable host, started *inside* that host (:func:`host_argv`: the
  network, hostname and mount namespaces of its sshd) with ``--node-ip-address`` = its
  management address, one CPU, the custom resource ``fchost_<host>: 1`` and the label
  ``fabriccheck/host=<host>`` (how the Ray executor names a node,
  :mod:`fabriccheck.inventory.ray`), the host's ``PATH`` (a hung host's shadows the probe
  binaries) and ``TMPDIR`` under the lab's Ray root (the agents' files go there). Each raylet
  has its host's network namespace to itself, so its own ports need no choosing. The probes'
  traffic goes over the hosts' data NICs, through the lab's shaped links;
- a host with ``node_unreachable`` gets no raylet (as it gets no sshd).

Every ``ray start --block`` is detached (its own session) and outlives ``lab up``; ``state.json``
keeps each one's process group. :func:`stop` works without that state too: it kills our process
groups, then every process whose session is one of them or whose command line names the lab's
Ray root (the way ``lab down`` finds namespaces by prefix), then removes the root. It never runs
``ray stop``, which would end every Ray process on the machine.

The head's GCS declares a killed raylet dead after a few seconds (:data:`HEALTH_ENV`, Ray's own
default is ~15 s), so the executor stops scheduling on it soon after.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fabriccheck.errors import ConfigError, ExecutorError
from fabriccheck.lab.plan import HostPlan, LabPlan

#: what ``ray start --block`` prints once its node is up and registered
READY_LINE = "Ray runtime started."
#: the custom resource naming a host's Ray node (rule 2 of fabriccheck.inventory.ray)
HOST_RESOURCE_PREFIX = "fchost_"
HOST_LABEL = "fabriccheck/host"
#: environment of every Ray process of the lab
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "RAY_DEDUP_LOGS": "0",
}
#: the head's GCS declares a silent raylet dead after ~3-6 s (Ray's default: ~15 s or more);
#: three missed checks in a row, so a busy 2-core machine does not lose nodes by accident
HEALTH_ENV = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "2000",
    "RAY_health_check_failure_threshold": "3",
}
#: per node (Ray's minimum is 75 MiB); the lab moves no objects to speak of
OBJECT_STORE_BYTES = 80 * 1024 * 1024
START_TIMEOUT_S = 120.0
STOP_GRACE_S = 3.0


def ray_root(name: str) -> Path:
    """The directory every Ray process of lab ``name`` keeps its files in."""
    return Path(f"/tmp/fcray-{name}")


def host_resource(host: str) -> str:
    """The custom resource that names ``host``'s Ray node."""
    return f"{HOST_RESOURCE_PREFIX}{host}"


def ray_bin() -> str:
    """The ``ray`` CLI of the Python running the lab; ConfigError when Ray is not installed."""
    if importlib.util.find_spec("ray") is None:
        raise ConfigError(f"lab up --ray: Ray is not installed in {sys.executable}",
                          field="--ray", hint="pip install ray (fabriccheck's default install "
                          "has it), or run the lab without --ray")
    for path in (Path(sys.executable).with_name("ray"), shutil.which("ray")):
        if path and Path(path).exists():
            return str(path)
    raise ConfigError(f"lab up --ray: no `ray` command beside {sys.executable}", field="--ray",
                      hint="reinstall ray into this environment")


def free_port() -> int:
    """A TCP port free on every address of the root namespace right now."""
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def check_port(port: int) -> None:
    """ConfigError (one line) when ``port`` is taken in the root namespace."""
    if not 1 <= port <= 65535:
        raise ConfigError(f"Ray port {port} is not a TCP port", field="--ray-port")
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError as exc:
            busy = exc.errno == errno.EADDRINUSE
            raise ConfigError(f"Ray port {port} is {'busy' if busy else 'unusable'}: "
                              f"{exc.strerror}", field="--ray-port",
                              hint="pick another port, or omit --ray-port (a free one is "
                              "chosen)") from None


def _ray_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    return {**env, **RAY_ENV, **(extra or {})}


def head_argv(ray: str, ip: str, port: int, temp_dir: Path) -> list[str]:
    """``ray start --head`` on ``ip``: no CPUs, every port it opens in the root ns chosen free."""
    ports = [free_port() for _ in range(6)]
    return [
        ray, "start", "--head", "--block", "--disable-usage-stats",
        "--node-ip-address", ip, "--port", str(port),
        "--temp-dir", str(temp_dir), "--num-cpus", "0", "--num-gpus", "0",
        "--include-dashboard", "false", "--dashboard-port", str(ports[0]),
        "--dashboard-agent-listen-port", str(ports[1]),
        "--dashboard-agent-grpc-port", str(ports[2]),
        "--metrics-export-port", str(ports[3]),
        "--runtime-env-agent-port", str(ports[4]),
        "--object-store-memory", str(OBJECT_STORE_BYTES), "--include-log-monitor", "false",
        "--log-style", "record",
    ]


def raylet_argv(ray: str, host: HostPlan, address: str, temp_dir: Path) -> list[str]:
    """``ray start`` joining ``address`` as ``host``'s node (run inside the host, host_argv)."""
    return [
        ray, "start", "--block", "--disable-usage-stats", "--address", address,
        "--node-ip-address", host.mgmt_ip, "--temp-dir", str(temp_dir),
        "--num-cpus", "1", "--num-gpus", "0",
        "--resources", json.dumps({host_resource(host.name): 1}),
        "--labels", f"{HOST_LABEL}={host.name}",
        "--object-store-memory", str(OBJECT_STORE_BYTES), "--include-log-monitor", "false",
        "--log-style", "record",
    ]


def host_argv(sshd_pid: int) -> list[str]:
    """The prefix that runs a command on a lab host: its sshd's network, UTS and mount ns."""
    return ["nsenter", "-t", str(sshd_pid), "-n", "-u", "-m", "--"]


def _spawn(argv: Sequence[str], log: Path, env: Mapping[str, str]) -> int:
    """Start ``argv`` detached (own session, output to ``log``); its pid is its process group."""
    with open(log, "wb") as fh:
        proc = subprocess.Popen(list(argv), stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=dict(env),
                                start_new_session=True, close_fds=True)
    return proc.pid


def _tail(log: Path, n: int = 1500) -> str:
    try:
        return log.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def _first_error(text: str) -> str:
    """The most telling line of a failed ``ray start`` (for a one-line error)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for key in ("already in use", "Address in use", "Error", "error", "Failed", "failed"):
        hit = next((ln for ln in lines if key in ln), None)
        if hit:
            return hit[:240]
    return lines[-1][:240] if lines else "no output"


def _alive(pid: int) -> bool:
    """``pid`` runs and is not a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return False
    return bool(fields) and fields[0] not in ("Z", "X")


def wait_ready(what: str, pid: int, log: Path, deadline: float) -> None:
    """Wait until ``ray start`` (pid) printed :data:`READY_LINE`; ExecutorError otherwise."""
    while True:
        text = _tail(log, 20000)
        if READY_LINE in text:
            return
        if not _alive(pid):
            raise ExecutorError(f"lab: Ray {what} did not start: {_first_error(text)}",
                                hint=f"see {log}")
        if time.monotonic() > deadline:
            raise ExecutorError(f"lab: Ray {what} not up within the start timeout",
                                hint=f"see {log}; the machine may be overloaded")
        time.sleep(0.1)


def start(
    plan: LabPlan,
    lab_dir: Path,
    sshd_pids: Mapping[str, int],
    *,
    port: int = 0,
    timeout_s: float = START_TIMEOUT_S,
) -> dict[str, Any]:
    """Start the head and one raylet per host in ``sshd_pids``; return the ``ray`` state.

    The state (saved in ``state.json`` as ``ray``) holds ``address`` (the GCS ``ip:port``),
    ``root``, the head's and each raylet's process group, IP, log and host resource, and
    ``start_s``. On any failure everything started here is stopped again.

    Raises
    ------
    ConfigError
        Ray not installed; ``port`` busy.
    ExecutorError
        A ``ray start`` failed or was not up within ``timeout_s`` (the message quotes its log).
    """
    ray = ray_bin()
    if port:
        check_port(port)
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    root = ray_root(plan.name)
    stop(plan.name)  # a stale cluster of a lab of this name
    root.mkdir(parents=True)
    root.chmod(0o755)
    (root / "tmp").mkdir()
    port = port or free_port()
    address = f"{plan.gateway_ip}:{port}"
    state: dict[str, Any] = {"address": address, "root": str(root), "head": {},
                             "raylets": {}, "start_s": 0.0}
    try:
        log = root / "head.log"
        pid = _spawn(head_argv(ray, plan.gateway_ip, port, root / "head"), log,
                     _ray_env(HEALTH_ENV))
        state["head"] = {"pgid": pid, "ip": plan.gateway_ip, "log": str(log)}
        hosts = [h for h in plan.hosts if h.name in sshd_pids]
        # the raylets start with the head: their start-up (Python, imports) overlaps the
        # head's, and each waits for the GCS by itself
        for h in hosts:
            state["raylets"][h.name] = start_raylet(plan, lab_dir, h, sshd_pids[h.name],
                                                    address, ray=ray)
        wait_ready("head", pid, log, deadline)
        with ThreadPoolExecutor(max_workers=max(1, len(hosts))) as pool:
            list(pool.map(lambda h: wait_ready(
                f"raylet of {h.name}", state["raylets"][h.name]["pgid"],
                Path(state["raylets"][h.name]["log"]), deadline), hosts))
    except BaseException:
        stop(plan.name, state)
        raise
    state["start_s"] = round(time.monotonic() - t0, 2)
    return state


def start_raylet(
    plan: LabPlan, lab_dir: Path, host: HostPlan, sshd_pid: int, address: str,
    *, ray: str | None = None, wait_s: float | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Start ``host``'s raylet inside the host (does not wait unless ``wait_s``); its state."""
    from fabriccheck.lab.sshd import host_path

    ray = ray or ray_bin()
    root = ray_root(plan.name)
    temp = root / f"h{host.index}"
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir(parents=True)
    log = root / f"h{host.index}.log"
    env = _ray_env({"PATH": host_path(lab_dir, host.hang), "TMPDIR": str(root / "tmp")})
    pid = _spawn([*host_argv(sshd_pid), *raylet_argv(ray, host, address, temp)], log, env)
    entry = {"pgid": pid, "ip": host.mgmt_ip, "resource": host_resource(host.name),
             "log": str(log)}
    if wait_s is not None:
        wait_ready(f"raylet of {host.name}", pid, log, time.monotonic() + wait_s)
    return entry


# -- finding and stopping ------------------------------------------------------------------
def _proc_table() -> Iterable[tuple[int, int, int, bytes]]:
    """(pid, pgid, sid, cmdline) of every process."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if len(fields) < 4 or fields[0] in ("Z", "X"):
            continue
        yield int(entry.name), int(fields[2]), int(fields[3]), cmd


def _is_ray(cmd: bytes) -> bool:
    """A Ray program (``ray start``, gcs_server, raylet, log_monitor.py ...), not, say, a
    ``tail`` of one of the lab's Ray logs."""
    return any(b"/ray/" in arg or arg.endswith(b"/ray") for arg in cmd.split(b"\0")[:3])


def _marker(root: str | Path) -> bytes:
    return (str(root).rstrip("/") + "/").encode()


def _members(groups: Iterable[int], root: str | Path,
             table: list[tuple[int, int, int, bytes]] | None = None) -> list[int]:  # fmt: skip
    """Live processes in one of ``groups`` (process group or session ids of ``ray start``s we
    spawned), counting only groups that still hold a Ray program naming ``root``: a group id
    left in a stale state file may be a recycled pid of somebody else's now."""
    table = list(_proc_table()) if table is None else table
    marker = _marker(root)
    wanted = {g for g in groups if g > 1}
    ours = {g for pid, pgid, sid, cmd in table for g in (pgid, sid)
            if g in wanted and marker in cmd and _is_ray(cmd)}
    me = os.getpid()
    return [pid for pid, pgid, sid, _ in table if pid != me and (pgid in ours or sid in ours)]


def lab_ray_pids(name: str, groups: Iterable[int] = ()) -> list[int]:
    """Live processes of lab ``name``'s Ray cluster.

    Those in one of ``groups`` (the process groups, and sessions, of the ``ray start`` we
    spawned; see :func:`_members`), and without them: every Ray program naming the lab's Ray
    root on its command line, and the whole session of each such program that leads one (a
    ``ray start``: its agents and workers rename themselves ``ray::...`` but stay in its
    session).
    """
    root = ray_root(name)
    marker = _marker(root)
    table = list(_proc_table())
    ours = {pid for pid, _, _, cmd in table if marker in cmd and _is_ray(cmd)}
    leaders = {pid for pid, _, sid, _ in table if pid in ours and pid == sid}
    me = os.getpid()
    return sorted({pid for pid, _, _, _ in table if pid in ours and pid != me}
                  | set(_members([*groups, *leaders], root, table)))


def _groups(state: Mapping[str, Any] | None) -> list[int]:
    if not state:
        return []
    entries = [state.get("head") or {}, *(state.get("raylets") or {}).values()]
    return [int(e["pgid"]) for e in entries if e.get("pgid")]


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_groups(groups: Iterable[int], sig: int) -> None:
    for g in groups:
        try:
            os.killpg(g, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop_group(entry: Mapping[str, Any], grace_s: float = STOP_GRACE_S) -> None:
    """End one ``ray start`` (a state entry: its process group, TERM, grace, KILL) and its
    session's stragglers; nothing when the group is not ours any more."""
    pgid, root = int(entry["pgid"]), _entry_root(entry)
    members = _members([pgid], root)
    if not members:
        return
    _kill_groups([pgid], signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(p) for p in members):
        time.sleep(0.05)
    _kill_groups([pgid], signal.SIGKILL)
    _signal([p for p in members if _alive(p)], signal.SIGKILL)


def _entry_root(entry: Mapping[str, Any]) -> Path:
    """The lab's Ray root, from a state entry (its log lives there)."""
    return Path(str(entry["log"])).parent


def stop(name: str, state: Mapping[str, Any] | None = None,
         grace_s: float = STOP_GRACE_S) -> list[str]:  # fmt: skip
    """Stop every Ray process of lab ``name`` and remove its Ray root; returns what was done.

    ``state`` (the ``ray`` part of ``state.json``) names our process groups; without it (state
    lost after a crash) the Ray root on the command lines still finds every process.
    """
    groups = [g for g in _groups(state) if _members([g], ray_root(name))]  # still ours
    pids = lab_ray_pids(name, groups)
    removed = []
    if pids or groups:
        _kill_groups(groups, signal.SIGTERM)
        _signal(pids, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and lab_ray_pids(name, groups):
            time.sleep(0.05)
        left = lab_ray_pids(name, groups)
        _kill_groups(groups, signal.SIGKILL)
        _signal(left, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and lab_ray_pids(name, groups):
            time.sleep(0.05)
        if pids:
            removed.append(f"ray: {len(pids)} process(es)")
    root = ray_root(name)
    if root.exists():
        shutil.rmtree(root, ignore_errors=True)
        removed.append(f"dir {root}")
    return removed


def status(state: Mapping[str, Any] | None) -> dict[str, Any]:
    """``address`` and whether the head and each host's raylet still run."""
    if not state:
        return {}
    return {
        "address": state.get("address"),
        "head": raylet_alive(state.get("head")),
        "raylets": {h: raylet_alive(e) for h, e in (state.get("raylets") or {}).items()},
    }


def raylet_alive(entry: Mapping[str, Any] | None) -> bool:
    """Whether the ``ray start`` of a state entry (head or raylet) still runs, as ours."""
    return bool(entry and entry.get("pgid")
                and _members([int(entry["pgid"])], _entry_root(entry)))
