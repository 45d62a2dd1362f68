"""Node-local evidence through the whole loop (docs/node-checks.md): the preflight judges with
the catalogue on the simulator, warns are listed and exit 0 (1 with --strict), faults drain the
node that has them and nobody else, and the kernel log is read since the node's last check."""

from __future__ import annotations

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.orchestrator import run
from fabriccheck.policy import GatePolicy, SweepPolicy
from fabriccheck.probes.node.catalogue import builtin_catalogue
from fabriccheck.specs import resolve_spec
from fabriccheck.topology.load import load_topology
from tests.conftest import REPO

NOISE = {"jitter": 0.03, "glitch_rate": 0.01}


@pytest.fixture(scope="module", params=["ib-fattree-128", "roce-rail-64"])
def topo(request):
    return load_topology(str(REPO / "topologies" / f"{request.param}.yaml"))


def gate(topo, faults, seed=0, noise=None, **policy):
    nodes = sorted(topo.nodes)[:8]
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict({"noise": noise or NOISE, "faults": faults})
    return run("gate", nodes, topo, spec, SimExecutor(topo, spec, fs, seed),
               GatePolicy(seed=seed, **policy))


def _severity(n: int) -> str:
    cat = builtin_catalogue()
    return cat.entry(f"xid-{n}" if f"xid-{n}" in cat else "xid-default").severity


@pytest.mark.parametrize("seed", [11, 12])
def test_background_alone_drains_nobody_and_exits_0(topo, seed):
    res = gate(topo, [], seed)
    assert res.drain == [] and res.exit_code == 0, (res.drain, res.extra.get("warnings"))
    for w in res.extra["warnings"]:  # listed with a reason and a fix, on a node of the run
        assert w["what"] and w["target"].split("/", 1)[0] in res.nodes


@pytest.mark.parametrize("xid", [79, 48, 119])
def test_a_hardware_xid_drains_its_node_naming_the_xid(topo, xid):
    node = sorted(topo.nodes)[3]
    res = gate(topo, [{"kind": "xid", "node": node, "xid": xid}], seed=xid)
    assert res.drain == [node]
    verdict = next(v for v in res.verdicts if v.name == node and v.state == "bad")
    assert "kernel-log" in verdict.reason and str(xid) in verdict.reason
    assert res.exit_code == 1


@pytest.mark.parametrize("xid", [13, 31, 43, 45, 63, 94])
def test_application_and_soft_xids_never_drain(topo, xid):
    node = sorted(topo.nodes)[2]
    res = gate(topo, [{"kind": "xid", "node": node, "xid": xid}], seed=xid)
    assert res.drain == []
    listed = [w for w in res.extra["warnings"] if w["target"] == node and str(xid) in w["what"]]
    assert bool(listed) == (_severity(xid) == "warn"), res.extra["warnings"]
    assert res.exit_code == 0
    if listed:  # --strict: a warning is a reason not to start the job
        assert gate(topo, [{"kind": "xid", "node": node, "xid": xid}], seed=xid,
                    strict=True).exit_code == 1


@pytest.mark.parametrize("fault", [
    {"kind": "gpu_throttle", "reason": "hw_power_brake"},
    {"kind": "gpu_throttle", "reason": "hw_slowdown"},
    {"kind": "gpu_throttle", "reason": "thermal"},
    {"kind": "row_remap_pending"},
    {"kind": "nvlink_down", "links": 2},
])
def test_calm_looking_gpu_faults_drain_their_node_only(topo, fault):
    node = sorted(topo.nodes)[5]
    res = gate(topo, [{**fault, "node": node}], seed=7)
    assert res.drain == [node], (fault, res.drain)


def test_a_flapping_port_is_found_on_its_nic(topo):
    node = sorted(topo.nodes)[4]
    nic = f"{node}/{sorted(n.name for n in topo.nodes[node].nics)[2]}"
    res = gate(topo, [{"kind": "port_flap", "nic": nic, "per_hour": 6}], seed=3)
    warned = {w["target"] for w in res.extra["warnings"]}
    assert nic in res.bad_nics or nic in warned, (res.bad_nics, warned)
    assert set(res.drain) <= {node}


def test_the_kernel_log_is_read_since_the_last_check(topo):
    node = sorted(topo.nodes)[1]
    faults = [{"kind": "xid", "node": node, "xid": 63}]
    first = gate(topo, faults, seed=5)
    scope = first.extra["kernel_log"][node]
    assert scope["since"] is None and scope["until"]  # no earlier check: since boot, said so
    assert any(w["target"] == node for w in first.extra["warnings"])
    later = gate(topo, faults, seed=5, kernel_since=((node, scope["until"]),))
    assert later.extra["kernel_log"][node]["since"] == scope["until"]
    assert not any(w["target"] == node and w["signal"] == "kernel-log"
                   for w in later.extra["warnings"]), "an event already judged came back"


def sweep(topo, faults, seed=0):
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict({"noise": NOISE, "faults": faults})
    return run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed),
               SweepPolicy(seed=seed))


@pytest.mark.slow
def test_counters_are_judged_again_over_the_runs_span(topo):
    """A port erring at 0.2/s shows one error in the preflight's 5 s (noise: not even listed)
    and a dozen over the ladder: the closing read with the first round after the ladder
    drains it, naming the span; a healthy fabric's closing reads drain nobody."""
    node = sorted(topo.nodes)[9]
    nic = f"{node}/{sorted(n.name for n in topo.nodes[node].nics)[1]}"
    res = sweep(topo, [{"kind": "port_errors", "nic": nic, "rate": 0.2}], seed=21)
    assert nic in res.bad_nics and res.drain == [node], (res.bad_nics, res.drain)
    why = next(v.reason for v in res.verdicts if v.name == nic)
    assert "over the run's" in why, why
    clean = sweep(topo, [], seed=21)
    assert clean.drain == [] and clean.exit_code == 0
