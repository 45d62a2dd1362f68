"""What history teaches, over simulated repeated sweeps: baselines, drift, lemon nodes."""

from __future__ import annotations

from statistics import median

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.store import APPLIED, Store
from fabriccheck.store.stats import mad, theil_sen_slope
from tests.runfactory import FLOOR_GBPS, NOMINAL_GBPS, build_run, nodes

NODES = nodes(16)


def _record(store, result, t, **kw):
    run_id = store.begin_run("sweep", result.nodes, sku=kw.get("sku", "h100"), started_s=t)
    store.finish_run(run_id, result, finished_s=t + 10)
    return run_id


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "h.sqlite") as s:
        yield s


def test_baseline_is_median_and_mad_of_passing_results_only(store):
    assert store.baseline("h100", "ib_write_bw", 2) is None
    for k in range(3):
        _record(store, build_run(NODES, node_gbps={"node-004": 90.0}, seed=k), 1000.0 * k)
    _record(store, build_run(NODES, seed=9, node_gbps={n: 360.0 for n in NODES}), 9e3, sku="a100")
    b = store.baseline("h100", "ib_write_bw", 2)
    vals = [
        r[0]
        for r in store.conn.execute(
            "SELECT o.value FROM observations o JOIN runs r USING (run_id)"
            " WHERE r.sku='h100' AND o.status='pass'"
        )
    ]
    assert b.n == len(vals) == 3 * (16 - 2)  # node-004's 2 tests fail each run
    assert b.median == pytest.approx(median(vals)) and b.mad == pytest.approx(mad(vals))
    assert abs(b.median - NOMINAL_GBPS) < 0.02 * NOMINAL_GBPS
    assert FLOOR_GBPS < b.robust_floor() < b.median and b.unit == "Gb/s"
    assert store.baseline("a100", "ib_write_bw", 2).median == pytest.approx(360.0, rel=0.03)
    assert store.baseline("h100", "nccl", 8) is None


def test_drifting_node_is_flagged_before_it_fails_the_floor(store):
    # node-005 loses 1% a sweep: 392 -> ~357 Gb/s after 10 sweeps, still above the 342 floor
    for k in range(10):
        speed = NOMINAL_GBPS * (1 - 0.01 * k)
        result = build_run(NODES, node_gbps={"node-005": speed}, seed=100 + k)
        _record(store, result, 1000.0 * k)
    drift = store.drifting_nodes(probe="ib_write_bw")
    assert [d.node for d in drift] == ["node-005"]
    d = drift[0]
    assert not d.below_floor and d.latest_value > FLOOR_GBPS
    assert 0.04 <= d.drop_fraction <= 0.09 and d.slope_per_run < 0 and d.runs == 10


def test_flaky_node_tops_the_lemon_list_while_a_one_off_glitch_does_not(store):
    flaky, glitchy = "node-006", "node-011"
    t = 0.0
    for k in range(12):
        slow = {flaky: 150.0} if k % 3 == 0 else {}  # fails every third sweep
        glitch = [(0, glitchy)] if k == 5 else []
        run_id = _record(store, build_run(NODES, node_gbps=slow, glitch_tests=glitch, seed=k), t)
        if slow:  # fabriccheck drained it; next sweep it passed and was returned
            store.record_action(flaky, "drain", backend="slurm", status=APPLIED, run_id=run_id)
        elif k % 3 == 1:
            store.record_action(flaky, "resume", backend="slurm", status=APPLIED, run_id=run_id)
        t += 3600.0
    lemons = store.lemon_nodes()
    assert lemons[0].node == flaky
    top = lemons[0].signals
    assert top["bad_runs"] == 4 and top["drained"] == 4 and top["returned"] == 4
    assert top["flaps"] == 7 and top["runs_tested"] == 12
    scores = {s.node: s.score for s in lemons}
    assert scores[glitchy] < scores[flaky] / 4
    # partners of the flaky node were suspect now and then; none comes close, none was bad
    others = [s for s in lemons if s.node != flaky]
    assert lemons[1].score < lemons[0].score / 2
    assert all(s.signals["bad_runs"] == 0 and s.signals["drained"] == 0 for s in others)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=40))
def test_mad_is_translation_invariant_and_nonnegative(xs):
    assert mad(xs) >= 0
    assert mad([x + 10.0 for x in xs]) == pytest.approx(mad(xs), abs=1e-6)


@settings(max_examples=50, deadline=None)
@given(st.floats(-5, 5), st.floats(-100, 100), st.integers(2, 15))
def test_theil_sen_recovers_an_exact_line(slope, icept, n):
    assert theil_sen_slope([icept + slope * i for i in range(n)]) == pytest.approx(slope, abs=1e-9)


def test_passing_but_far_below_the_learned_baseline_is_flagged_not_blamed(store):
    for k in range(4):
        _record(store, build_run(NODES, seed=200 + k), 1000.0 * k)
    # node-009 at 352 Gb/s: above the 342 spec floor, far below what this SKU does (~392)
    run = build_run(NODES, node_gbps={"node-009": 352.0}, seed=300)
    assert all(o.passed for o in run.observations)
    run_id = _record(store, run, 9000.0)
    low = store.below_baseline(run.observations, sku="h100", exclude_run=run_id)
    assert low["nodes"] == ["node-009"]
    assert {t["test"] for t in low["tests"]} == {
        o.test.test_id for o in run.observations if "node-009" in o.test.nodes
    }
    assert all(t["value"] < t["limit"] < t["baseline_median"] for t in low["tests"])
    # without history there is nothing to compare with
    assert store.below_baseline(run.observations, sku="b200")["tests"] == []
