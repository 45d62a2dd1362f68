"""A sweep process SIGKILLed mid-run keeps its finished rounds; --resume replays them and ends
with the same verdicts as an uninterrupted run (real orchestrator and simulator)."""

from __future__ import annotations

import os
import signal
import textwrap

import pytest

pytest.importorskip("fabriccheck.orchestrator")

from fabriccheck.actions.session import OpsOptions, OpsSession  # noqa: E402
from fabriccheck.executors.factory import make_executor  # noqa: E402
from fabriccheck.faults import load_faults  # noqa: E402
from fabriccheck.orchestrator import run  # noqa: E402
from fabriccheck.policy import SweepPolicy  # noqa: E402
from fabriccheck.specs import resolve_spec  # noqa: E402
from fabriccheck.store import Store  # noqa: E402
from fabriccheck.topology import load_topology  # noqa: E402
from tests.childproc import python_child  # noqa: E402
from tests.conftest import REPO  # noqa: E402
from tests.doubles import CountingExecutor  # noqa: E402

FAULTS = str(REPO / "topologies" / "faults" / "demo-roce-64.yaml")
SEED = 13

CHILD = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    from tests.actions.test_resume_killed_run import sweep
    from tests.doubles import StallingExecutor

    sweep({db!r}, run_id_out=True, stall=lambda exe: StallingExecutor(exe, at=3))
    """
)


def sweep(db, *, resume=None, run_id_out=False, stall=None, counter=None):
    """One demo sweep through OpsSession, as the CLI runs it."""
    topo = load_topology("roce-rail-64")
    spec = resolve_spec(None, topo)
    ops = OpsSession("sweep", OpsOptions(db=db, resume=resume), sku=spec.sku, fabric=topo.fabric)
    nodes = ops.select_nodes(sorted(topo.nodes), explicit=True, known=topo.nodes)
    run_id = ops.begin(nodes, params={"topology": "roce-rail-64", "seed": SEED})
    if run_id_out:
        print("run", run_id, flush=True)
    exe = make_executor("sim", topology=topo, spec=spec, faults=load_faults(FAULTS), seed=SEED)
    if counter is not None:
        exe = counter(exe)
    if stall is not None:
        exe = stall(exe)
    result = run("sweep", nodes, topo, spec, ops.wrap(exe, spec), SweepPolicy(seed=SEED))
    ops.finish(result, topology=topo)
    ops.close()
    return result


@pytest.mark.slow
def test_killed_sweep_resumes_to_the_same_verdicts(tmp_path):
    db = str(tmp_path / "h.sqlite")
    with python_child(CHILD.format(repo=str(REPO), db=db)) as child:
        run_id = child.stdout.readline().split()[1]
        assert child.stdout.readline().startswith("stalled in round 3")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    with Store(db) as s:
        assert s.run(run_id).status == "running"
        done = s.completed_rounds(run_id)
    assert list(done) == [0, 1]
    replayed_tests = sum(len(v) for v in done.values())

    counter: list[CountingExecutor] = []
    resumed = sweep(db, resume=run_id,
                    counter=lambda e: counter.append(CountingExecutor(e)) or counter[0])
    fresh_counter: list[CountingExecutor] = []
    fresh = sweep(str(tmp_path / "fresh.sqlite"),
                  counter=lambda e: fresh_counter.append(CountingExecutor(e)) or fresh_counter[0])
    # the finished rounds were not run again; the rest was
    assert counter[0].ran == fresh_counter[0].ran - replayed_tests
    assert (resumed.drain, resumed.bad_nics, resumed.hung, resumed.bad_links) == (
        fresh.drain, fresh.bad_nics, fresh.hung, fresh.bad_links)
    assert resumed.drain == ["node-017", "node-033", "node-040", "node-058"]  # the demo faults
    with Store(db) as s:
        rec = s.run(run_id)
        assert rec.status == "finished" and rec.rounds == resumed.rounds
        assert len(s.runs()) == 1 and s.run(run_id).summary["resumed"] == run_id
