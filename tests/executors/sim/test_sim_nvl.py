"""The simulator's NVLink domains: every tray's GPU and IMEX tools show the domain and its faults
in the real formats, the node judges read them, and topologies without domains print exactly
what they printed before."""

from __future__ import annotations

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.executors.sim import preflight as pf
from fabriccheck.executors.sim.node_text import smi_nvlink, smi_query
from fabriccheck.executors.sim.node_world import background
from fabriccheck.executors.sim.nvl_world import DEFAULT_CLIQUE, OTHER_CLIQUE, cluster_uuid
from fabriccheck.faults import FaultSet
from fabriccheck.models import ProbeParams, Test
from fabriccheck.probes.node.imex import IMEX_COMMAND
from fabriccheck.probes.node.judge import judge_node_text
from fabriccheck.specs import load_spec
from fabriccheck.topology import generate, load_topology

FAULTS = [{"kind": "nvlink_port_down", "node": "node-003", "gpu": 2, "port": 17},
          {"kind": "nvswitch_down", "rack": "rack-1", "tray": 3},
          {"kind": "imex_missing", "node": "node-010"},
          {"kind": "clique_mismatch", "node": "node-025"},
          {"kind": "nvlink_degraded", "node": "node-030", "gpu": 0, "factor": 0.5}]
COMMANDS = {"nvidia-smi -q": "nvidia-smi-q", "nvidia-smi nvlink -s": "nvidia-smi-nvlink",
            IMEX_COMMAND: "imex"}


@pytest.fixture(scope="module")
def racks2():
    return generate({"kind": "nvl72", "racks": 2}, name="nvl-2", fabric="infiniband")


def _run(ex: SimExecutor, node: str, command: str) -> str:
    test = Test(f"t-{node}-{len(command)}", "signal", (node,), (), 1, "preflight", 30.0,
                ProbeParams(signal="x", command=command, gpus_per_node=4))
    raw = ex.run_round([test])[0]
    assert raw.exit_code == 0, raw.stderr
    return raw.stdout


def _judged(ex: SimExecutor, node: str) -> dict[str, tuple[str, list[str]]]:
    out = {}
    for command, tool in COMMANDS.items():
        report = judge_node_text(_run(ex, node, command), tool)
        assert report.complete, (node, tool, report.reason)
        out[tool] = (report.node_verdict, sorted(f.check for f in report.findings
                                                 if f.severity != "info"))
    return out


@pytest.mark.parametrize("seed", [0, 7])
def test_a_healthy_domain_is_judged_healthy_on_every_tray(racks2, seed):
    ex = SimExecutor(racks2, load_spec("gb200-ndr400-ib"), FaultSet(), seed=seed)
    for node in ("node-001", "node-018", "node-019", "node-036"):
        judged = _judged(ex, node)
        assert all(v == ("healthy", []) for v in judged.values()), (node, judged)
    text = _run(ex, "node-019", "nvidia-smi -q")
    assert text.count("    Fabric\n") == 4
    assert f"CliqueId                          : {DEFAULT_CLIQUE}" in text
    assert cluster_uuid("rack-1") in text and cluster_uuid("rack-0") not in text


def test_each_fault_shows_where_it_should(racks2):
    ex = SimExecutor(racks2, load_spec("gb200-ndr400-ib"), FaultSet.from_dict(
        {"faults": FAULTS}), seed=3)
    healthy = ("healthy", [])
    # nvlink_port_down: that GPU's link, a fault on the tray only
    j = _judged(ex, "node-003")
    assert j["nvidia-smi-nvlink"] == ("fault", ["gpu-nvlink-inactive"])
    assert "\t Link 17: <inactive>" in _run(ex, "node-003", "nvidia-smi nvlink -s")
    assert j["nvidia-smi-q"] == healthy
    # nvswitch_down: ports 6 and 7 of every GPU of rack-1, a switch-side warning on each tray
    for node in ("node-019", "node-036"):
        assert _judged(ex, node)["nvidia-smi-nvlink"] == ("warn", ["gpu-nvlink-switch-side"])
    assert _judged(ex, "node-018")["nvidia-smi-nvlink"] == healthy
    # imex_missing: the tray faults, its rack-mates warn, the other rack is clean
    assert _judged(ex, "node-010")["imex"] == ("fault", ["imex-not-ready"])
    assert _judged(ex, "node-011")["imex"] == ("warn", ["imex-domain-degraded"])
    assert _judged(ex, "node-020")["imex"] == healthy
    assert "Node #9   - 172.16.0.10     - UNAVAILABLE" in _run(ex, "node-001", IMEX_COMMAND)
    # clique_mismatch: only a comparison across the rack shows it
    assert _judged(ex, "node-025")["nvidia-smi-q"] == healthy
    assert f"CliqueId                          : {OTHER_CLIQUE}" in _run(ex, "node-025",
                                                                          "nvidia-smi -q")
    # nvlink_degraded: that GPU's fabric health
    assert _judged(ex, "node-030")["nvidia-smi-q"] == ("warn", ["gpu-fabric-health"])


def test_without_domains_the_gpu_tools_print_what_they_did():
    topo = load_topology("roce-rail-64")
    ex = SimExecutor(topo, load_spec("h100-roce400"), FaultSet(), seed=5)
    node = "node-007"
    for command in ("nvidia-smi -q", "nvidia-smi nvlink -s"):
        text = _run(ex, node, command)
        facts = ex._node_facts[node]
        assert facts.nvl is None
        want = (smi_query(facts, background(5, node, facts), 5, node, 0.0)
                if command == "nvidia-smi -q" else smi_nvlink(facts, 5, node))
        assert text == want and "Fabric" not in text
    assert "not found" in pf.answer(IMEX_COMMAND, node, facts, seed=5, fabric="roce",
                                    clock_s=0).stdout


def test_a_tray_the_fabric_manager_never_configured(racks2):
    ex = SimExecutor(racks2, load_spec("gb200-ndr400-ib"), FaultSet.from_dict(
        {"faults": [{"kind": "fabric_unregistered", "node": "node-012"}]}), seed=2)
    j = _judged(ex, "node-012")
    assert j["imex"] == ("fault", ["fabric-manager-not-ready"])
    assert j["nvidia-smi-q"] == ("fault", ["gpu-fabric-not-ready"] * 4)
    assert j["nvidia-smi-nvlink"] == ("healthy", [])
    text = _run(ex, "node-012", IMEX_COMMAND)
    assert "== fabric_manager\ninactive\n== fabric_state\n0, Not Started, [N/A]\n" in text
    assert "State                             : Not Started" in _run(ex, "node-012",
                                                                     "nvidia-smi -q")
    # the rest of the rack: configured, and the tray's own fabric manager is not expected
    for node in ("node-011", "node-019"):
        assert all(v == ("healthy", []) for v in _judged(ex, node).values()), node
        assert "0, Completed, Success\n" in _run(ex, node, IMEX_COMMAND)
