"""OpsSession set-up rules: flag errors up front, node selection (gate env, recent, topology)."""

from __future__ import annotations

import pytest

from fabriccheck.actions.session import OpsOptions, OpsSession
from fabriccheck.errors import ConfigError, ExecutorError
from fabriccheck.store import Store
from tests.runfactory import build_run, nodes


def test_flag_errors_before_anything_runs(tmp_path):
    with pytest.raises(ConfigError, match="--apply needs to know where to act"):
        OpsSession("sweep", OpsOptions(no_history=True, apply=True))
    with pytest.raises(ConfigError, match="unknown scheduler 'pbs'"):
        OpsSession("sweep", OpsOptions(no_history=True, scheduler="pbs"))
    with pytest.raises(ConfigError, match="--max-drain"):
        OpsSession("sweep", OpsOptions(no_history=True, max_drain=3))
    with pytest.raises(ConfigError, match="--resume needs the history"):
        OpsSession("sweep", OpsOptions(no_history=True, resume="x"))
    db = str(tmp_path / "h.sqlite")
    with Store(db) as s:
        s.begin_run("gate", ["a"], run_id="g1")
    with pytest.raises(ConfigError, match="run 'g1' was a gate, not a sweep"):
        OpsSession("sweep", OpsOptions(db=db, resume="g1"))


def test_gate_takes_the_job_nodes_from_slurm(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node-[003-004],node-009")
    ops = OpsSession("gate", OpsOptions(no_history=True))
    assert ops.select_nodes([], explicit=False) == ["node-003", "node-004", "node-009"]
    assert ops.select_nodes(["node-001"], explicit=True) == ["node-001"]  # explicit wins
    assert ops.notes["nodes_from"] == "SLURM_JOB_NODELIST"


def test_sweep_skips_recently_tested_and_unknown_nodes(tmp_path):
    db = str(tmp_path / "h.sqlite")
    with Store(db) as s:
        r = build_run(nodes(4), seed=1)
        s.finish_run(s.begin_run("sweep", r.nodes), r)
    ops = OpsSession("sweep", OpsOptions(db=db, skip_tested_within_s=3600))

    class Idle:  # what a scheduler inventory answers (real ones: tests/inventory)
        def idle_nodes(self, recovering=()):
            return nodes(8) + ["login1"]

    ops.inventory = Idle()
    chosen = ops.select_nodes([], explicit=False, known=nodes(8))
    assert chosen == nodes(8)[4:]
    assert ops.notes["skipped_recently_tested"] == nodes(4)
    assert ops.notes["not_in_topology"] == ["login1"]
    # named nodes are not filtered: an unknown one is the orchestrator's clear error
    assert ops.select_nodes(["login1"], explicit=True, known=nodes(8)) == ["login1"]
    # a scheduler with nothing idle: "could not test" (exit 3), not a configuration error
    ops.inventory.idle_nodes = lambda recovering=(): []
    with pytest.raises(ExecutorError, match="reports none idle"):
        ops.select_nodes([], explicit=False, known=nodes(8))
    run_id = ops.begin(chosen)
    result = build_run(chosen, seed=2)
    ops.finish(result)
    assert result.extra["run_id"] == run_id and result.extra["skipped_recently_tested"]
    ops.close()
    with Store(db) as s:
        assert s.run(run_id).status == "finished" and s.run(run_id).nodes == chosen
