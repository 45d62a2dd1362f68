"""Small fabrics for planning and inference tests, built by the real generators."""

from __future__ import annotations

from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.cover import plan_sweep_rail_pairs
from fabriccheck.planning.pairing import pair_key
from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import resolve_spec
from fabriccheck.topology import generate
from fabriccheck.topology.view import FabricView


def make_view(kind: str = "rail-optimized", fabric: str = "infiniband", **gen) -> FabricView:
    spec = {"kind": kind, "nodes": 64, "rails": 4, "gpus_per_node": 4, "nodes_per_leaf": 16,
            "spines": 4, **gen}
    return FabricView(generate(spec, name="t", fabric=fabric))


def two_carvings(topo, seed: int) -> tuple[FabricView, list[dict], dict]:
    """Plan rounds 1 and 2 as the sweep does (no simulator); return the view, the plans and the
    switch-link coverage of their flows (tests/planning/test_cover.py, bench/bench_links.py)."""
    view = FabricView(topo)
    spec = resolve_spec(None, topo)
    avoid: dict = {}
    cross: dict = {}
    served: dict = {}
    covered: set = set()
    plans, flows = [], []
    for k in (1, 2):
        got = plan_sweep_rail_pairs(topo.nodes, view, round_no=k, seed=seed, avoid=avoid,
                                    prev_cross=cross, prev_served=served, covered=covered)
        b = RoundBuilder(k, view, spec, SweepPolicy())
        for rail, plan in got.items():
            for c, s in plan.pairs:
                b.add_flow(c, s, rail, check_links=False)
            avoid.setdefault(rail, set()).update(pair_key(*p) for p in plan.pairs)
            cross[rail] = plan.cross
            served[rail] = served.get(rail, frozenset()) | plan.served
        plans.append(got)
        flows += [f for t in b.tests for f in t.flows]
    return view, plans, view.coverage(flows)
