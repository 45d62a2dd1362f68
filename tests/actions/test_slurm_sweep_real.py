"""A whole sweep against a real Slurm: idle nodes from sinfo, a reservation held while testing,
verdicts from the orchestrator (simulated probes on those node names), a real drain, and the
node resumed by the next sweep once it passes."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("fabriccheck.orchestrator")

from fabriccheck.actions.session import OpsOptions, OpsSession  # noqa: E402
from fabriccheck.executors.factory import make_executor  # noqa: E402
from fabriccheck.faults import load_faults  # noqa: E402
from fabriccheck.orchestrator import run  # noqa: E402
from fabriccheck.policy import SweepPolicy  # noqa: E402
from fabriccheck.specs import resolve_spec  # noqa: E402
from fabriccheck.store import Store  # noqa: E402
from fabriccheck.topology import load_topology  # noqa: E402
from tests.doubles import PassThrough  # noqa: E402
from tests.slurmlab import REAL_SLURM, slurm_lab_fixture  # noqa: E402

pytestmark = REAL_SLURM

TOPOLOGY = """name: slurm-6
fabric: roce
spec: lab-tcp
gpus_per_node: 0
nodes:
{nodes}
switches:
  - {{name: leaf-1, tier: leaf}}
  - {{name: leaf-2, tier: leaf}}
  - {{name: spine-1, tier: spine}}
links:
{links}
  - {{a: leaf-1, b: spine-1, gbps: 1}}
  - {{a: leaf-2, b: spine-1, gbps: 1}}
"""


lab = slurm_lab_fixture(nodes=6)


@pytest.fixture
def topo(tmp_path):
    names = [f"fcn{i}" for i in range(1, 7)]
    text = TOPOLOGY.format(
        nodes="\n".join(f"  - {{name: {n}, gpus: 0, nics: [{{name: eth0, rail: 0, gbps: 1}}]}}"
                        for n in names),
        links="\n".join(f"  - {{a: {n}/eth0, b: leaf-{1 + i // 3}, gbps: 1}}"
                        for i, n in enumerate(names)),
    )  # fmt: skip
    path = tmp_path / "slurm-6.yaml"
    path.write_text(text)
    return load_topology(str(path))


class Watching(PassThrough):
    """Pass-through executor that reads the reservations while each round runs."""

    def __init__(self, inner, lab):
        super().__init__(inner)
        self.lab, self.seen = lab, []

    def before_round(self, tests):
        self.seen.append(self.lab.run("scontrol", "show", "reservation", check=False))


def _sweep(lab, topo, tmp_path, opts, fault_text, seed):
    spec = resolve_spec(None, topo)
    faults_file = tmp_path / f"faults-{seed}.yaml"
    faults_file.write_text(fault_text)
    ops = OpsSession("sweep", opts, sku=spec.sku, fabric=topo.fabric)
    nodes = ops.select_nodes(sorted(topo.nodes), explicit=False, known=topo.nodes)
    ops.begin(nodes)
    sim = make_executor("sim", topology=topo, spec=spec, faults=load_faults(faults_file), seed=seed)
    watch = Watching(sim, lab)
    with ops.hold(nodes):
        exe = ops.wrap(watch, spec)
        result = run("sweep", nodes, topo, spec, exe, SweepPolicy(seed=seed, pair_probe="iperf3"))
    summary = ops.finish(result, topology=topo)
    ops.close()
    return nodes, result, summary, watch


def test_sweep_drains_for_real_then_resumes(lab, topo, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", lab.env["SLURM_CONF"])
    jobs = [lab.submit(n, "sleep 300") for n in ("fcn5", "fcn6")]
    try:
        lab.wait_states({"fcn5": "allocated", "fcn6": "allocated"})
        opts = OpsOptions(db=str(tmp_path / "h.sqlite"), scheduler="slurm", apply=True,
                          max_drain=0.25, exclude_file=str(tmp_path / "exclude"))  # fmt: skip
        bad = "noise: {jitter: 0.02, glitch_rate: 0}\nfaults:\n" \
              "  - {kind: nic_degraded, nic: fcn3/eth0, factor: 0.2}\n"  # fmt: skip
        nodes, result, summary, watch = _sweep(lab, topo, tmp_path, opts, bad, seed=3)
        assert nodes == ["fcn1", "fcn2", "fcn3", "fcn4"]  # busy fcn5/fcn6 never tested
        assert all("Nodes=fcn[1-4]" in seen for seen in watch.seen)  # held while testing
        assert "fcn3" in result.drain
        assert [(a["node"], a["status"]) for a in summary["done"]] == [("fcn3", "applied")]
        lab.wait_states({"fcn3": "drained"})
        reason = lab.run("scontrol", "show", "node", "fcn3")
        assert re.search(r"Reason=fabriccheck: (eth0 )?iperf3 0\.\d+ Gb/s < 0\.75 \(\d+ tests\)",
                         reason)
        assert "fabriccheck-" not in lab.run("scontrol", "show", "reservation", check=False)
        assert (tmp_path / "exclude").read_text() == "fcn3\n"

        good = "noise: {jitter: 0.02, glitch_rate: 0}\nfaults: []\n"
        nodes, result, summary, _ = _sweep(lab, topo, tmp_path, opts, good, seed=4)
        assert nodes == ["fcn1", "fcn2", "fcn4", "fcn3"]  # the drained node is re-tested
        assert [(a["node"], a["action"], a["status"]) for a in summary["done"]] == [
            ("fcn3", "resume", "applied")
        ]
        lab.wait_states({"fcn3": "idle"})
        assert (tmp_path / "exclude").read_text() == ""
        with Store(tmp_path / "h.sqlite") as store:
            assert [a.action for a in store.actions(node="fcn3")] == ["drain", "resume"]
            assert store.held_nodes("slurm") == {}
    finally:
        for job in jobs:
            lab.run("scancel", job, check=False)


def test_cli_refuses_simulated_drains_on_a_real_slurm(lab, topo, tmp_path):
    """Through the real CLI as a subprocess: simulated measurements never drain a real node;
    the sim executor with --scheduler slurm --apply is refused before Slurm is contacted."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    topo_file = tmp_path / "slurm-6.yaml"  # written by the topo fixture
    faults = tmp_path / "f.yaml"
    faults.write_text("noise: {jitter: 0.02, glitch_rate: 0}\nfaults:\n"
                      "  - {kind: nic_degraded, nic: fcn2/eth0, factor: 0.2}\n")  # fmt: skip
    env = {**os.environ, "SLURM_CONF": lab.env["SLURM_CONF"]}
    lab.run("scontrol", "update", "NodeName=fcn[1-6]", "State=RESUME", check=False)
    lab.wait_states({f"fcn{i}": "idle" for i in range(1, 7)})
    proc = subprocess.run(
        [sys.executable, "-m", "fabriccheck", "sweep", "-t", str(topo_file), "--faults",
         str(faults), "--probe", "iperf3", "--scheduler", "slurm", "--apply", "--max-drain",
         "0.2", "--db", str(tmp_path / "h.sqlite"), "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "sim executor only simulates" in proc.stderr and proc.stdout == ""
    assert "fabriccheck-" not in lab.run("scontrol", "show", "reservation", check=False)
    lab.wait_states({f"fcn{i}": "idle" for i in range(1, 7)})  # nothing drained
