"""Link verdicts on the simulator: precision (no healthy link bad) and recall, coverage, RoCE sets.

A link is only ``bad`` after two probes from fresh node pairs failed across it (docs/design.md
"Confirm before blaming"), so hundreds of glitches per round at 1,024-4,096 nodes never convict
a healthy link; rounds 1+2 on a rail-optimized IB fabric cross every leaf uplink, so an injected
link fault is always exercised and found exactly.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from fabriccheck.models import link_key
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.pairing import pair_key, plan_rail_pairs
from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import resolve_spec
from fabriccheck.topology import load_topology
from fabriccheck.topology.generators import generate
from fabriccheck.topology.view import FabricView
from tests.test_orchestrator import fabric, sweep


def link_faults(topo, rng: random.Random, k: int, glitch: float) -> dict:
    """``k`` degraded switch links on different leaves, plus 3% jitter and ``glitch``."""
    sw = sorted(lk for lk in topo.links if lk[0] in topo.switches and lk[1] in topo.switches)
    picks, used = [], set()
    for lk in rng.sample(sw, len(sw)):
        if len(picks) == k:
            break
        if lk[0] in used or lk[1] in used:
            continue
        picks.append(lk)
        used.update(lk)
    return {"noise": {"jitter": 0.03, "glitch_rate": glitch},
            "faults": [{"kind": "link_degraded", "link": list(lk), "factor": 0.5}
                       for lk in picks]}


def link_score(res, fs) -> tuple[set, set]:
    truth = {link_key(*lk) for lk in fs.bad_links()}
    found = {link_key(*lk) for lk in res.bad_links}
    return found - truth, truth - found


@pytest.mark.slow
@pytest.mark.parametrize(("nodes", "seed", "glitch"), [
    (128, 1, 0.02), (128, 2, 0.01), (256, 3, 0.02), (512, 4, 0.02), (1024, 5, 0.02),
    (1024, 6, 0.01),
])
def test_ib_link_precision_and_recall(nodes, seed, glitch):
    topo = fabric(nodes, "infiniband", rails=8)
    res, fs = sweep(topo, link_faults(topo, random.Random(seed), 2, glitch), seed)
    false, missed = link_score(res, fs)
    assert not false, f"healthy link(s) called bad: {false}"
    assert not missed, f"injected link fault(s) not found exactly: {missed}"
    assert res.drain == []


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 4,096 nodes: 270-700 s here (the recheck and top-up; load)
@pytest.mark.parametrize("seed", [1])  # one seed here, more in bench/
def test_ib_rail_4096_glitches_never_convict_a_link(seed):
    """The colleague's case: ~160 glitches per round; one injected link, found exactly."""
    topo = load_topology("ib-rail-4096")
    faults = {"noise": {"jitter": 0.03, "glitch_rate": 0.01},
              "faults": [{"kind": "link_degraded", "link": ["leaf-10-2", "spine-3"],
                          "factor": 0.5}]}
    res, fs = sweep(topo, faults, seed)
    assert [link_key(*lk) for lk in res.bad_links] == [link_key("leaf-10-2", "spine-3")]
    assert res.drain == [] and res.extra["link_coverage"]["share"] == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("fabric_kind", ["infiniband", "roce"])
@pytest.mark.parametrize("seed", [11, 12, 13])
def test_no_healthy_link_bad_on_a_healthy_noisy_fabric(fabric_kind, seed):
    topo = fabric(256, fabric_kind, rails=8)
    res, _ = sweep(topo, {"noise": {"jitter": 0.03, "glitch_rate": 0.02}}, seed)
    assert res.bad_links == [] and res.drain == []


@pytest.mark.parametrize("name", ["ib-rail-1024", "ib-rail-4096"])
def test_rounds_one_and_two_cover_every_leaf_uplink_on_rail_optimized_ib(name):
    topo = load_topology(name)
    view = FabricView(topo)
    spec = resolve_spec(None, topo)
    avoid, cross, served, flows = {}, {}, {}, []
    for k in (1, 2):
        plans = plan_rail_pairs(topo.nodes, view, round_no=k, seed=k, avoid=avoid,
                                prev_cross=cross, prev_served=served)
        b = RoundBuilder(k, view, spec, SweepPolicy())
        for rail, plan in plans.items():
            for c, s in plan.pairs:
                b.add_flow(c, s, rail, check_links=False)
            avoid.setdefault(rail, set()).update(pair_key(*p) for p in plan.pairs)
            cross[rail] = plan.cross
            served[rail] = served.get(rail, frozenset()) | plan.served
        flows += [f for t in b.tests for f in t.flows]
        if k == 1:
            assert view.coverage(flows)["share"] < 1.0  # one round is not enough
    cov = view.coverage(flows)
    assert cov["exercised"] == cov["total"] == len(view.switch_links)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ib-fattree-128", "ib-fattree3-512"])
def test_fat_tree_sweep_covers_95_percent_per_tier_and_says_so(name):
    """Fat-trees route every flow to a NIC down one fixed spine link: pairs are chosen by
    destination (planning.cover), so the pairing rounds alone cross >= 95% of links on every
    tier; the ladder's rings (every rail of 4 and 8 nodes across leaves) cover at least as
    much."""
    topo = load_topology(name)
    noise = {"noise": {"jitter": 0.03, "glitch_rate": 0.0}}
    pairs, _ = sweep(topo, noise, 1, policy=SweepPolicy(seed=1, levels=()))
    cov = pairs.extra["link_coverage"]
    assert cov["total"] == len(FabricView(topo).switch_links)
    assert cov["share"] >= 0.95
    assert {t: c["share"] >= 0.95 for t, c in cov["tiers"].items()} == dict.fromkeys(
        FabricView(topo).links_by_tier, True)
    assert pairs.drain == [] and pairs.bad_links == []
    ladder, _ = sweep(topo, noise, 1)
    lcov = ladder.extra["link_coverage"]
    assert lcov["total"] == cov["total"] and cov["exercised"] <= lcov["exercised"] <= lcov["total"]


@pytest.mark.slow
def test_roce_demo_link_is_named_or_in_a_described_candidate_set():
    topo = load_topology("roce-rail-64")
    bad = link_key("leaf-1-2", "spine-3")
    faults = {"noise": {"jitter": 0.03, "glitch_rate": 0.01},
              "faults": [{"kind": "link_degraded", "link": list(bad), "factor": 0.5}]}
    named = in_set = 0
    for seed in range(6):
        res, _ = sweep(topo, faults, seed)
        assert res.drain == [] and set(res.bad_links) <= {bad}  # never a wrong link
        for s in res.link_suspects:
            assert s["size"] == len(s["candidates"]) and s["summary"].startswith("one of")
        named += res.bad_links == [bad]
        in_set += any(bad in {link_key(*c) for c in s["candidates"]} for s in res.link_suspects)
    # pinned flows with traced paths name it (bench_roce_links: 10/10); a set is the fallback
    assert named + in_set >= 5 and named >= 3, (named, in_set)


def _one_link(topo, link, kind: str, seed: int):
    fault = {"kind": kind, "link": list(link)}
    if kind == "link_degraded":
        fault["factor"] = 0.5
    return sweep(topo, {"noise": {"jitter": 0.03, "glitch_rate": 0.01}, "faults": [fault]}, seed)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "link", "kind", "seed"), [
    ("ib-fattree-128", ("leaf-7", "spine-19"), "link_degraded", 3),
    ("ib-fattree-128", ("leaf-30", "spine-2"), "link_down", 4),
    ("ib-fattree3-512", ("leaf-4-9", "spine-4-11"), "link_degraded", 5),
    ("ib-fattree3-512", ("core-133", "spine-9-8"), "link_degraded", 6),
    ("ib-fattree3-512", ("core-40", "spine-12-2"), "link_down", 7),
])
def test_fat_tree_single_link_named_exactly_within_five_rounds(name, link, kind, seed):
    """Held-out links (leaf-spine and spine-core): the exact link, no other, nobody drained,
    the verdict by round 5; routes from the D-mod-K model, and the run says so."""
    topo = load_topology(name)
    res, fs = _one_link(topo, link, kind, seed)
    assert [link_key(*lk) for lk in res.bad_links] == [link_key(*link)]
    assert res.drain == [] and res.exit_code == 1
    assert res.extra["verdict_rounds"][f"{link_key(*link)[0]} -- {link_key(*link)[1]}"] <= 5
    assert res.extra["routing"] == "d-mod-k"


@pytest.mark.slow
def test_a_dead_spine_is_one_switch_verdict_on_a_fat_tree():
    topo = load_topology("ib-fattree-128")
    faults = [{"kind": "link_down", "link": list(lk)}
              for lk in sorted(FabricView(topo).switch_links) if "spine-5" in lk]
    res, _ = sweep(topo, {"noise": {"jitter": 0.03, "glitch_rate": 0.01}, "faults": faults}, 2)
    assert res.extra["bad_switches"] == ["spine-5"]
    assert all("spine-5" in lk for lk in res.bad_links) and res.drain == []


def test_lft_routes_drive_the_sweep_and_the_verdict_names_ports(tmp_path):
    """An imported fabric with its forwarding tables: routes from the tables ("lft"); a down
    leaf-spine link the tables use is named with its ports, or left a suspect, never wrong."""
    from typer.testing import CliRunner

    from fabriccheck.cli.main import app

    fix = Path(__file__).resolve().parent / "fixtures" / "routes"
    out = tmp_path / "fabric.yaml"
    res = CliRunner().invoke(app, [
        "topology", "import", "--ibnetdiscover", str(fix / "ibnetdiscover_fattree_2x2.txt"),
        "--routes", str(fix / "dump_lfts_fattree_2x2.txt"), "--gpus-per-node", "8",
        "-o", str(out)])
    assert res.exit_code == 0, res.output
    topo = load_topology(out)
    link = ("ib-leaf-1", "ib-spine-1")  # the tables send all of leaf-1's up-traffic here
    res, _ = _one_link(topo, link, "link_down", 1)
    assert res.extra["routing"] == "lft" and res.drain == [] and res.exit_code == 1
    assert {link_key(*lk) for lk in res.bad_links} <= {link_key(*link)}
    named = [v for v in res.verdicts if v.kind == "link" and v.link == link_key(*link)]
    if res.bad_links:
        assert "cable: ib-leaf-1 port 31 -- ib-spine-1 port 1" in named[0].reason


@pytest.mark.parametrize("seed", [3, 11])
def test_a_leaf_with_every_uplink_at_half_speed_is_one_switch_and_no_flaky_nic(seed):
    """RoCE, 64 nodes, two spines: both uplinks of one leaf at half speed. The leaf is the
    verdict (all of its links are bad; two links are fewer than the three that make a spine
    verdict otherwise), and the NICs behind it, which fail their cross-leaf tests and pass
    the rest, are not called intermittent (a bad link explains those failures)."""
    topo = generate({"kind": "rail-optimized", "nodes": 64, "rails": 8, "gpus_per_node": 8,
                     "nodes_per_leaf": 16, "spines": 2}, name="roce64", fabric="roce")
    view = FabricView(topo)
    leaf = sorted(topo.switches)[seed % 8]
    ups = sorted(lk for lk in view.switch_links if leaf in lk)
    assert len(ups) == 2
    faults = [{"kind": "link_degraded", "link": list(lk), "factor": 0.5} for lk in ups]
    res, _ = sweep(topo, {"noise": {"jitter": 0.03, "glitch_rate": 0.01}, "faults": faults}, seed)
    assert res.extra["bad_switches"] == [leaf]
    assert {link_key(*lk) for lk in res.bad_links} <= {link_key(*lk) for lk in ups}
    assert not [v for v in res.verdicts if v.state == "flaky"]
    assert res.drain == [] and res.exit_code == 1


FAT3_SMALL = {"kind": "fat-tree", "tiers": 3, "nodes": 32, "rails": 8, "gpus_per_node": 8,
              "nodes_per_leaf": 2, "leaves_per_pod": 4, "spines_per_pod": 4, "cores": 8}


@pytest.mark.parametrize("seed", [2, 5])
def test_a_dead_spine_of_a_small_three_tier_fabric_is_one_switch_by_round_five(seed):
    """32 nodes, 3 tiers: every path through the dead spine crosses two of its links, so no
    probe pins one link alone. No test across the spine ever passes: the switch is one
    hypothesis, its probes pooled, and it is the verdict by round 5 (it took 6-8 before)."""
    topo = generate(FAT3_SMALL, name="fat3-32", fabric="infiniband")
    spines = sorted(s for s in topo.switches if s.startswith("spine"))
    dead = spines[seed % len(spines)]
    faults = [{"kind": "link_down", "link": list(lk)}
              for lk in sorted(FabricView(topo).switch_links) if dead in lk]
    res, _ = sweep(topo, {"noise": {"jitter": 0.03, "glitch_rate": 0.01}, "faults": faults}, seed)
    assert res.extra["bad_switches"] == [dead]
    assert res.extra["verdict_rounds"][dead] <= 5
    assert res.drain == [] and res.exit_code == 1
    assert not [v for v in res.verdicts if v.state == "flaky"]


def test_a_half_speed_leaf_in_every_8x_group_stays_one_switch():
    """InfiniBand rail-optimized, 64 nodes: every uplink of one leaf at half speed. The 8x
    groups are dealt across leaves, so each holds a node behind that leaf and every 8x test
    is slow: in line with its peers, each passes (a uniformly slow level). Such a pass clears
    no link: the leaf stays the verdict (its links were called intermittent before)."""
    topo = generate({"kind": "rail-optimized", "nodes": 64, "rails": 8, "gpus_per_node": 8,
                     "nodes_per_leaf": 8, "spines": 8}, name="ib64", fabric="infiniband")
    view = FabricView(topo)
    leaf = "leaf-4-3"
    ups = sorted(lk for lk in view.switch_links if leaf in lk)
    faults = [{"kind": "link_degraded", "link": list(lk), "factor": 0.5} for lk in ups]
    res, _ = sweep(topo, {"noise": {"jitter": 0.03, "glitch_rate": 0.0143}, "faults": faults}, 74)
    assert res.extra["bad_switches"] == [leaf]
    assert not [v for v in res.verdicts if v.state == "flaky"]
    assert res.drain == [] and res.exit_code == 1
