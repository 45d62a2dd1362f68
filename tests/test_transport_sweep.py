"""NCCL transport through the whole loop on the simulator (issue 29): on roce-rail-64 and
ib-fattree-128, five seeds each with noise, a node whose NCCL falls back to sockets or to host
memory is named with its cause from the nccl tests' own NCCL INFO lines (the preflight off: the
traffic's evidence stands alone); ACS, NUMA and RoCE-without-PFC are named with their cause by
the preflight's configuration check while the traffic drains and suspects no healthy node; a
fabric without faults still exits 0.

Runs are small to stay quick: a sweep over the first 16 nodes (the ladder's 2x/4x/8x collectives
give every node inter-node nccl tests), a gate over the first 8.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.models import nic_node
from fabriccheck.orchestrator import run
from fabriccheck.policy import GatePolicy, SweepPolicy
from fabriccheck.specs import resolve_spec
from fabriccheck.topology.load import load_topology
from tests.conftest import REPO

TOPOS = ("roce-rail-64", "ib-fattree-128")
SEEDS = range(5)
NOISE = {"jitter": 0.03, "glitch_rate": 0.01}
SWEEP_NODES = 16


@functools.cache
def _topo(name: str):
    return load_topology(str(REPO / "topologies" / f"{name}.yaml"))


def _nodes(name: str, n: int = SWEEP_NODES) -> list[str]:
    return sorted(_topo(name).nodes)[:n]


def _target(name: str, seed: int) -> str:
    """A different node per seed (a leaf's first, middle or last)."""
    nodes = _nodes(name)
    return nodes[(3 * seed + 2) % len(nodes)]


def _run(name: str, faults: list, seed: int, *, mode: str = "sweep", preflight: bool = False,
         n: int = SWEEP_NODES):
    topo = _topo(name)
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict({"noise": NOISE, "faults": faults})
    policy = (GatePolicy if mode == "gate" else SweepPolicy)(seed=seed, preflight=preflight)
    return run(mode, _nodes(name, n), topo, spec, SimExecutor(topo, spec, fs, seed), policy)


def _verdict(res, name: str):
    return next(v for v in res.verdicts if v.name == name)


def _healthy_nodes_untouched(res, target: str) -> None:
    """No node but the target drained, bad or a suspect (its own NICs aside; switch links are
    checked apart)."""
    assert set(res.drain) <= {target}, res.drain
    others = {nic_node(s) for s in res.suspects if " -- " not in s} - {target}
    assert not others, res.suspects
    bad = {v.name for v in res.verdicts if v.kind == "node" and v.state == "bad"}
    assert bad <= {target}, bad


FALLBACKS = {
    "socket": ("NCCL used NET/Socket on {node} (ranks ", ("ibstat", "NCCL_IB_HCA",
                                                           "NCCL_SOCKET_IFNAME")),
    "host_memory": ("GPUDirect RDMA off on {node}: its NET channels (ranks ",
                    ("nvidia_peermem",)),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", TOPOS)
@pytest.mark.parametrize("to", sorted(FALLBACKS))
def test_transport_fallback_named_from_the_traffic_alone(to, name, seed):
    target = _target(name, seed)
    res = _run(name, [{"kind": "transport_fallback", "node": target, "to": to}], seed)
    assert res.exit_code == 1
    assert res.drain == [target] and res.suspects == []
    assert res.bad_links == [] and res.link_suspects == []  # its slow tests blame no link
    start, fixes = FALLBACKS[to]
    reason = _verdict(res, target).reason
    assert reason.startswith(start.format(node=target)), reason
    assert all(f in reason for f in fixes), reason
    transport = res.extra["transport"]
    assert [(f["node"], f["to"]) for f in transport["fallbacks"]] == [(target, to)]
    assert transport["warnings"] == [] and res.fabric_warnings == []
    assert transport["unseen"] == []  # the ladder's collectives showed every node's transport
    peers = {n: t for n, t in transport["nodes"].items() if n != target}
    assert peers and all(t == {"net": "ib", "gdr": True, "tests": t["tests"]}
                         for t in peers.values())


@pytest.mark.parametrize("name", TOPOS)
def test_gate_names_a_socket_fallback_in_its_job_collective(name):
    target = _nodes(name, 8)[2]
    res = _run(name, [{"kind": "transport_fallback", "node": target, "to": "socket"}], 0,
               mode="gate", n=8)
    assert res.exit_code == 1 and res.drain == [target] and res.suspects == []
    assert _verdict(res, target).reason.startswith(f"NCCL used NET/Socket on {target}")
    # the failing job collective is explained: no bisection followed
    assert not [o for o in res.observations if o.test.purpose == "bisect"]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", TOPOS)
def test_no_fault_gate_exits_0_with_every_node_on_ib_and_gdrdma(name, seed):
    res = _run(name, [], seed, mode="gate", n=8, preflight=True)
    assert res.exit_code == 0, (res.drain, res.suspects, res.extra["untested"])
    transport = res.extra["transport"]
    assert transport["fallbacks"] == [] and transport["warnings"] == []
    assert transport["nodes"] and all(t["net"] == "ib" and t["gdr"] is True
                                      for t in transport["nodes"].values())


CONFIG = {  # kind -> (fault on the target, words of its cause in the verdicts)
    "acs_enabled": (lambda n, s: {"kind": "acs_enabled", "node": n}, ("ACS",)),
    "numa_misaligned": (lambda n, s: {"kind": "numa_misaligned", "node": n},
                        ("NUMA", "nearest NIC", "nearest GPU", " SYS", " NODE")),
    "pfc_disabled": (lambda n, s: {"kind": "pfc_disabled", "nic": f"{n}/mlx5_{s % 8}"},
                     ("PFC",)),
}
CASES = [(k, name, s) for k in sorted(CONFIG) for name in TOPOS for s in SEEDS
         if k != "pfc_disabled" or name.startswith("roce")]


@pytest.mark.parametrize("kind,name,seed", CASES)
def test_config_fault_drains_no_healthy_node_from_the_traffic(kind, name, seed):
    """The preflight off: ACS, NUMA and PFC slow collectives without a word in NCCL's lines;
    whatever the bandwidth rules conclude, no healthy node is drained, bad or a suspect, and
    no transport fallback is claimed. (A switch link may be left a suspect: the node passed
    its host-memory pair tests, so the slow collectives' un-cleared links explain them too.)"""
    target = _target(name, seed)
    res = _run(name, [CONFIG[kind][0](target, seed)], seed)
    _healthy_nodes_untouched(res, target)
    assert res.extra["transport"]["fallbacks"] == []


@pytest.mark.parametrize("kind,name,seed", CASES)
def test_config_fault_named_with_its_cause(kind, name, seed):
    """The whole product (preflight on): the node, or the NIC's node, is drained with the
    cause its configuration check names, nothing else, exit 1."""
    target = _target(name, seed)
    fault = CONFIG[kind][0](target, seed)
    res = _run(name, [fault], seed, preflight=True)
    assert res.exit_code == 1
    assert res.drain == [target]
    _healthy_nodes_untouched(res, target)
    assert res.bad_links == [] and res.link_suspects == []  # drained before its traffic
    part = fault.get("nic") or target
    reasons = _verdict(res, part).reason + " " + _verdict(res, target).reason
    assert any(word in reasons for word in CONFIG[kind][1]), reasons


@pytest.mark.parametrize("to", sorted(FALLBACKS))
@pytest.mark.parametrize("name", TOPOS)
def test_fallback_with_the_preflight_on_drains_only_its_node(name, to):
    """Traffic and node-local evidence together name the same node, nothing else."""
    target = _target(name, 1)
    res = _run(name, [{"kind": "transport_fallback", "node": target, "to": to}], 1,
               preflight=True)
    assert res.exit_code == 1 and res.drain == [target]
    _healthy_nodes_untouched(res, target)


def test_run_json_carries_the_transport_through_the_cli(tmp_path):
    """``fabriccheck gate --json`` (the real CLI, a subprocess): the run JSON's ``transport``
    key names the fallback, and the run exits 1."""
    faults = tmp_path / "faults.yaml"
    faults.write_text("noise: {jitter: 0.03, glitch_rate: 0.01}\nfaults:\n"
                      "  - {kind: transport_fallback, node: node-003, to: socket}\n")
    nodes = ",".join(_nodes("roce-rail-64", 8))
    out = subprocess.run(
        [sys.executable, "-m", "fabriccheck", "gate", "--topology",
         str(REPO / "topologies" / "roce-rail-64.yaml"), "--faults", str(faults),
         "--nodes", nodes, "--json"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 1, out.stderr[-500:]
    data = json.loads(out.stdout)
    assert data["drain"] == ["node-003"]
    [fallback] = data["transport"]["fallbacks"]
    assert (fallback["node"], fallback["to"], fallback["ranks"]) == ("node-003", "socket",
                                                                     "16-23")
    assert data["transport"]["nodes"]["node-001"] == {"net": "ib", "gdr": True, "tests": 1}
