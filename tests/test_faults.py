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
        ({"faults": [{"kind": "nic_down"}]}, "faults[0].nic", "missing required field"),
        ({"faults": [{"kind": "node_hang", "node": "node-001", "factor": 0.5}]},
         "faults[0].factor", "unknown field 'factor'"),
        ({"faults": [{"kind": "nic_degraded", "nic": "node-001/mlx5_0", "factor": 1.5}]},
         "faults[0].factor", "must be < 1, got 1.5"),
        ({"faults": [{"kind": "nic_degraded", "nic": "node-001/mlx5_0", "factor": "half"}]},
         "faults[0].factor", "expected a number"),
        ({"faults": [{"kind": "nic_down", "nic": "node-001"}]}, "faults[0].nic", "node/nic"),
        ({"faults": [{"kind": "link_down", "link": ["spine-0"]}]}, "faults[0].link",
         "two different endpoints"),
        ({"faults": [{"kind": "link_flapping", "link": ["a", "b"], "probability": 0}]},
         "faults[0].probability", "must be positive"),
        ({"noise": {"jitter": -0.1}}, "noise.jitter", "must be >= 0"),
        ({"noise": {"sigma": 0.1}}, "noise.sigma", "unknown field"),
        ({"fault": []}, "fault", "did you mean 'faults'"),
        ({"faults": {"kind": "nic_down"}}, "faults", "expected a list"),
        ({"faults": ["nic_down"]}, "faults[0]", "expected a mapping"),
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
               "factor": 0.5, "probability": 0.3, "width": 8, "rate": 5.0,
               "reason": "thermal", "links": 2, "per_hour": 6.0, "xid": 79, "to": "socket",
               "mtu": 1500, "version": "28.39.1002", "gpu": 1, "port": 3, "rack": "rack-0",
               "tray": 2}
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
    with pytest.raises(ConfigError, match="malformed YAML"):
        load_faults(bad)


def test_to_dict_round_trips(tmp_path):
    path = tmp_path / "faults.yaml"
    path.write_text(DESIGN_EXAMPLE)
    fs = load_faults(path)
    again = FaultSet.from_dict(fs.to_dict(), source=fs.source)
    assert again == fs
    assert fs.to_dict()["faults"][4] == {"kind": "link_degraded", "link": ["leaf-1-2", "spine-3"],
                                         "factor": 0.5}


NODE_LOCAL = """\
noise: {background: none}
faults:
  - {kind: xid, node: node-003, xid: 13}
  - {kind: xid, node: node-001, xid: 79}
  - {kind: xid, node: node-001, xid: 48}
  - {kind: gpu_throttle, node: node-004, reason: hw_power_brake}
  - {kind: row_remap_pending, node: node-005}
  - {kind: nvlink_down, node: node-006, links: 3}
  - {kind: port_flap, nic: node-007/mlx5_2, per_hour: 6}
  - {kind: gpu_missing, node: node-008}
"""


def test_node_local_kinds_load_with_their_ground_truth(tmp_path, topo64):
    path = tmp_path / "node.yaml"
    path.write_text(NODE_LOCAL)
    fs = load_faults(path).validate(topo64)
    assert fs.noise == Noise(background="none") and fs  # background off is a non-default
    assert fs.faults[3] == Fault("gpu_throttle", node="node-004", reason="hw_power_brake")
    assert fs.faults[5] == Fault("nvlink_down", node="node-006", links=3)
    assert fs.faults[6] == Fault("port_flap", nic="node-007/mlx5_2", per_hour=6)
    # an Xid's severity depends on its number: the caller judges it, the truth only lists it
    assert fs.xids() == {"node-001": [79, 48], "node-003": [13]}
    assert fs.bad_nodes() == ("node-004", "node-005", "node-006", "node-008")
    assert fs.bad_nics() == () and fs.warned_nics() == ("node-007/mlx5_2",)  # a flap: listed
    assert fs.drain_nodes() == ("node-004", "node-005", "node-006", "node-008")
    assert FaultSet.from_dict(fs.to_dict(), source=fs.source) == fs
    assert fs.to_dict()["noise"] == {"jitter": 0.0, "glitch_rate": 0.0, "background": "none"}


def test_background_defaults_on_and_an_empty_set_is_still_empty():
    fs = FaultSet.from_dict({"noise": {"jitter": 0.01}})
    assert fs.noise.background == "default" and Noise().background == "default"
    assert not FaultSet.from_dict({}) and FaultSet.from_dict({}).xids() == {}


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"kind": "xid", "node": "node-001", "xid": 0}, "faults[0].xid",
         "must be between 1 and 999, got 0"),
        ({"kind": "xid", "node": "node-001", "xid": 1000}, "faults[0].xid",
         "must be between 1 and 999"),
        ({"kind": "xid", "node": "node-001", "xid": True}, "faults[0].xid",
         "expected an integer"),
        ({"kind": "xid", "node": "node-001", "xid": "79"}, "faults[0].xid",
         "expected an integer"),
        ({"kind": "xid", "node": "node-001"}, "faults[0].xid", "missing required field"),
        ({"kind": "gpu_throttle", "node": "node-001", "reason": "hot"}, "faults[0].reason",
         "unknown value 'hot'"),
        ({"kind": "nvlink_down", "node": "node-001", "links": 0}, "faults[0].links",
         "must be >= 1"),
        ({"kind": "nvlink_down", "node": "node-001", "links": 19}, "faults[0].links",
         "must be <= 18"),
        ({"kind": "port_flap", "nic": "node-001/mlx5_0", "per_hour": 0}, "faults[0].per_hour",
         "must be positive"),
        ({"kind": "port_flap", "nic": "node-001", "per_hour": 2}, "faults[0].nic", "node/nic"),
        ({"kind": "row_remap_pending", "node": "node-001", "links": 2}, "faults[0].links",
         "unknown field 'links'"),
    ],
)
def test_node_local_kinds_bad_shapes_are_one_line(data, field, words):
    with pytest.raises(ConfigError) as info:
        FaultSet.from_dict({"faults": [data]}, source="f.yaml")
    msg = str(info.value)
    assert msg.startswith(f"f.yaml:{field}: ") and words in msg and "\n" not in msg, msg


def test_bad_background_names_the_choices():
    with pytest.raises(ConfigError) as info:
        FaultSet.from_dict({"noise": {"background": "off"}}, source="f.yaml")
    assert str(info.value).startswith("f.yaml:noise.background: unknown value 'off'")
    assert "default" in info.value.hint and "none" in info.value.hint


def test_doctests():
    import doctest

    import fabriccheck.faults as mod

    assert doctest.testmod(mod).failed == 0


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("faults:\n  - {kind: [nic_down], nic: node-001/mlx5_0}\n", "faults[0].kind",
         "unknown kind"),
        ("faults:\n  - {kind: nic_down, nic: node-001/mlx5_0, nic: node-002/mlx5_0}\n", "line 2",
         "duplicate key 'nic'"),
        ("faults:\n  - {kind: node_slow, node: node-001, factor: true}\n", "faults[0].factor",
         "expected a number, got the boolean True"),
        ("faults:\n  - {kind: node_hang, nod: node-001}\n", "faults[0].nod", "did you mean 'node'"),
        ("noise: {jitter: 0.01, glitchrate: 0.1}\n", "noise.glitchrate", "'glitch_rate'"),
    ],
)
def test_bad_faults_files_one_line(tmp_path, text, field, words):
    path = tmp_path / "f.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_faults(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}:{field}") and words in msg and "\n" not in msg, msg


def test_faults_cli_bad_kind_is_exit_2_one_line(tmp_path, capsys):
    """DESIGN: a bad file is exit 2 and one line naming the file and field, never a traceback."""
    from fabriccheck.cli.main import main

    path = tmp_path / "f.yaml"
    path.write_text("faults:\n  - {kind: [nic_down], nic: node-001/mlx5_0}\n")
    code = main(["sweep", "--topology", "roce-rail-64", "--faults", str(path), "--json"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{path}:faults[0].kind: unknown kind" in err and "Traceback" not in err


def test_kinds_table_matches_the_models():
    from fabriccheck.schema.faults import FAULT_MODELS

    by_kind = {m.model_fields["kind"].annotation.__args__[0]: tuple(m.model_fields)[1:]
               for m in FAULT_MODELS}  # fmt: skip
    assert by_kind == KINDS
