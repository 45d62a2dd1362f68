"""Follow-up planning: confirmations against known-good same-leaf partners, probes, bisection."""

from __future__ import annotations

import math

import pytest

from fabriccheck.planning.bisect_steps import (
    BisectTask,
    bisect_round_bound,
    plan_bisect,
    split_halves,
)
from fabriccheck.planning.build import RoundBuilder, ring_flows
from fabriccheck.planning.confirm import GoodPool, plan_nic_confirm, plan_node_confirm
from fabriccheck.planning.link_probes import plan_link_probes
from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import load_spec
from tests.planning.fabrics import make_view

SPEC = load_spec("h100-ndr400-ib")


def builder(view, policy=None):
    return RoundBuilder(3, view, SPEC, policy or SweepPolicy())


def test_nic_confirm_uses_two_known_good_partners_on_the_same_leaf():
    view = make_view()
    good = set(view.topology.nodes) - {"node-001"}
    good_nics = {n for n in view.topology.nics if not n.startswith("node-001/")}
    b = builder(view)
    made = plan_nic_confirm("node-001/mlx5_2", b, GoodPool(good, view, 0, 3), good_nics)
    assert made == 2
    att = view.topology.attachment
    clients = {t.flows[0].src for t in b.tests}
    servers = {t.flows[0].dst for t in b.tests}
    assert "node-001/mlx5_2" in clients and "node-001/mlx5_2" in servers
    for t in b.tests:
        assert t.purpose == "confirm"
        assert att[t.flows[0].src] == att[t.flows[0].dst], "confirmation must avoid uplinks"
        assert set(t.nodes) - {"node-001"} <= good
    assert len({n for t in b.tests for n in t.nodes}) == 3  # two different partners


def test_node_confirm_covers_every_rail_both_ways():
    view = make_view()
    good = set(view.topology.nodes) - {"node-005"}
    b = builder(view)
    made = plan_node_confirm("node-005", b, GoodPool(good, view, 0, 3),
                             set(view.topology.nics))
    assert made == 8
    assert {t.params["rails"][0] for t in b.tests} == {0, 1, 2, 3}


def test_hang_confirm_is_one_test():
    view = make_view()
    b = builder(view)
    assert plan_node_confirm("node-005", b, GoodPool(set(view.topology.nodes) - {"node-005"},
                                                     view, 0, 3),
                             set(view.topology.nics), hang=True) == 1


def test_builder_never_double_books_a_nic_direction():
    view = make_view()
    b = builder(view)
    assert b.add_flow("node-001", "node-002", 0) is not None
    assert b.add_flow("node-001", "node-003", 0) is None  # node-001/mlx5_0 already sends
    assert b.add_flow("node-003", "node-001", 0) is not None  # but can receive (full duplex)
    assert b.add_group(("node-001", "node-004")) is None


def test_ib_link_probe_crosses_exactly_one_candidate():
    view = make_view()
    b = builder(view)
    att = view.topology.attachment
    src, dst = "node-001/mlx5_0", "node-020/mlx5_0"
    route = sorted(view.route_links(src, dst))
    assert len(route) == 2
    flows = [("r1-00001", src, dst), ("r2-00007", "node-002/mlx5_0", "node-021/mlx5_0")]
    made = plan_link_probes(flows, route, b, set(view.topology.nics), seed=0)
    assert made == 4  # two probes per candidate (two failures seen: no retest needed)
    by_link = {}
    for t in b.tests:
        by_link.setdefault(t.params["probe_of"], set()).add(frozenset(t.nodes))
    assert len(by_link) == 2 and all(len(p) == 2 for p in by_link.values())  # fresh pairs
    for t in b.tests:
        assert "probe_of" in t.params
        links = view.route_links(t.flows[0].src, t.flows[0].dst)
        assert len(links & set(route)) == 1
        assert att[t.flows[0].src] != att[t.flows[0].dst]
    b2 = builder(view)
    assert plan_link_probes([("r1-00001", src, dst)], route[:1], b2, set(view.topology.nics),
                            seed=0) == 2  # two probes from fresh pairs, one each direction
    assert all(t.params["probe_of"] == f"{route[0][0]} -- {route[0][1]}" for t in b2.tests)
    assert set(b2.tests[0].nodes) != set(b2.tests[1].nodes)
    # both directions of the link are taken: no room for a retest of the failing flow
    assert not any("retest_of" in t.params for t in b2.tests)
    b3 = builder(view)
    assert plan_link_probes([("r1-00001", src, dst)], route[:1], b3, set(view.topology.nics),
                            seed=0, per_link=1) >= 1
    assert "probe_of" in b3.tests[0].params  # probes first; a retest only where links are free
    assert sum("probe_of" in t.params for t in b3.tests) == 1


def test_split_and_bound():
    assert split_halves(list("abcdefgh")) == (tuple("abcd"), tuple("efgh"))
    for n in (8, 16, 100, 1024, 4096):
        assert bisect_round_bound(n) == 2 + max(0, math.ceil(math.log2(n / 8)))


@pytest.mark.parametrize("size", [4, 8])
def test_bisect_pads_halves_to_group_size(size):
    view = make_view()
    suspects = tuple(sorted(view.topology.nodes)[:size])
    good = set(sorted(set(view.topology.nodes) - set(suspects))[:size])  # room for halves only
    b = builder(view)
    out, left = plan_bisect(BisectTask(suspects, size, "r1-00001"), b,
                            GoodPool(good, view, 0, 3))
    assert len(out) == 2 and not left
    halves = [h for _, h in out]
    assert set(halves[0]) | set(halves[1]) == set(suspects)
    for t in b.tests:
        assert t.group_size == size and t.purpose == "bisect"
        assert set(t.nodes) - set(suspects) <= good
    assert not set(b.tests[0].nodes) & set(b.tests[1].nodes)


def test_bisect_tests_every_suspect_alone_when_padding_allows():
    view = make_view()
    suspects = tuple(sorted(view.topology.nodes)[:8])
    good = set(view.topology.nodes) - set(suspects)  # 56 = 8 x 7 padding nodes
    b = builder(view)
    out, left = plan_bisect(BisectTask(suspects, 8, "r1-00001"), b, GoodPool(good, view, 0, 3))
    assert out and sorted([p for _, p in out] + left) == [(n,) for n in suspects]
    assert all(t.group_size == 8 and len(set(t.nodes) & set(suspects)) == 1 for t in b.tests)
    hops = [h for t in b.tests for f in t.flows for h in view.directed_hops(f.src, f.dst)]
    assert len(hops) == len(set(hops)), "concurrent bisection rings must not share a link"


def test_ring_flows_per_rail():
    view = make_view()
    flows = ring_flows(["node-001", "node-002", "node-003"], [0, 1], view)
    assert len(flows) == 6
    assert ring_flows(["node-001"], [0, 1], view) == ()


def _leaf_spine_links(view, rail=0):
    return sorted(k for k in view.switch_links if any(x.endswith(f"-{rail}") for x in k)
                  and any(x.startswith("spine") for x in k))


def test_link_probe_prefers_a_route_whose_other_link_is_cleared():
    """A probe that also crosses an uncleared link pins nothing when it fails; with a route
    whose other link passing tests cleared, the probe takes that route."""
    view = make_view()
    src, dst = "node-001/mlx5_0", "node-020/mlx5_0"
    suspect = sorted(view.route_links(src, dst))[0]
    # only one other leaf-spine link of the rail is cleared: the probe must cross it
    others = [lk for lk in _leaf_spine_links(view) if lk != suspect
              and suspect[1] in lk]  # the same spine, another leaf
    cleared = {others[-1]}
    b = builder(view)
    made = plan_link_probes([("r1-00001", src, dst)], [suspect], b, set(view.topology.nics),
                            seed=0, retest=False, per_link=1, cleared=cleared)
    assert made >= 1
    probe = next(t for t in b.tests if t.params.get("probe_of"))
    route = view.route_links(probe.flows[0].src, probe.flows[0].dst)
    assert suspect in route and route - {suspect} <= cleared


def test_link_probe_clears_the_other_uncleared_link_in_the_same_round():
    """No route pins the suspect (its other links are all uncleared): a second flow crosses
    the probe's other link but not the suspect, so a pass clears it at once."""
    view = make_view()
    src, dst = "node-001/mlx5_0", "node-020/mlx5_0"
    suspect = sorted(view.route_links(src, dst))[0]
    cleared = {lk for lk in view.switch_links if suspect[1] not in lk}  # not at its spine
    b = builder(view)
    made = plan_link_probes([("r1-00001", src, dst)], [suspect], b, set(view.topology.nics),
                            seed=0, retest=False, per_link=1, cleared=cleared)
    probe = next(t for t in b.tests if t.params.get("probe_of") == " -- ".join(suspect))
    other = view.route_links(probe.flows[0].src, probe.flows[0].dst) - {suspect} - cleared
    assert other
    helpers = [t for t in b.tests if t is not probe]
    assert made == 1 + len(helpers) and helpers
    for lk in other:
        assert any(lk in view.route_links(t.flows[0].src, t.flows[0].dst)
                   and suspect not in view.route_links(t.flows[0].src, t.flows[0].dst)
                   for t in helpers)
    assert len({frozenset(t.nodes) for t in b.tests}) == len(b.tests)  # fresh pairs
    # without ``cleared`` (nothing known) nothing is added beside the probe
    b2 = builder(view)
    assert plan_link_probes([("r1-00001", src, dst)], [suspect], b2, set(view.topology.nics),
                            seed=0, retest=False, per_link=1) == 1


def test_roce_batch_sends_no_more_flows_one_way_than_there_are_uplinks():
    """lab-4: one uplink per leaf. Two sampled flows one way surely halve each other (a
    fault-free sweep failed all 12 of its sampling tests, as contention); one flow per way."""
    from pathlib import Path

    from fabriccheck.planning.roce_link_probes import plan_roce_batch, plan_roce_sampling
    from fabriccheck.topology import load_topology
    from fabriccheck.topology.view import FabricView

    topo = load_topology(str(Path(__file__).parents[2] / "topologies" / "lab-4.yaml"))
    view = FabricView(topo)
    good = set(topo.nics)
    b = RoundBuilder(7, view, load_spec("lab-tcp"), SweepPolicy(pair_probe="iperf3"))
    assert plan_roce_batch("leaf-1", "leaf-2", 0, b, good, seed=0, per_way=2) == 2
    ways = [t.params["batch"] for t in b.tests]
    assert sorted(ways) == ["leaf-1>leaf-2", "leaf-2>leaf-1"]
    b2 = RoundBuilder(7, view, load_spec("lab-tcp"), SweepPolicy(pair_probe="iperf3"))
    assert plan_roce_sampling(b2, good, seed=0, per_way=2) == 2
    # two spines: two flows each way may spread over the two uplinks
    wide = make_view(fabric="roce", nodes=8, rails=1, nodes_per_leaf=4, spines=2)
    b3 = builder(wide)
    assert plan_roce_batch("leaf-0-0", "leaf-1-0", 0, b3, set(wide.topology.nics), seed=0,
                           per_way=2) == 4


def test_a_test_the_round_has_no_room_for_runs_in_an_overflow_wave():
    """``in_later_wave``: a flow whose NICs the round has taken runs in the round's first
    overflow wave (after the round's tests so far); one that clashes there too, in the
    second; after :data:`OVERFLOW_WAVES` none (the next round plans it). Ids stay unique."""
    from fabriccheck.planning.build import OVERFLOW_WAVES

    view = make_view()
    b = builder(view)
    assert b.add_flow("node-001", "node-017", 0, "localize") is not None
    assert b.add_flow("node-001", "node-017", 0, "localize") is None  # its NICs are taken
    got = [b.in_later_wave(lambda sb: sb.add_flow("node-001", "node-017", 0, "localize"))
           for _ in range(OVERFLOW_WAVES + 1)]
    assert all(t is not None for t in got[:OVERFLOW_WAVES]) and got[-1] is None
    assert [t.params.wave for t in b.tests] == [None, *range(1, OVERFLOW_WAVES + 1)]
    assert len({t.test_id for t in b.tests}) == len(b.tests)
    # a wave the round adds later (cover flows, recheck samples) comes after the overflow
    assert b.next_wave() == OVERFLOW_WAVES + 1


def test_a_link_probe_whose_route_a_confirmation_took_runs_in_an_overflow_wave():
    """The round's confirmation took the direction of the suspect link its probes need:
    the probes run in overflow waves of the same round instead of a round later."""
    view = make_view()
    good_nics = set(view.topology.nics)
    b = builder(view)
    first = plan_link_probes((), [], b, good_nics, seed=1)  # nothing to probe: nothing made
    assert first == 0
    probe_b = builder(view)
    assert plan_link_probes((), [_some_uplink(view)], probe_b, good_nics, seed=1,
                            retest=False, per_link=2) == 2
    routes = [view.directed_hops(t.flows[0].src, t.flows[0].dst) for t in probe_b.tests]
    for r in routes:  # the round has already given away those directions of the link
        b.budget.used |= r
    made = plan_link_probes((), [_some_uplink(view)], b, good_nics, seed=1, retest=False,
                            per_link=2)
    assert made == 2 and all(t.params.wave for t in b.tests)
    assert all(t.purpose == "localize" and t.params.probe_of for t in b.tests)


def _some_uplink(view):
    return sorted(k for k in view.switch_links if any("leaf" in x for x in k))[0]
