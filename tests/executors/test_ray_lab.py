"""End to end: ``fabriccheck sweep --executor ray`` on a real multi-node Ray cluster in the lab.

The Ray cluster spans the namespace lab: the head on the lab's management gateway (root
namespace), one raylet per lab host started inside that host's network namespace with its own
hostname and ``--node-ip-address`` = its management address. The sweep (a subprocess: the real
CLI is the Ray driver) runs iperf3 between the hosts' data NICs, through the lab's tc-shaped
links. A host interface throttled to a quarter rate must be found, nothing else blamed; a host
that goes down (the lab kills everything in its namespace, its raylet included) must be reported
unreachable, nothing else blamed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.lab.labfixtures import inject, lab, lab4, stray_processes  # noqa: F401
from tests.raycluster import FAST_FAILURE_ENV, RAY_TEST_ENV, lab_cluster, unavailable_reason

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.lab, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parents[2]
FABRICCHECK = str(Path(sys.executable).with_name("fabriccheck"))


def _ray_state(address: str) -> tuple[list[dict], dict]:
    """ray.nodes() and the placement-group table, from a short-lived driver (a subprocess)."""
    code = (
        "import json, sys\n"
        "from fabriccheck.inventory.ray_session import connect\n"
        "import ray\n"
        "from ray.util.placement_group import placement_group_table\n"
        "connect(sys.argv[1], timeout_s=60)\n"
        "print(json.dumps([ray.nodes(), placement_group_table()], default=str))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, address], capture_output=True, text=True,
                         timeout=120, env={**os.environ, **RAY_TEST_ENV}, cwd=str(REPO))
    assert out.returncode == 0, out.stderr[-2000:]
    nodes, pgs = json.loads(out.stdout.strip().splitlines()[-1])
    return nodes, pgs


def _sweep(cluster, lab) -> tuple[int, dict, str]:  # noqa: F811 - not the fixture
    out = subprocess.run(
        [FABRICCHECK, "sweep", "--executor", "ray", "--ray-address", cluster.address,
         "--inventory", str(lab.inventory), "--topology", "topologies/lab-4.yaml",
         "--probe", "iperf3", "--json"],
        capture_output=True, text=True, timeout=240, cwd=str(REPO),
        env={**os.environ, **RAY_TEST_ENV},
    )
    return out.returncode, (json.loads(out.stdout) if out.stdout.strip() else {}), out.stderr


@pytest.fixture(scope="module")
def ray_lab(lab4):  # noqa: F811 - the fixture
    """One Ray cluster over the shared lab-4 for this module (torn down before other modules)."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    cluster = lab_cluster(lab4.inventory, extra_env=FAST_FAILURE_ENV)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def test_ray_sweep_in_the_lab_finds_the_throttled_interface(lab, ray_lab):  # noqa: F811
    inject(lab, {"kind": "nic_degraded", "nic": "host3/eth0", "factor": 0.25})
    cluster = ray_lab
    nodes, _ = _ray_state(cluster.address)
    hosts = {n["NodeManagerHostname"]: n["NodeManagerAddress"] for n in nodes if n["Alive"]}
    inventory = {h: e["address"] for h, e in _inventory_hosts(lab.inventory).items()}
    assert {h: hosts.get(h) for h in inventory} == inventory  # one raylet per host, in it
    code, result, stderr = _sweep(cluster, lab)
    assert code == 1, stderr[-3000:]
    assert result["bad_nics"] == ["host3/eth0"] or result["bad_nodes"] == ["host3"], result
    assert result["drain"] == ["host3"]
    assert result["unreachable"] == [] and result["bad_links"] == []
    _, pgs = _ray_state(cluster.address)
    ours = {v["name"]: v["state"] for v in pgs.values()
            if v["name"].startswith("fabriccheck-")}
    assert ours and set(ours.values()) == {"REMOVED"}  # every group reserved, then released
    left = {h: [c for c in cmds if "iperf3" in c] for h, cmds in stray_processes(lab).items()}
    assert not any(left.values()), left


def test_ray_sweep_in_the_lab_reports_a_downed_host_unreachable(lab, ray_lab):  # noqa: F811
    inject(lab, {"kind": "node_unreachable", "node": "host2"})  # kills host2's raylet too
    deadline = time.monotonic() + 30
    while any(n["Alive"] and n["NodeManagerHostname"] == "host2"
              for n in _ray_state(ray_lab.address)[0]):
        assert time.monotonic() < deadline, "the GCS never declared host2 dead"
        time.sleep(0.5)
    code, result, stderr = _sweep(ray_lab, lab)
    assert code == 1, stderr[-3000:]
    assert result["unreachable"] == ["host2"], result
    assert result["bad_nodes"] == [] and result["bad_nics"] == [] and result["drain"] == []


def _inventory_hosts(path: Path) -> dict:
    import yaml

    return yaml.safe_load(Path(path).read_text())["hosts"]
