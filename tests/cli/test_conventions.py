"""CLI conventions: --version, -v/-q, ``parse -``, no hard-wrap in pipes, full run ids, per-round
and total times, error messages that name the right next step."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from fabriccheck import __version__
from fabriccheck.cli.main import app
from tests.conftest import REPO

NCCL = (REPO / "tests" / "fixtures" / "nccl-tests"
        / "nccl_allreduce_v2.20_current_format_2node_synthetic.txt")


@pytest.fixture(autouse=True)
def _history_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICCHECK_DB", str(tmp_path / "history.sqlite"))


def invoke(*args: str, **kw):
    return CliRunner().invoke(app, list(args), **kw)


def _cli(*args: str, stdin: str | None = None, env: dict | None = None):
    return subprocess.run([sys.executable, "-m", "fabriccheck", *args], input=stdin,
                          capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def test_version_flag():
    r = invoke("--version")
    assert r.exit_code == 0 and r.stdout.strip() == f"fabriccheck {__version__}"


def test_parse_reads_stdin_like_a_file():
    text = NCCL.read_text()
    from_stdin = _cli("parse", "-", "--json", stdin=text)
    from_file = _cli("parse", str(NCCL), "--json")
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert json.loads(from_stdin.stdout) == json.loads(from_file.stdout)
    empty = _cli("parse", "-", stdin="")
    assert empty.returncode == 2 and empty.stderr.startswith("error: -: standard input was empty")


def test_quiet_has_no_progress_and_verbose_keeps_it():
    args = ("sweep", "node-[001-008]", "-t", "roce-rail-64", "--no-history")
    loud = invoke(*args)
    quiet = invoke(*args, "-q")
    root_quiet = invoke("-q", *args)
    assert loud.exit_code == quiet.exit_code == root_quiet.exit_code == 0
    assert "round 1" in loud.stderr
    assert quiet.stderr == "" and root_quiet.stderr == ""
    assert "healthy" in quiet.stdout and "healthy" in root_quiet.stdout  # the answer stays
    assert "round 1" in invoke(*args, "-v").stderr


def test_progress_gives_each_rounds_time_and_the_total():
    r = invoke("sweep", "node-[001-016]", "-t", "roce-rail-64", "--no-history")
    rounds = [ln for ln in r.stderr.splitlines() if ln.startswith("round ")]
    assert len(rounds) >= 2
    parsed = [tuple(float(x) for x in re.search(r"test time (\d+) s \(total (\d+) s\)",
                                                 ln).groups()) for ln in rounds]  # fmt: skip
    assert parsed[0][0] == parsed[0][1]  # the first round is the whole total
    assert abs(parsed[0][1] + parsed[1][0] - parsed[1][1]) <= 1  # rounding of each number


def test_piped_output_is_not_hard_wrapped_and_run_ids_are_whole(tmp_path):
    db = str(tmp_path / "h.sqlite")
    run = _cli("sweep", "node-[013-020]", "-t", "roce-rail-64", "--faults",
               str(REPO / "topologies" / "faults" / "demo-roce-64.yaml"), "--db", db,
               env={"COLUMNS": ""})  # fmt: skip
    run_id = next(ln.split()[2] for ln in run.stdout.splitlines() if ln.startswith("run id:"))
    assert len(run_id) == len("20261125T052208-c7b305")
    assert max(len(ln) for ln in run.stdout.splitlines()) > 80  # one line per reason
    table = _cli("history", "runs", "--db", db, env={"COLUMNS": ""})
    assert run_id in table.stdout and "…" not in table.stdout


def test_report_of_an_unknown_run_names_the_next_step(tmp_path):
    invoke("sweep", "node-[001-004]", "-t", "roce-rail-64")
    r = invoke("report", "nosuchrun")
    assert r.exit_code == 2
    assert "history runs" in r.stderr and "--resume" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_demo_runs_from_any_directory_on_bundled_files(tmp_path):
    from fabriccheck.cli.run_cmd import demo_faults

    package = REPO / "fabriccheck"
    assert demo_faults().is_file()
    assert str(demo_faults()).startswith(str(package))  # shipped in the wheel, not the repo
    proc = subprocess.run([sys.executable, "-m", "fabriccheck", "demo", "-q", "--out", "rep"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and (tmp_path / "rep" / "index.html").is_file()
