"""NVLink-domain fault kinds: shapes and names checked with one-line errors, and the model values
the domain level will read (each GPU's NVLink bandwidth, trays cut off, the ground truth)."""

from __future__ import annotations

import pytest

from fabriccheck.errors import ConfigError
from fabriccheck.faults import FaultSet
from fabriccheck.faults_nvl import cut_off_trays, dead_ports, nvl_truth, nvlink_bandwidth
from fabriccheck.topology import generate, load_topology


@pytest.fixture(scope="module")
def racks2():
    return generate({"kind": "nvl72", "racks": 2}, name="nvl-2", fabric="infiniband")


ALL = [{"kind": "nvlink_port_down", "node": "node-003", "gpu": 2, "port": 17},
       {"kind": "nvswitch_down", "rack": "rack-1", "tray": 3},
       {"kind": "imex_missing", "node": "node-010"},
       {"kind": "clique_mismatch", "node": "node-025"},
       {"kind": "nvlink_degraded", "node": "node-030", "gpu": 0, "factor": 0.5}]


def test_every_nvl_kind_loads_validates_and_round_trips(racks2):
    fs = FaultSet.from_dict({"faults": ALL}, source="f.yaml").validate(racks2)
    assert [f.target for f in fs.faults] == ["node-003", "rack-1-nvsw-3", "node-010",
                                             "node-025", "node-030"]
    assert fs.to_dict()["faults"] == ALL
    assert FaultSet.from_dict(fs.to_dict()).faults == fs.faults
    # the scale-out ground truth is untouched by them (the domain level is not built)
    assert fs.bad_nodes() == () and fs.drain_nodes() == ()


@pytest.mark.parametrize(("fault", "field", "words"), [
    ({"kind": "nvlink_port_down", "node": "node-003", "gpu": 4, "port": 1}, "gpu",
     "node-003 has no GPU 4 (0 to 3)"),
    ({"kind": "nvlink_port_down", "node": "node-003", "gpu": 1, "port": 18}, "port",
     "no NVLink port 18 (0 to 17)"),
    ({"kind": "nvlink_port_down", "node": "node-003", "gpu": 1}, "port",
     "missing required field"),
    ({"kind": "nvswitch_down", "rack": "rack-7", "tray": 0}, "rack",
     "unknown NVLink domain 'rack-7' (one of: rack-0, rack-1)"),
    ({"kind": "nvswitch_down", "rack": "rack-1", "tray": 9}, "tray",
     "rack-1 has no NVSwitch tray 9 (0 to 8)"),
    ({"kind": "imex_missing", "node": "node-999"}, "node", "unknown node 'node-999'"),
    ({"kind": "nvlink_degraded", "node": "node-001", "gpu": 0, "factor": 1.5}, "factor",
     "must be < 1"),
    ({"kind": "clique_mismatch", "node": "node-001", "gpu": 0}, "gpu", "unknown field"),
])
def test_bad_fields_are_one_line_naming_file_and_field(racks2, fault, field, words):
    with pytest.raises(ConfigError) as info:
        FaultSet.from_dict({"faults": [fault]}, source="f.yaml").validate(racks2)
    msg = str(info.value)
    assert msg.startswith(f"f.yaml:faults[0].{field}: "), msg
    assert words in msg and "\n" not in msg


def test_nvl_kinds_need_a_topology_with_domains():
    fs = FaultSet.from_dict({"faults": [{"kind": "imex_missing", "node": "node-001"}]},
                            source="f.yaml")
    with pytest.raises(ConfigError) as info:
        fs.validate(load_topology("roce-rail-64"))
    assert str(info.value).startswith("f.yaml:faults[0].node: imex_missing needs NVLink domains")
    assert "gb200-nvl72-8" in str(info.value)


def test_a_node_outside_every_domain_is_refused():
    t = generate({"kind": "nvl72", "racks": 1}, name="x", fabric="infiniband")
    t.domains["rack-0"] = type(t.domains["rack-0"])("rack-0", ("node-001",))
    fs = FaultSet.from_dict({"faults": [{"kind": "clique_mismatch", "node": "node-002"}]})
    with pytest.raises(ConfigError, match="node-002 is a tray of no NVLink domain"):
        fs.validate(t)


def test_nvlink_bandwidth_model(racks2):
    fs = FaultSet.from_dict({"faults": ALL})
    bw = nvlink_bandwidth(fs.faults, racks2)
    assert bw[("node-003", 2)] == pytest.approx(17 / 18)
    assert bw[("node-030", 0)] == pytest.approx(16 / 18 * 0.5)  # rack-1: switch tray too
    rack1 = {k for k in bw if k[0] in racks2.domains["rack-1"].trays}
    assert len(rack1) == 18 * 4  # every GPU of the rack loses the switch tray's 2 ports
    assert bw[("node-020", 3)] == pytest.approx(16 / 18)
    assert ("node-001", 0) not in bw and ("node-003", 1) not in bw
    assert dead_ports(fs.faults, racks2)[("node-019", 0)] == {6, 7}


def test_degradations_compound_and_stay_above_zero(racks2):
    fs = FaultSet.from_dict({"faults": [
        {"kind": "nvlink_degraded", "node": "node-002", "gpu": 1, "factor": 0.5},
        {"kind": "nvlink_degraded", "node": "node-002", "gpu": 1, "factor": 0.5},
        *({"kind": "nvlink_port_down", "node": "node-002", "gpu": 1, "port": p}
          for p in range(9))]})
    assert nvlink_bandwidth(fs.faults, racks2)[("node-002", 1)] == pytest.approx(0.125)


def test_cut_off_trays_and_truth(racks2):
    fs = FaultSet.from_dict({"faults": ALL})
    assert cut_off_trays(fs.faults) == ("node-010", "node-025")
    truth = nvl_truth(fs.faults, racks2)
    assert truth == {"trays": ["node-003", "node-010", "node-025", "node-030"],
                     "switch_trays": ["rack-1-nvsw-3"],
                     "ports": ["node-003/gpu2/nvl17 -> rack-0-nvsw-8/1"],
                     "gpus": ["node-030/gpu0"]}
