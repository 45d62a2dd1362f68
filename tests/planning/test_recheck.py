"""Intermittence sampling plans (planning.recheck): recheck samples come from several partners
(blocks of fresh partners), and NICs with few finished tests get same-leaf top-up samples."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import pytest

from fabriccheck.models import nic_node
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.confirm import GoodPool
from fabriccheck.planning.recheck import plan_recheck, plan_topup
from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import resolve_spec
from tests.planning.fabrics import make_view


def _builder(view, round_no: int = 5) -> RoundBuilder:
    return RoundBuilder(round_no, view, resolve_spec(None, view.topology), SweepPolicy())


@pytest.mark.parametrize("kind", ["rail-optimized", "fat-tree"])
def test_recheck_samples_come_from_several_partners(kind):
    """Every candidate gets its samples from more than the two partners of one block, so one
    intermittent partner spoils a block's samples, not all of them."""
    view = make_view(kind) if kind == "rail-optimized" else make_view(
        kind, nodes_per_leaf=4, spines=4, nodes=32)
    topo = view.topology
    nodes = sorted(topo.nodes)
    good_nics = {nic.endpoint for n in nodes for nic in topo.nodes[n].nics}
    cands = [topo.nodes[nodes[0]].nics[0].endpoint, topo.nodes[nodes[9]].nics[1].endpoint]
    b = _builder(view)
    pool = GoodPool(set(nodes) - {nic_node(c) for c in cands}, view, 0, b.round_no)
    made = plan_recheck(b, cands, [], pool, good_nics, nodes)
    assert made == len(cands) * SweepPolicy().recheck_samples
    partners: dict[str, set[str]] = defaultdict(set)
    for t in b.tests:
        part = t.params.recheck_of
        assert part in t.nics
        partners[part] |= set(t.nodes) - {nic_node(part)}
    for part in cands:
        assert len(partners[part]) > 2, partners[part]
    # a NIC sends once and receives once per wave
    per_wave: dict[tuple[int, str, str], int] = defaultdict(int)
    for t in b.tests:
        for f in t.flows:
            per_wave[(t.params.wave, f.src, "tx")] += 1
            per_wave[(t.params.wave, f.dst, "rx")] += 1
    assert max(per_wave.values()) == 1


def test_topup_gives_few_tested_nics_same_leaf_samples_after_other_waves():
    view = make_view("fat-tree", nodes_per_leaf=4, spines=4, nodes=16)
    topo = view.topology
    nics = sorted(topo.nics)
    counts = {x: 8 for x in nics}
    few = nics[0]
    counts[few] = 2  # a ladder level found no room for its node
    b = _builder(view)
    first = b.add_flow(*sorted(topo.nodes)[4:6], 0, "confirm")
    assert first is not None and b.tests == [first]
    b.tests[-1] = replace(first, params={**dict(first.params), "wave": 3})  # an earlier wave
    before = len(b.tests)
    made = plan_topup(b, nics, counts, 8)
    new = b.tests[before:]
    assert made == len(new) > 0
    got = sum(few in t.nics for t in new)
    assert got >= 6  # up to 8 finished tests
    for t in new:
        assert t.params.wave > 3  # after the round's waves
        (f,) = t.flows
        assert topo.attachment[f.src] == topo.attachment[f.dst]  # crosses no switch link
        assert not t.params.recheck_of  # the screen counts them
    assert plan_topup(_builder(view), nics, {x: 8 for x in nics}, 8) == 0
