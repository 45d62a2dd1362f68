"""A real multi-node Ray cluster on this machine for tests: one ``ray start --block`` per node.

Each node is its own raylet (the head also runs the GCS) with its own temp dir, its own ports and
its own node IP, and carries the custom resource ``fchost_<name>`` naming the host it stands for:

- on loopback every node gets a distinct address in 127.0.0.0/8 (``127.<a>.<b>.<i>``): Ray
  rewrites only ``127.0.0.1``/``localhost`` to the machine's address, so ``127.x.y.z`` keeps the
  whole cluster on loopback (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` would also keep it there,
  but then ``ray start`` refuses to add worker nodes);
- in the lab every node runs inside its host's namespaces (``prefix``, e.g. ``ip netns exec ns``)
  with ``--node-ip-address`` set to the host's address.

Nothing is shared with other Ray users of the machine: every ``ray start`` is our child in its own
session (so its whole process group is ours to kill) and runs under ``timeout -s KILL`` so a
crashed test cannot leave a cluster behind. :meth:`RayCluster.stop` kills by process group; it
never runs ``ray stop`` (that would kill every Ray process on the machine).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

RAY_BIN = str(Path(sys.executable).with_name("ray"))
READY_LINE = "Ray runtime started."
#: environment every raylet and driver of a test cluster gets
RAY_TEST_ENV = {
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DEDUP_LOGS": "0",
}
#: GCS declares a killed raylet dead in ~2-3 s instead of ~15 s (tests that kill nodes)
FAST_FAILURE_ENV = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "2",
}


def unavailable_reason() -> str | None:
    """Why a real Ray cluster cannot start here, or None."""
    if not Path(RAY_BIN).exists():
        return f"no ray CLI beside {sys.executable}"
    if shutil.which("timeout") is None:
        return "coreutils timeout missing"
    return None


def free_ports(n: int, ip: str = "127.0.0.1") -> list[int]:
    """``n`` distinct TCP ports that are free on ``ip`` right now."""
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind((ip, 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def loopback_ips(n: int) -> list[str]:
    """``n`` loopback addresses ``127.a.b.1..n`` in a random /24 (not 127.0.0.x)."""
    a, b = random.randint(10, 250), random.randint(1, 250)
    return [f"127.{a}.{b}.{i + 1}" for i in range(n)]


@dataclass
class NodeSpec:
    """One raylet: the host ``name`` it stands for, its IP and how to enter its host."""

    name: str
    ip: str
    prefix: tuple[str, ...] = ()  # e.g. ("ip", "netns", "exec", "fclab-node-000")
    num_cpus: int = 1
    num_gpus: int = 0
    resources: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # extra environment of this raylet
    tag_resource: bool = True  # add the fchost_<name> resource


@dataclass
class _Proc:
    spec: NodeSpec
    popen: subprocess.Popen
    temp_dir: Path
    log: Path


class RayCluster:
    """Start/stop a real multi-node Ray cluster (see the module docstring).

    ``nodes[0]`` is the head. Use as a context manager; :meth:`stop` always runs.
    """

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        *,
        tag: str = "fcr",
        max_life_s: float = 900.0,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        if not nodes:
            raise ValueError("a cluster needs at least one node")
        self.nodes = list(nodes)
        self.tag = f"{tag}{os.getpid() % 100000}-{random.randint(0, 9999)}"
        self.max_life_s = max_life_s
        self.env = {**os.environ, **RAY_TEST_ENV, **(extra_env or {})}
        self.env.pop("RAY_ADDRESS", None)
        self.env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        self.procs: list[_Proc] = []
        self.port = 0
        self._used_ports: set[int] = set()
        self.root = Path("/tmp") / self.tag  # short: Ray's unix socket paths must stay < 108 chars

    @property
    def address(self) -> str:
        """The GCS address drivers pass to ``ray.init`` / ``--ray-address``."""
        return f"{self.nodes[0].ip}:{self.port}"

    @property
    def head_ip(self) -> str:
        return self.nodes[0].ip

    def _ports(self, n: int) -> list[int]:
        """``n`` free ports never handed out before by this cluster (a closed probe socket's
        port can come back from the kernel at once)."""
        out: list[int] = []
        while len(out) < n:
            for port in free_ports(n - len(out)):
                if port not in self._used_ports:
                    self._used_ports.add(port)
                    out.append(port)
        return out

    def _argv(self, spec: NodeSpec, idx: int, temp_dir: Path) -> list[str]:
        resources = {**({f"fchost_{spec.name}": 1.0} if spec.tag_resource else {}),
                     **spec.resources}
        import json

        ports = self._ports(4)
        argv = [
            *spec.prefix,
            "timeout", "-s", "KILL", str(int(self.max_life_s)),
            RAY_BIN, "start", "--block", "--disable-usage-stats",
            "--node-ip-address", spec.ip,
            "--temp-dir", str(temp_dir),
            "--num-cpus", str(spec.num_cpus), "--num-gpus", str(spec.num_gpus),
            "--resources", json.dumps(resources),
            "--dashboard-agent-listen-port", str(ports[0]),
            "--dashboard-agent-grpc-port", str(ports[1]),
            "--metrics-export-port", str(ports[2]),
            "--runtime-env-agent-port", str(ports[3]),
            "--object-store-memory", str(80 * 1024 * 1024),
            "--log-style", "record",
        ]
        if spec.labels:
            argv += ["--labels", json.dumps(spec.labels)]
        if idx == 0:
            argv += ["--head", "--port", str(self.port), "--include-dashboard", "false",
                     "--dashboard-port", str(self._ports(1)[0])]
        else:
            argv += ["--address", self.address]
        return argv

    def _spawn(self, idx: int) -> _Proc:
        spec = self.nodes[idx]
        temp_dir = self.root / f"n{idx}"
        temp_dir.mkdir(parents=True, exist_ok=True)
        log = self.root / f"n{idx}.log"
        with open(log, "wb") as fh:
            popen = subprocess.Popen(
                self._argv(spec, idx, temp_dir), stdout=fh, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env={**self.env, **spec.env}, start_new_session=True,
            )
        proc = _Proc(spec, popen, temp_dir, log)
        self.procs.append(proc)
        return proc

    def _wait_ready(self, proc: _Proc, deadline: float) -> None:
        while time.monotonic() < deadline:
            text = proc.log.read_text(errors="replace") if proc.log.exists() else ""
            if READY_LINE in text:
                return
            if proc.popen.poll() is not None:
                raise RuntimeError(
                    f"ray start for {proc.spec.name} exited {proc.popen.returncode}:\n"
                    f"{text[-2000:]}"
                )
            time.sleep(0.1)
        raise RuntimeError(f"ray start for {proc.spec.name} not ready in time:\n"
                           f"{proc.log.read_text(errors='replace')[-2000:]}")

    def start(self, timeout_s: float = 90.0) -> RayCluster:
        """Start the head, then every worker at once; return when all raylets say they started."""
        deadline = time.monotonic() + timeout_s
        self.port = self._ports(1)[0]
        try:
            self._wait_ready(self._spawn(0), deadline)
            workers = [self._spawn(i) for i in range(1, len(self.nodes))]
            with ThreadPoolExecutor(max_workers=max(1, len(workers))) as pool:
                list(pool.map(lambda p: self._wait_ready(p, deadline), workers))
        except BaseException:
            self.stop()
            raise
        return self

    def pids(self) -> list[int]:
        """Every live (non-zombie) process of this cluster: members of our nodes' process groups."""
        from fabriccheck.executors.ray.agent import group_members

        return [pid for p in self.procs for pid in group_members(p.popen.pid)]

    def node_of_pid(self, pid: int) -> str | None:
        """The node whose ``ray start`` process group is an ancestor of ``pid`` (or holds it)."""
        groups = {p.popen.pid: p.spec.name for p in self.procs}
        while pid > 1:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
            except OSError:
                return None
            ppid, pgrp = int(fields[1]), int(fields[2])
            if pgrp in groups:
                return groups[pgrp]
            pid = ppid
        return None

    def kill_node(self, name: str) -> None:
        """Kill one node's raylet process group at once (simulates a dead host)."""
        for p in self.procs:
            if p.spec.name == name:
                _killpg(p.popen.pid, signal.SIGKILL)
                p.popen.wait(timeout=10)

    def restart_node(self, name: str, timeout_s: float = 60.0) -> None:
        """Start a fresh raylet for worker node ``name`` (after :meth:`kill_node`)."""
        idx = next(i for i, s in enumerate(self.nodes) if s.name == name)
        if idx == 0:
            raise ValueError("the head cannot be restarted")
        self.kill_node(name)
        self.procs = [p for p in self.procs if p.spec.name != name]
        self._wait_ready(self._spawn(idx), time.monotonic() + timeout_s)

    def stop(self, grace_s: float = 5.0) -> None:
        """Kill every process group we started (TERM, then KILL) and remove our temp dirs."""
        for p in reversed(self.procs):
            _killpg(p.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for p in self.procs:
            try:
                p.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in self.procs:  # the group may outlive its leader: always KILL what is left
            _killpg(p.popen.pid, signal.SIGKILL)
            try:
                p.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + 5.0
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        shutil.rmtree(self.root, ignore_errors=True)

    def logs(self) -> str:
        """The tail of every node's ``ray start`` output (for failure messages)."""
        parts = []
        for p in self.procs:
            text = p.log.read_text(errors="replace") if p.log.exists() else ""
            parts.append(f"--- {p.spec.name} ---\n{text[-1500:]}")
        return "\n".join(parts)

    def __enter__(self) -> RayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def loopback_cluster(names: Sequence[str], **kwargs: object) -> RayCluster:
    """A cluster with one raylet per name, each on its own 127.x.y.z address (not started)."""
    ips = loopback_ips(len(names))
    specs = [NodeSpec(n, ip, env={"FC_RAY_TEST_HOST": n}) for n, ip in zip(names, ips, strict=True)]
    return RayCluster(specs, **kwargs)  # type: ignore[arg-type]


#: hosts of the shared test cluster: h0 is the head; hx may be killed by a test (node death)
SHARED_HOSTS = ("h0", "h1", "h2", "h3", "hx")


def cluster_fixture(hosts: Sequence[str] = SHARED_HOSTS):
    """Body of a ``ray_cluster`` fixture: ``pytest.fixture(scope="module")(cluster_fixture)``.

    Starts ``hosts`` on loopback and connects this test process to it; the connection is owned
    here, so executors created by tests reuse it and never shut Ray down themselves.
    """
    import pytest

    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    cluster = loopback_cluster(hosts)
    cluster.start()
    from fabriccheck.inventory.ray_session import connect, disconnect

    try:
        os.environ.update(RAY_TEST_ENV)
        connect(cluster.address, timeout_s=60.0)
        yield cluster
    finally:
        try:
            disconnect()
        finally:
            cluster.stop()


def lab_cluster(
    inventory_path: str | Path, *, tag_resource: bool = False, extra_env: dict | None = None
) -> RayCluster:
    """A Ray cluster over a running namespace lab (not started): one raylet per lab host.

    The head (no CPUs: it only serves the driver) runs in the root namespace on the lab's
    management gateway; every host's raylet runs inside that host's network namespace with its
    own hostname (``unshare --uts``) and ``--node-ip-address`` = its management address, so Ray
    knows each node by the host's real hostname and IP (no ``fchost_`` tag unless asked).
    The probes' traffic goes over the hosts' data NICs, through the lab's shaped links.
    """
    import yaml

    data = yaml.safe_load(Path(inventory_path).read_text())
    gateway = data["lab"]["gateway"]
    venv_bin = str(Path(sys.executable).parent)
    path = f"{venv_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    specs = [NodeSpec("ray-head", gateway, num_cpus=0, tag_resource=False)]
    for host, entry in data["hosts"].items():
        prefix = ("ip", "netns", "exec", entry["netns"], "unshare", "--uts",
                  "sh", "-c", 'hostname "$0" && exec "$@"', host)
        specs.append(NodeSpec(host, entry["address"], prefix=prefix, tag_resource=tag_resource,
                              env={"PATH": path}))
    return RayCluster(specs, tag="fcrlab", extra_env=extra_env)
