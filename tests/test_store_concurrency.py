"""History store under real concurrent writer processes and a SIGKILL in the middle of a run."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import textwrap

from fabriccheck.store import APPLIED, Store
from tests.childproc import python_child
from tests.conftest import REPO
from tests.runfactory import build_run, nodes

ROUNDS_PER_WRITER = 12


def _writer(path: str, wid: int) -> None:
    names = [f"w{wid}-{n}" for n in nodes(8)]
    store = Store(path, busy_timeout_s=60)
    for k in range(ROUNDS_PER_WRITER // 2):
        result = build_run(names, seed=wid * 100 + k)
        run_id = store.begin_run("sweep", names, run_id=f"w{wid}-run{k}")
        for rnd in (0, 1):
            store.record_round(run_id, rnd, [o for o in result.observations if o.test.round == rnd])
        store.record_action(names[0], "drain", backend="slurm", status=APPLIED, run_id=run_id)
        store.finish_run(run_id, result)
    store.close()


def test_four_writer_processes_lose_nothing(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    Store(path).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with Store(path) as s:
        runs = s.runs(limit=1000)
        assert len(runs) == 4 * ROUNDS_PER_WRITER // 2
        assert all(r.status == "finished" and r.rounds == 2 for r in runs)
        n_obs = s.conn.execute("SELECT COUNT(*) FROM observations").fetchone()[0]
        assert n_obs == len(runs) * 8  # 4 tests per round, 2 rounds
        assert len(s.actions()) == len(runs)
        assert s.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert s.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {repo!r})
    from fabriccheck.store import Store
    from tests.runfactory import build_run, nodes
    store = Store({path!r})
    result = build_run(nodes(8), node_gbps={{"node-002": 100.0}}, seed=7)
    run_id = store.begin_run("sweep", result.nodes, run_id="killed-run")
    by_round = {{}}
    for o in result.observations:
        by_round.setdefault(o.test.round, []).append(o)
    store.record_round(run_id, 0, by_round[0])
    print("round 0 written", flush=True)
    # round 1 is killed half-way through its transaction
    with store._tx() as c:
        store._insert_observations(c, run_id, 1, by_round[1][:2])
        print("mid round 1", flush=True)
        time.sleep(60)
    """
)


def test_sigkill_mid_round_keeps_completed_rounds_and_resume_works(tmp_path):
    path = str(tmp_path / "crash.sqlite")
    with python_child(CHILD.format(repo=str(REPO), path=path)) as child:
        assert child.stdout.readline().strip() == "round 0 written"
        assert child.stdout.readline().strip() == "mid round 1"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    with Store(path, busy_timeout_s=5) as s:  # not locked by the dead writer
        rec, rounds = s.resume_run("killed-run")
        assert rec.status == "running" and list(rounds) == [0] and len(rounds[0]) == 4
        n = s.conn.execute("SELECT COUNT(*) FROM observations WHERE round = 1").fetchone()[0]
        assert n == 0  # the half-written round left nothing behind
        # resume: run the missing round and finish
        result = build_run(nodes(8), node_gbps={"node-002": 100.0}, seed=7)
        s.record_round("killed-run", 1, [o for o in result.observations if o.test.round == 1])
        s.finish_run("killed-run", result)
        assert s.run("killed-run").status == "finished"
        assert len(s.observations("killed-run")) == 8
        assert s.run("killed-run").summary["bad_nodes"] == ["node-002"]
        assert s.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # the database file opens cleanly from plain sqlite too
    assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
