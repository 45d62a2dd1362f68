"""Per-round recording and resume-by-replay around the real simulator executor."""

from __future__ import annotations

from fabriccheck.executors.factory import make_executor
from fabriccheck.models import Flow, Test
from fabriccheck.store import Store
from fabriccheck.store.recording import RecordingExecutor
from fabriccheck.topology import load_topology
from tests.doubles import CountingExecutor


def _rounds(topo):
    names = sorted(topo.nodes)[:8]
    out = []
    for k, shift in enumerate((1, 3, 5)):
        tests = []
        for i in range(0, 8, 2):
            a, b = names[i], names[(i + shift) % 8] if k else names[i + 1]
            if a == b:
                continue
            tests.append(Test(f"r{k}-{a}-{b}", "ib_write_bw", (a, b),
                              (Flow(topo.nic(a, 0), topo.nic(b, 0)),), round=k,
                              params={"size_bytes": 1 << 20, "duration_s": 2}))  # fmt: skip
        out.append(tests)
    return out


def test_rounds_are_recorded_as_they_finish_and_replayed_on_resume(tmp_path):
    topo = load_topology("roce-rail-64")
    rounds = _rounds(topo)
    db = tmp_path / "h.sqlite"
    store = Store(db)
    run_id = store.begin_run("sweep", sorted(topo.nodes)[:8])
    first = CountingExecutor(make_executor("sim", topology=topo, seed=1))
    rec = RecordingExecutor(first, store, run_id)
    raws0 = rec.run_round(rounds[0])
    raws1 = rec.run_round(rounds[1])
    assert first.ran == len(rounds[0]) + len(rounds[1])
    assert all("BW average[Gb/sec]" in r.stdout for r in raws0)  # real perftest text
    # the process dies here; a new one resumes the run
    store.close()
    store = Store(db)
    rec_, done = store.resume_run(run_id)
    assert list(done) == [0, 1] and [len(v) for v in done.values()] == [4, 4]
    second = CountingExecutor(make_executor("sim", topology=topo, seed=1))
    rec2 = RecordingExecutor(second, store, run_id, replay=done)
    again0 = rec2.run_round(rounds[0])
    again1 = rec2.run_round(rounds[1])
    assert second.ran == 0 and rec2.replayed == 8  # finished rounds are not run twice
    assert [r.stdout for r in again0] == [r.stdout for r in raws0]
    assert [r.stdout for r in again1] == [r.stdout for r in raws1]
    rec2.run_round(rounds[2])
    assert second.ran == len(rounds[2])
    assert list(store.completed_rounds(run_id)) == [0, 1, 2]
    assert store.run(run_id).rounds == 3
    statuses = {o.status for o in store.observations(run_id)}
    assert statuses == {"pass"}
    rec2.close()
    store.close()


def test_under_the_orchestrator_each_round_is_written_as_the_run_judged_it(tmp_path):
    """The orchestrator hands every judged round to the recorder (its ``on_round``): the store
    holds the run's own observations (peer judgement included), round by round, and the
    recorder never parses or judges a round itself."""
    from fabriccheck.faults import load_faults
    from fabriccheck.orchestrator import run
    from fabriccheck.policy import SweepPolicy
    from fabriccheck.specs import resolve_spec
    from tests.conftest import REPO

    topo = load_topology("roce-rail-64")
    spec = resolve_spec(None, topo)
    faults = load_faults(str(REPO / "topologies" / "faults" / "demo-roce-64.yaml"))
    store = Store(tmp_path / "h.sqlite")
    nodes = sorted(topo.nodes)
    run_id = store.begin_run("sweep", nodes)
    exe = make_executor("sim", topology=topo, spec=spec, faults=faults, seed=2)
    rec = RecordingExecutor(exe, store, run_id, spec=None, records_rounds=False)
    result = run("sweep", nodes, topo, spec, rec, SweepPolicy(seed=2))
    stored = store.completed_rounds(run_id)
    assert len(stored) == result.rounds
    got = [(o.test.test_id, o.status, o.value, o.reason) for obs in stored.values() for o in obs]
    want = [(o.test.test_id, o.status, o.value, o.reason) for o in result.observations]
    traffic = {o.test.test_id for o in result.observations}
    # spec=None: a recorder judging itself would give pass/error only, no values or reasons
    assert [g for g in got if g[0] in traffic] == want
    assert {"pass", "fail"} <= {s for _, s, _, _ in want}
    signals = [g for g in got if g[0] not in traffic]  # the preflight's judged readings
    assert signals and all(r for _, _, _, r in signals)
    store.close()
