"""Regressions from held-out scenario seeds (``bench/bench_scenarios.py --first-seed 100/110/120``),
each the run the rule was written for: the simulator with the scenario's own faults and noise,
through the public ``run``. The bench measures the rules on the other seeds; these pin the
cases down."""

from __future__ import annotations

import pytest

from bench.bench_scenarios import POLICIES
from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.orchestrator import run
from fabriccheck.specs import resolve_spec
from tests.scenarios import scenario


def _run(family: str, kind: str, seed: int):
    sc = scenario(family, kind, seed)
    topo, faults, nodes, mode = sc
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict(faults)
    res = run(mode, nodes, topo, spec, SimExecutor(topo, spec, fs, seed=seed),
              POLICIES[mode](mode=mode, seed=seed), log_suspects=sc.log_suspects)
    return res, fs, sc


def _flaky(res) -> set[str]:
    return {v.name for v in res.verdicts if v.state == "flaky"}


def test_a_bad_nics_leaf_mate_behind_a_half_speed_uplink_is_not_drained():
    """ib-fat3, 32 nodes: node-025/mlx5_5 at quarter speed, its leaf's uplink for that rail at
    half speed. Its leaf-mate's NIC on the same rail failed with it and across the uplink:
    that NIC was drained and the bad one left a suspect. The uplink explains the crossings
    (their values match its own), the quarter-speed failures are deeper than it explains."""
    res, fs, _ = _run("multi_per_node_leaf", "ib-fat3", 112)
    assert set(res.drain) == set(fs.drain_nodes())
    assert "node-025/mlx5_5" in {v.name for v in res.verdicts if v.state == "bad"}


def test_a_gate_tests_a_suspect_nic_off_the_one_cable_its_partners_came_over():
    """A 16-node gate on a 256-node IB fabric: every confirmation partner of the quarter-speed
    NIC came over one cable (routes are chosen by destination), so nothing told the NIC from
    the cable. Its confirmations now take a route off that cable; the NIC is named (bad, or
    a suspect while only one failure lies off the cable), nobody healthy is drained."""
    from fabriccheck.models import Flow
    from fabriccheck.topology.view import FabricView

    res, fs, sc = _run("small_jobs", "ib-rail", 100)
    nic = "node-249/mlx5_1"
    view = FabricView(sc.topology)
    cable = view.flow_links(Flow("node-071/mlx5_1", nic))[1]  # the sweep's failing route
    off = [o for o in res.observations if nic in o.test.nics and o.test.purpose == "confirm"
           and not view.flow_links(o.test.flows[0])[1] & cable]
    assert off and all(o.status == "fail" for o in off)
    assert nic in {v.name for v in res.verdicts if v.state in ("bad", "suspect")}
    assert set(res.drain) <= set(fs.drain_nodes()) and res.exit_code == 1


def test_a_flapping_roce_uplink_and_nic_are_named_not_passed_silently():
    """RoCE, 64 nodes: a flapping uplink (p 0.56) and a NIC failing one test in three. The run
    exited 0 (RoCE links had no screen or recheck): the uplink is now flaky, and the run exits 1."""
    res, _, _ = _run("intermittent", "roce-rail", 100)
    assert "leaf-2-4 -- spine-5" in _flaky(res)
    assert res.exit_code == 1 and not res.drain


@pytest.mark.slow
def test_a_dead_roce_spine_is_one_switch_and_no_nic_is_called_flaky():
    """RoCE, 128 nodes, every link of spine-2 down: two links and five NICs called flaky
    before; no test across the spine ever passed, so the spine is one hypothesis."""
    res, _, sc = _run("switch_down", "roce-rail", 101)
    assert res.extra["bad_switches"] == [sc.switch]
    assert not _flaky(res) and not res.drain


def test_a_fault_free_roce_fabric_passes_with_its_links_on_learned_paths_rechecked():
    """RoCE, 32 nodes, noise only: links on learned paths are screened; their recheck flows,
    pinned onto two links of one spine, must never share a wave (they failed for that alone)."""
    res, _, _ = _run("noise_only", "roce-rail", 102)
    assert res.exit_code == 0 and res.healthy


def test_a_half_speed_leaf_of_a_two_leaf_rail_is_one_switch():
    """IB rail-optimized, 32 nodes (two leaves per rail): every uplink of one leaf at half
    speed. Every same-rail route down one of its uplinks comes up the other leaf's uplink to
    that spine, so the probes pinned nothing and 16 two-link suspects were left; a sender on
    another rail's leaf separates them."""
    res, _, sc = _run("switch_down", "ib-rail", 111)
    assert res.extra["bad_switches"] == [sc.switch]
    assert not res.drain and not _flaky(res)


def test_a_nic_that_only_ever_failed_as_a_recheck_partner_is_named():
    """RoCE, 32 nodes (seed 120): the NIC failing one test in three passed all of its own
    tests and was the recheck partner of two candidates, failing 3 of 16 samples of each;
    both were cleared and the run exited 0. Pooled over the two, its failures are beyond
    noise: it is rechecked itself and found flaky."""
    res, _, _ = _run("intermittent", "roce-rail", 120)
    assert "node-014/mlx5_6" in _flaky(res)
    assert res.exit_code == 1 and not res.drain


@pytest.mark.parametrize(("seed", "link", "by"), [
    (121, "leaf-4-3 -- spine-4-3", 4), (122, "leaf-1-0 -- spine-1-3", 5)])
def test_a_half_speed_uplink_of_a_two_node_leaf_is_named_within_the_link_bar(seed, link, by):
    """ib-fat3, a two-node leaf with a slow node and a half-speed uplink: the only NICs whose
    routes come down that uplink are suspects, and the round's confirmations take its one
    free direction. The uplink was named in round 6: its probes now go up it from the leaf's
    other NICs to another rail's receivers, in overflow waves of the same round, and its
    failures, held by a NIC suspect, are probed while the NIC is confirmed."""
    res, fs, _ = _run("multi_per_node_leaf", "ib-fat3", seed)
    assert res.extra["verdict_rounds"][link] <= by
    assert set(res.drain) == set(fs.drain_nodes())


@pytest.mark.slow
def test_a_half_speed_roce_uplink_of_a_small_leaf_is_sampled_during_the_ladder():
    """RoCE, 256 nodes (seed 122): the half-speed uplink sat on a four-node leaf whose rail
    had two quarter-speed NICs; the two rail-pair rounds never sent a flow over it (an
    eighth of the fabric's links stay uncrossed after them) and the sampling batch waited
    for the ladder's end: named in round 10. The batch now rides the first ladder round in
    a wave of its own."""
    res, fs, _ = _run("multi_per_node_leaf", "roce-rail", 122)
    assert res.extra["verdict_rounds"]["leaf-59-4 -- spine-5"] <= 5
    assert set(res.drain) == set(fs.drain_nodes())


def test_a_gate_pairs_its_untested_nic_when_the_round_has_no_room_left():
    """A 3-node gate on a 3-tier tree (seed 129, noise only): the probe of a glitch's link
    took the uplink the last untested NIC's test needed; the NIC is tested in an overflow
    wave of the round, and the gate passes (it exited 3, the NIC untested)."""
    res, _, _ = _run("small_jobs", "ib-fat3", 129)
    assert res.exit_code == 0 and not res.extra["untested"]


def test_a_two_node_gate_names_a_quarter_speed_nic_against_its_one_partner():
    """A 3-node gate with one node unreachable (seed 132): the quarter-speed NIC's one
    partner on its rail is proven good by its passes with other rails; the NIC failed
    confirmations against it in two rounds and is bad (it was left a suspect)."""
    res, fs, _ = _run("small_jobs", "ib-rail", 132)
    assert "node-081/mlx5_6" in {v.name for v in res.verdicts if v.state == "bad"}
    assert set(res.drain) == set(fs.drain_nodes()) and res.exit_code == 1


def test_a_dead_roce_uplink_does_not_make_the_nics_it_carried_flaky():
    """RoCE, 9 nodes (odd_leaves, seed 130): a dead uplink fails the flows ECMP hashes onto
    it and passes the rest. Its candidate set was one link, beyond noise, but the screen
    counted those failures as lonely for the NIC that sent most of them: called flaky (5 of
    7). A failure that may have crossed a suspected link is the link's."""
    res, fs, _ = _run("odd_leaves", "roce-rail", 130)
    assert not _flaky(res)
    assert set(res.drain) == set(fs.drain_nodes()) and res.exit_code == 1
