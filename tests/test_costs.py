"""The cost meter sees every round of a real (simulated) run, charged to its phases."""

from __future__ import annotations

from fabriccheck.costs import PHASES, CostMeter
from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.orchestrator import run
from fabriccheck.policy import GatePolicy
from fabriccheck.specs import resolve_spec
from fabriccheck.topology import load_topology


def test_every_round_is_charged_with_its_tests_and_test_time():
    topo = load_topology("roce-rail-64")
    spec = resolve_spec(None, topo)
    nodes = sorted(topo.nodes)[:8]
    fs = FaultSet.from_dict({"faults": [{"kind": "nic_degraded", "nic": "node-003/mlx5_2",
                                         "factor": 0.5}]})
    meter = CostMeter()
    res = run("gate", nodes, topo, spec, SimExecutor(topo, spec, fs, seed=4),
              GatePolicy(mode="gate", seed=4), meter=meter)
    assert len(meter.rounds) == res.rounds >= 2
    assert sum(r.tests for r in meter.rounds) == res.tests
    assert abs(sum(r.test_seconds for r in meter.rounds) - res.test_seconds) < 1e-6
    for r in meter.rounds:
        assert set(r.cpu) == set(PHASES)
        assert r.cpu["execute"] > 0 and r.cpu["plan"] > 0 and r.cpu["infer"] > 0
        assert r.orchestrator_s == sum(v for k, v in r.cpu.items() if k != "execute")
    assert meter.rounds[0].cpu["signals"] > 0  # the preflight's readings, judged in round 1
    assert meter.tail.cpu["infer"] > 0  # the final inference after the last round
