"""The faults file: loading, shape checks, name validation against a topology, ground truth."""

from __future__ import annotations

import pytest

from fabriccheck.errors import ConfigError
from fabriccheck.faults import KINDS, Fault, FaultSet, Noise, load_faults
from fabriccheck.topology.generators import generate

DESIGN_EXAMPLE = """\
noise: {jitter: 0.03, glitch_rate: 0.01}
faults:
  - {kind: nic_degraded, nic: node-017/mlx5_3, factor: 0.25}
  - {kind: node_slow, node: node-040, factor: 0.5}
  - {kind: node_hang, node: node-033}
  - {kind: node_unreachable, node: node-050}
  - {kind: link_degraded, link: [leaf-1-2, spine-3], factor: 0.5}
  - {kind: nic_down, nic: node-018/mlx5_0}
  - {kind: link_down, link: [spine-0, leaf-0-0]}
  - {kind: link_flapping, link: [leaf-1-1, spine-2], probability: 0.4}
"""


@pytest.fixture(scope="module")
def topo64():
    return generate({"kind": "rail-optimized", "nodes": 64, "rails": 8, "nodes_per_leaf": 32,
                     "spines": 8, "nic_gbps": 400, "uplink_gbps": 400},
                    name="t64", fabric="infiniband")


def test_design_example_loads_and_validates(tmp_path, topo64):
    path = tmp_path / "faults.yaml"
    path.write_text(DESIGN_EXAMPLE)
    fs = load_faults(path).validate(topo64)
    assert fs.noise == Noise(jitter=0.03, glitch_rate=0.01)
    assert [f.kind for f in fs.faults] == [
        "nic_degraded", "node_slow", "node_hang", "node_unreachable", "link_degraded",
        "nic_down", "link_down", "link_flapping"]
    assert fs.faults[0] == Fault("nic_degraded", nic="node-017/mlx5_3", factor=0.25)
    assert fs.faults[4].link == ("leaf-1-2", "spine-3")
    assert fs.faults[6].link == ("leaf-0-0", "spine-0")  # normalized to the sorted key
    assert fs.source == str(path)
    # ground truth: what a perfect tool reports
    assert fs.bad_nodes() == ("node-033", "node-040")
    assert fs.bad_nics() == ("node-017/mlx5_3", "node-018/mlx5_0")
    assert fs.bad_links() == (("leaf-0-0", "spine-0"), ("leaf-1-1", "spine-2"),
                              ("leaf-1-2", "spine-3"))
    assert fs.hung_nodes() == ("node-033",)
    assert fs.unreachable_nodes() == ("node-050",)
    assert fs.drain_nodes() == ("node-017", "node-018", "node-033", "node-040")


def test_empty_file_and_no_noise(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    fs = load_faults(path)
    assert fs.faults == () and fs.noise == Noise() and not fs
    assert FaultSet.from_dict({"faults": []}).bad_nodes() == ()


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"faults": [{"kind": "nic_melted", "nic": "node-001/mlx5_0"}]}, "faults[0].kind",
         "unknown kind"),
        ({"faults": [{"kind": "nic_down"}]}, "faults[0].nic", "needs 'nic'"),
        ({"faults": [{"kind": "node_hang", "node": "node-001", "factor": 0.5}]},
         "faults[0].factor", "takes no field"),
        ({"faults": [{"kind": "nic_degraded", "nic": "node-001/mlx5_0", "factor": 1.5}]},
         "faults[0].factor", "out of range"),
        ({"faults": [{"kind": "nic_degraded", "nic": "node-001/mlx5_0", "factor": "half"}]},
         "faults[0].factor", "must be a number"),
        ({"faults": [{"kind": "nic_down", "nic": "node-001"}]}, "faults[0].nic", "node/nic"),
        ({"faults": [{"kind": "link_down", "link": ["spine-0"]}]}, "faults[0].link",
         "two different endpoints"),
        ({"faults": [{"kind": "link_flapping", "link": ["a", "b"], "probability": 0}]},
         "faults[0].probability", "out of range"),
        ({"noise": {"jitter": -0.1}}, "noise.jitter", "out of range"),
        ({"noise": {"sigma": 0.1}}, "noise.sigma", "unknown key"),
        ({"fault": []}, "fault", "unknown key"),
        ({"faults": {"kind": "nic_down"}}, "faults", "must be a list"),
        ({"faults": ["nic_down"]}, "faults[0]", "must be a mapping"),
    ],
)
def test_bad_shapes_name_file_and_field(data, field, words):
    with pytest.raises(ConfigError) as info:
        FaultSet.from_dict(data, source="f.yaml")
    msg = str(info.value)
    assert msg.startswith(f"f.yaml:{field}: "), msg
    assert words in msg
    assert "\n" not in msg


def test_every_kind_is_accepted_with_its_fields():
    example = {"nic": "node-001/mlx5_0", "node": "node-001", "link": ["leaf-0-0", "spine-0"],
               "factor": 0.5, "probability": 0.3}
    for kind, fields in KINDS.items():
        fs = FaultSet.from_dict({"faults": [{"kind": kind, **{f: example[f] for f in fields}}]})
        assert fs.faults[0].kind == kind
        assert fs.faults[0].target is not None


@pytest.mark.parametrize(
    ("fault", "field", "words"),
    [
        ({"kind": "nic_down", "nic": "node-001/mlx5_9"}, "faults[1].nic", "unknown NIC"),
        ({"kind": "nic_down", "nic": "node-999/mlx5_0"}, "faults[1].nic", "unknown NIC"),
        ({"kind": "node_hang", "node": "node-999"}, "faults[1].node", "unknown node"),
        ({"kind": "link_down", "link": ["leaf-0-0", "leaf-1-0"]}, "faults[1].link", "no link"),
    ],
)
def test_validate_names_against_topology(topo64, fault, field, words):
    fs = FaultSet.from_dict({"faults": [{"kind": "node_hang", "node": "node-001"}, fault]},
                            source="lab.yaml")
    with pytest.raises(ConfigError) as info:
        fs.validate(topo64)
    assert str(info.value).startswith(f"lab.yaml:{field}: {words}")
    assert info.value.hint


def test_unknown_nic_hint_lists_the_nodes_nics(topo64):
    fs = FaultSet.from_dict({"faults": [{"kind": "nic_down", "nic": "node-001/eth0"}]})
    with pytest.raises(ConfigError) as info:
        fs.validate(topo64)
    assert "mlx5_0" in info.value.hint


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read faults file"):
        load_faults(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("faults: [ {kind: nic_down\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_faults(bad)


def test_to_dict_round_trips(tmp_path):
    path = tmp_path / "faults.yaml"
    path.write_text(DESIGN_EXAMPLE)
    fs = load_faults(path)
    again = FaultSet.from_dict(fs.to_dict(), source=fs.source)
    assert again == fs
    assert fs.to_dict()["faults"][4] == {"kind": "link_degraded", "link": ["leaf-1-2", "spine-3"],
                                         "factor": 0.5}


def test_doctests():
    import doctest

    import fabriccheck.faults as mod

    assert doctest.testmod(mod).failed == 0
