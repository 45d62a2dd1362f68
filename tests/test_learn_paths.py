"""Path learning: pinned RoCE flows' paths from same-5-tuple traceroutes (on the simulator)."""

from __future__ import annotations

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.learn_paths import PathLearner, directed_hops
from fabriccheck.models import Flow, Test, link_key
from fabriccheck.topology import load_topology
from fabriccheck.topology.view import FabricView


@pytest.fixture(scope="module")
def roce():
    return load_topology("roce-rail-64")


def pair(tid: str, a: int, b: int, sport: int, rail: int = 0, **params) -> Test:
    src, dst = f"node-{a:03d}", f"node-{b:03d}"
    return Test(tid, "ib_write_bw", (src, dst), (Flow(f"{src}/mlx5_{rail}", f"{dst}/mlx5_{rail}"),),
                params={"sport": sport, "dport": 4791, **params})


def switch_part(topo, path):
    return {lk for lk in path if lk[0] in topo.switches and lk[1] in topo.switches}


def test_learns_the_path_each_flow_really_takes_and_caches_it(roce) -> None:
    ex = SimExecutor(roce, seed=5)
    learner = PathLearner.for_executor(FabricView(roce), ex)
    tests = [pair(f"t{i}", 1 + i, 33 + i, 49152 + 97 * i) for i in range(12)]
    out = learner.learn(tests, ex, repin_tries=0, cover_tries=0)
    for t in out:
        real = ex.router.path(t.flows[0], t.test_id, (t.params.sport, 4791))
        assert set(t.flows[0].path) == switch_part(roce, real)
    assert learner.stats.learned == learner.stats.traces == 12
    learner.learn(tests, ex, repin_tries=0, cover_tries=0)
    assert learner.stats.traces == 12  # same 5-tuples: cached, not traced again
    view = FabricView(roce)
    exact, possible = view.flow_links(out[0].flows[0])
    assert exact == possible == frozenset(out[0].flows[0].path)
    assert len(view.flow_links(tests[0].flows[0])[1]) == 16  # unlearned: the ECMP set


def test_colliding_flows_are_repinned_onto_free_paths(roce) -> None:
    ex = SimExecutor(roce, seed=2)
    view = FabricView(roce)
    learner = PathLearner.for_executor(view, ex)
    # 8 flows leaving leaf-0-0 for leaf-1-0: random ports collide on some of the 8 uplinks
    tests = [pair(f"t{i}", 1 + i, 33 + i, 49152 + 13 * i) for i in range(8)]
    plain = PathLearner.for_executor(view, ex)
    assert plain.collisions(plain.learn(tests, ex, repin_tries=0))  # they do collide
    out = learner.learn(tests, ex, repin_tries=12)
    assert learner.stats.repinned > 0
    hops = [directed_hops(view, t.flows[0]) for t in out]
    assert sum(len(h) for h in hops) == len(set().union(*hops))  # pairwise disjoint now
    assert len(learner.collisions(out)) == 0


def test_a_probe_aimed_at_a_link_is_pinned_onto_it(roce) -> None:
    ex = SimExecutor(roce, seed=9)
    learner = PathLearner.for_executor(FabricView(roce), ex)
    target = link_key("leaf-0-0", "spine-6")
    t = pair("p", 3, 40, 50000, probe_of=f"{target[0]} -- {target[1]}")
    (out,) = learner.learn([t], ex)
    assert target in out.flows[0].path
    assert ex.router.path(out.flows[0], "p", (out.params.sport, 4791)) is not None


def test_a_trace_dying_at_a_down_link_narrows_the_candidates(roce) -> None:
    fs = FaultSet.from_dict({"faults": [{"kind": "link_down", "link": ["leaf-1-0", "spine-2"]}]})
    ex = SimExecutor(roce, faults=fs, seed=4)
    view = FabricView(roce)
    learner = PathLearner.for_executor(view, ex)
    tests = [pair(f"t{i}", 1 + i % 32, 33 + i % 32, 49152 + 31 * i) for i in range(40)]
    out = learner.learn(tests, ex, repin_tries=0, cover_tries=0)
    partial = [t for t in out if t.flows[0].partial is not None]
    assert partial and learner.stats.partial == len(partial)
    for t in partial:  # died beyond spine-2: only the downlink is left
        assert t.flows[0].partial == (link_key("leaf-1-0", "spine-2"),)
        assert view.flow_links(t.flows[0]) == (frozenset(), frozenset(t.flows[0].partial))


def test_no_learning_without_hop_names_or_on_infiniband(roce) -> None:
    class Plain:
        def run_round(self, tests):  # pragma: no cover - never called
            raise AssertionError

    assert PathLearner.for_executor(FabricView(roce), Plain()) is None
    ib = load_topology("ib-fattree-128")
    assert PathLearner.for_executor(FabricView(ib), SimExecutor(ib)) is None


def test_a_trace_through_unknown_routers_learns_nothing(roce) -> None:
    ex = SimExecutor(roce, seed=5)
    names = dict(list(ex.hop_names().items())[:3])  # most router addresses unknown
    learner = PathLearner(FabricView(roce), names)
    (out,) = learner.learn([pair("t", 1, 40, 50123)], ex)
    assert out.flows[0].path is None and learner.stats.not_learned == 1
    assert "incomplete" in learner.stats.examples[0]
