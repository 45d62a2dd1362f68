"""A simulated sweep of NVL72 racks through the whole loop (docs/nvl72.md): fault-free it exits 0
and drains nobody; with every NVLink fault kind the preflight drains the trays at fault (port
down, IMEX missing, clique compared across the rack) and only warns for a switch tray and a
degraded GPU, which the domain level localizes (the GPU drained, the switch tray named)."""

from __future__ import annotations

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.orchestrator import run
from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import load_spec
from fabriccheck.topology import generate

NOISE = {"jitter": 0.03, "glitch_rate": 0.01}


@pytest.fixture(scope="module")
def racks2():
    return generate({"kind": "nvl72", "racks": 2}, name="nvl-2", fabric="infiniband")


def sweep(topo, faults, seed):
    spec = load_spec("gb200-ndr400-ib")
    fs = FaultSet.from_dict({"noise": NOISE, "faults": faults}).validate(topo)
    return run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed),
               SweepPolicy(seed=seed))


@pytest.mark.parametrize("seed", [1, 2])
def test_fault_free_racks_exit_0_and_drain_nobody(racks2, seed):
    res = sweep(racks2, [], seed)
    assert (res.exit_code, res.drain) == (0, []), res.extra.get("warnings")
    signals = {w["signal"] for w in res.extra["warnings"]}
    assert not signals & {"imex", "gpu-nvlink", "gpu-health"}
    clique = [k for k in res.extra["config"] if k.startswith("nvlink_clique")]
    assert len(clique) == 2  # one comparison per rack
    assert all(not res.extra["config"][k]["outliers"] for k in clique)


def test_every_nvlink_kind_drains_only_its_tray(racks2):
    faults = [{"kind": "nvlink_port_down", "node": "node-003", "gpu": 2, "port": 17},
              {"kind": "nvswitch_down", "rack": "rack-1", "tray": 3},
              {"kind": "imex_missing", "node": "node-010"},
              {"kind": "clique_mismatch", "node": "node-025"},
              {"kind": "nvlink_degraded", "node": "node-030", "gpu": 0, "factor": 0.5}]
    res = sweep(racks2, faults, 4)
    assert res.exit_code == 1
    assert res.drain == ["node-003", "node-010", "node-025", "node-030"]
    assert res.extra["bad_switches"] == ["rack-1-nvsw-3"]
    assert "node-030/gpu0" in res.extra["nvlink"]["components"]
    reasons = {v.name: v.reason for v in res.verdicts if v.state == "bad"}
    assert "nvlink_clique" in reasons["node-025"] and "32765" in reasons["node-025"]
    assert "IMEX" in reasons["node-010"] and "NVLink 17" in reasons["node-003"]
    warned = {(w["target"], w["check"]) for w in res.extra["warnings"]}
    rack1 = {f"node-{i:03d}" for i in range(19, 37)}
    # every tray of the rack warns, but the drained one (its warnings go with its verdict)
    assert {t for t, c in warned if c == "gpu-nvlink-switch-side"} == rack1 - {"node-025"}
    assert ("node-030", "gpu-fabric-health") in warned
    assert {t for t, c in warned if c == "imex-domain-degraded"} == {
        f"node-{i:03d}" for i in range(1, 19)} - {"node-010", "node-003"}  # less the drained


@pytest.mark.parametrize("seed", [1, 5])
def test_a_tray_the_fabric_manager_never_configured_is_drained_alone(racks2, seed):
    res = sweep(racks2, [{"kind": "fabric_unregistered", "node": "node-012"}], seed)
    assert (res.exit_code, res.drain) == (1, ["node-012"])
    reason = next(v.reason for v in res.verdicts if v.name == "node-012")
    assert "signal imex" in reason and "fabric manager configured none" in reason
    # nobody else hears about the fabric manager, not even as a warning
    assert not [w for w in res.extra["warnings"] if w["check"].startswith("fabric-manager")]
    assert res.extra["nvlink"]["components"] == ["node-012"]
