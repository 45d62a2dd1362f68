"""``bisect --job JOBID`` against a real slurmctld: the job's nodes and its log come from
``scontrol show job``; the log names the rank that never reached the collective (issue 17)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from tests.slurmlab import REAL_SLURM, slurm_lab_fixture

pytestmark = REAL_SLURM

lab = slurm_lab_fixture(nodes=4)

TOPOLOGY = """name: slurm-4
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

#: what the job prints: NCCL init lines of its 4 ranks (2 per node), then 3 watchdog reports
#: (rank 3 on fcn2 silent), in the PyTorch 2.4+ / NCCL 2.2x formats; then it stays alive
JOB = r"""
for r in 0 1 2 3; do h=fcn$((r / 2 + 1)); echo "$h:$((7000 + r)):$((7100 + r)) [$((r % 2))] \
NCCL INFO comm 0x5a$r rank $r nranks 4 cudaDev $((r % 2)) busId 18000 commId 0x1 - Init COMPLETE"
done
for r in 0 1 2; do echo "[rank$r]:[E1125 04:12:31.123456789 ProcessGroupNCCL.cpp:616] [Rank $r] \
Watchdog caught collective operation timeout: WorkNCCL(SeqNum=311, OpType=ALLREDUCE, NumelIn=8, \
NumelOut=8, Timeout(ms)=600000) ran for 600031 milliseconds before timing out."; done
sleep 300
"""


@pytest.fixture
def topo_file(tmp_path) -> str:
    names = [f"fcn{i}" for i in range(1, 5)]
    text = TOPOLOGY.format(
        nodes="\n".join(f"  - {{name: {n}, gpus: 0, nics: [{{name: eth0, rail: 0, gbps: 1}}]}}"
                        for n in names),
        links="\n".join(f"  - {{a: {n}/eth0, b: leaf-{1 + i // 2}, gbps: 1}}"
                        for i, n in enumerate(names)),
    )  # fmt: skip
    path = tmp_path / "slurm-4.yaml"
    path.write_text(text)
    return str(path)


def test_bisect_job_reads_nodes_and_log_from_slurm(lab, topo_file, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", lab.env["SLURM_CONF"])
    monkeypatch.setenv("FABRICCHECK_DB", str(tmp_path / "h.sqlite"))
    script = lab.root / "job.sh"
    script.write_text("#!/bin/sh\n" + JOB)
    job = lab.run("sbatch", "--parsable", "-N", "2", "-w", "fcn[1-2]",
                  f"--output={lab.root}/slurm-%j.out", str(script)).strip()
    out = Path(lab.root) / f"slurm-{job}.out"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "[Rank 2]" not in (
            out.read_text() if out.exists() else ""):
        time.sleep(0.5)
    r = CliRunner().invoke(app, ["bisect", "--job", job, "-t", topo_file, "--probe", "iperf3",
                                 "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["nodes"] == ["fcn1", "fcn2"] and d["nodes_from"] == f"--job {job}"
    jl = d["job_log"]
    assert jl["missing_ranks"] == [3] and jl["rank_hosts"]["3"] == "fcn2"
    assert jl["conclusion"] == "not-fabric" and "rank 3 on fcn2 never reached" in jl["why"]
