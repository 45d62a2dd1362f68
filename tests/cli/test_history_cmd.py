"""`fabriccheck history`: lemon list, runs, drift, actions via CliRunner and a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import fabriccheck.cli.main  # noqa: F401  (registers every command module on app)
from fabriccheck.cli.app import app
from fabriccheck.store import APPLIED, Store
from tests.conftest import REPO
from tests.runfactory import NOMINAL_GBPS, build_run, nodes

runner = CliRunner()


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("hist") / "h.sqlite"
    with Store(path) as s:
        for k in range(10):
            speeds = {"node-002": NOMINAL_GBPS * (1 - 0.01 * k)}
            if k % 2 == 0:
                speeds["node-007"] = 100.0  # flaky: bad every other sweep
            result = build_run(nodes(12), node_gbps=speeds, seed=40 + k)
            run_id = s.begin_run("sweep", result.nodes, sku="h100", started_s=1e9 + 3600 * k)
            s.finish_run(run_id, result, finished_s=1e9 + 3600 * k + 60)
            if k % 2 == 0:
                s.record_action("node-007", "drain", backend="slurm", status=APPLIED,
                                reason=result.drain and "fabriccheck: x", run_id=run_id,
                                evidence=["a", "b"], at_s=1e9 + 3600 * k + 61)  # fmt: skip
        s.begin_run("sweep", nodes(12), run_id="crashed-run", started_s=1e9 + 3600 * 11)
    return path


def test_history_nodes_json_is_a_ranked_list_with_signals(db):
    res = runner.invoke(app, ["history", "nodes", "--db", str(db), "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert rows[0]["node"] == "node-007"
    assert rows[0]["bad_runs"] == 5 and rows[0]["drained"] == 5
    scores = [r["score"] for r in rows]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert {"node", "score", "fail_rate", "flaps", "last_state"} <= set(rows[0])


def test_history_runs_and_drift_and_actions(db):
    res = runner.invoke(app, ["history", "runs", "--db", str(db), "--json", "--limit", "3"])
    assert res.exit_code == 0, res.output
    runs = json.loads(res.stdout)
    assert [r["status"] for r in runs] == ["running", "finished", "finished"]
    assert runs[0]["run_id"] == "crashed-run" and runs[1]["rounds"] == 2
    res = runner.invoke(app, ["history", "drift", "--db", str(db), "--json"])
    drift = json.loads(res.stdout)
    assert [d["node"] for d in drift] == ["node-002"] and drift[0]["below_floor"] is False
    res = runner.invoke(app, ["history", "actions", "--db", str(db), "--json", "--node",
                              "node-007"])  # fmt: skip
    assert [a["action"] for a in json.loads(res.stdout)] == ["drain"] * 5


def test_human_tables_and_missing_db(db, tmp_path):
    res = runner.invoke(app, ["history", "nodes", "--db", str(db)])
    assert res.exit_code == 0 and "node-007" in res.stdout and "lemon nodes" in res.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "fabriccheck", "history", "runs", "--db", str(tmp_path / "no.db")],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "no history database here" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "no.db").exists()


def _families(text):
    from prometheus_client.parser import text_string_to_metric_families

    return {f.name: {tuple(sorted(s.labels.items())): s.value for s in f.samples}
            for f in text_string_to_metric_families(text)}  # fmt: skip


def test_history_metrics_prints_the_newest_run(db):
    res = runner.invoke(app, ["history", "metrics", "--db", str(db)])
    assert res.exit_code == 0, res.output
    fams = _families(res.stdout)
    health = fams["fabriccheck_node_health"]
    assert len(health) == 12  # the newest finished run: sweep 9 (node-007 healthy then)
    assert fams["fabriccheck_run_timestamp_seconds"][(("mode", "sweep"),)] == 1e9 + 3600 * 9 + 60


def test_history_metrics_endpoint_follows_new_runs(tmp_path):
    import socket
    import time
    import urllib.request

    path = tmp_path / "live.sqlite"
    with Store(path) as s:
        r = build_run(nodes(4), seed=1)
        s.finish_run(s.begin_run("sweep", r.nodes), r)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "fabriccheck", "history", "metrics", "--db", str(path),
         "--port", str(port), "--addr", "127.0.0.1"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        def scrape():
            deadline = time.monotonic() + 30
            while True:
                try:
                    url = f"http://127.0.0.1:{port}/metrics"
                    with urllib.request.urlopen(url, timeout=5) as resp:
                        return _families(resp.read().decode())
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)

        assert len(scrape()["fabriccheck_node_health"]) == 4
        with Store(path) as s:
            r = build_run(nodes(6), node_gbps={"node-005": 90.0}, seed=2)
            s.finish_run(s.begin_run("sweep", r.nodes), r)
        health = scrape()["fabriccheck_node_health"]
        assert len(health) == 6 and health[(("node", "node-005"),)] == 0.0
    finally:
        proc.terminate()
        proc.wait(timeout=10)
