"""Importing topologies from real ibnetdiscover and LLDP outputs (shared fixtures)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from fabriccheck.errors import ConfigError, ParseError
from fabriccheck.topology import load_topology
from fabriccheck.topology.discovery.ibnetdiscover import (
    import_ibnetdiscover,
    parse_ibnetdiscover,
)
from fabriccheck.topology.discovery.lldp import Neighbor, import_lldp, parse_lldp
from fabriccheck.topology.fields import parse_yaml
from fabriccheck.topology.load import topology_from_dict
from tests.conftest import read_fixture

IB = "ibnetdiscover/"
NDR = IB + "ibnetdiscover_ndr_dgx_h100_fabric_40switches_full.txt"
VOLTAIRE = IB + "ibnetdiscover_qdr_ddr_voltaire_11switches_generic_ca_names.txt"
EDR_PORTS = IB + "ibnetdiscover_p_ports_edr_excerpt_with_unlinked_ports.txt"
HDR_PORTS = IB + "ibnetdiscover_p_ports_hdr_excerpt_padded_names.txt"
SINGLE_CA = IB + "ibnetdiscover_gb200_single_ca_no_switch.txt"
LLDP_5NICS = "lldp/lldpcli_json0_roce_gpu_host_5nics_sonic_leafs.txt"
LLDP_MIXED = "lldp/lldpcli_json0_mixed_h3c_switch_and_host_peers.txt"
LLDP_KEYED = "lldp/lldpctl_json_single_iface_juniper_anonymized.txt"
LLDP_PLAIN = "lldp/lldpcli_show_neighbors_plain_cumulus_7ports.txt"


def stage(tmp_path: Path, relpath: str, name: str | None = None) -> Path:
    """Write a fixture (source line stripped) to a temporary file, as a user would have it."""
    path = tmp_path / (name or Path(relpath).name)
    path.write_text(read_fixture(relpath), encoding="utf-8")
    return path


def count_plain(text: str) -> dict:
    """Count a plain ibnetdiscover file by hand, independently of the parser under test."""
    switches, cas, leaf_ids, sw_cables, sw_pairs = set(), [], set(), set(), set()
    cur = None
    for line in text.splitlines():
        if line.startswith(("Switch", "Ca")):
            cur = line.split('"')[1]
            if line.startswith("Switch"):
                switches.add(cur)
            else:
                cas.append((cur, line.split('# "')[1].rstrip('"')))
        elif line.startswith("[") and cur in switches:
            peer = line.split('"')[1]
            port = int(line[1 : line.index("]")])
            peer_port = int(line.split('"[')[1].split("]")[0])
            if peer.startswith("S-"):
                sw_cables.add(tuple(sorted([(cur, port), (peer, peer_port)])))
                sw_pairs.add(tuple(sorted([cur, peer])))
            elif "Aggregation" not in line:
                leaf_ids.add(cur)
    agg = [c for c in cas if "Aggregation" in c[1]]
    named = [d for _, d in cas if re.fullmatch(r"\S+ (mlx5_\d+|HCA-\d+)", d)]
    generic = len(cas) - len(agg) - len(named)
    return {
        "switches": len(switches), "nics": len(cas) - len(agg), "leaves": len(leaf_ids),
        "nodes": len({d.split()[0] for d in named}) + generic,
        "switch_links": len(sw_pairs), "switch_cables": len(sw_cables),
    }


@pytest.mark.parametrize("relpath", [NDR, VOLTAIRE])
def test_ibnetdiscover_import_counts(tmp_path, relpath):
    expected = count_plain(read_fixture(relpath))
    text, warnings = import_ibnetdiscover(stage(tmp_path, relpath), name="fab")
    topo = topology_from_dict(parse_yaml(text, "imp.yaml"), source="imp.yaml")
    assert topo.fabric == "infiniband"
    assert len(topo.nodes) == expected["nodes"]
    assert len(topo.nics) == expected["nics"]
    assert len(topo.switches) == expected["switches"]
    assert len(topo.links) == expected["nics"] + expected["switch_links"]
    assert f"({expected['nics'] + expected['switch_cables']} cables)" in text
    tiers = Counter(s.tier for s in topo.switches.values())
    assert tiers["leaf"] == expected["leaves"]
    # tiers by distance: a spine touches a leaf, a core touches none
    adj = {s: set() for s in topo.switches}
    for a, b in topo.links:
        if a in adj and b in adj:
            adj[a].add(b)
            adj[b].add(a)
    for name, sw in topo.switches.items():
        if sw.tier == "spine":
            assert any(topo.switches[n].tier == "leaf" for n in adj[name])
        if sw.tier == "core":
            assert not any(topo.switches[n].tier == "leaf" for n in adj[name])
    assert any("generic description" in w for w in warnings)


def test_ibnetdiscover_ndr_fabric_names_tiers_and_speeds(tmp_path):
    text, warnings = import_ibnetdiscover(stage(tmp_path, NDR))
    topo = topology_from_dict(parse_yaml(text, "imp.yaml"), source="imp.yaml")
    assert "skipped 40 SHARP aggregation node(s)" in warnings
    # the graph-inferred tiers agree with the switch names
    for name, sw in topo.switches.items():
        assert sw.tier == ("leaf" if "IBLEAF" in name else "spine"), name
    assert Counter(s.tier for s in topo.switches.values()) == {"leaf": 31, "spine": 9}
    assert "A09-P1-IBLEAF-04-04" in topo.switches  # MF0;...:MQM9701/U1 cleaned
    nic = topo.nics["a08-p1-dgx-04-c01/mlx5_5"]
    assert nic.gbps == 400.0 and topo.leaf_of(nic.endpoint) == "A09-P1-IBLEAF-04-04"
    assert not any("Aggregation" in n for n in topo.nodes)
    # parallel cables merged: every leaf-spine pair here is cabled twice (2 x 400G)
    up = [lk for k, lk in topo.links.items() if k[0] in topo.switches and k[1] in topo.switches]
    speeds = {lk.gbps for lk in up}
    assert speeds <= {400.0, 800.0, 1200.0, 1600.0} and 800.0 in speeds
    # routes exist between hosts on different leaves
    a, b = "a08-p1-dgx-04-c01/mlx5_5", sorted(topo.nics)[-1]
    assert topo.route(a, b) is not None


def test_ibnetdiscover_voltaire_mixed_speeds(tmp_path):
    text, _ = import_ibnetdiscover(stage(tmp_path, VOLTAIRE))
    topo = topology_from_dict(parse_yaml(text, "v.yaml"), source="v.yaml")
    assert {n.gbps for n in topo.nics.values()} == {20.0, 40.0}  # 4xDDR and 4xQDR
    assert all(n.startswith("ca-") for n in topo.nodes)


def test_ibnetdiscover_ports_format_hdr(tmp_path):
    fabric = parse_ibnetdiscover(read_fixture(HDR_PORTS))
    assert fabric.format == "ports"
    assert len(fabric.cables) == 3  # two CA-SW cables and one SW-CA (aggregation)
    text, warnings = import_ibnetdiscover(stage(tmp_path, HDR_PORTS))
    topo = topology_from_dict(parse_yaml(text, "p.yaml"), source="p.yaml")
    assert list(topo.nodes) == ["worker20"]
    assert topo.leaf_of("worker20/mlx5_3") == "5FB0405-leaf-IB01"  # padding stripped
    assert topo.nics["worker20/mlx5_3"].gbps == 200.0
    assert any("no cable" in w for w in warnings)


def test_ibnetdiscover_ports_format_edr_excerpt(tmp_path):
    fabric = parse_ibnetdiscover(read_fixture(EDR_PORTS))
    assert len(fabric.cables) == 4  # each cable is listed from both ends; counted once
    kinds = Counter(d.kind for d in fabric.devices.values())
    assert kinds == {"ca": 3, "switch": 4}
    path = stage(tmp_path, EDR_PORTS)
    with pytest.raises(ConfigError, match="disconnected") as info:
        import_ibnetdiscover(path)  # an excerpt: p0001's leaf is cut off from the rest
    assert "--largest-component" in (info.value.hint or "")
    text, _ = import_ibnetdiscover(path, largest_component=True)
    topo = topology_from_dict(parse_yaml(text, "e.yaml"), source="e.yaml")
    assert sorted(topo.nodes) == ["o0001", "o0002"]
    assert {s.name: s.tier for s in topo.switches.values()} == {
        "ib-i1l1s01": "leaf", "ib-i1l2s01": "spine"}
    assert topo.nics["o0001/HCA-1"].gbps == 100.0


def test_ibnetdiscover_single_ca_and_wrong_tool_are_clear_errors(tmp_path):
    runner = CliRunner()
    path = stage(tmp_path, SINGLE_CA)
    result = runner.invoke(app, ["topology", "import", "--ibnetdiscover", str(path)])
    assert result.exit_code == 2
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: {path}: no switches") and "dgx-gb200-n01-c1 HCA-1" in first
    other = stage(tmp_path, IB + "iblinkinfo_qdr_is5035_ca_excerpt.txt")
    with pytest.raises(ConfigError, match=f"{other}: no Switch or Ca records"):
        import_ibnetdiscover(other)
    result = runner.invoke(app, ["topology", "import", "--ibnetdiscover", str(other)])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_cli_import_writes_a_loadable_file(tmp_path):
    out = tmp_path / "fabric.yaml"
    result = CliRunner().invoke(app, ["topology", "import", "--ibnetdiscover",
                                      str(stage(tmp_path, NDR)), "--name", "dgx",
                                      "--spec", "h100-ndr400-ib", "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    assert "warning: skipped 40 SHARP" in result.stderr
    topo = load_topology(out)
    assert topo.name == "dgx" and topo.spec == "h100-ndr400-ib" and len(topo.nodes) == 191
    shown = CliRunner().invoke(app, ["topology", "show", str(out), "--json"])
    assert len(json.loads(shown.stdout)["switches"]) == 40


# ---- LLDP ---------------------------------------------------------------------------------
def test_lldp_parsers_read_all_three_formats():
    five = parse_lldp(read_fixture(LLDP_5NICS))
    assert {(n.interface, n.sysname) for n in five.neighbors} == {
        ("ens1np0", "StorageSW"), ("ens841np0", "LEAF03"), ("ens842np0", "LEAF04"),
        ("ens110np0", "LEAF02"), ("ens108np0", "LEAF01")}
    assert five.neighbors[0].port_id_type == "local"
    keyed = parse_lldp(read_fixture(LLDP_KEYED))
    assert keyed.neighbors == [Neighbor("eno1", "router", "ge-1/0/1", "ifname")]
    plain = parse_lldp(read_fixture(LLDP_PLAIN))
    assert len(plain.neighbors) == 7
    assert plain.neighbors[0] == Neighbor("eth0", "PIONEERMS22", "swp47", "ifname")
    with pytest.raises(ParseError):
        parse_lldp(read_fixture("lldp/lldpctl_keyvalue_lldpd_0.5.7_vlan_key_collision_excerpt.txt"))


def test_lldp_import_needs_spines_and_says_so(tmp_path):
    path = stage(tmp_path, LLDP_5NICS, "gpu-01.json")
    with pytest.raises(ConfigError, match="disconnected") as info:
        import_lldp([path])
    assert "--spines" in (info.value.hint or "")
    text, warnings = import_lldp([path], spines=2, name="roce")
    assert any("switch-to-switch links are not visible from hosts" in w for w in warnings)
    topo = topology_from_dict(parse_yaml(text, "l.yaml"), source="l.yaml")
    assert topo.fabric == "roce" and list(topo.nodes) == ["gpu-01"]
    assert len(topo.nics) == 5
    assert Counter(s.tier for s in topo.switches.values()) == {"leaf": 5, "spine": 2}
    assert len(topo.links) == 5 + 5 * 2
    assert topo.leaf_of("gpu-01/ens841np0") == "LEAF03"


def test_lldp_import_folder_of_hosts_skips_host_peers(tmp_path):
    folder = tmp_path / "lldp"
    folder.mkdir()
    stage(folder, LLDP_5NICS, "gpu-01.json")
    stage(folder, LLDP_KEYED, "gpu-02.json")
    stage(folder, LLDP_MIXED, "gpu-03.json")
    text, warnings = import_lldp([folder], spines=1)
    topo = topology_from_dict(parse_yaml(text, "l.yaml"), source="l.yaml")
    assert sorted(topo.nodes) == ["gpu-01", "gpu-02", "gpu-03"]
    # gpu-03's two NICs facing another Linux host (port id type mac) are not fabric links
    assert [n.name for n in topo.nodes["gpu-03"].nics] == ["enp129s0f0"]
    assert sum("looks like a host" in w for w in warnings) == 2
    assert topo.switches["router"].tier == "leaf"


def test_lldp_uplinks_file_and_local_chassis(tmp_path):
    data = json.loads(read_fixture(LLDP_5NICS))
    data["local-chassis"] = [{"chassis": [{"name": [{"value": "dgx-a1"}]}]}]
    host = tmp_path / "whatever.json"
    host.write_text(json.dumps(data), encoding="utf-8")
    uplinks = tmp_path / "uplinks.yaml"
    uplinks.write_text(
        "".join(f"- {{a: {leaf}, b: SPINE-A, gbps: 800}}\n"
                for leaf in ("LEAF01", "LEAF02", "LEAF03", "LEAF04", "StorageSW")),
        encoding="utf-8",
    )
    out = tmp_path / "t.yaml"
    result = CliRunner().invoke(app, ["topology", "import", "--lldp", str(host), "--uplinks",
                                      str(uplinks), "--nic-gbps", "200", "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    topo = load_topology(out)
    assert list(topo.nodes) == ["dgx-a1"]
    assert topo.switches["SPINE-A"].tier == "spine"
    assert topo.links[("LEAF01", "SPINE-A")].gbps == 800
    assert {n.gbps for n in topo.nics.values()} == {200.0}
    bad = tmp_path / "bad-uplinks.yaml"
    bad.write_text("- {a: LEAF01, b: SPINE-A, gbps: -1}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["topology", "import", "--lldp", str(host), "--uplinks",
                                      str(bad)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {bad}:links[0].gbps: must be positive")


def test_import_needs_exactly_one_source():
    result = CliRunner().invoke(app, ["topology", "import"])
    assert result.exit_code == 2 and "exactly one of" in result.stderr
