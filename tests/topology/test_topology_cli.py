"""``fabriccheck topology show|validate|list`` on every bundled topology (the docs/design.md
contract)."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from fabriccheck.topology import bundled_topologies, load_topology
from fabriccheck.topology.dump import topology_to_yaml
from fabriccheck.topology.fields import parse_yaml
from fabriccheck.topology.load import TOPOLOGY_DIR, topology_from_dict

BUNDLED = bundled_topologies()
# name -> (nodes, NICs per node, switches by tier, fabric)
SIZES = {
    "roce-rail-64": (64, 8, {"leaf": 16, "spine": 8}, "roce"),
    "ib-fattree-128": (128, 8, {"leaf": 32, "spine": 32}, "infiniband"),
    "ib-rail-1024": (1024, 8, {"leaf": 256, "spine": 32}, "infiniband"),
    "ib-rail-4096": (4096, 8, {"leaf": 1024, "spine": 32}, "infiniband"),
    "ib-fattree3-512": (512, 8, {"leaf": 256, "spine": 256, "core": 256}, "infiniband"),
    "lab-4": (4, 1, {"leaf": 2, "spine": 1}, "roce"),
    "lab-8": (8, 2, {"leaf": 4, "spine": 1}, "roce"),
    "gb200-nvl72-8": (144, 4, {"leaf": 32, "spine": 18}, "infiniband"),
}


def test_every_expected_topology_is_bundled():
    assert set(SIZES) <= set(BUNDLED)


@pytest.mark.parametrize("name", BUNDLED)
def test_show_json_contract(name):
    result = CliRunner().invoke(app, ["topology", "show", str(TOPOLOGY_DIR / f"{name}.yaml"),
                                      "--json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)  # stdout holds only JSON
    assert list(doc)[:5] == ["name", "fabric", "nodes", "switches", "links"]
    # more keys are welcome (docs/design.md); NVLink domains only where the file has them
    assert list(doc)[5:] == (["nvlink_domains"] if name.startswith("gb200") else [])
    assert doc["name"] == name
    nodes, per_node, tiers, fabric = SIZES.get(name, (None, None, None, doc["fabric"]))
    assert doc["fabric"] == fabric
    switch_names = {s["name"] for s in doc["switches"]}
    nic_ends = {f"{n['name']}/{nic}" for n in doc["nodes"] for nic in n["nics"]}
    assert all(set(s) == {"name", "tier"} for s in doc["switches"])
    assert all(set(lk) == {"a", "b", "gbps"} and lk["gbps"] > 0 for lk in doc["links"])
    ends = [e for lk in doc["links"] for e in (lk["a"], lk["b"])]
    assert set(ends) <= switch_names | nic_ends  # NICs written node/nic, switches by name
    nic_uses = [e for e in ends if e in nic_ends]
    assert len(nic_uses) == len(set(nic_uses)) == len(nic_ends)  # each NIC on exactly one link
    if nodes is not None:
        assert len(doc["nodes"]) == nodes
        assert {len(n["nics"]) for n in doc["nodes"]} == {per_node}
        counts = {t: sum(s["tier"] == t for s in doc["switches"]) for t in tiers}
        assert counts == tiers


@pytest.mark.parametrize("name", ["roce-rail-64", "lab-8", "ib-fattree3-512"])
def test_show_summary(name):
    result = CliRunner().invoke(app, ["topology", "show", name])
    assert result.exit_code == 0
    text = result.stdout
    nodes, per_node, tiers, fabric = SIZES[name]
    assert f"fabric      {fabric}" in text
    assert f"{nodes * per_node} on {per_node} rails" in text
    for tier, count in tiers.items():
        assert f"{count} {tier}" in text
    topo = load_topology(name)
    a, b = sorted(topo.nodes)[0], sorted(topo.nodes)[-1]
    width = len(topo.paths(topo.nic(a, 0), topo.nic(b, 0)))
    assert f"ECMP width  {width} paths" in text
    if name == "roce-rail-64":
        assert width == 8  # = spines on a 2-tier rail-optimized fabric


def test_validate_and_list():
    runner = CliRunner()
    result = runner.invoke(app, ["topology", "validate", "lab-4", "--tree"])
    assert result.exit_code == 0 and ": ok (4 nodes, 3 switches, 6 links, roce)" in result.stdout
    listing = runner.invoke(app, ["topology", "list"])
    assert listing.exit_code == 0
    for name in SIZES:
        line = next(ln for ln in listing.stdout.splitlines() if ln.startswith(name + " "))
        assert f"{SIZES[name][0]} nodes" in line


@pytest.mark.parametrize("name", ["roce-rail-64", "lab-8", "ib-fattree3-512"])
def test_explicit_yaml_round_trip(name):
    topo = load_topology(name)
    text = topology_to_yaml(topo)
    again = topology_from_dict(parse_yaml(text, "rt.yaml"), source="rt.yaml")
    def norm(doc: dict) -> dict:
        links = sorted((*sorted((lk["a"], lk["b"])), lk["gbps"]) for lk in doc["links"])
        return {**doc, "links": links}

    assert norm(again.to_contract()) == norm(topo.to_contract())
    assert {n: node.nics for n, node in again.nodes.items()} == {
        n: node.nics for n, node in topo.nodes.items()
    }
    assert again.spec == topo.spec and again.gpus_per_node == topo.gpus_per_node


def test_generator_files_match_design_example():
    raw = yaml.safe_load((TOPOLOGY_DIR / "roce-rail-64.yaml").read_text())
    assert raw["generator"] == {
        "kind": "rail-optimized", "nodes": 64, "gpus_per_node": 8, "rails": 8,
        "nodes_per_leaf": 32, "spines": 8, "nic_gbps": 400, "uplink_gbps": 400,
    }
    for name in BUNDLED:
        raw = yaml.safe_load((TOPOLOGY_DIR / f"{name}.yaml").read_text())
        assert raw.get("spec"), f"{name} names no default spec"
    topo = load_topology("ib-rail-4096")
    assert len(topo.links) == 4096 * 8 + 1024 * 32
    assert sorted(topo.nodes)[-1] == "node-4096"
    assert math.isclose(topo.links[("leaf-0-0", "spine-0")].gbps, 400)


def test_import_writes_the_gpu_count_it_is_given(tmp_path):
    """`topology import --gpus-per-node N`: every imported node gets N GPUs (0 = unknown when
    left out), from the repo's own ibnetdiscover fixture."""
    from pathlib import Path

    dump = Path(__file__).resolve().parent.parent / "fixtures" / "ibnetdiscover" / \
        "ibnetdiscover_switch_blocks_only_qdr_synthetic.txt"
    for flag, want in (([], 0), (["--gpus-per-node", "4"], 4)):
        out = tmp_path / f"t{want}.yaml"
        result = CliRunner().invoke(app, ["topology", "import", "--ibnetdiscover", str(dump),
                                          "--name", "t", "-o", str(out), *flag])
        assert result.exit_code == 0, result.output
        topo = load_topology(str(out))
        assert topo.nodes and {n.gpus for n in topo.nodes.values()} == {want}
