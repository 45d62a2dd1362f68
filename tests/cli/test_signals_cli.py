"""--signals and --no-preflight through the real CLI (subprocess and CliRunner) on the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from tests.conftest import REPO

GOOD = """signals:
  - name: port-rate-user
    level: 1
    per: nic
    command: "cat /sys/class/infiniband/{nic}/ports/1/rate"
    value: '(?P<value>\\d+) Gb/sec'
    unit: Gb/s
    pass: {min: 400}
    timeout_s: 10
"""


@pytest.fixture(autouse=True)
def _history_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICCHECK_DB", str(tmp_path / "history.sqlite"))


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


ENTRY = '{name: a, level: 1, per: node, command: "cat /x", value: "(?P<value>\\\\d+)", %s}'


@pytest.mark.parametrize("body,field,needle", [
    ("signals:\n  - " + ENTRY % "pass: {min: 1}" + "\n  - "
     + (ENTRY % "pass: {min: 1}").replace("level: 1", "level: 3").replace("a,", "b,"),
     "signals[1].level", "unknown value 3"),
    ("signals:\n  - " + ENTRY.replace("cat /x", "cat {nicc}") % "pass: {min: 1}",
     "signals[0].command", "unknown placeholder {nicc}"),
    ("signals:\n  - " + ENTRY % "pass: {}", "signals[0].pass", "needs 'min' or 'max'"),
    ("signals:\n  - " + ENTRY.replace('value: "(?P<value>\\\\d+)"', "parser: nope")
     % "pass: {max: 1}", "signals[0].parser", "no signal parser 'nope'"),
    ("signals:\n  - " + ENTRY % "pass: {min: 1}" + "\n  - " + ENTRY % "pass: {min: 2}",
     "signals[1].name", "duplicate signal name"),
])
def test_bad_signal_file_is_one_line_naming_file_entry_field_and_exit_2(tmp_path, body, field,
                                                                        needle):
    path = write(tmp_path, "bad.yaml", body + "\n")
    env = {**os.environ, "FABRICCHECK_DB": str(tmp_path / "h.sqlite")}
    for cmd in (["sweep"], ["gate"], ["bisect"]):
        proc = subprocess.run([sys.executable, "-m", "fabriccheck", *cmd, "-t", "ib-fattree-128",
                               "--nodes", "node-[001-004]", "--signals", path],
                              capture_output=True, text=True, cwd=REPO, timeout=60, env=env)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and f"{path}:{field}" in lines[0] and needle in lines[0], lines
        assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_one_signal_name_in_two_files_is_refused(tmp_path):
    a, b = write(tmp_path, "a.yaml", GOOD), write(tmp_path, "b.yaml", GOOD)
    r = CliRunner().invoke(app, ["sweep", "-t", "ib-fattree-128", "--nodes", "node-[001-004]",
                                 "--signals", a, "--signals", b, "--json"])
    assert r.exit_code == 2 and "port-rate-user" in r.output and str(a) in r.output


def test_signals_file_runs_and_lands_in_the_json(tmp_path):
    path = write(tmp_path, "s.yaml", GOOD)
    faults = write(tmp_path, "f.yaml", "faults:\n  - {kind: nic_down, nic: node-003/mlx5_2}\n")
    r = CliRunner().invoke(app, ["sweep", "-t", "ib-fattree-128", "--nodes", "node-[001-008]",
                                 "--signals", path, "--faults", faults, "--json"])
    d = json.loads(r.stdout)
    assert r.exit_code == 1
    user = d["signals"]["port-rate-user"]
    assert user["pass"] == {"min": 400.0} and user["unit"] == "Gb/s" and user["per"] == "nic"
    assert user["values"]["node-003/mlx5_2"] == {
        "value": 10.0, "status": "fail", "tests": ["r1-sig-port-rate-user-node-003-mlx5_2"],
        "reason": "signal port-rate-user: 10 Gb/s fails >= 400 Gb/s"}
    assert user["values"]["node-001/mlx5_0"]["status"] == "pass"
    assert "gpu-count" in d["signals"]  # the preflight ran too
    assert d["drain"] == ["node-003"] and d["bad_nics"] == ["node-003/mlx5_2"]


def test_no_preflight_runs_only_the_given_signals(tmp_path):
    path = write(tmp_path, "s.yaml", GOOD)
    r = CliRunner().invoke(app, ["sweep", "-t", "ib-fattree-128", "--nodes", "node-[001-004]",
                                 "--signals", path, "--no-preflight", "--json"])
    d = json.loads(r.stdout)
    assert r.exit_code == 0, r.output
    assert list(d["signals"]) == ["port-rate-user"]
    assert d["preflight_skipped"] == ["preflight off (--no-preflight)"]


def test_metrics_carry_each_signal(tmp_path):
    faults = write(tmp_path, "f.yaml",
                   "faults:\n  - {kind: pcie_downtrained, nic: node-002/mlx5_4, width: 8}\n")
    prom = tmp_path / "m.prom"
    r = CliRunner().invoke(app, ["sweep", "-t", "ib-fattree-128", "--nodes", "node-[001-008]",
                                 "--faults", faults, "--metrics", str(prom), "--json"])
    assert r.exit_code == 1, r.output
    text = prom.read_text()
    assert 'fabriccheck_signal_readings{signal="pcie-link",status="fail"} 1.0' in text
    assert 'fabriccheck_signal_readings{signal="pcie-link",status="pass"} 63.0' in text
    assert ('fabriccheck_signal_value{signal="pcie-link",status="fail",target="node-002/mlx5_4"}'
            ' 0.5') in text
    assert 'fabriccheck_signal_min{signal="gpu-count"} 8.0' in text


def test_report_has_the_signals_table(tmp_path):
    faults = write(tmp_path, "f.yaml", "faults:\n  - {kind: gpu_missing, node: node-005}\n")
    r = CliRunner().invoke(app, ["sweep", "-t", "ib-fattree-128", "--nodes", "node-[001-008]",
                                 "--faults", faults, "--report", str(tmp_path / "rep"), "--json"])
    assert r.exit_code == 1, r.output
    html = (tmp_path / "rep" / "index.html").read_text()
    assert 'id="signals"' in html and "gpu-count" in html and "&gt;= 8 GPUs" in html
    assert "<b>node-005</b>" in html and "7 GPUs fails" in html


def test_history_keeps_each_signal_apart(tmp_path):
    from fabriccheck.store.db import Store

    faults = write(tmp_path, "f.yaml", "faults:\n  - {kind: gpu_missing, node: node-003}\n")
    r = CliRunner().invoke(app, ["sweep", "-t", "ib-fattree-128", "--nodes", "node-[001-004]",
                                 "--faults", faults, "--json"])
    d = json.loads(r.stdout)
    with Store(tmp_path / "history.sqlite") as store:
        rows = store.conn.execute(
            "SELECT o.probe, o.status, o.value FROM observations o JOIN obs_nodes n"
            " ON n.obs_id = o.id WHERE o.run_id = ? AND n.node = 'node-003'"
            " AND o.probe LIKE 'signal:%' ORDER BY o.probe", (d["run_id"],)).fetchall()
        loaded = store.load_result(d["run_id"])
    by = {p: (s, v) for p, s, v in rows}
    assert by["signal:gpu-count"] == ("fail", 7.0)
    assert by["signal:kernel-log"] == ("fail", 1.0)
    assert by["signal:port-rate"] == ("pass", 400.0)
    assert "node-003" in loaded.drain
