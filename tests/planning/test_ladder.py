"""The ladder (1x, 2x, 4x, 8x; two carvings per level >= 2) on simulated fabrics."""

from __future__ import annotations

from collections import defaultdict

import pytest

from fabriccheck.errors import ConfigError
from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.orchestrator import run
from fabriccheck.planning.ladder import parse_levels
from fabriccheck.policy import SweepPolicy, spec_probes
from fabriccheck.specs import resolve_spec
from fabriccheck.topology import load_topology

NOISE = {"jitter": 0.03, "glitch_rate": 0.01}


def sweep(name: str, faults: list, seed: int, **policy):
    topo = load_topology(name)
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict({"noise": NOISE, "faults": faults})
    res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed=seed),
              SweepPolicy(seed=seed, **policy))
    return res, topo


def ladder_rounds(res) -> dict[int, set[int]]:
    """Group size -> rounds in which the ladder ran nccl at that size (sweep/scale purposes)."""
    out: dict[int, set[int]] = defaultdict(set)
    for o in res.observations:
        if o.test.probe == "nccl" and o.test.purpose in ("sweep", "scale"):
            out[len(o.test.nodes)].add(o.test.round)
    return out


@pytest.mark.parametrize("name", ["ib-fattree-128", "roce-rail-64"])
def test_default_sweep_climbs_the_ladder_and_finds_a_gpu_link_fault(name):
    topo = load_topology(name)
    bad = sorted(topo.nodes)[9]
    res, topo = sweep(name, [{"kind": "gpu_link_degraded", "node": bad, "factor": 0.5}], 3)
    assert res.extra["ladder"]["levels"] == [1, 2, 4, 8]
    rounds = ladder_rounds(res)
    assert len(rounds[1]) >= 1
    for k in (2, 4, 8):
        assert len(rounds[k]) >= 2, f"{k}x ran in rounds {sorted(rounds[k])}: two carvings"
    # carving 2 gives every node other members than carving 1 where the fabric allows
    for k in (4, 8):
        r1, r2 = sorted(rounds[k])[:2]
        g1 = {frozenset(o.test.nodes) for o in res.observations if o.test.round == r1
              and o.test.purpose == "scale"}
        g2 = {frozenset(o.test.nodes) for o in res.observations if o.test.round == r2
              and o.test.purpose == "scale"}
        assert len(g1 & g2) <= len(g1) // 4
    nics = {x for o in res.observations if o.test.probe == "ib_write_bw" for x in o.test.nics}
    assert nics == set(topo.nics)
    assert res.drain == [bad]
    v = next(v for v in res.verdicts if v.name == bad)
    assert "node-internal" in v.reason


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_no_healthy_node_drained_under_noise(seed):
    res, _ = sweep("ib-fattree-128", [], seed)
    assert res.drain == [] and res.bad_nics == []


def test_levels_are_respected():
    res, _ = sweep("roce-rail-64", [], 0, levels=(1, 2))
    assert res.extra["ladder"]["levels"] == [1, 2]
    assert max(len(o.test.nodes) for o in res.observations) == 2


def test_gpu_less_spec_skips_1x_with_a_reason():
    topo = load_topology("lab-8")
    spec = resolve_spec(None, topo)
    res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec),
              SweepPolicy(**spec_probes(spec)))
    assert "1" in res.extra["ladder"]["skipped"]
    assert "GPU" in res.extra["ladder"]["skipped"]["1"]
    assert all(len(o.test.nodes) > 1 for o in res.observations)


@pytest.mark.parametrize("text", ["3", "1,x", "", "16"])
def test_bad_levels_are_one_line_errors(text):
    with pytest.raises(ConfigError):
        parse_levels(text)


def test_spec_levels_are_validated_and_used():
    import yaml

    from fabriccheck.specs import load_spec, spec_from_dict

    data = yaml.safe_load(open(load_spec("h100-ndr400-ib").source).read())
    assert spec_from_dict({**data, "levels": [8, 1]}, source="s.yaml").levels == (1, 8)
    with pytest.raises(ConfigError, match="levels"):
        spec_from_dict({**data, "levels": [1, 3]}, source="s.yaml")


def test_gate_whose_job_collective_has_nobody_left_to_run():
    """A 4-node gate where one node is unreachable and another is slow: once the pairs have
    blamed them, fewer than two nodes may be left for the job's collective; the gate goes on
    without it (it crashed on an empty group: bench_scenarios small_jobs, ib-rail, seed 1)."""
    from fabriccheck.policy import GatePolicy
    from tests.scenarios import scenario

    sc = scenario("small_jobs", "ib-rail", 1)
    topo, faults, nodes, mode = sc
    assert mode == "gate" and len(nodes) == 4
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict(faults)
    res = run("gate", nodes, topo, spec, SimExecutor(topo, spec, fs, seed=1),
              GatePolicy(seed=1))
    assert set(res.unreachable) == set(fs.unreachable_nodes()) and res.exit_code == 1
    assert not set(res.drain) - set(fs.bad_nodes())


@pytest.mark.slow
@pytest.mark.parametrize("kind,seed", [("ib-rail", 2), ("roce-rail", 2), ("ib-rail", 0)])
def test_a_uniformly_slow_fabric_drains_nobody_at_scale(kind, seed):
    """Every link and NIC at 80 %: the 4x/8x groups sit at their floor, so a bisection half
    that fails while the other passes is noise, not a node that fails only at scale. The run
    warns about the fabric (exit 1) and drains nobody; such nodes stay suspects (these seeds
    drained 3 and 2 healthy nodes when bisection convicted them)."""
    from fabriccheck.policy import BisectPolicy, GatePolicy
    from tests.scenarios import scenario

    policies = {"sweep": SweepPolicy, "gate": GatePolicy, "bisect": BisectPolicy}

    topo, faults, nodes, mode = scenario("fabric_slow", kind, seed)
    spec = resolve_spec(None, topo)
    res = run(mode, nodes, topo, spec, SimExecutor(topo, spec, FaultSet.from_dict(faults), seed),
              policies[mode](mode=mode, seed=seed))
    assert res.fabric_warnings and res.exit_code == 1
    assert res.drain == [] and res.bad_nodes == []
