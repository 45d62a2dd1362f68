"""The executor contract (tests/executors/contract.py) for the Ray executor on a real cluster.

Four raylets ``host1..host4`` on loopback addresses; the contract's iperf3 tests run between
them for real (NIC addresses fall back to the Ray nodes' IPs). Faults are made real the Ray way:

- ``node_hang``: every raylet has a shim ``iperf3`` first on its PATH that execs a marked
  ``sleep`` when ``$FC_HANG_DIR/<host>`` exists, else the real iperf3;
- ``node_unreachable``: the host's raylet is killed (and restarted for the next check).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.executors.contract import CHECKS, HOSTS, Harness
from tests.raycluster import (
    FAST_FAILURE_ENV,
    RAY_TEST_ENV,
    NodeSpec,
    RayCluster,
    loopback_ips,
    unavailable_reason,
)

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(300)]
ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_harness(tmp_path_factory: pytest.TempPathFactory):
    reason = unavailable_reason() or (None if shutil.which("iperf3") else "iperf3 missing")
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("raycontract")
    shim_dir, hang_dir = root / "bin", root / "hang"
    shim_dir.mkdir()
    hang_dir.mkdir()
    marker = f"31474{uuid.uuid4().int % 10**5:05d}"
    real = shutil.which("iperf3")
    shim = shim_dir / "iperf3"
    shim.write_text(f'#!/bin/sh\nif [ -e "$FC_HANG_DIR/$FC_RAY_TEST_HOST" ]; then '
                    f"exec sleep {marker}; fi\nexec {real} \"$@\"\n")
    shim.chmod(0o755)
    path = f"{shim_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    specs = [NodeSpec(h, ip, env={"FC_RAY_TEST_HOST": h, "FC_HANG_DIR": str(hang_dir),
                                  "PATH": path})
             for h, ip in zip(HOSTS, loopback_ips(len(HOSTS)), strict=True)]
    cluster = RayCluster(specs, extra_env=FAST_FAILURE_ENV).start()
    from fabriccheck.executors.ray.executor import RayExecutor
    from fabriccheck.inventory.ray_session import connect, disconnect

    killed: set[str] = set()
    ports = iter(range(29000, 30000, 10))

    def make(faults: list[dict]):
        for f in hang_dir.iterdir():
            f.unlink()
        for f in faults:
            if f["kind"] == "node_hang":
                (hang_dir / f["node"]).touch()
        down = {f["node"] for f in faults if f["kind"] == "node_unreachable"}
        for host in sorted(killed - down):
            cluster.restart_node(host)
            killed.discard(host)
            _wait_single_live_node(host)
        for host in sorted(down - killed):
            cluster.kill_node(host)
            killed.add(host)
        return RayExecutor(cluster.address, idle_resource="CPU", reserve_timeout_s=4.0,
                           base_port=next(ports))

    def strays() -> str:
        return subprocess.run(["pgrep", "-af", f"sleep {marker}|iperf3 -s -1 -B 127\\."],
                              capture_output=True, text=True).stdout

    try:
        os.environ.update(RAY_TEST_ENV)
        connect(cluster.address, timeout_s=60.0)
        yield Harness("ray", make, strays)
    finally:
        try:
            disconnect()
        finally:
            cluster.stop()


def _wait_single_live_node(host: str, timeout_s: float = 30.0) -> None:
    """Until the killed raylet of ``host`` is declared dead and only its new one is alive."""
    from fabriccheck.inventory.ray import host_name_of

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [n for n in ray.nodes() if n["Alive"] and host_name_of(n) == host]
        if len(alive) == 1:
            return
        time.sleep(0.2)
    raise AssertionError(f"{host}: no single live node after restart")


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_ray_executor_contract(check: str, ray_harness: Harness) -> None:
    CHECKS[check](ray_harness)


def test_contract_harness_really_runs_on_separate_raylets(ray_harness: Harness) -> None:
    """The contract above is not vacuous: each iperf3 end ran under its own host's raylet."""
    from fabriccheck.models import Test
    from fabriccheck.probes.launch import HostCommand, ProbeLaunch

    ex = ray_harness.make([])
    ex.build = lambda t, ips, port: ProbeLaunch(
        (HostCommand(t.nodes[0], ("sh", "-c", "echo $FC_RAY_TEST_HOST; command -v iperf3")),), 0)
    try:
        out = [r.stdout.split() for r in ex.run_round(
            [Test(f"w{i}", "iperf3", (h,)) for i, h in enumerate(HOSTS)])]
    finally:
        ex.close()
    assert [o[0] for o in out] == list(HOSTS)
    assert all(Path(o[1]).name == "iperf3" and "bin" in o[1] for o in out)
