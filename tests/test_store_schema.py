"""History schema versions: an old database is migrated forward, a newer one is refused, and
simulated runs are kept apart from real ones (baselines, lemons, recently tested)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from fabriccheck.errors import ConfigError
from fabriccheck.models import Observation, RunResult, Test, Verdict
from fabriccheck.store import Store
from fabriccheck.store.schema import SCHEMA_VERSION

#: the schema fabriccheck 0.1.0 wrote (version 1: no user_version, no runs.executor), verbatim
V1_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY, mode TEXT NOT NULL, status TEXT NOT NULL,
  started_s REAL NOT NULL, finished_s REAL, sku TEXT NOT NULL DEFAULT '',
  fabric TEXT NOT NULL DEFAULT '', nodes_json TEXT NOT NULL, params_json TEXT NOT NULL,
  summary_json TEXT);
CREATE TABLE IF NOT EXISTS rounds (
  run_id TEXT NOT NULL, round INTEGER NOT NULL, recorded_s REAL NOT NULL,
  PRIMARY KEY (run_id, round));
CREATE TABLE IF NOT EXISTS observations (
  id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, round INTEGER NOT NULL, test_id TEXT NOT NULL,
  probe TEXT NOT NULL, group_size INTEGER NOT NULL, purpose TEXT NOT NULL, status TEXT NOT NULL,
  value REAL, unit TEXT, floor REAL, obs_json TEXT NOT NULL, UNIQUE (run_id, test_id));
CREATE TABLE IF NOT EXISTS obs_nodes (
  obs_id INTEGER NOT NULL, run_id TEXT NOT NULL, node TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS verdicts (
  run_id TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, node TEXT, state TEXT NOT NULL,
  reason TEXT NOT NULL, evidence_json TEXT NOT NULL, PRIMARY KEY (run_id, kind, name));
CREATE TABLE IF NOT EXISTS actions (
  id INTEGER PRIMARY KEY, run_id TEXT, node TEXT NOT NULL, action TEXT NOT NULL,
  backend TEXT NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL,
  evidence_json TEXT NOT NULL, at_s REAL NOT NULL);
INSERT INTO meta VALUES ('schema_version', '1');
"""


def _old_db(path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(V1_SCHEMA)
    for run_id, params in (("r-sim", {"executor": "sim", "seed": 3}),
                           ("r-ssh", {"executor": "ssh"}), ("r-old", {})):  # fmt: skip
        conn.execute("INSERT INTO runs VALUES (?, 'sweep', 'finished', 1.0, 2.0, '', '', '[]',"
                     " ?, NULL)", (run_id, json.dumps(params)))  # fmt: skip
    conn.commit()
    conn.close()


def test_an_old_database_is_migrated_forward(tmp_path):
    path = tmp_path / "old.sqlite"
    _old_db(path)
    with Store(path) as store:
        assert store.migrated_from == 1
        assert {r.run_id: r.executor for r in store.runs()} == {
            "r-sim": "sim", "r-ssh": "ssh", "r-old": ""}
        assert [r.run_id for r in store.runs(executor="sim")] == ["r-sim"]
        run_id = store.begin_run("gate", ["n1"], params={"executor": "ray"})
        assert store.run(run_id).executor == "ray"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    with Store(path) as store:  # opening again migrates nothing
        assert store.migrated_from == SCHEMA_VERSION


def test_a_fresh_database_has_the_current_version(tmp_path):
    with Store(tmp_path / "new.sqlite") as store:
        assert store.migrated_from == 0
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_newer_database_is_refused_in_one_line(tmp_path):
    path = tmp_path / "future.sqlite"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(ConfigError, match=f"schema v{SCHEMA_VERSION + 1} is newer"):
        Store(path)
    r = CliRunner().invoke(app, ["history", "runs", "--db", str(path)])
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: history database schema")
    assert "upgrade fabriccheck" in lines[0]


def _run(store: Store, executor: str, value: float, state: str = "healthy") -> str:
    run_id = store.begin_run("sweep", ["n1", "n2"], sku="h100", params={"executor": executor})
    obs = [Observation(Test(f"t{i}", "ib_write_bw", ("n1", "n2")), "pass", value + i * 0.1,
                       "Gb/s", floor=300.0) for i in range(10)]  # fmt: skip
    store.record_round(run_id, 1, obs)
    result = RunResult(mode="sweep", nodes=["n1", "n2"], observations=obs,
                       verdicts=[Verdict("node", "n1", state, evidence=("t0", "t1"))])
    store.finish_run(run_id, result)
    return run_id


def test_simulated_runs_feed_no_real_baseline_or_lemon(tmp_path):
    with Store(tmp_path / "h.sqlite") as store:
        _run(store, "sim", 100.0, state="bad")
        _run(store, "sim", 100.0, state="bad")
        assert store.baseline("h100", "ib_write_bw", 2) is None  # real baseline: no real run
        assert store.baseline("h100", "ib_write_bw", 2, executor="sim").median == pytest.approx(
            100.45)
        assert store.lemon_nodes() == []
        assert [s.node for s in store.lemon_nodes(executor="sim")] == ["n1"]
        assert store.recently_tested(3600) == set()
        assert store.recently_tested(3600, executor="sim") == {"n1", "n2"}
        _run(store, "ssh", 390.0)
        assert store.baseline("h100", "ib_write_bw", 2).median == pytest.approx(390.45)
