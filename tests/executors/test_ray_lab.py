"""End to end: ``fabriccheck sweep --executor ray`` on a real multi-node Ray cluster in the lab.

The Ray cluster spans the namespace lab: the head on the lab's management gateway (root
namespace), one raylet per lab host started inside that host's network namespace with its own
hostname and ``--node-ip-address`` = its management address. The sweep (a subprocess: the real
CLI is the Ray driver) runs iperf3 between the hosts' data NICs, through the lab's tc-shaped
links; one host interface is throttled to a quarter rate and must be found, nothing else blamed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lab.labfixtures import inject, lab, lab4, stray_processes  # noqa: F401
from tests.raycluster import RAY_TEST_ENV, lab_cluster, unavailable_reason

pytestmark = [pytest.mark.ray, pytest.mark.lab, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parents[2]
FABRICCHECK = str(Path(sys.executable).with_name("fabriccheck"))


def _ray_state(address: str) -> tuple[list[dict], dict]:
    """ray.nodes() and the placement-group table, from a short-lived driver (a subprocess)."""
    code = (
        "import json, sys\n"
        "from fabriccheck.executors.ray_session import connect\n"
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


def test_ray_sweep_in_the_lab_finds_the_throttled_interface(lab):  # noqa: F811 - fixture
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    inject(lab, {"kind": "nic_degraded", "nic": "host3/eth0", "factor": 0.25})
    cluster = lab_cluster(lab.inventory)
    try:
        cluster.start()
        nodes, _ = _ray_state(cluster.address)
        hosts = {n["NodeManagerHostname"]: n["NodeManagerAddress"] for n in nodes if n["Alive"]}
        inventory = {h: e["address"] for h, e in _inventory_hosts(lab.inventory).items()}
        assert {h: hosts.get(h) for h in inventory} == inventory  # one raylet per host, in it
        out = subprocess.run(
            [FABRICCHECK, "sweep", "--executor", "ray", "--ray-address", cluster.address,
             "--inventory", str(lab.inventory), "--topology", "topologies/lab-4.yaml",
             "--probe", "iperf3", "--json"],
            capture_output=True, text=True, timeout=240, cwd=str(REPO),
            env={**os.environ, **RAY_TEST_ENV},
        )
        assert out.returncode == 1, out.stderr[-3000:]
        result = json.loads(out.stdout)
        assert result["bad_nics"] == ["host3/eth0"] or result["bad_nodes"] == ["host3"], result
        assert result["drain"] == ["host3"]
        assert result["unreachable"] == [] and result["bad_links"] == []
        _, pgs = _ray_state(cluster.address)
        ours = {v["name"]: v["state"] for v in pgs.values()
                if v["name"].startswith("fabriccheck-")}
        assert ours and set(ours.values()) == {"REMOVED"}  # every group reserved, then released
        left = {h: [c for c in cmds if "iperf3" in c] for h, cmds in stray_processes(lab).items()}
        assert not any(left.values()), left
    finally:
        cluster.stop()


def _inventory_hosts(path: Path) -> dict:
    import yaml

    return yaml.safe_load(Path(path).read_text())["hosts"]
