"""Bisect mode: a culprit that only shows at scale, and one the job log names.

The simulator has no fault that only shows in big groups, so :class:`ScaleOnly` dispatches a
round's tests to two real simulators: pairs to a healthy one, groups of 4+ nodes to one where the
culprit is slow. Everything else (planning, parsing, inference) is the real thing.
"""

from __future__ import annotations

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.orchestrator import run
from fabriccheck.planning.bisect_steps import bisect_round_bound
from fabriccheck.policy import BisectPolicy
from fabriccheck.specs import resolve_spec
from fabriccheck.topology import generate


class ScaleOnly:
    name = "sim"

    def __init__(self, topo, spec, culprit: str, seed: int = 0) -> None:
        slow = {"faults": [{"kind": "node_slow", "node": culprit, "factor": 0.5}]}
        self.ok = SimExecutor(topo, spec, FaultSet(), seed)
        self.bad = SimExecutor(topo, spec, FaultSet.from_dict(slow), seed)

    def run_round(self, tests):
        big = [t for t in tests if len(t.nodes) >= 4]
        small = [t for t in tests if len(t.nodes) < 4]
        got = {}
        for ex, part in ((self.bad, big), (self.ok, small)):
            if part:
                got.update({t.test_id: r for t, r in zip(part, ex.run_round(part), strict=True)})
        return [got[t.test_id] for t in tests]

    def close(self) -> None:
        pass


def cluster(n: int):
    return generate({"kind": "rail-optimized", "nodes": n, "rails": 8, "gpus_per_node": 8,
                     "nodes_per_leaf": 16, "spines": 4}, name=f"c{n}", fabric="infiniband")


@pytest.mark.parametrize("n,culprit", [(32, "node-021"), (32, "node-002"), (64, "node-037"),
                                       (256, "node-200")])
def test_scale_only_culprit_within_the_bisection_bound(n, culprit):
    topo = cluster(n)
    spec = resolve_spec(None, topo)
    res = run("bisect", sorted(topo.nodes), topo, spec, ScaleOnly(topo, spec, culprit),
              BisectPolicy(pair_probe="ib_write_bw"))
    assert res.bad_nodes == [culprit] and res.drain == [culprit]
    assert res.extra["verdict_rounds"][culprit] <= bisect_round_bound(n)
    v = next(v for v in res.verdicts if v.name == culprit)
    assert "only at scale" in v.reason and len(v.evidence) >= 2


def test_scale_only_small_job_still_found():
    topo = cluster(16)
    spec = resolve_spec(None, topo)
    res = run("bisect", sorted(topo.nodes), topo, spec, ScaleOnly(topo, spec, "node-005"),
              BisectPolicy())
    assert res.bad_nodes == ["node-005"]
    # pairs, groups, then 8 -> 4 -> 2 -> 1: 8 spare nodes pad two halves of 8 at most, and a
    # round's groups are disjoint, so 16 nodes cannot meet 2 + ceil(log2(16 / 8)) = 3
    assert res.extra["verdict_rounds"]["node-005"] <= 2 + 3


def test_fault_that_shows_in_pairs_takes_at_most_three_rounds():
    topo = cluster(64)
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict({"noise": {"jitter": 0.03, "glitch_rate": 0.01},
                             "faults": [{"kind": "nic_degraded", "nic": "node-020/mlx5_1",
                                         "factor": 0.3}]})
    res = run("bisect", sorted(topo.nodes)[:32], topo, spec, SimExecutor(topo, spec, fs, 3),
              BisectPolicy(seed=3), log_suspects=["node-020"])
    assert res.bad_nics == ["node-020/mlx5_1"] and res.drain == ["node-020"]
    assert res.rounds <= 3
    first = [o for o in res.observations if o.test.round == 1]
    assert any("node-020" in o.test.nodes for o in first[:4]), "log suspects go first"
