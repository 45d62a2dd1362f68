"""``fabriccheck report``: re-render from a directory, a results.json, or a history-DB run id."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from fabriccheck.report import render_report
from fabriccheck.report.svg import STATE_COLOURS
from fabriccheck.store import Store
from fabriccheck.topology import load_topology
from tests.report.dom import parse
from tests.report.report_runs import Faults, build_run

runner = CliRunner()


@pytest.fixture
def lab_run():
    topo = load_topology("lab-8")
    return build_run(topo, Faults(bad_nic="host3/eth1", unreachable="host8")), topo


def test_report_rerenders_a_report_directory_in_place(tmp_path, lab_run):
    run, topo = lab_run
    render_report(run, topo, tmp_path)
    (tmp_path / "index.html").unlink()
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert f"report: {tmp_path / 'index.html'}" in res.output
    dom = parse((tmp_path / "index.html").read_text())
    assert dom.find("rect", data_nic="host3/eth1").attrs["fill"] == STATE_COLOURS["bad"]


def test_report_from_a_results_file_to_another_dir_as_json(tmp_path, lab_run):
    run, topo = lab_run
    render_report(run, topo, tmp_path / "a")
    res = runner.invoke(app, ["report", str(tmp_path / "a" / "results.json"),
                              "-o", str(tmp_path / "b"), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    paths = json.loads(res.stdout)
    assert paths["index"] == str(tmp_path / "b" / "index.html")
    assert all((tmp_path / "b" / n).is_file() for n in ("results.json", "observations.csv"))
    assert json.loads((tmp_path / "b" / "results.json").read_text()) == json.loads(
        (tmp_path / "a" / "results.json").read_text()
    )


def test_report_from_a_run_id_in_the_history_db(tmp_path, lab_run):
    run, topo = lab_run
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        for k in range(2):  # two earlier healthy runs, then the failing one
            healthy = build_run(topo, Faults(), seed=k)
            old = store.begin_run("sweep", healthy.nodes, started_s=1000.0 + k)
            store.finish_run(old, healthy)
        run_id = store.begin_run("sweep", run.nodes, params={"topology": "lab-8"},
                                 started_s=2000.0)  # fmt: skip
        store.finish_run(run_id, run)
    res = runner.invoke(app, ["report", run_id, "--db", str(db), "-o", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    dom = parse((tmp_path / "r" / "index.html").read_text())
    assert dom.find("div", **{"class": "verdict"}).text() == "DRAIN"
    assert "st-unreachable" in dom.find("g", data_node="host8").classes()
    failing = dom.find("table", id="failing-table").find_all("tr")
    assert len(failing) - 1 == sum(1 for o in run.observations if not o.passed)
    # history sparkline from the stored runs: healthy, healthy, bad
    spark = dom.find("div", id="node-host3").find("svg", **{"class": "spark"})
    dots = [c.attrs["fill"] for c in spark.find_all("circle")]
    assert dots == [STATE_COLOURS["healthy"]] * 2 + [STATE_COLOURS["bad"]]


def test_report_from_the_json_contract_alone(tmp_path, lab_run):
    """``sweep --json > run.json`` has no observations: the verdict parts still render."""
    from fabriccheck.serialize import run_result_to_dict

    run, _ = lab_run
    (tmp_path / "run.json").write_text(json.dumps(run_result_to_dict(run)))
    res = runner.invoke(app, ["report", str(tmp_path / "run.json"), "-t", "lab-8"])
    assert res.exit_code == 0, res.output
    dom = parse((tmp_path / "index.html").read_text())
    assert dom.find("div", **{"class": "verdict"}).text() == "DRAIN"
    assert "st-bad" in dom.find("g", data_node="host3").classes()
    assert dom.find("rect", data_nic="host3/eth1").attrs["fill"] == STATE_COLOURS["bad"]


def test_bad_inputs_are_one_line_errors_exit_2(tmp_path):
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "no results.json here" in res.output
    bad = tmp_path / "results.json"
    bad.write_text("{not json")
    res = runner.invoke(app, ["report", str(bad)])
    assert res.exit_code == 2 and "not readable JSON" in res.output
    bad.write_text('{"some": "thing"}')
    res = runner.invoke(app, ["report", str(bad)])
    assert res.exit_code == 2 and "not a fabriccheck run result" in res.output
    res = runner.invoke(app, ["report", "20260101-nope", "--db", str(tmp_path / "none.sqlite")])
    assert res.exit_code == 2 and "no history database" in res.output
    with Store(tmp_path / "h.sqlite"):
        pass
    res = runner.invoke(app, ["report", "nope", "--db", str(tmp_path / "h.sqlite")])
    assert res.exit_code == 2 and "no run 'nope'" in res.output


def test_report_cli_as_a_subprocess(tmp_path, lab_run):
    run, topo = lab_run
    render_report(run, topo, tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "fabriccheck", "report", str(tmp_path), "-o", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"report: {tmp_path / 'o' / 'index.html'}"
    assert proc.stderr == ""
