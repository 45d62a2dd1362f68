"""`fabriccheck parse`: the real CLI via CliRunner and as a subprocess; JSON keys, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import fabriccheck.cli.main  # noqa: F401  (registers every command module on app)
from fabriccheck.cli.app import app
from tests.conftest import REPO, SHARED_FIXTURES, requires_shared

runner = CliRunner()
NCCL = SHARED_FIXTURES / "nccl-tests" / "nccl_allreduce_h100_2node_16gpu_gcp_a3mega_ok.txt"
MIDRUN = SHARED_FIXTURES / "nccl-tests" / "nccl_allreduce_h100_multinode_midrun_cuda_error.txt"
PERF = SHARED_FIXTURES / "perftest" / "ib_send_bw_ndr400_cx7_mibsec_client_ok.txt"
LAT = SHARED_FIXTURES / "perftest" / "ib_send_lat_ndr400_cx7_client_ok.txt"
IPERF = SHARED_FIXTURES / "iperf3" / "iperf3_J_tcp_1stream_v3.9_omit3_cross_cloud_client.txt"
LOG = SHARED_FIXTURES / "nccl-logs" / "nccl_warn_net_ib_status12_vendor129_recv_gids_excerpt.txt"


def _json(args: list[str]) -> dict:
    res = runner.invoke(app, ["parse", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@requires_shared
def test_nccl_tests_json_contract():
    d = _json([str(NCCL)])
    assert (d["tool"], d["status"], d["reason"]) == ("nccl-tests", "ok", "")
    assert d["max_busbw_gbps"] == 338.82
    assert d["hosts"] == ["ztan-mig-235z", "ztan-mig-gq73"] and d["errors"] == []
    last = d["rows"][-1]
    assert (last["size_bytes"], last["busbw_gbps"], last["busbw_inplace_gbps"], last["wrong"]) == (
        8589934592, 338.82, 337.35, 0)


@requires_shared
def test_tool_failure_is_still_exit_0():
    d = _json([str(MIDRUN)])
    assert d["status"] == "failed"
    assert [(e["kind"], e["host"]) for e in d["errors"]][:1] == [("nccl", "HCA-128")]


@requires_shared
def test_perftest_json_contract_in_gbits():
    d = _json([str(PERF)])
    assert (d["test"], d["device"], d["link_type"]) == ("Send BW Test", "mlx5_0", "IB")
    (row,) = d["rows"]
    assert row["size_bytes"] == 65536
    assert row["bw_avg_gbps"] == pytest.approx(390.549, abs=0.001)
    assert row["bw_peak_gbps"] == pytest.approx(46567.34 * 2**20 * 8 / 1e9)
    lat = _json([str(LAT)])["latency_rows"][0]
    assert (lat["t_typical_us"], lat["t_p99_us"]) == (1.27, 1.37)


@requires_shared
def test_iperf3_and_log_json():
    d = _json([str(IPERF)])
    assert d["tool"] == "iperf3" and d["retransmits"] == 196
    log = _json([str(LOG)])
    assert log["tool"] == "nccl-log" and log["suspects"] == ["kp-ddp-worker-0"]
    assert log["errors"][0]["status"] == "12" and log["peers"] == ["10.216.210.236"]


@requires_shared
def test_forced_tool_and_source_line_stripped(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("# source: somewhere\n" + NCCL.read_text().partition("\n")[2])
    d = _json([str(f), "--tool", "nccl-tests"])
    assert d["status"] == "ok" and len(d["rows"]) == 31


@requires_shared
def test_human_summary_has_a_table():
    res = runner.invoke(app, ["parse", str(MIDRUN)])
    assert res.exit_code == 0
    assert "failed" in res.stdout and "367.29" in res.stdout and "HCA-128" in res.stdout


def test_missing_file_exit_2_one_line(tmp_path):
    res = runner.invoke(app, ["parse", str(tmp_path / "nope.txt")])
    assert res.exit_code == 2
    assert "no such file" in res.output and len(res.output.strip().splitlines()) == 1


def test_unknown_format_exit_2_one_line(tmp_path):
    f = tmp_path / "sinfo.txt"
    f.write_text("PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
                 "debug* up infinite 2 idle a[1-2]\n")
    res = runner.invoke(app, ["parse", str(f)])
    assert res.exit_code == 2 and "not the output of" in res.output
    assert len(res.output.strip().splitlines()) == 1
    forced = runner.invoke(app, ["parse", str(f), "--tool", "perftest"])
    assert forced.exit_code == 2 and "not perftest output" in forced.output
    bad = runner.invoke(app, ["parse", str(f), "--tool", "hpl"])
    assert bad.exit_code == 2 and "unknown tool" in bad.output


@requires_shared
def test_subprocess_json_and_exit_codes(tmp_path):
    exe = REPO / ".venv" / "bin" / "fabriccheck"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "fabriccheck"]
    p = subprocess.run([*cmd, "parse", str(PERF), "--json"], capture_output=True, text=True,
                       timeout=60, cwd=REPO)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)  # stdout holds only JSON
    assert {"test", "device", "link_type", "rows", "errors", "status"} <= set(d)
    miss = subprocess.run([*cmd, "parse", str(tmp_path / "none"), "--json"], capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    assert miss.returncode == 2 and miss.stdout == "" and "no such file" in miss.stderr
