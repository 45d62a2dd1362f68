"""Path learning for coverage: dull pinned flows are re-pinned onto switch links no flow crossed
yet, and aimed flows find their link even on a wide ECMP fabric (simulator)."""

from __future__ import annotations

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.learn_paths import PathLearner, directed_hops
from fabriccheck.models import link_key
from fabriccheck.topology import generate, load_topology
from fabriccheck.topology.view import FabricView
from tests.test_learn_paths import pair


@pytest.fixture(scope="module")
def roce():
    return load_topology("roce-rail-64")


def leaf_links(topo, *leaves):
    return {lk for lk in topo.links if lk[0] in leaves or lk[1] in leaves
            if lk[0] in topo.switches and lk[1] in topo.switches}


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_two_rounds_of_four_flows_cover_every_uplink_of_two_leaves(roce, seed) -> None:
    """Round 1: four flows leaf-0-0 -> leaf-1-0; round 2: four other pairs back. Each flow
    covers two of the 16 links between the leaves and the 8 spines, so the two rounds cover
    all 16 only when round 2 takes exactly the 4 spines round 1 left (1 chance in 70 for free
    random paths): the learner re-pins its dull flows onto them."""
    ex = SimExecutor(roce, seed=seed)
    view = FabricView(roce)
    learner = PathLearner.for_executor(view, ex, seed)
    r1 = [pair(f"r1-{i}", 1 + i, 33 + i, 49152 + 101 * i) for i in range(4)]
    r2 = [pair(f"r2-{i}", 37 + i, 5 + i, 50152 + 101 * i) for i in range(4)]
    out = [*learner.learn(r1, ex, cover_tries=40), *learner.learn(r2, ex, cover_tries=40)]
    assert learner.covered == leaf_links(roce, "leaf-0-0", "leaf-1-0")
    assert learner.stats.covered_links == 16
    for t in out:  # every flow really takes the path it is annotated with
        real = ex.router.path(t.flows[0], t.test_id, (t.params.sport, 4791))
        assert set(t.flows[0].path) <= set(real)
    hops = [directed_hops(view, t.flows[0]) for t in out]
    assert sum(len(h) for h in hops) == len(set().union(*hops))  # and none collide


def test_a_dull_flow_keeps_its_port_when_no_port_adds_a_link(roce) -> None:
    """Every link is covered already: re-pinning would only cost a port change."""
    ex = SimExecutor(roce, seed=3)
    view = FabricView(roce)
    learner = PathLearner.for_executor(view, ex, 3)
    learner.covered = set(view.switch_links)
    t = pair("t", 2, 40, 51000)
    (out,) = learner.learn([t], ex)
    assert out.params.sport == 51000 and learner.stats.repinned == 0
    assert learner.dull([out]) == [0]


def test_retests_are_never_repinned_for_coverage(roce) -> None:
    """A retest must take its failing flow's path again (glitch or real?)."""
    ex = SimExecutor(roce, seed=3)
    learner = PathLearner.for_executor(FabricView(roce), ex, 3)
    first = learner.learn([pair("a", 2, 40, 51000)], ex)[0]
    again = pair("b", 2, 40, 51000, retest_of="a")
    (out,) = learner.learn([again], ex)
    assert out.params.sport == 51000 and out.flows[0].path == first.flows[0].path


@pytest.mark.parametrize("seed", range(6))
def test_an_aimed_flow_finds_its_link_among_32_equal_cost_paths(seed) -> None:
    """32 spines: a fixed 16 draws miss a given spine 60% of the time; the learner draws six
    per equal-cost path."""
    topo = generate({"kind": "rail-optimized", "nodes": 64, "rails": 1, "gpus_per_node": 8,
                     "nodes_per_leaf": 32, "spines": 32}, name="wide", fabric="roce")
    ex = SimExecutor(topo, seed=seed)
    learner = PathLearner.for_executor(FabricView(topo), ex, seed)
    target = link_key("leaf-0-0", f"spine-{(7 * seed) % 32}")
    t = pair("p", 3, 40, 50000, probe_of=f"{target[0]} -- {target[1]}")
    (out,) = learner.learn([t], ex)
    assert target in out.flows[0].path


def test_a_flow_is_sent_at_a_link_whose_traces_die(roce) -> None:
    """A down link is never covered by a whole traced path; the ports whose traces die just
    past spine-2 (toward leaf-1-0) are where the uncovered link is, so a dull flow is sent there
    and fails there (the localizer then has a one-link partial path)."""
    from fabriccheck.faults import FaultSet

    dead = link_key("leaf-1-0", "spine-2")
    fs = FaultSet.from_dict({"faults": [{"kind": "link_down", "link": list(dead)}]})
    ex = SimExecutor(roce, faults=fs, seed=6)
    view = FabricView(roce)
    learner = PathLearner.for_executor(view, ex, 6)
    learner.covered = set(view.switch_links) - {dead}
    t = pair("t", 2, 40, 51000)
    first = ex.router.path(t.flows[0], "t", (51000, 4791))
    assert dead not in first  # its own port takes another spine
    (out,) = learner.learn([t], ex, cover_tries=24)
    assert out.params.sport != 51000
    assert out.flows[0].path is None and out.flows[0].partial == (dead,)
    assert dead in ex.router.path(out.flows[0], "t", (out.params.sport, 4791))
