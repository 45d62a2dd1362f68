"""``bisect`` after a NCCL timeout, through the real CLI on the simulator: the job is the scope,
the log is triaged first, and the run ends with fabric / not-fabric / unknown (issue 17)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.bisect_scope import parse_scontrol_job, slurm_job
from fabriccheck.cli.main import app
from fabriccheck.errors import ConfigError, ExecutorError
from tests.conftest import LOCAL_FIXTURES, REPO

LOG = str(LOCAL_FIXTURES / "nccl-logs" / "pytorch_32rank_4host_rank28_missing.log")
NIC_FAULT = str(LOCAL_FIXTURES / "faults" / "node-004-nic-degraded.yaml")
HOSTS = ["node-001", "node-002", "node-003", "node-004"]


@pytest.fixture(autouse=True)
def _history_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICCHECK_DB", str(tmp_path / "history.sqlite"))


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_healthy_job_nodes_conclude_not_fabric_and_name_rank_28():
    r = invoke("bisect", "--job-log", LOG, "--topology", "roce-rail-64", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["nodes"] == HOSTS and d["nodes_from"] == "job log"  # not the 64 of the topology
    # traffic tests; the node-local preflight readings (35 per node here) come on top
    assert d["tests"] - d["signal_readings"] <= 4 * 8 and d["drain"] == []
    jl = d["job_log"]
    assert jl["conclusion"] == "not-fabric" and jl["missing_ranks"] == [28]
    assert jl["suspect_hosts"] == ["node-004"] and jl["rank_hosts"]["28"] == "node-004"
    assert jl["collective"] == {"op": "ALLREDUCE", "seq": 4021, "timeout_ms": 600000}
    assert "rank 28 on node-004 never reached ALLREDUCE SeqNum=4021" in jl["why"]
    assert "py-spy dump --pid 41028" in jl["why"]


def test_degraded_nic_on_rank_28s_host_concludes_fabric_and_drains_it():
    r = invoke("bisect", "--job-log", LOG, "--topology", "roce-rail-64", "--faults", NIC_FAULT,
               "--json")
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    assert d["nodes"] == HOSTS and d["bad_nics"] == ["node-004/mlx5_5"]
    assert d["drain"] == ["node-004"]
    assert d["job_log"]["conclusion"] == "fabric" and "node-004/mlx5_5" in d["job_log"]["why"]


def test_human_output_leads_with_the_conclusion():
    r = invoke("bisect", "--job-log", LOG, "--topology", "roce-rail-64")
    assert r.exit_code == 0
    out = r.stdout
    assert out.index("job log: not-fabric") < out.index("healthy:")
    assert "rank 28 on node-004" in out and "tested 4 node(s) from job log" in out


def test_explicit_nodes_win_over_the_log_hosts():
    r = invoke("bisect", "--job-log", LOG, "-t", "roce-rail-64", "--nodes", "node-[003-006]",
               "--json")
    d = json.loads(r.stdout)
    assert d["nodes"] == ["node-003", "node-004", "node-005", "node-006"]
    assert d["nodes_from"] == "--nodes/--node-file" and d["job_log"]["conclusion"] == "not-fabric"


def _cli(*args: str, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "FABRICCHECK_DB": str(tmp_path / "h.sqlite")}
    return subprocess.run([sys.executable, "-m", "fabriccheck", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=60, env=env)


def test_no_nodes_is_refused_never_the_whole_topology(tmp_path):
    p = _cli("bisect", "-t", "roce-rail-64", "--json", tmp_path=tmp_path)
    assert p.returncode == 2 and p.stdout == "" and "Traceback" not in p.stderr
    assert "no nodes to test" in p.stderr and "--job JOBID" in p.stderr


def test_log_naming_no_topology_node_is_refused(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("gpu-a:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 1 - Init COMPLETE\n")
    p = _cli("bisect", "-t", "roce-rail-64", "--job-log", str(log), tmp_path=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "gpu-a" in p.stderr and "none of them a node of the topology" in p.stderr


def test_missing_log_file_is_one_line(tmp_path):
    p = _cli("bisect", "-t", "roce-rail-64", "--job-log", str(tmp_path / "nope.log"),
             tmp_path=tmp_path)
    assert p.returncode == 2 and "--job-log" in p.stderr and "Traceback" not in p.stderr


SCONTROL = """JobId=4242 JobName=train
   UserId=u(1000) GroupId=u(1000) MCS_label=N/A
   JobState=FAILED Reason=NonZeroExitCode Dependency=(null)
   ReqNodeList=(null) ExcNodeList=(null)
   NodeList=node-[001-004]
   BatchHost=node-001
   StdErr={log}
   StdIn=/dev/null
   StdOut={log}
"""


class Recorder:
    """A runner double (no Slurm here): answers scontrol/sacct from a table, records argv."""

    def __init__(self, answers: dict[str, str | Exception]):
        self.answers, self.calls = answers, []

    def __call__(self, argv, timeout_s):
        self.calls.append(list(argv))
        a = self.answers.get(argv[0])
        if isinstance(a, Exception) or a is None:
            raise a or ExecutorError(f"{argv[0]}: command not found")
        return a


def test_slurm_job_from_scontrol():
    nodes, log = slurm_job("4242", Recorder({"scontrol": SCONTROL.format(log=LOG)}))
    assert nodes == HOSTS and log == LOG
    assert parse_scontrol_job(SCONTROL.format(log=LOG))["JobState"] == "FAILED"


def test_slurm_job_falls_back_to_sacct_then_refuses():
    gone = ExecutorError("`scontrol show job 9` exited 1: Invalid job id specified")
    rec = Recorder({"scontrol": gone, "sacct": "node-[010-011]|/nonexistent/dir\n"})
    assert slurm_job("9", rec) == (["node-010", "node-011"], None)
    assert rec.calls[1][:3] == ["sacct", "-j", "9"]
    with pytest.raises(ConfigError, match="does not know job 9"):
        slurm_job("9", Recorder({"scontrol": gone, "sacct": gone}))
    with pytest.raises(ConfigError, match="not a Slurm job id"):
        slurm_job("9; rm -rf /", Recorder({}))


def test_sacct_workdir_gives_the_default_log(tmp_path):
    (tmp_path / "slurm-9.out").write_text("x\n")
    gone = ExecutorError("`scontrol show job 9` exited 1: Invalid job id specified")
    rec = Recorder({"scontrol": gone, "sacct": f"node-[010-011]|{tmp_path}\n"})
    assert slurm_job("9", rec) == (["node-010", "node-011"], str(tmp_path / "slurm-9.out"))


def test_bisect_job_flag_uses_the_jobs_nodes_and_log(monkeypatch, tmp_path):
    from fabriccheck.cli import bisect_scope

    rec = Recorder({"scontrol": SCONTROL.format(log=LOG)})
    monkeypatch.setattr(bisect_scope, "_default_runner", lambda: rec)
    r = invoke("bisect", "--job", "4242", "-t", "roce-rail-64", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["nodes"] == HOSTS and d["nodes_from"] == "--job 4242"
    assert d["job_log"]["missing_ranks"] == [28] and rec.calls[0][:3] == ["scontrol", "show", "job"]


def test_report_carries_the_conclusion(tmp_path):
    r = invoke("bisect", "--job-log", LOG, "-t", "roce-rail-64", "--report", str(tmp_path / "r"),
               "--json")
    assert r.exit_code == 0, r.output
    saved = json.loads((tmp_path / "r" / "results.json").read_text())
    assert saved["job_log"]["conclusion"] == "not-fabric" and saved["log_suspects"] == ["node-004"]


def test_hostfile_places_the_silent_rank_when_the_log_names_no_host(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("".join(
        f"[rank{r}]:[E1125 04:12:31.1 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
        f"collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, "
        f"NumelOut=8, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.\n"
        for r in (0, 1, 2))
        + "Not all ranks joining collective, sequence number: 5\ncollective: nccl:all_reduce\n"
          "missing ranks: {3}\nworld size: 4\n")  # fmt: skip
    hostfile = tmp_path / "hosts"
    hostfile.write_text("node-001 slots=2\nnode-002 slots=2\n")
    r = invoke("bisect", "--job-log", str(log), "--hostfile", str(hostfile), "-t",
               "roce-rail-64", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["nodes"] == ["node-001", "node-002"]
    jl = d["job_log"]
    assert jl["missing_ranks"] == [3] and jl["rank_hosts"]["3"] == "node-002"
    assert "rank 3 on node-002 never reached ALLREDUCE SeqNum=5" in jl["why"]


def test_two_node_job_with_a_bad_nic_is_unknown_and_says_what_is_missing():
    r = invoke("bisect", "--job-log", LOG, "-t", "roce-rail-64", "--nodes", "node-[003-004]",
               "--faults", NIC_FAULT, "--json")
    assert r.exit_code == 1, r.output
    jl = json.loads(r.stdout)["job_log"]
    assert jl["conclusion"] == "unknown" and "node-004/mlx5_5" in jl["why"]
    assert "add known-good nodes" in jl["why"]


def test_fqdn_hosts_in_the_log_map_to_the_topologys_short_names(tmp_path):
    log = tmp_path / "fqdn.log"
    log.write_text("".join(line.replace(":41", ".cluster.local:41", 1) if line.startswith("node-")
                           else line for line in Path(LOG).read_text().splitlines(keepends=True)))
    r = invoke("bisect", "--job-log", str(log), "-t", "roce-rail-64", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["nodes"] == HOSTS and d["job_log"]["rank_hosts"]["28"] == "node-004"
    assert d["job_log"]["conclusion"] == "not-fabric"
