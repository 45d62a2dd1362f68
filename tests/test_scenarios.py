"""The scenario generator (tests/scenarios.py): valid faults files, the shapes it promises, seeds.

Only the generator is checked here, never verdict quality (bench/bench_scenarios.py measures
that): every scenario loads with ``FaultSet.from_dict`` and names parts of its own topology, the
density is 5-10%, each family has the shape its docstring says, and a seed fixes everything.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.faults import FaultSet
from fabriccheck.models import link_key, nic_node
from tests.scenarios import FAMILIES, TOPOLOGY_KINDS, fabric_slow, leaves, scenario, switch_links

families = st.sampled_from(sorted(FAMILIES))
kinds = st.sampled_from(sorted(TOPOLOGY_KINDS))
seeds = st.integers(0, 10**6)


def faulty_nodes(fs: FaultSet) -> set[str]:
    return {f.node or nic_node(f.nic) for f in fs.faults if f.node or f.nic}


@settings(max_examples=60, deadline=None)
@given(family=families, kind=kinds, seed=seeds)
def test_every_scenario_is_a_valid_faults_file_for_its_topology(family, kind, seed):
    sc = scenario(family, kind, seed)
    topo, faults, nodes, mode = sc
    fs = FaultSet.from_dict(faults).validate(topo)
    assert FaultSet.from_dict(fs.to_dict()) == fs
    assert mode in ("sweep", "gate", "bisect") and sc.expect in (
        "faults", "healthy", "fabric_warning")
    assert nodes and set(nodes) <= set(topo.nodes) and list(nodes) == sorted(set(nodes))
    assert fs.noise.jitter == 0.03 and 0.01 <= fs.noise.glitch_rate <= 0.02
    assert (sc.expect == "healthy") == (not fs.faults)
    assert set(sc.log_suspects) <= set(nodes)
    assert topo.fabric == TOPOLOGY_KINDS[kind][0] and len(leaves(topo)) >= 2


@settings(max_examples=40, deadline=None)
@given(kind=kinds, seed=seeds)
def test_density_is_five_to_ten_percent_one_fault_per_node(kind, seed):
    sc = scenario("density", kind, seed)
    fs = FaultSet.from_dict(sc.faults)
    n = len(sc.topology.nodes)
    assert 16 <= n <= 256 and len(faulty_nodes(fs)) == len(fs.faults)
    assert 0.05 <= len(fs.faults) / n <= 0.10
    assert {f.kind for f in fs.faults} <= {"node_slow", "nic_degraded", "nic_down", "node_hang",
                                            "node_unreachable"}


@settings(max_examples=30, deadline=None)
@given(family=families, kind=kinds, seed=seeds)
def test_a_seed_fixes_the_scenario(family, kind, seed):
    a, b = scenario(family, kind, seed), scenario(family, kind, seed)
    assert (a.faults, a.nodes, a.mode, a.flaky_nics, a.switch, a.log_suspects) == (
        b.faults, b.nodes, b.mode, b.flaky_nics, b.switch, b.log_suspects)
    assert a.topology.links.keys() == b.topology.links.keys()


def test_seeds_give_different_scenarios():
    for family in FAMILIES:
        drawn = {repr(scenario(family, "ib-rail", s).faults) for s in range(6)}
        assert len(drawn) > 1 or family == "noise_only", family


def test_fabric_slow_slows_every_link_and_nic_by_a_fifth():
    sc = scenario("fabric_slow", "roce-rail", 1)
    fs = FaultSet.from_dict(sc.faults)
    assert {f.link for f in fs.faults} == set(sc.topology.links)
    assert {(f.kind, f.factor) for f in fs.faults} == {("link_degraded", 0.8)}
    attached = {e for k in fs.bad_links() for e in k}
    assert set(sc.topology.nics) <= attached and sc.expect == "fabric_warning"


@settings(max_examples=20, deadline=None)
@given(kind=kinds, seed=seeds)
def test_switch_down_faults_every_link_of_one_switch(kind, seed):
    sc = scenario("switch_down", kind, seed)
    fs = FaultSet.from_dict(sc.faults)
    topo = sc.topology
    of_switch = {k for k in topo.links if sc.switch in k and all(e in topo.switches for e in k)}
    assert set(fs.bad_links()) == of_switch and len(of_switch) >= 2


@settings(max_examples=20, deadline=None)
@given(kind=kinds, seed=seeds)
def test_intermittent_flaps_one_switch_link_and_one_nic_attachment(kind, seed):
    sc = scenario("intermittent", kind, seed)
    fs = FaultSet.from_dict(sc.faults)
    (nic,) = sc.flaky_nics
    assert {f.kind for f in fs.faults} == {"link_flapping"}
    assert link_key(nic, sc.topology.attachment[nic]) in fs.bad_links()
    assert sum(all(e in sc.topology.switches for e in k) for k in fs.bad_links()) == 1


@settings(max_examples=40, deadline=None)
@given(kind=kinds, seed=seeds)
def test_small_jobs_hold_two_to_sixteen_nodes_and_at_most_two_faults_among_them(kind, seed):
    sc = scenario("small_jobs", kind, seed)
    fs = FaultSet.from_dict(sc.faults)
    assert sc.mode in ("gate", "bisect") and 2 <= len(sc.nodes) <= 16
    assert len(sc.topology.nodes) >= 128
    assert len(fs.faults) <= 2 and faulty_nodes(fs) <= set(sc.nodes)
    assert not (sc.mode == "gate" and fs.hung_nodes())


@settings(max_examples=30, deadline=None)
@given(kind=kinds, seed=seeds)
def test_odd_leaves_have_odd_node_and_leaf_group_counts(kind, seed):
    sc = scenario("odd_leaves", kind, seed)
    topo = sc.topology
    n = len(topo.nodes)
    assert n % 2 == 1
    if kind.endswith("rail"):
        groups = {leaf.split("-")[1] for leaf in leaves(topo)}
    else:  # fat-trees: leaves (2-tier) or pods (3-tier)
        groups = {leaf.rsplit("-", 1)[0] if kind == "ib-fat3" else leaf
                  for leaf in leaves(topo)}
    assert len(groups) % 2 == 1


def test_multi_per_node_leaf_puts_several_faults_on_one_node_and_one_leaf():
    for seed in range(5):
        sc = scenario("multi_per_node_leaf", "ib-fat2", seed)
        fs = FaultSet.from_dict(sc.faults)
        per_node: dict[str, int] = {}
        for f in fs.faults:
            if f.node or f.nic:
                n = f.node or nic_node(f.nic)
                per_node[n] = per_node.get(n, 0) + 1
        assert max(per_node.values()) >= 2
        (lk,) = fs.bad_links()
        leaf = next(e for e in lk if sc.topology.switches[e].tier == "leaf")
        on_leaf = {n for n in per_node if sc.topology.node_leaves(n)[0] == leaf}
        assert on_leaf


def test_the_1024_node_row_builds():
    sc = scenario("density", "ib-rail", 0, nodes=1024)
    fs = FaultSet.from_dict(sc.faults).validate(sc.topology)
    assert len(sc.nodes) == 1024 and 51 <= len(fs.faults) <= 102


def test_fabric_slow_by_nics_degrades_every_nic_and_switch_link():
    sc = fabric_slow(random.Random(2), "ib-fat2", 32, how="nics")
    fs = FaultSet.from_dict(sc.faults).validate(sc.topology)
    assert set(fs.bad_nics()) == set(sc.topology.nics)
    assert set(fs.bad_links()) == set(switch_links(sc.topology))
    assert {f.factor for f in fs.faults} == {0.8}
