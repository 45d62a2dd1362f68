"""RoCE single-link faults on the simulator: pinned flows + learned paths name the link or a
set of <= 2 in >= 90% of held-out faults, and never blame a healthy link or node."""

from __future__ import annotations

import random

import pytest

from fabriccheck.models import link_key
from fabriccheck.topology import load_topology
from tests.test_orchestrator import sweep


@pytest.mark.parametrize("kind", ["link_degraded", "link_down"])
def test_roce_single_link_faults_are_named_or_in_a_set_of_two(kind):
    topo = load_topology("roce-rail-64")
    links = sorted(lk for lk in topo.links if lk[0] in topo.switches and lk[1] in topo.switches)
    hits, runs = 0, 20
    for seed in range(100, 100 + runs):  # held out: the bench uses seeds 0..29
        link = random.Random(f"held-out:{seed}").choice(links)
        fault = {"kind": kind, "link": list(link)} | (
            {"factor": 0.5} if kind == "link_degraded" else {})
        res, _ = sweep(topo, {"noise": {"jitter": 0.03, "glitch_rate": 0.01},
                              "faults": [fault]}, seed)
        truth = link_key(*link)
        bad = {link_key(*lk) for lk in res.bad_links}
        assert bad <= {truth}, f"seed {seed}: healthy link called bad: {bad - {truth}}"
        assert res.drain == [], f"seed {seed}: drained {res.drain}"
        sets = [{link_key(*c) for c in s["candidates"]} for s in res.link_suspects]
        hits += bad == {truth} or any(truth in s and len(s) <= 2 for s in sets)
        pl = res.extra["path_learning"]
        assert pl["learned"] + pl["not_learned"] == pl["pinned_flows"] > 0
    assert hits >= 0.9 * runs, f"{hits}/{runs}"
