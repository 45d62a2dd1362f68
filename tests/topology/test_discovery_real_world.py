"""ibnetdiscover and LLDP import on what real captures look like: labels, lost tabs, loopbacks,
switch-blocks-only dumps, truncation, duplicate GUIDs, speeds, tiers, chassis ids, GPUs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from fabriccheck.errors import ConfigError
from fabriccheck.topology.discovery.common import read_bounded, tiers_from_hosts
from fabriccheck.topology.discovery.ibnetdiscover import import_ibnetdiscover
from fabriccheck.topology.discovery.lldp import import_lldp
from fabriccheck.topology.fields import parse_yaml
from fabriccheck.topology.load import topology_from_dict
from tests.conftest import read_fixture

NDR = "ibnetdiscover/ibnetdiscover_ndr_labels_crlf_tabs_lost_loopback_synthetic.txt"
BLOCKS = "ibnetdiscover/ibnetdiscover_switch_blocks_only_qdr_synthetic.txt"


def _stage(tmp_path: Path, relpath: str, text: str | None = None) -> Path:
    path = tmp_path / Path(relpath).name
    path.write_bytes((text if text is not None else read_fixture(relpath)).encode())
    return path


def _load(text: str):
    return topology_from_dict(parse_yaml(text, "t"), source="t")


def test_ndr_labels_lost_tabs_crlf_loopback_and_speed_disagreement(tmp_path):
    text, warnings = import_ibnetdiscover(_stage(tmp_path, NDR))
    topo = _load(text)
    assert sorted(topo.nics) == ["gpu-001/mlx5_0", "gpu-002/mlx5_0"]
    assert {s.name: s.tier for s in topo.switches.values()} == {"leaf-01": "leaf",
                                                                "spine-01": "spine"}
    assert topo.links[("leaf-01", "spine-01")].gbps == 800  # two parallel 4xNDR cables
    # the two ends disagree (4xNDR / 1xSDR): the lower is kept, and said
    assert topo.nics["gpu-002/mlx5_0"].gbps == 2.5
    assert any("kept the lower" in w for w in warnings)
    (loop,) = [w for w in warnings if "loopback" in w]
    assert "leaf-01" in loop and "port 5 to port 6" in loop and loop.startswith("line ")
    assert topo.gpus_per_node == 0 and "GPUs per node unknown" in text


def test_gpus_per_node_when_given(tmp_path):
    text, _ = import_ibnetdiscover(_stage(tmp_path, NDR), gpus_per_node=4)
    topo = _load(text)
    assert topo.gpus_per_node == 4 and {n.gpus for n in topo.nodes.values()} == {4}


def test_switch_blocks_only_dump_keeps_its_hosts(tmp_path):
    text, warnings = import_ibnetdiscover(_stage(tmp_path, BLOCKS))
    topo = _load(text)
    assert sorted(topo.nodes) == ["blade-01", "blade-02", "blade-03"]
    assert topo.links[("blade-sw-a", "blade-sw-b")].gbps == 80
    assert any("taken from the switches' port lines" in w for w in warnings)


def test_cut_mid_record_is_refused_naming_the_line(tmp_path):
    full = read_fixture(BLOCKS)
    cut = full[: full.index("lid 15 4xQDR") + len("lid 15 4")]
    path = _stage(tmp_path, "cut.txt", cut)
    with pytest.raises(ConfigError, match=rf"^{path}:\d+: output cut mid-record") as e:
        import_ibnetdiscover(path)
    assert f":{cut.count(chr(10)) + 1}:" in str(e.value)


def test_switch_without_a_record_means_truncated(tmp_path):
    full = read_fixture(BLOCKS)
    first = full[: full.index("\nvendid", 10)] + "\n"  # blade-sw-b's block gone
    path = _stage(tmp_path, "half.txt", first)
    with pytest.raises(ConfigError, match=r":6: switch S-0002c9020040c790 is cabled here but "
                                          r"has no record"):
        import_ibnetdiscover(path)


def test_duplicate_guid_refused_naming_both(tmp_path):
    full = read_fixture(NDR)
    dup = full.replace("a088c20300000002", "a088c20300000001")
    path = _stage(tmp_path, "dup.txt", dup)
    with pytest.raises(ConfigError, match="GUID H-a088c20300000001 is used twice") as e:
        import_ibnetdiscover(path)
    assert "'gpu-001 mlx5_0'" in str(e.value) and "'gpu-002 mlx5_0'" in str(e.value)
    blocks = read_fixture(BLOCKS).replace("H-0002c9030003bf7a", "H-0002c903000413c0")
    with pytest.raises(ConfigError, match="used twice: 'blade-02 HCA-1' .line 8. and "
                                          "'blade-01 HCA-1' .line 9."):
        import_ibnetdiscover(_stage(tmp_path, "dup2.txt", blocks))


def test_cli_errors_are_one_line_with_file_and_line(tmp_path):
    path = _stage(tmp_path, "dup.txt", read_fixture(NDR).replace("00000002", "00000001"))
    out = tmp_path / "o.yaml"
    r = CliRunner().invoke(app, ["topology", "import", "--ibnetdiscover", str(path), "-o",
                                 str(out)])
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and not out.exists()
    assert lines[0].startswith(f"error: {path}:") and "used twice" in lines[0]


def test_tiers_are_hop_distance_from_hosts():
    adj = {"h/0": {"l1"}, "l1": {"h/0", "s1"}, "s1": {"l1", "c1", "l2"}, "c1": {"s1"},
           "l2": {"s1", "g/0"}, "g/0": {"l2"}, "x": {"y"}, "y": {"x"}}
    assert tiers_from_hosts(adj) == {"l1": "leaf", "l2": "leaf", "s1": "spine", "c1": "core"}
    assert tiers_from_hosts(adj, {"c1": "spine"})["c1"] == "spine"


def test_lldp_switch_keyed_by_chassis_id(tmp_path):
    def nb(iface, name, mac):
        chassis = {name: {"id": {"type": "mac", "value": mac}}} if name else {
            "id": {"type": "mac", "value": mac}}
        return {iface: {"chassis": chassis, "port": {"id": {"type": "ifname", "value": "p1"}}}}

    data = {"lldp": {"interface": [nb("eth0", "leaf-a", "00:00:00:00:00:01"),
                                   nb("eth1", None, "00:00:00:00:00:01"),  # same chassis
                                   nb("eth2", "leaf-b", "00:00:00:00:00:02"),
                                   nb("eth3", "leaf-b", "00:00:00:00:00:03")]}}  # same name
    path = tmp_path / "host1.json"
    path.write_text(json.dumps(data))
    text, _ = import_lldp([path], spines=1)
    topo = _load(text)
    assert topo.attachment["host1/eth0"] == topo.attachment["host1/eth1"] == "leaf-a"
    assert topo.attachment["host1/eth2"] != topo.attachment["host1/eth3"]
    assert topo.gpus_per_node == 0


def test_lldp_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text('{"lldp": {"interface": [\n{"eth0": {"chassis": ')
    with pytest.raises(ConfigError, match=rf"^{path}:2: invalid JSON: .*cut short"):
        import_lldp([path])


def test_oversized_or_endless_input_is_refused(tmp_path):
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(ConfigError, match=r"big.txt: more than 1024 bytes"):
        read_bounded(big, max_bytes=1024)
    with pytest.raises(ConfigError, match="^/dev/zero: binary data"):
        read_bounded(Path("/dev/zero"))
