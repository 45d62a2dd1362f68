"""Reports of simulated runs (orchestrator + simulator): injected faults show where they must."""

from __future__ import annotations

import pytest

from fabriccheck.faults import FaultSet, load_faults
from fabriccheck.report import render_html, render_report
from fabriccheck.report.svg import STATE_COLOURS
from fabriccheck.specs import resolve_spec
from fabriccheck.topology import load_topology
from fabriccheck.topology.generators import generate
from tests.conftest import REPO
from tests.report.dom import El, parse
from tests.report.test_report_content import drained_by

orchestrator = pytest.importorskip("fabriccheck.orchestrator")
sim = pytest.importorskip("fabriccheck.executors.sim.executor")

NOISE = {"jitter": 0.03, "glitch_rate": 0.01}


def simulate(topo, faults: FaultSet, *, mode: str = "sweep", nodes=None, seed: int = 1):
    spec = resolve_spec(None, topo)
    executor = sim.SimExecutor(topo, spec, faults, seed=seed)
    try:
        return orchestrator.run(mode, nodes or sorted(topo.nodes), topo, spec, executor)
    finally:
        executor.close()


def node_classes(dom: El) -> dict[str, set[str]]:
    return {el.attrs["data-node"]: el.classes() for el in dom.iter() if "data-node" in el.attrs}


def verdict_states(dom: El) -> dict[str, str]:
    rows = dom.find("table", id="verdict-table").find("tbody").find_all("tr")
    return {r.find_all("td")[1].text().strip(): r.find_all("td")[2].text().strip() for r in rows}


def step_titles(dom: El) -> list[str]:
    return [li.find("div", **{"class": "title"}).text() for li in dom.find_all("li")
            if "step" in li.classes()]  # fmt: skip


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    topo = load_topology("roce-rail-64")
    result = simulate(topo, load_faults(REPO / "topologies" / "faults" / "demo-roce-64.yaml"))
    index = render_report(result, topo, tmp_path_factory.mktemp("demo"))
    return result, parse(index.read_text(encoding="utf-8"))


def test_demo_faults_in_banner_drain_list_and_steps(demo):
    result, dom = demo
    assert dom.find("div", **{"class": "verdict"}).text() == "DRAIN"
    assert {"node-017", "node-033", "node-040"} <= set(result.drain)
    steps = dom.find("ol", **{"class": "steps"}).find_all("li")
    assert drained_by(steps[0].find("pre").text().splitlines()) == sorted(result.drain)
    titles = step_titles(dom)
    assert any("node-017/mlx5_3" in t for t in titles)
    assert any("node-050" in t and "not tested" in t for t in titles)
    assert any("node-033" in t and "hung" in t for t in titles)


def test_demo_faults_highlighted_in_topology_svg(demo):
    result, dom = demo
    cls = node_classes(dom)
    assert "st-bad" in cls["node-017"] and "st-bad" in cls["node-040"]
    assert "st-hung" in cls["node-033"] and "st-unreachable" in cls["node-050"]
    healthy = set(result.nodes) - set(result.drain) - set(result.unreachable)
    assert all("st-healthy" in cls[n] for n in healthy - set(result.suspects))
    # RoCE: the degraded spine link is in a suspect set (ECMP) or named: drawn either way
    line = dom.find("line", data_link="leaf-1-2 -- spine-3")
    assert line.attrs["stroke"] in (STATE_COLOURS["bad"], STATE_COLOURS["suspect"])


def test_demo_faults_in_verdict_table(demo):
    _, dom = demo
    states = verdict_states(dom)
    assert states["node-017/mlx5_3"] == "bad"
    assert states["node-050"] == "unreachable"
    assert states["node-033"] == "hung"
    assert states["node-040"] == "bad"


def test_infiniband_link_fault_named_exactly_in_report():
    gen = {"kind": "rail-optimized", "nodes": 64, "rails": 8, "gpus_per_node": 8,
           "nodes_per_leaf": 16, "spines": 8}  # fmt: skip
    topo = generate(gen, name="ib-rail-64", fabric="infiniband")
    faults = FaultSet.from_dict({"noise": NOISE, "faults": [
        {"kind": "nic_degraded", "nic": "node-017/mlx5_3", "factor": 0.25},
        {"kind": "link_degraded", "link": ["leaf-1-2", "spine-3"], "factor": 0.4},
    ]})  # fmt: skip
    result = simulate(topo, faults)
    dom = parse(render_html(result, topo))
    assert ("leaf-1-2", "spine-3") in result.bad_links
    line = dom.find("line", data_link="leaf-1-2 -- spine-3")
    assert line.attrs["stroke"] == STATE_COLOURS["bad"]
    assert verdict_states(dom)["leaf-1-2 -- spine-3"] == "bad"
    assert any(t.startswith("Repair link leaf-1-2 ↔ spine-3") for t in step_titles(dom))
    rail = next(s for s in dom.find_all("svg") if s.attrs["aria-label"].startswith("node × rail"))
    titled = [r for r in rail.find_all("rect") if r.find_all("title")]
    cell = next(r for r in titled if r.find("title").text().startswith("node-017 · rail 3"))
    assert cell.attrs["fill"] == STATE_COLOURS["bad"]


def test_fat_tree_128_aggregated_matrix_and_hang():
    topo = load_topology("ib-fattree-128")
    faults = FaultSet.from_dict({"noise": NOISE, "faults": [
        {"kind": "nic_degraded", "nic": "node-077/mlx5_5", "factor": 0.25},
        {"kind": "node_hang", "node": "node-100"},
    ]})  # fmt: skip
    result = simulate(topo, faults)
    dom = parse(render_html(result, topo))
    pair = next(s for s in dom.find_all("svg") if s.attrs["aria-label"].startswith("pair heatmap"))
    assert "aggregated" in pair.attrs["aria-label"]
    cls = node_classes(dom)
    assert "st-bad" in cls["node-077"] and "st-hung" in cls["node-100"]
    assert verdict_states(dom)["node-077/mlx5_5"] == "bad"


def test_healthy_gate_on_a_subset_says_go():
    topo = load_topology("roce-rail-64")
    nodes = sorted(topo.nodes)[:16]
    result = simulate(topo, FaultSet.from_dict({"noise": {"jitter": 0.02}}), mode="gate",
                      nodes=nodes)  # fmt: skip
    dom = parse(render_html(result, topo))
    assert result.drain == []
    assert dom.find("div", **{"class": "verdict"}).text() == "GO"
    cls = node_classes(dom)
    assert all("st-healthy" in cls[n] for n in nodes)
    assert all("st-untested" in cls[n] for n in sorted(topo.nodes)[16:])


def test_configuration_outliers_and_node_warnings_are_tabled():
    """A NIC on another firmware (a warning) and one on another MTU (drained): the configuration
    table lists both outliers first, with the fleet's majority; the warning table names the NIC
    and its fix; a healthy gate has no warning table."""
    topo = load_topology("roce-rail-64")
    nodes = sorted(topo.nodes)[:8]
    faults = FaultSet.from_dict({"noise": NOISE, "faults": [
        {"kind": "firmware_drift", "nic": "node-003/mlx5_1", "version": "28.39.1002"},
        {"kind": "mtu_mismatch", "nic": "node-004/mlx5_2", "mtu": 1500}]})
    result = simulate(topo, faults, mode="gate", nodes=nodes)
    dom = parse(render_html(result, topo))
    rows = dom.find("table", id="config-table").find("tbody").find_all("tr")
    top = {r.find_all("td")[0].text().strip(): r.find_all("td")[3].text() for r in rows[:2]}
    assert set(top) == {"firmware", "mtu"}
    assert "node-003/mlx5_1" in top["firmware"] and "28.39.1002" in top["firmware"]
    assert "node-004/mlx5_2" in top["mtu"] and "1500" in top["mtu"]
    warns = dom.find("table", id="warning-table").text()
    assert "node-003/mlx5_1" in warns and "firmware" in warns
    assert "node-004" in result.drain
    clean = simulate(topo, FaultSet.from_dict({"noise": NOISE}), mode="gate", nodes=nodes)
    assert clean.drain == [] and 'id="warning-table"' not in render_html(clean, topo)
