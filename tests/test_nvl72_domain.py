"""The ``domain`` level end to end on two simulated NVL72 racks (docs/nvl72.md): the ladder runs
it after the scale-out levels, NCCL's lines prove nothing rode the network, and each NVLink
fault is localized to its tray, GPU or switch tray while NIC faults stay the scale-out ladder's
(and the other way round)."""

from __future__ import annotations

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.orchestrator import run
from fabriccheck.policy import GatePolicy, SweepPolicy
from fabriccheck.specs import load_spec
from fabriccheck.topology import generate

NOISE = {"jitter": 0.03, "glitch_rate": 0.01}


@pytest.fixture(scope="module")
def racks2():
    return generate({"kind": "nvl72", "racks": 2}, name="nvl-2", fabric="infiniband")


def sweep(topo, faults, seed, mode="sweep", nodes=None):
    spec = load_spec("gb200-ndr400-ib")
    fs = FaultSet.from_dict({"noise": NOISE, "faults": faults}).validate(topo)
    pol = (GatePolicy if mode == "gate" else SweepPolicy)(seed=seed)
    return run(mode, nodes or sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed),
               pol)


def test_fault_free_domain_level_passes_and_proves_its_transport(racks2):
    res = sweep(racks2, [], 11)
    assert (res.exit_code, res.drain) == (0, [])
    steps = res.extra["ladder"]["steps"]
    assert steps[-6:] == ["domain full", "domain half carving 1", "domain quarter carving 1",
                          "domain half carving 2", "domain quarter carving 2", "domain localize"]
    nvl = res.extra["nvlink"]
    assert nvl["tests"] == 2 * (1 + 2 + 4 + 2 + 4)  # per rack: full, halves, quarters x2
    assert nvl["transport"]["proven"] == nvl["tests"] and not nvl["transport"]["network"]
    assert nvl["components"] == [] and set(nvl["racks"]) == {"rack-0", "rack-1"}
    # the domain tests are not the scale-out ladder's: no 18-node group among its observations
    assert max(len(o.test.nodes) for o in res.observations) <= 8


def test_degraded_gpu_is_nvlink_and_a_degraded_nic_is_not(racks2):
    faults = [{"kind": "nvlink_degraded", "node": "node-030", "gpu": 1, "factor": 0.5},
              {"kind": "nic_degraded", "nic": "node-005/mlx5_2", "factor": 0.25}]
    res = sweep(racks2, faults, 12)
    assert res.drain == ["node-005", "node-030"]
    assert res.bad_nics == ["node-005/mlx5_2"]  # the NVLink fault is never a NIC
    nvl = res.extra["nvlink"]
    assert nvl["components"] == ["node-030/gpu1"]  # the NIC fault is never NVLink
    [tray] = nvl["trays"]
    assert (tray["tray"], tray["fault"], tray["state"]) == ("node-030", "nvlink", "bad")
    reason = next(v.reason for v in res.verdicts if v.name == "node-030")
    assert "NVLink" in reason and "GPU 1" in reason
    assert any(e.startswith("r") and "nvl" in e for e in tray["evidence"])


def test_switch_tray_named_and_no_compute_tray_drained(racks2):
    res = sweep(racks2, [{"kind": "nvswitch_down", "rack": "rack-0", "tray": 4}], 13)
    assert res.exit_code == 1 and res.drain == []
    assert res.extra["bad_switches"] == ["rack-0-nvsw-4"]
    [sw] = res.extra["nvlink"]["switches"]
    assert sw["ports"] == [8, 9] and "under the other racks" in sw["reason"]


def test_cut_off_trays_are_named_by_nccls_own_lines(racks2):
    faults = [{"kind": "imex_missing", "node": "node-004"},
              {"kind": "clique_mismatch", "node": "node-025"}]
    res = sweep(racks2, faults, 14)
    assert res.drain == ["node-004", "node-025"]
    nvl = res.extra["nvlink"]
    assert {(t["tray"], t["fault"]) for t in nvl["trays"]} == {("node-004", "imex"),
                                                              ("node-025", "clique")}
    # every group with the odd-clique tray rode the network: a configuration fault, no pass
    assert len(nvl["transport"]["network"]) == 5


@pytest.mark.slow  # ~13 s alone, 20+ s on shared cores
def test_slow_in_the_domain_and_over_the_network_is_the_tray(racks2):
    res = sweep(racks2, [{"kind": "node_slow", "node": "node-020", "factor": 0.5}], 15)
    assert res.drain == ["node-020"]
    trays = res.extra["nvlink"]["trays"]
    assert [(t["tray"], t["fault"]) for t in trays] == [("node-020", "node")]


def test_gate_runs_the_domain_level_for_the_jobs_racks(racks2):
    job = [f"node-{i:03d}" for i in range(1, 13)]  # 12 trays of rack-0
    res = sweep(racks2, [{"kind": "nvlink_degraded", "node": "node-007", "gpu": 3,
                          "factor": 0.4}], 16, mode="gate", nodes=job)
    assert res.exit_code == 1 and res.drain == ["node-007"]
    assert res.extra["nvlink"]["components"] == ["node-007/gpu3"]
    assert set(res.extra["nvlink"]["racks"]) == {"rack-0"}
