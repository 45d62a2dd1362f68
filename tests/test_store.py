"""History store: runs, rounds, resume, actions, recently-tested nodes, bad database files."""

from __future__ import annotations

import pytest

from fabriccheck.errors import ConfigError
from fabriccheck.store import APPLIED, DRY_RUN, Store
from tests.runfactory import build_run, nodes


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "h.sqlite") as s:
        yield s


def test_run_roundtrip_per_round_then_finish(store):
    result = build_run(nodes(8), node_gbps={"node-003": 120.0}, seed=1)
    run_id = store.begin_run("sweep", result.nodes, sku="h100", fabric="roce", started_s=1000.0)
    r0 = [o for o in result.observations if o.test.round == 0]
    assert store.record_round(run_id, 0, r0) == 4
    assert store.record_round(run_id, 0, r0) == 0  # idempotent: a round written twice stays once
    rec = store.run(run_id)
    assert (rec.status, rec.rounds, rec.sku, rec.nodes) == ("running", 1, "h100", result.nodes)
    store.finish_run(run_id, result, finished_s=1012.0)
    rec = store.run(run_id)
    assert rec.status == "finished" and rec.rounds == 2
    assert rec.summary["bad_nodes"] == ["node-003"] and rec.summary["drain"] == ["node-003"]
    back = store.observations(run_id)
    assert [o.test.test_id for o in back] == [o.test.test_id for o in result.observations]
    assert back[0] == result.observations[0]  # full observation, raw text included
    assert store.runs()[0].run_id == run_id


def test_finish_rewrites_only_the_observations_whose_judgement_changed(store):
    """Rounds are written as judged when they end; the run's final, peer-aware judgement of a
    test replaces that row, and a test judged the same is not written twice."""
    import dataclasses

    result = build_run(nodes(8), node_gbps={"node-003": 120.0}, seed=4)
    run_id = store.begin_run("sweep", result.nodes)
    for rnd in sorted({o.test.round for o in result.observations}):
        store.record_round(run_id, rnd, [o for o in result.observations if o.test.round == rnd])
    first = result.observations[0]
    rejudged = dataclasses.replace(first, status="flaky" if first.status != "flaky" else "pass",
                                   reason="rejudged against peers")  # fmt: skip
    result.observations[0] = rejudged
    before = store.conn.total_changes
    store.finish_run(run_id, result)
    back = {o.test.test_id: o for o in store.observations(run_id)}
    assert back[first.test.test_id] == rejudged
    assert all(back[o.test.test_id] == o for o in result.observations)
    # one observation row updated, plus the run's own rows (rounds, verdicts, summary)
    obs_writes = store.conn.total_changes - before - len(result.verdicts) - 1
    assert obs_writes <= 1 + len({o.test.round for o in result.observations})


def test_a_second_store_on_the_same_file_still_writes_the_final_judgement(tmp_path):
    """The memory of what was written is per store: a run resumed in a new process rewrites."""
    import dataclasses

    result = build_run(nodes(8), seed=5)
    with Store(tmp_path / "h.sqlite") as s1:
        run_id = s1.begin_run("sweep", result.nodes)
        s1.record_round(run_id, 0, [o for o in result.observations if o.test.round == 0])
    first = next(o for o in result.observations if o.test.round == 0)
    result.observations[result.observations.index(first)] = changed = dataclasses.replace(
        first, reason="rejudged")
    with Store(tmp_path / "h.sqlite") as s2:
        s2.finish_run(run_id, result)
        back = {o.test.test_id: o for o in s2.observations(run_id)}
    assert back[first.test.test_id] == changed


def test_resume_gives_back_completed_rounds_and_refuses_finished(store):
    result = build_run(nodes(8), seed=2)
    run_id = store.begin_run("sweep", result.nodes)
    store.record_round(run_id, 0, [o for o in result.observations if o.test.round == 0])
    rec, rounds = store.resume_run(run_id)
    assert rec.run_id == run_id and list(rounds) == [0] and len(rounds[0]) == 4
    store.finish_run(run_id, result)
    with pytest.raises(ConfigError, match="already finished"):
        store.resume_run(run_id)
    with pytest.raises(ConfigError, match="no run 'nope'"):
        store.run("nope")


def test_recently_tested_and_held_nodes(store):
    r = build_run(nodes(4), seed=3)
    run_id = store.begin_run("sweep", r.nodes, started_s=10_000.0)
    store.finish_run(run_id, r)
    assert store.recently_tested(600, now=10_100.0) == set(r.nodes)
    assert store.recently_tested(60, now=10_100.0) == set()
    store.record_action("node-001", "drain", backend="slurm", status=APPLIED, reason="x",
                        evidence=["t1", "t2"], run_id=run_id)  # fmt: skip
    store.record_action("node-002", "drain", backend="slurm", status=DRY_RUN, reason="y")
    store.record_action("node-003", "drain", backend="slurm", status=APPLIED, reason="z")
    store.record_action("node-003", "resume", backend="slurm", status=APPLIED, reason="passed")
    held = store.held_nodes("slurm")
    assert list(held) == ["node-001"] and held["node-001"].evidence == ("t1", "t2")
    assert store.held_nodes("kubernetes") == {}
    assert [a.action for a in store.actions(node="node-003")] == ["drain", "resume"]


def test_not_a_database_is_one_clear_config_error(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("this is not sqlite\n" * 100)
    with pytest.raises(ConfigError, match="not a fabriccheck history database"):
        Store(bad)


def test_prune_keeps_numbers_and_actions_drops_old_runs_and_raw_text(store):
    day = 86400.0
    ids = []
    for k, age_days in enumerate((400, 30, 1)):
        r = build_run(nodes(4), seed=k)
        run_id = store.begin_run("sweep", r.nodes, started_s=1e9 - age_days * day)
        store.finish_run(run_id, r)
        store.record_action("node-001", "drain", backend="slurm", status=APPLIED, run_id=run_id)
        ids.append(run_id)
    done = store.prune(keep_days=180, keep_raw_days=14, now=1e9)
    assert done == {"runs_deleted": 1, "raw_stripped": 4}
    assert [r.run_id for r in store.runs()] == ids[:0:-1]
    month_old = store.observations(ids[1])
    assert month_old[0].value is not None and month_old[0].raw.stdout == ""
    assert store.observations(ids[2])[0].raw.stdout != ""
    assert len(store.actions(node="node-001")) == 3  # the audit trail stays
    gone = store.conn.execute("SELECT COUNT(*) FROM obs_nodes WHERE run_id = ?", (ids[0],))
    assert gone.fetchone()[0] == 0
