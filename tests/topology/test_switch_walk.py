"""The planner's fast route (Topology.switch_walk, FabricView.directed_hops) is the route: on
generated fat-trees (2 and 3 tiers, rail-optimized) and on forwarding tables, for many pairs."""

from __future__ import annotations

import random

import pytest

from fabriccheck.models import link_key
from fabriccheck.topology import generate
from fabriccheck.topology.view import FabricView

SHAPES = [
    {"kind": "fat-tree", "nodes": 32, "rails": 2, "nodes_per_leaf": 4, "spines": 3},
    {"kind": "fat-tree", "tiers": 3, "nodes": 64, "rails": 2, "pods": 4, "leaves_per_pod": 2,
     "nodes_per_leaf": 8, "spines_per_pod": 2, "cores": 4},
    {"kind": "rail-optimized", "nodes": 32, "rails": 4, "nodes_per_leaf": 8, "spines": 4},
]


def _switch_hops(topo, route):
    """Directed switch-to-switch hops of a route given as link keys, from its source."""
    cur, out = None, []
    for i, (a, b) in enumerate(route):
        if i == 0:
            cur = a if a in topo.nics else b
        nxt = b if a == cur else a
        if cur in topo.switches and nxt in topo.switches:
            out.append((cur, nxt))
        cur = nxt
    return out


@pytest.mark.parametrize("gen", SHAPES)
@pytest.mark.parametrize("tables", [False, True])
def test_switch_walk_and_directed_hops_follow_the_route(gen, tables):
    topo = generate(gen, name="t", fabric="infiniband")
    rng = random.Random(7)
    if tables:  # destination-based tables that are not D-mod-K
        lft: dict[str, dict[str, str]] = {}
        for dst, d_sw in topo.attachment.items():
            for sw in topo.switches:
                nh = [dst] if sw == d_sw else topo._next_hops(sw, d_sw)
                if nh:
                    lft.setdefault(sw, {})[dst] = rng.choice(nh)
        topo.set_lft(lft, "test")
    view = FabricView(topo)
    nics = sorted(topo.nics)
    for _ in range(300):
        a, b = rng.sample(nics, 2)
        route = topo.route(a, b)
        assert route is not None and route in topo.paths(a, b)
        walk = topo.switch_walk(topo.attachment[a], b)
        assert walk[0] == topo.attachment[a] and walk[-1] == topo.attachment[b]
        hops = _switch_hops(topo, route)
        assert list(zip(walk, walk[1:], strict=False)) == hops
        assert view.directed_hops(a, b) == frozenset(hops)
        assert all(view.hop_link[h] == link_key(*h) for h in hops)
