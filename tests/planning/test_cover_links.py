"""Switch links the carvings leave uncrossed: a pair whose route crosses any link is found,
follow-up flows are aimed at them, and a sweep never exits 0 with a reachable link untested."""

from __future__ import annotations

import random

import pytest

import fabriccheck.planning.cover as cover
import fabriccheck.planning.followup_round as followup_round
from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.inference.link_cover import untested_links
from fabriccheck.models import link_key
from fabriccheck.orchestrator import run
from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import resolve_spec
from fabriccheck.topology import generate
from fabriccheck.topology.link_reach import find_link_flow
from fabriccheck.topology.view import FabricView

SHAPES = [
    {"kind": "fat-tree", "nodes": 16, "rails": 2, "gpus_per_node": 2, "nodes_per_leaf": 4,
     "spines": 3},
    {"kind": "fat-tree", "tiers": 3, "nodes": 64, "rails": 1, "gpus_per_node": 1, "pods": 4,
     "leaves_per_pod": 4, "nodes_per_leaf": 4, "spines_per_pod": 4, "cores": 8},
]


def _crosses(view: FabricView, src: str, dst: str, lk) -> bool:
    hops = view.directed_hops(src, dst)
    return (lk[0], lk[1]) in hops or (lk[1], lk[0]) in hops


@pytest.mark.parametrize("gen", SHAPES)
def test_every_switch_link_has_a_pair_whose_route_crosses_it(gen):
    topo = generate(gen, name="t", fabric="infiniband")
    view = FabricView(topo)
    nics = sorted(topo.nics)
    for lk in sorted(view.switch_links):
        got = find_link_flow(view, lk, nics)
        assert got is not None, lk
        src, dst = got
        assert topo.nics[src].rail == topo.nics[dst].rail
        assert _crosses(view, src, dst, lk), (lk, got)


def test_busy_nics_are_skipped_and_tables_are_followed():
    topo = generate(SHAPES[1], name="t", fabric="infiniband")
    rng = random.Random(3)
    lft: dict[str, dict[str, str]] = {}
    for dst, d_sw in topo.attachment.items():
        for sw in topo.switches:
            nh = [dst] if sw == d_sw else topo._next_hops(sw, d_sw)
            if nh:
                lft.setdefault(sw, {})[dst] = rng.choice(nh)
    topo.set_lft(lft, "test")
    view = FabricView(topo)
    nics = sorted(topo.nics)
    for lk in sorted(view.switch_links)[:20]:
        first = find_link_flow(view, lk, nics)
        if first is None:  # random tables may route no flow over a link: then none is found
            assert not any(_crosses(view, a, b, lk) for a in nics for b in nics if a != b)
            continue
        again = find_link_flow(view, lk, nics, skip=first)
        assert again is None or (set(again).isdisjoint(first)
                                 and _crosses(view, *again, lk))


def test_links_out_of_reach_of_the_scope_are_not_untested():
    topo = generate(SHAPES[1], name="t", fabric="infiniband")
    view = FabricView(topo)
    one_leaf = [n for n in sorted(topo.nodes) if topo.node_leaves(n) == ("leaf-0-0",)]
    assert one_leaf and untested_links(view, [], one_leaf) == []
    two = one_leaf[:1] + [n for n in sorted(topo.nodes)
                          if topo.node_leaves(n) == ("leaf-3-3",)][:1]
    left = untested_links(view, [], two)
    assert left and all(len(lk) == 2 for lk in left)
    assert link_key("leaf-1-1", "spine-1-1") not in left  # no node of the scope below it


def _sweep(monkeypatch, *, cover_on: bool, seed: int = 1):
    """A levels-1,2 sweep whose carvings pair no node across leaves by destination (the
    planner's search is switched off), so only the leftover cross pairs cross links (the link
    top-up, which would cross them too, is off: this is the cover's own work)."""
    monkeypatch.setattr(cover, "_best_sender", lambda *a, **k: None)
    if not cover_on:
        monkeypatch.setattr(followup_round, "plan_link_cover", lambda *a, **k: 0)
    topo = generate(SHAPES[1], name="t", fabric="infiniband")
    spec = resolve_spec(None, topo)
    return run("sweep", sorted(topo.nodes), topo, spec,
               SimExecutor(topo, spec, FaultSet.from_dict({"faults": []}), seed),
               SweepPolicy(mode="sweep", seed=seed, levels=(1, 2), link_topup_rounds=0))


def test_follow_up_flows_cross_every_link_the_carvings_left(monkeypatch):
    res = _sweep(monkeypatch, cover_on=True)
    cov = res.extra["link_coverage"]
    assert cov["share"] == 1.0 and cov["untested_links"] == []
    assert res.exit_code == 0, res.extra["untested"]


def test_without_them_the_links_are_listed_untested_and_the_run_exits_3(monkeypatch):
    res = _sweep(monkeypatch, cover_on=False)
    cov = res.extra["link_coverage"]
    assert cov["share"] < 1.0
    left = {link_key(*lk) for lk in cov["untested_links"]}
    assert left and len(left) == cov["total"] - cov["exercised"]
    assert {f"link {lk[0]} -- {lk[1]}" for lk in left} <= set(res.extra["untested"])
    assert res.exit_code == 3


def test_cover_flows_ride_the_ladder_and_a_down_link_is_named_by_round_five(monkeypatch):
    """The full ladder: links the rail pairs left uncrossed get their flows in waves of the
    ladder's own rounds, after that round's groups (which hold every NIC of their nodes),
    before its 4x level, not after the ladder's end; a down link among them is named by
    round 5."""
    monkeypatch.setattr(cover, "_best_sender", lambda *a, **k: None)
    topo = generate(SHAPES[1], name="t", fabric="infiniband")
    spec = resolve_spec(None, topo)
    link = link_key("leaf-2-1", "spine-2-3")
    res = run("sweep", sorted(topo.nodes), topo, spec,
              SimExecutor(topo, spec, FaultSet.from_dict(
                  {"faults": [{"kind": "link_down", "link": list(link)}]}), 2),
              SweepPolicy(mode="sweep", seed=2))
    first_4x = min(o.test.round for o in res.observations if o.test.group_size == 4)
    waves = [o.test for o in res.observations if o.test.round < first_4x
             and o.test.params.wave and o.test.purpose == "sweep" and len(o.test.flows) == 1]
    assert waves  # cover flows inside the ladder, in waves after the round's own tests
    assert [link_key(*lk) for lk in res.bad_links] == [link]
    assert res.extra["verdict_rounds"][f"{link[0]} -- {link[1]}"] <= 5
    assert res.drain == []
