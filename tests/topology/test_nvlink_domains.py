"""NVLink domains in the topology model: the nvl72 generator, an explicit ``nvlink_domains:``
list, the derived GPU-to-switch-chip wiring, the import from ``nvidia-smi -q`` fabric fields,
and topologies without domains unchanged."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from fabriccheck.errors import ConfigError
from fabriccheck.topology import bundled_topologies, generate, load_topology, topology_from_dict
from fabriccheck.topology.load import TOPOLOGY_DIR
from fabriccheck.topology.nvlink import NvlDomain
from fabriccheck.topology.nvlink_import import domains_from_smi
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "nvl72"


def test_bundled_gb200_nvl72_8_has_8_racks_of_18_trays():
    t = load_topology("gb200-nvl72-8")
    assert (len(t.nodes), t.gpus_per_node, t.rails, t.spec) == (144, 4, 4, "gb200-ndr400-ib")
    assert sorted(t.domains) == [f"rack-{r}" for r in range(8)]
    for r, d in enumerate(t.domains[f"rack-{r}"] for r in range(8)):
        assert len(d.trays) == 18 and d.switch_trays == 9 and d.chips == 18
        assert d.trays[0] == f"node-{18 * r + 1:03d}"
        assert all(t.domain_of(tray) is d for tray in d.trays)
    # the scale-out fabric: one leaf per rail per rack, non-blocking (18 spines)
    tiers = [s.tier for s in t.switches.values()]
    assert (tiers.count("leaf"), tiers.count("spine")) == (32, 18)
    assert t.node_leaves("node-019") == ("leaf-1-0", "leaf-1-1", "leaf-1-2", "leaf-1-3")
    assert not any("nvsw" in s for s in t.switches)  # NVSwitch trays are not scale-out switches


def test_topologies_without_domains_are_unchanged():
    for name in bundled_topologies():
        t = load_topology(name)
        if name.startswith("gb200"):
            continue
        assert t.domains == {} and t.domain_of(next(iter(t.nodes))) is None
        assert "nvlink_domains" not in t.to_contract()


def test_show_json_lists_the_domains():
    result = CliRunner().invoke(app, ["topology", "show",
                                      str(TOPOLOGY_DIR / "gb200-nvl72-8.yaml"), "--json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [d["name"] for d in doc["nvlink_domains"]] == [f"rack-{r}" for r in range(8)]
    assert doc["nvlink_domains"][1]["trays"][:2] == ["node-019", "node-020"]
    assert doc["nvlink_domains"][0]["ports_per_gpu"] == 18


def test_wiring_rule_port_p_goes_to_chip_p():
    d = NvlDomain("rack-0", ("a", "b"))
    ports = list(d.ports())
    assert len(ports) == 2 * 4 * 18
    assert all(p.chip == p.port for p in ports)
    assert d.chip_of(7) == (3, 1) and d.chip_name(7) == "rack-0-nvsw-3/1"
    assert d.ports_of_switch_tray(3) == (6, 7)
    # every GPU has exactly one port on every chip (the NVL72's full bipartite wiring)
    for tray in d.trays:
        for g in range(4):
            assert sorted(p.chip for p in ports if (p.tray, p.gpu) == (tray, g)) == list(range(18))
    assert ports[0].name == "a/gpu0/nvl0"


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(1, 4), st.integers(1, 40))
def test_every_port_lands_on_one_chip_of_one_switch_tray(switch_trays, per_tray, ports):
    d = NvlDomain("r", ("t",), 2, switch_trays, per_tray, ports)
    for p in range(ports):
        t, k = d.chip_of(p)
        assert 0 <= t < switch_trays and 0 <= k < per_tray
        assert p in d.ports_of_switch_tray(t)
    assert sum(len(d.ports_of_switch_tray(t)) for t in range(switch_trays)) == ports


def test_generator_parameters():
    t = generate({"kind": "nvl72", "racks": 3, "trays_per_rack": 4, "gpus_per_tray": 2,
                  "nics_per_tray": 2, "trays_per_leaf": 8, "spines": 2, "nic_gbps": 200},
                 name="x", fabric="roce")
    assert len(t.nodes) == 12 and t.gpus_per_node == 2 and t.rails == 2
    assert [d.trays for d in t.domains.values()][2] == ("node-009", "node-010", "node-011",
                                                        "node-012")
    assert {nic.gbps for nic in t.nics.values()} == {200.0}
    assert sum(s.tier == "spine" for s in t.switches.values()) == 2


@pytest.mark.parametrize(("gen", "field", "words"), [
    ({"kind": "nvl72"}, "generator.racks", "missing required field"),
    ({"kind": "nvl72", "racks": 0}, "generator.racks", "must be >= 1"),
    ({"kind": "nvl72", "racks": 1, "trays": 9}, "generator.trays", "unknown field"),
])
def test_bad_generator_fields_name_the_field(gen, field, words):
    with pytest.raises(ConfigError) as info:
        topology_from_dict({"name": "x", "fabric": "infiniband", "generator": gen},
                           source="g.yaml")
    msg = str(info.value)
    assert msg.startswith(f"g.yaml:{field}: ") and words in msg and "\n" not in msg


def _explicit(domains: list) -> dict:
    return {"name": "two", "fabric": "roce", "gpus_per_node": 4,
            "nodes": [{"name": n, "nics": ["eth0"]} for n in ("a", "b", "c")],
            "switches": [{"name": "leaf", "tier": "leaf"}],
            "links": [{"a": f"{n}/eth0", "b": "leaf", "gbps": 400} for n in ("a", "b", "c")],
            "nvlink_domains": domains}


def test_explicit_domains_load():
    t = topology_from_dict(_explicit([{"name": "r0", "trays": ["a", "b"]},
                                      {"name": "r1", "trays": ["c"], "switch_trays": 4}]),
                           source="e.yaml")
    assert t.domains["r0"].trays == ("a", "b") and t.domains["r1"].switch_trays == 4
    assert t.domain_of("c").name == "r1"


@pytest.mark.parametrize(("domains", "field", "words"), [
    ([{"name": "r0", "trays": ["a", "zz"]}], "nvlink_domains[0].trays[1]", "unknown node 'zz'"),
    ([{"name": "r0", "trays": ["a"]}, {"name": "r1", "trays": ["a"]}],
     "nvlink_domains[1].trays[0]", "already a tray of domain 'r0'"),
    ([{"name": "r0", "trays": ["a"]}, {"name": "r0", "trays": ["b"]}],
     "nvlink_domains[1].name", "duplicate domain name"),
    ([{"name": "r0", "trays": ["a"], "gpus_per_tray": 8}], "nvlink_domains[0].trays[0]",
     "has 4 GPUs, the domain's trays 8"),
    ([{"name": "r/0", "trays": ["a"]}], "nvlink_domains[0].name", "must not contain '/'"),
    ([{"name": "r0", "trays": []}], "nvlink_domains[0].trays", "at least 1"),
])
def test_bad_domains_name_the_file_and_field(domains, field, words):
    with pytest.raises(ConfigError) as info:
        topology_from_dict(_explicit(domains), source="e.yaml")
    msg = str(info.value)
    assert msg.startswith(f"e.yaml:{field}: "), msg
    assert words in msg and "\n" not in msg


def test_nvl72_generator_refuses_a_second_domain_list():
    data = {"name": "x", "fabric": "infiniband", "generator": {"kind": "nvl72", "racks": 1},
            "nvlink_domains": [{"name": "r", "trays": ["node-001"]}]}
    with pytest.raises(ConfigError, match="nvl72 generator makes the NVLink domains"):
        topology_from_dict(data, source="g.yaml")


def test_domains_import_from_nvidia_smi_q_fabric_fields():
    healthy = (FIXTURES / "nvidia-smi-q-gb200-fabric-healthy.txt").read_text()
    split = (FIXTURES / "nvidia-smi-q-gb200-split-clique.txt").read_text()
    h200 = (FIXTURES / "nvidia-smi-q-h200-zero-cluster.txt").read_text()
    other = healthy.replace("9c6f5af3-53bf-49b5-a436-b66766c413c3",
                            "6a130f54-faaa-4b8f-847f-be44ab70f917")
    got = domains_from_smi({"t3": healthy, "t1": healthy, "t2": other, "t4": split,
                            "hgx": h200})
    assert {n: d.trays for n, d in got.domains.items()} == {"rack-0": ("t1", "t3"),
                                                             "rack-1": ("t2",)}
    assert got.domains["rack-0"].gpus_per_tray == 4
    assert set(got.unplaced) == {"t4", "hgx"}
    assert "disagree" in got.unplaced["t4"] and "all zeros" in got.unplaced["hgx"]


def test_the_explicit_yaml_keeps_the_domains():
    from fabriccheck.topology.dump import topology_to_yaml
    from fabriccheck.topology.fields import parse_yaml

    t = generate({"kind": "nvl72", "racks": 2, "trays_per_rack": 3}, name="x",
                 fabric="infiniband")
    back = topology_from_dict(parse_yaml(topology_to_yaml(t), source="x.yaml"), source="x.yaml")
    assert back.domains == t.domains and len(back.domains) == 2
