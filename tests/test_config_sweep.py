"""Silent misconfiguration through the whole loop on the simulator (docs/config-checks.md): a gate
over 8 nodes finds each misconfiguration kind on the node or NIC that has it, with its cause,
drains nothing else and exits 1; firmware drift is a warning (exit 0); without the spec's
``config:`` block the peers find what the spec would have; a fleet split evenly judges nobody."""

from __future__ import annotations

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.orchestrator import run
from fabriccheck.policy import GatePolicy
from fabriccheck.specs import resolve_spec, spec_from_dict
from fabriccheck.topology.fields import read_yaml
from fabriccheck.topology.load import load_topology
from tests.conftest import REPO

NOISE = {"jitter": 0.03, "glitch_rate": 0.01}
SEEDS = (1, 2, 3, 4, 5)
#: kind -> (its fault's extra fields per fabric, the words its verdict must name)
NODE_KINDS = {
    "transport_fallback": ({"to": "host_memory"}, "nvidia_peermem is not loaded"),
    "acs_enabled": ({}, "ACS redirects peer-to-peer traffic"),
    "numa_misaligned": ({}, "nearest NIC"),
}
NIC_KINDS = {
    "pfc_disabled": ({}, "PFC is off on priority 3"),
    "gid_mismatch": ({}, "GID index 3 is RoCE v1"),
    "mtu_mismatch": ({"mtu": 4200}, "has MTU 4200"),
}
ROCE_ONLY = ("pfc_disabled", "gid_mismatch")


@pytest.fixture(scope="module", params=["roce-rail-64", "ib-fattree-128"])
def topo(request):
    return load_topology(str(REPO / "topologies" / f"{request.param}.yaml"))


def gate(topo, faults, seed, spec=None):
    nodes = sorted(topo.nodes)[:8]
    spec = spec or resolve_spec(None, topo)
    fs = FaultSet.from_dict({"noise": NOISE, "faults": faults})
    return run("gate", nodes, topo, spec, SimExecutor(topo, spec, fs, seed),
               GatePolicy(seed=seed))


def _where(topo, seed: int) -> tuple[str, str]:
    """The faulty node and NIC of ``seed``: a different one per seed."""
    node = sorted(topo.nodes)[seed % 8]
    nic = sorted(n.name for n in topo.nodes[node].nics)[(3 * seed) % 8]
    return node, f"{node}/{nic}"


def _bad(res) -> dict[str, str]:
    return {v.name: v.reason for v in res.verdicts if v.state == "bad"}


def _cfg_warnings(res, exclude: str = "") -> list[dict]:
    return [w for w in res.extra["warnings"]
            if w["check"].startswith("cfg-") and w["target"] != exclude]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_fault_free_gate_drains_nobody_and_every_setting_has_a_majority(topo, seed):
    res = gate(topo, [], seed)
    assert res.drain == [] and res.exit_code == 0, _bad(res)
    assert not _cfg_warnings(res)
    assert res.extra["config"] and all(not v.get("outliers") and v["majority"] is not None
                                       for v in res.extra["config"].values())


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", sorted(NODE_KINDS))
def test_a_node_misconfiguration_drains_its_node_only_naming_the_cause(topo, kind, seed):
    node, _nic = _where(topo, seed)
    extra, words = NODE_KINDS[kind]
    res = gate(topo, [{"kind": kind, "node": node, **extra}], seed)
    assert res.drain == [node] and res.bad_nics == [], _bad(res)
    assert set(_bad(res)) == {node}
    assert "signal node-config" in _bad(res)[node] and words in _bad(res)[node]
    assert res.exit_code == 1
    assert res.extra["verdict_rounds"][node] == 1  # the preflight found it
    assert not _cfg_warnings(res)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", sorted(NIC_KINDS))
def test_a_nic_misconfiguration_drains_that_nic_naming_the_cause(topo, kind, seed):
    if kind in ROCE_ONLY and topo.fabric != "roce":
        pytest.skip(f"{kind} is a RoCE setting; InfiniBand has no PFC or GID types")
    node, nic = _where(topo, seed)
    extra, words = NIC_KINDS[kind]
    if kind == "mtu_mismatch" and topo.fabric == "infiniband":
        extra, words = {"mtu": 2048}, "has MTU 2048"  # a partition at 2048
    res = gate(topo, [{"kind": kind, "nic": nic, **extra}], seed)
    assert res.bad_nics == [nic] and res.drain == [node], _bad(res)
    assert set(_bad(res)) == {node, nic}
    assert "signal nic-config" in _bad(res)[nic] and words in _bad(res)[nic]
    assert res.exit_code == 1
    assert not _cfg_warnings(res)


@pytest.mark.parametrize("seed", SEEDS)
def test_firmware_drift_alone_is_a_warning_naming_the_nic_and_its_peers(topo, seed):
    _node, nic = _where(topo, seed)
    res = gate(topo, [{"kind": "firmware_drift", "nic": nic, "version": "28.39.1002"}], seed)
    assert res.drain == [] and res.exit_code == 0, _bad(res)
    (w,) = _cfg_warnings(res)
    assert (w["target"], w["check"]) == (nic, "cfg-nic-firmware")
    assert "firmware 28.39.1002" in w["what"] and "63 peers have 28.41.1000" in w["what"]
    assert res.extra["config"]["firmware"]["outliers"] == {nic: "28.39.1002"}


def _spec_without_config(topo):
    spec = resolve_spec(None, topo)
    data = read_yaml(spec.source)
    return spec_from_dict({k: v for k, v in data.items() if k != "config"}, source=spec.source)


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_without_the_specs_config_block_the_peers_find_the_odd_one(topo, seed):
    node, nic = _where(topo, seed)
    spec = _spec_without_config(topo)
    mtu = 4200 if topo.fabric == "roce" else 2048
    res = gate(topo, [{"kind": "mtu_mismatch", "nic": nic, "mtu": mtu}], seed, spec=spec)
    assert res.bad_nics == [nic] and res.drain == [node], _bad(res)
    assert f"mtu {mtu} on {nic}; 63 peers have" in _bad(res)[nic]
    res = gate(topo, [{"kind": "transport_fallback", "node": node, "to": "host_memory"}], seed,
               spec=spec)
    assert res.drain == [node] and "gpudirect off on" in _bad(res)[node]
    res = gate(topo, [{"kind": "numa_misaligned", "node": node}], seed, spec=spec)
    assert res.drain == [node] and f"gpu_nic NODE on {node}; 7 peers have PIX" in _bad(res)[node]


def test_a_fleet_split_evenly_judges_nobody(topo):
    """Half the nodes were upgraded: 32 NICs on each firmware; nobody is the odd one."""
    spec = _spec_without_config(topo)
    faults = [{"kind": "firmware_drift", "nic": f"{n}/{nic.name}", "version": "28.39.1002"}
              for n in sorted(topo.nodes)[:4] for nic in topo.nodes[n].nics]
    res = gate(topo, faults, 1, spec=spec)
    assert res.drain == [] and res.exit_code == 0 and not _cfg_warnings(res)
    assert res.extra["config"]["firmware"]["majority"] is None
    assert res.extra["config"]["firmware"]["values"] == {"28.41.1000": 32, "28.39.1002": 32}
