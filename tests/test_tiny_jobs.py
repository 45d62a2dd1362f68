"""Two- and three-node jobs (issue 31): the node that is slow or hangs is drained, its healthy
partner never is, on a fresh seed each run (the seed is in the failure message).

With two nodes every pair test involves both, so pair tests alone cannot say which one is
slow or hangs; the tests each node runs alone (loopback, NIC to NIC) do
(:mod:`fabriccheck.inference.alone`). Real planning, simulator, parsing and inference.
"""

from __future__ import annotations

import random

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.orchestrator import run
from fabriccheck.policy import BisectPolicy, GatePolicy
from fabriccheck.specs import resolve_spec
from fabriccheck.topology import generate

SEED = random.randrange(1_000_000)


def cluster():
    return generate({"kind": "rail-optimized", "nodes": 64, "rails": 8, "gpus_per_node": 8,
                     "nodes_per_leaf": 16, "spines": 4}, name="c64", fabric="infiniband")


#: (mode, fault kind, factor); no hang in a gate: it has a time budget (tests/scenarios.py)
CASES = [(mode, "node_slow", f) for mode in ("bisect", "gate") for f in (0.5, 0.7)] + [
    ("bisect", "node_hang", None)]


@pytest.mark.parametrize("mode,kind,factor", CASES)
@pytest.mark.parametrize("size", [2, 3])
def test_the_faulty_node_of_a_tiny_job_is_drained_and_nobody_else(mode, kind, factor, size):
    rng = random.Random(f"{SEED}:{mode}:{kind}:{factor}:{size}")
    topo = cluster()
    start = rng.randrange(len(topo.nodes) - size)
    job = sorted(topo.nodes)[start:start + size] if rng.random() < 0.5 else sorted(
        rng.sample(sorted(topo.nodes), size))
    culprit = rng.choice(job)
    fault = {"kind": kind, "node": culprit} | ({"factor": factor} if factor else {})
    spec = resolve_spec(None, topo)
    policy = (BisectPolicy if mode == "bisect" else GatePolicy)(mode=mode, seed=SEED)
    res = run(mode, job, topo, spec, SimExecutor(topo, spec, FaultSet.from_dict(
        {"faults": [fault]}), seed=SEED), policy)
    assert res.drain == [culprit], (f"seed {SEED}: {job} {fault}: drained {res.drain}, "
                                    f"suspects {res.suspects}")
    assert res.exit_code == 1


@pytest.mark.parametrize("fabric", ["roce", "infiniband"])
def test_a_slow_nic_with_no_partner_on_its_leaf_is_drained_after_a_loopback(fabric):
    """A gate on nodes spread one per leaf: every partner's path crosses the suspect NIC's
    leaf uplinks, which its own failures leave un-cleared, so no pair confirmation pins it.
    The planner tests it alone (HCA loopback) and the NIC is drained; nobody else is. Default
    noise (3 % jitter, 1 % glitches), a fresh seed each run."""
    rng = random.Random(f"{SEED}:{fabric}:alone")
    topo = generate({"kind": "rail-optimized", "nodes": 128, "rails": 8, "gpus_per_node": 8,
                     "nodes_per_leaf": 16, "spines": 2}, name="c128", fabric=fabric)
    nodes = sorted(topo.nodes)
    job = sorted(rng.choice(nodes[i:i + 16]) for i in range(0, 128, 16))[:rng.choice([4, 6, 8])]
    culprit = rng.choice(job)
    nic = rng.choice(topo.nodes[culprit].nics).endpoint
    fs = FaultSet.from_dict({"faults": [{"kind": "nic_degraded", "nic": nic,
                                         "factor": rng.choice([0.25, 0.5])}],
                             "noise": {"jitter": 0.03, "glitch_rate": 0.01}})
    spec = resolve_spec(None, topo)
    res = run("gate", job, topo, spec, SimExecutor(topo, spec, fs, seed=SEED),
              GatePolicy(mode="gate", seed=SEED))
    why = f"seed {SEED}: {job} {nic}: drained {res.drain}, suspects {res.suspects}"
    assert res.drain == [culprit] and nic in res.bad_nics, why
    assert res.exit_code == 1
