"""Boolean tomography on known IB paths never names a wrong link (hypothesis, end to end).

Random single-link faults (degraded to half, or down) on small generated fat-trees, 2 and 3
tiers, with 3% jitter and glitches: the sweep on the simulator may name the injected link or
leave it open, but never calls a healthy link bad and never drains a healthy node.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.models import link_key
from fabriccheck.orchestrator import run
from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import resolve_spec
from fabriccheck.topology import generate
from fabriccheck.topology.view import FabricView


def small_tree(tiers: int, per_leaf: int) -> object:
    """A non-blocking fat-tree of 16-32 nodes, 2 rails (one NIC per rail on one leaf)."""
    if tiers == 2:
        gen = {"kind": "fat-tree", "tiers": 2, "nodes": 8 * per_leaf, "rails": 2,
               "gpus_per_node": 2, "nodes_per_leaf": per_leaf, "spines": 2 * per_leaf}
    else:
        gen = {"kind": "fat-tree", "tiers": 3, "nodes": 16 * per_leaf, "rails": 2,
               "gpus_per_node": 2, "pods": 4, "leaves_per_pod": 4, "nodes_per_leaf": per_leaf,
               "spines_per_pod": 2 * per_leaf, "cores": 8 * per_leaf}
    return generate(gen, name=f"ft{tiers}", fabric="infiniband")


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(tiers=st.sampled_from([2, 3]), per_leaf=st.sampled_from([1, 2]),
       pick=st.integers(0, 10_000), seed=st.integers(0, 10_000),
       kind=st.sampled_from(["link_degraded", "link_down"]),
       glitch=st.sampled_from([0.0, 0.01, 0.02]))
def test_sweep_never_names_a_wrong_link_nor_drains_a_node(tiers, per_leaf, pick, seed, kind,
                                                           glitch):
    topo = small_tree(tiers, per_leaf)
    view = FabricView(topo)
    links = sorted(view.switch_links)
    lk = links[pick % len(links)]
    fault = {"kind": kind, "link": list(lk)}
    if kind == "link_degraded":
        fault["factor"] = 0.5
    fs = FaultSet.from_dict({"noise": {"jitter": 0.03, "glitch_rate": glitch},
                             "faults": [fault]})
    spec = resolve_spec(None, topo)
    res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed),
              SweepPolicy(mode="sweep", seed=seed))
    found = {link_key(*x) for x in res.bad_links}
    assert found <= {link_key(*lk)}, f"wrong link(s) named: {found - {link_key(*lk)}}"
    assert res.drain == []
    if res.exit_code == 0:  # healthy only when no test crossed the bad link, and it says so
        crossed = set().union(*(view.flow_links(f)[0] for o in res.observations
                                if o.status in ("pass", "fail") for f in o.test.flows))
        assert link_key(*lk) not in crossed and res.extra["link_coverage"]["share"] < 1.0
    assert res.extra["routing"] == "d-mod-k"
