"""Gate and bisect on 2-16 nodes: no third partner on a rail to confirm against, two-node leaves
on 3-tier fat-trees. A named fault always exits 1; a found fault is found by honest evidence."""

from __future__ import annotations

import random

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.orchestrator import run
from fabriccheck.policy import BisectPolicy, GatePolicy
from fabriccheck.specs import resolve_spec
from tests.scenarios import build_topology

NOISE = {"jitter": 0.03, "glitch_rate": 0.01}


def fat_tree(tiers: int = 2, nodes: int = 128):
    return build_topology(f"ib-fat{tiers}", nodes, random.Random(1))


def go(mode, topo, nodes, faults, seed=0):
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict({"faults": faults, "noise": NOISE})
    pol = {"gate": GatePolicy, "bisect": BisectPolicy}[mode](mode=mode, seed=seed)
    return run(mode, list(nodes), topo, spec, SimExecutor(topo, spec, fs, seed=seed), pol)


@pytest.mark.parametrize("seed", range(3))
def test_two_node_gate_pins_the_nic_on_its_own_node(seed):
    """Two nodes: a NIC fails with its only partner; its node's other NIC (proven good) and an
    HCA loopback separate it from the partner's NIC."""
    topo = fat_tree()
    a, b = sorted(topo.nodes)[:2]
    bad = f"{b}/mlx5_3"
    res = go("gate", topo, (a, b), [{"kind": "nic_degraded", "nic": bad, "factor": 0.25}],
             seed)
    assert res.exit_code == 1
    assert res.drain == [b] and bad in res.bad_nics
    assert f"{a}/mlx5_3" not in res.bad_nics and a not in res.drain
    v = next(v for v in res.verdicts if v.name == bad)
    assert "proven-good parts" in v.reason
    assert res.rounds <= 3


@pytest.mark.parametrize("mode", ["gate", "bisect"])
def test_small_job_naming_a_fault_exits_1(mode):
    topo = fat_tree(tiers=3)
    job = sorted(topo.nodes)[10:14]  # two two-node leaves
    res = go(mode, topo, job, [{"kind": "nic_down", "nic": f"{job[2]}/mlx5_1"}])
    assert res.exit_code == 1
    named = set(res.drain) | {s.split("/")[0] for s in res.suspects}
    assert job[2] in named


def test_three_tier_two_node_leaves_confirm_across_leaves():
    """Partner choice never loops: the suspect meets a new partner on another leaf rather
    than its only leaf-mate again, and is convicted."""
    topo = fat_tree(tiers=3)
    job = sorted(topo.nodes)[10:14]
    bad = f"{job[0]}/mlx5_5"
    res = go("gate", topo, job, [{"kind": "nic_degraded", "nic": bad, "factor": 0.5}])
    assert res.exit_code == 1 and job[0] in res.drain
    pairs = [frozenset(o.test.nodes) for o in res.observations if bad in o.test.nics
             and len(o.test.nodes) == 2]
    assert len(set(pairs)) >= 2


def test_healthy_small_jobs_pass():
    for tiers in (2, 3):
        topo = fat_tree(tiers=tiers)
        for size in (2, 3, 4):
            job = sorted(topo.nodes)[20:20 + size]
            res = go("gate", topo, job, [])
            assert res.exit_code == 0, (tiers, size, res.suspects, res.extra["untested"])
