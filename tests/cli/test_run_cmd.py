"""The run commands through the real CLI (CliRunner and a subprocess), on the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from tests.conftest import REPO

DEMO_FAULTS = str(REPO / "topologies" / "faults" / "demo-roce-64.yaml")
CONTRACT = ("rounds", "tests", "test_seconds", "bad_nodes", "bad_nics", "bad_links",
            "link_suspects", "unreachable", "drain")


@pytest.fixture(autouse=True)
def _history_in_tmp(tmp_path, monkeypatch):
    """Runs record history: keep it in this test's temp dir, never in the user's home."""
    monkeypatch.setenv("FABRICCHECK_DB", str(tmp_path / "history.sqlite"))


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_sweep_records_history_and_dry_run_actions(tmp_path):
    r = invoke("sweep", "-t", "roce-rail-64", "--faults", DEMO_FAULTS, "--seed", "13", "--json",
               "--max-drain", "0.1", "--exclude-file", str(tmp_path / "exclude"))
    d = json.loads(r.stdout)
    assert r.exit_code == 1 and d["run_id"]
    assert (tmp_path / "history.sqlite").exists()
    assert d["actions"]["applied"] is False  # dry-run unless --apply
    # node-058: the demo's gpu_link_degraded node, found by the ladder's 1x
    assert (tmp_path / "exclude").read_text().strip() == "node-[017,033,040,058]"


def test_sweep_json_is_the_contract_and_exit_1_on_faults():
    r = invoke("sweep", "-t", "roce-rail-64", "--faults", DEMO_FAULTS, "--seed", "13", "--json")
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    assert list(d)[:len(CONTRACT)] == list(CONTRACT)
    assert d["bad_nics"] == ["node-017/mlx5_3"] and d["hung"] == ["node-033"]
    assert d["drain"] == ["node-017", "node-033", "node-040", "node-058"]
    assert d["unreachable"] == ["node-050"]
    assert all(isinstance(s["candidates"], list) for s in d["link_suspects"])


def test_sweep_healthy_exit_0_and_human_summary():
    r = invoke("sweep", "-t", "ib-fattree-128", "--nodes", "node-[001-032]", "--seed", "1")
    assert r.exit_code == 0, r.output
    assert "healthy" in r.stdout and "32 nodes" in r.stdout


def test_gate_positional_nodelist_and_exit_codes():
    bad = invoke("gate", "node-[013-020]", "-t", "roce-rail-64", "--faults", DEMO_FAULTS,
                 "--json")
    assert bad.exit_code == 1
    d = json.loads(bad.stdout)
    # 1x beside the rail pairs, the job's collective, one confirmation round
    assert d["bad_nics"] == ["node-017/mlx5_3"] and d["rounds"] <= 3
    assert d["nodes"] == [f"node-{i:03d}" for i in range(13, 21)]
    ok = invoke("gate", "node-[001-008]", "-t", "roce-rail-64", "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["drain"] == []
    broke = invoke("gate", "node-[001-008]", "-t", "roce-rail-64", "--budget-s", "2", "--json")
    assert broke.exit_code == 3  # no round fits in 2 s of test time: could not test
    assert json.loads(broke.stdout)["budget_exhausted"] is True


def test_gate_budget_caps_test_time():
    r = invoke("gate", "node-[025-040]", "-t", "roce-rail-64", "--faults", DEMO_FAULTS,
               "--budget-s", "40", "--json")
    d = json.loads(r.stdout)
    assert d["test_seconds"] <= 40  # hard: a hung test is killed when the budget runs out
    assert r.exit_code == 1 and d["hung"] in ([], ["node-033"])
    assert set(d["drain"]) <= {"node-033", "node-040"}


def test_bisect_with_job_log_tests_named_hosts_first(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("node-017:1:2 [3] net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer "
                   "10.0.0.9<3> with status=12 opcode=0 len=0 vendor err 129 (Recv) hca mlx5_3\n")
    r = invoke("bisect", "-t", "roce-rail-64", "--nodes", "node-[009-024]", "--faults",
               DEMO_FAULTS, "--job-log", str(log), "--json")
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    assert d["log_suspects"] == ["node-017"] and d["bad_nics"] == ["node-017/mlx5_3"]
    assert d["rounds"] <= 3
    first = [o for o in d.get("observations", [])]
    assert first == []  # observations only in reports, not in --json


@pytest.mark.parametrize("args,needle", [
    (["sweep", "-t", "no-such-topology"], "no-such-topology"),
    (["sweep", "-t", "roce-rail-64", "--nodes", "node-[001-003", "--json"], "--nodes"),
    (["sweep", "-t", "roce-rail-64", "--nodes", "host9"], "not in topology"),
    (["sweep", "--nodes", "node-001"], "--topology"),
    (["sweep", "-t", "roce-rail-64", "--executor", "ssh", "--faults", DEMO_FAULTS], "faults"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle, tmp_path):
    env = {**os.environ, "FABRICCHECK_DB": str(tmp_path / "h.sqlite")}
    proc = subprocess.run([sys.executable, "-m", "fabriccheck", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=60, env=env)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_demo_subprocess_writes_report_and_finds_faults(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fabriccheck", "demo", "--out",
                           str(tmp_path / "rep")], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "node-017/mlx5_3" in out and "node-040" in out and "node-033" in out
    assert "missed" not in out.split("injected faults")[1].split("link_degraded")[0]
    assert (tmp_path / "rep").is_dir() and any((tmp_path / "rep").iterdir())
    assert "round 1" in proc.stderr  # progress on stderr
    last = out.strip().splitlines()[-1]  # the demo ends by naming its report
    assert last == f"open the report: {(tmp_path / 'rep' / 'index.html').resolve()}"


def test_demo_json_only_json_on_stdout(tmp_path):
    r = invoke("demo", "--json", "--out", str(tmp_path / "rep"))
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    assert d["mode"] == "sweep" and d["report"]


def test_probe_defaults_from_the_spec_lab_tcp_has_no_ib_write_bw():
    """lab-4's spec (lab-tcp) defines iperf3 and allreduce-cpu only: no --probe needed."""
    r = invoke("sweep", "-t", "lab-4", "--json", "--seed", "2")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["pair_probe"] == "iperf3"
    assert d["tests"] > 0 and not d["drain"]


def test_levels_flag_limits_the_ladder_and_rejects_unknown_levels():
    r = invoke("sweep", "-t", "roce-rail-64", "--nodes", "node-[001-016]", "--levels", "1,2",
               "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["ladder"]["levels"] == [1, 2]
    bad = invoke("sweep", "-t", "roce-rail-64", "--levels", "1,3")
    assert bad.exit_code == 2 and "--levels" in bad.output and "Traceback" not in bad.output


def test_link_screen_flag_turns_the_screen_off_and_rejects_unknown_values():
    """``--link-screen off``: no top-up and no link screen in the result; ``auto`` (the
    default) screens an InfiniBand fabric of up to 4,096 switch links; a bad value is a
    one-line error (exit 2) before anything runs."""
    args = ("sweep", "-t", "ib-fattree-128", "--nodes", "node-[001-016]", "--json")
    auto, off = invoke(*args), invoke(*args, "--link-screen", "off")
    assert auto.exit_code in (0, 1) and off.exit_code in (0, 1), (auto.output, off.output)
    a, o = json.loads(auto.stdout), json.loads(off.stdout)
    assert a["link_screen"] is not None and o["link_screen"] is None
    assert o["tests"] < a["tests"]
    bad = invoke(*args, "--link-screen", "always")
    assert bad.exit_code == 2 and "--link-screen" in bad.output and "auto" in bad.output
    assert "Traceback" not in bad.output


def test_link_screen_on_lifts_the_size_limit():
    from fabriccheck.cli.run_cmd import _policy
    from fabriccheck.policy import SweepPolicy

    assert _policy("sweep", link_screen="on").link_screen_max_links > 10 ** 9
    assert _policy("sweep", link_screen="auto") == _policy("sweep") == SweepPolicy()
    assert _policy("sweep", link_screen="off").link_topup_rounds == 0
