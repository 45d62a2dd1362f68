"""Safe in an operator's hands: simulated runs never act, gate never guesses its nodes, every
end of a run is said (one line, the right exit code, the same code in JSON and in history)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from fabriccheck.errors import ConfigError, ExecutorError
from fabriccheck.store import Store
from tests.conftest import REPO

DEMO_FAULTS = str(REPO / "topologies" / "faults" / "demo-roce-64.yaml")


@pytest.fixture(autouse=True)
def _history_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICCHECK_DB", str(tmp_path / "history.sqlite"))
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def _fake_schedulers(tmp_path):
    """scontrol, sinfo, squeue and kubectl that only leave a mark when they are run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mark = tmp_path / "contacted"
    for tool in ("scontrol", "sinfo", "squeue", "kubectl"):
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\necho {tool} \"$@\" >> {mark}\nexit 1\n")
        script.chmod(0o755)
    return bin_dir, mark


@pytest.mark.parametrize("flags", [
    ["--scheduler", "slurm", "--apply"],
    ["--scheduler", "kubernetes", "--apply"],
    ["--scheduler", "slurm"],
    ["--apply"],
])
def test_sim_with_a_scheduler_action_is_refused_before_any_scheduler(flags, tmp_path):
    bin_dir, mark = _fake_schedulers(tmp_path)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "FABRICCHECK_DB": str(tmp_path / "h.sqlite"), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "fabriccheck", "sweep", "--executor", "sim", "-t", "roce-rail-64",
         *flags], capture_output=True, text=True, cwd=REPO, env=env, timeout=60)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --")
    assert "sim executor only simulates" in lines[0] and "--executor ssh or ray" in lines[0]
    assert not mark.exists(), mark.read_text()
    assert not (tmp_path / "h.sqlite").exists()  # nothing began


def test_gate_and_bisect_refuse_sim_actions_too():
    for cmd in ("gate", "bisect"):
        r = invoke(cmd, "node-[001-004]", "-t", "roce-rail-64", "--scheduler", "slurm",
                   "--apply")
        assert r.exit_code == 2 and "sim executor only simulates" in r.stderr


def test_gate_without_nodes_or_allocation_refuses_with_a_hint():
    r = invoke("gate", "-t", "roce-rail-64")
    assert r.exit_code == 2
    line = r.stderr.strip()
    assert "\n" not in line and "gate needs the job's nodes" in line
    assert "SLURM_JOB_NODELIST" in line and "fabriccheck gate 'node-[01-04]'" in line


def test_gate_inside_an_allocation_takes_its_nodes(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node-[001-004]")
    r = invoke("gate", "-t", "roce-rail-64", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["nodes"] == ["node-001", "node-002", "node-003", "node-004"]


def test_json_carries_executor_and_the_exit_code_in_every_mode():
    runs = {
        "sweep": invoke("sweep", "node-[013-020]", "-t", "roce-rail-64", "--faults", DEMO_FAULTS,
                        "--seed", "4", "--json"),
        "gate": invoke("gate", "--nodes", "node-[001-008]", "-t", "roce-rail-64", "--json"),
        "bisect": invoke("bisect", "node-[013-020]", "-t", "roce-rail-64", "--faults",
                         DEMO_FAULTS, "--json"),
    }  # fmt: skip
    for mode, r in runs.items():
        d = json.loads(r.stdout)
        assert d["exit_code"] == r.exit_code, mode
        assert d["executor"] == "sim" and d["seed"] in (0, 4), mode
    assert runs["sweep"].exit_code == 1 and runs["gate"].exit_code == 0
    assert json.loads(runs["sweep"].stdout)["faults"] == DEMO_FAULTS
    assert json.loads(runs["gate"].stdout)["faults"] is None
    assert json.loads(runs["bisect"].stdout)["nodes"][0] == "node-013"


def test_gate_that_cannot_test_says_why_on_one_line_and_exits_3(monkeypatch, tmp_path):
    def broken(*args, **kwargs):
        raise ExecutorError("ssh: connection refused", host="node-003",
                            hint="check the host")

    monkeypatch.setattr("fabriccheck.orchestrator.run", broken)
    r = invoke("gate", "node-[001-004]", "-t", "roce-rail-64")
    assert r.exit_code == 3
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error")]
    assert errors == ["error: node-003: ssh: connection refused (check the host)"]
    with Store(tmp_path / "history.sqlite") as store:
        (rec,) = store.runs()
    assert rec.status == "failed" and "connection refused" in rec.error
    as_json = invoke("gate", "node-[001-004]", "-t", "roce-rail-64", "--json")
    assert as_json.exit_code == 3
    d = json.loads(as_json.stdout)  # stdout still holds one JSON result, with the same code
    assert d["exit_code"] == 3 and "connection refused" in d["error"] and d["executor"] == "sim"


@pytest.mark.parametrize("exc,state", [
    (ConfigError("node-099 not in topology", source="--nodes"), "refused"),
    (RuntimeError("boom"), "crashed"),
])
def test_runs_that_end_without_a_result_are_not_left_running(monkeypatch, tmp_path, exc, state):
    def broken(*args, **kwargs):
        raise exc

    monkeypatch.setattr("fabriccheck.orchestrator.run", broken)
    r = invoke("sweep", "node-[001-004]", "-t", "roce-rail-64")
    assert r.exit_code != 0
    with Store(tmp_path / "history.sqlite") as store:
        (rec,) = store.runs()
    assert rec.status == state and rec.error
    table = invoke("history", "runs")
    assert state in table.stdout and rec.run_id in table.stdout  # the full run id


def test_history_keeps_simulated_runs_apart(tmp_path):
    invoke("sweep", "node-[013-020]", "-t", "roce-rail-64", "--faults", DEMO_FAULTS)
    rows = json.loads(invoke("history", "runs", "--json").stdout)
    assert [(r["executor"], r["faults"], r["seed"]) for r in rows] == [("sim", DEMO_FAULTS, 0)]
    assert rows[0]["exit_code"] == 1
    assert json.loads(invoke("history", "runs", "--executor", "ssh", "--json").stdout) == []
    assert json.loads(invoke("history", "runs", "--executor", "sim", "--json").stdout)
    # the simulated NIC fault makes no real lemon; asked for, the simulated one is there
    assert json.loads(invoke("history", "nodes", "--json").stdout) == []
    sim = json.loads(invoke("history", "nodes", "--executor", "sim", "--json").stdout)
    assert "node-017" in [s["node"] for s in sim]


def test_metrics_say_which_executor_made_them(tmp_path):
    prom = tmp_path / "fc.prom"
    invoke("sweep", "node-[001-004]", "-t", "roce-rail-64", "--seed", "2", "--metrics", str(prom))
    text = prom.read_text()
    assert 'fabriccheck_run_info{executor="sim",faults="",mode="sweep",seed="2"} 1.0' in text


def test_report_says_which_executor_made_it(tmp_path):
    out = tmp_path / "rep"
    r = invoke("sweep", "node-[001-004]", "-t", "roce-rail-64", "--seed", "6", "--report",
               str(out))
    assert r.exit_code == 0, r.output
    assert json.loads((out / "results.json").read_text())["executor"] == "sim"
    assert "executor <b>sim</b> (simulated, seed 6)" in (out / "index.html").read_text()


def test_history_metrics_serve_real_runs_unless_asked(tmp_path):
    invoke("sweep", "node-[001-004]", "-t", "roce-rail-64")
    real = invoke("history", "metrics")
    assert real.exit_code == 0 and real.stdout == ""
    assert "no finished run by executor real" in real.stderr
    sim = invoke("history", "metrics", "--executor", "sim")
    assert 'fabriccheck_run_info{executor="sim"' in sim.stdout
