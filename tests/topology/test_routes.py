"""Routes from forwarding tables: the LFT parsers on the repo's fixtures, resolution over
imported port numbers, the CLI's --routes and bad files (one line, exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from fabriccheck.errors import ConfigError
from fabriccheck.models import link_key
from fabriccheck.topology import generate, load_topology
from fabriccheck.topology.routes import parse_lft, read_routes, resolve_routes

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "routes"
IBNET = FIX / "ibnetdiscover_fattree_2x2.txt"
DUMP = FIX / "dump_lfts_fattree_2x2.txt"
FDBS = FIX / "ibdiagnet2_fattree_2x2.fdbs"


def imported(tmp_path: Path, *routes: Path) -> Path:
    out = tmp_path / "fabric.yaml"
    args = ["topology", "import", "--ibnetdiscover", str(IBNET), "-o", str(out)]
    for r in routes:
        args += ["--routes", str(r)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    return out


def test_dump_lfts_parser_reads_every_switch_and_destination():
    dump = parse_lft(DUMP.read_text())
    assert [t.desc.split(";")[1].split(":")[0] for t in dump.tables] == [
        "ib-leaf-1", "ib-leaf-2", "ib-spine-1", "ib-spine-2"]
    leaf1 = dump.tables[0]
    assert leaf1.lid == 1 and leaf1.guid == "0xb83fd20300aa0001"
    assert leaf1.rows[0x0D][0] == 31 and leaf1.rows[0x0B][0] == 1
    assert dump.lid_desc[0x0E] == ("Channel Adapter", "gpu-04 mlx5_0")


def test_opensm_style_rows_with_hash_and_no_parentheses_parse_alike():
    text = ("Unicast lids [0-14] of switch Lid 1 guid 0x00000000000000aa ('MF0;sw:X/U1'):\n"
            "0x000b 001 # Channel Adapter portguid 0x00000000000000bb: 'gpu-01 mlx5_0'\n"
            "0x000c 007 # unknown node and type\n14 lids dumped\n")
    dump = parse_lft(text)
    assert dump.tables[0].desc == "MF0;sw:X/U1"
    assert dump.tables[0].rows == {0x0B: (1, 2), 0x0C: (7, 3)}
    assert dump.lid_desc == {0x0B: ("Channel Adapter", "gpu-01 mlx5_0")}


def test_lft_routes_are_followed_not_the_model(tmp_path):
    topo = load_topology(imported(tmp_path, DUMP))
    assert topo.routing == "lft"
    # the tables send leaf-1's traffic up spine-1 and leaf-2's up spine-2: not D-mod-K
    up = topo.route("gpu-01/mlx5_0", "gpu-04/mlx5_0")
    back = topo.route("gpu-04/mlx5_0", "gpu-01/mlx5_0")
    assert link_key("ib-leaf-1", "ib-spine-1") in up
    assert link_key("ib-leaf-2", "ib-spine-2") in back
    model = load_topology(imported(tmp_path))
    assert model.routing == "d-mod-k"
    assert model.route("gpu-01/mlx5_0", "gpu-04/mlx5_0") != up


def test_fdbs_resolve_through_an_lft_dump_given_with_them(tmp_path):
    a = load_topology(imported(tmp_path, FDBS, DUMP))
    b = load_topology(imported(tmp_path, DUMP))
    assert a.lft == b.lft and a.routing == "lft"


def test_a_generated_topology_has_no_ports_to_follow():
    topo = generate({"kind": "fat-tree", "nodes": 4, "rails": 1, "nodes_per_leaf": 2,
                     "spines": 2}, name="t", fabric="infiniband")
    dump, source = read_routes([DUMP])
    with pytest.raises(ConfigError, match="no port numbers"):
        resolve_routes(dump, topo, source=source)


@pytest.mark.parametrize(("text", "expect"), [
    ("hello\n", "line 1: not a forwarding-table line"),
    ("0x000b 001 : (Channel Adapter portguid 0x1: 'gpu-01 mlx5_0')\n",
     "line 1: a table row before any switch heading"),
    ("", "no forwarding table"),
    ("Unicast lids [0x0-0xe] of switch Lid 9 guid 0x99 (MF0;ib-leaf-9:X/U1):\n"
     "0x000b 001 : (Channel Adapter portguid 0x1: 'gpu-01 mlx5_0')\n",
     "line 1: switch 'ib-leaf-9' is not in topology"),
    ("Unicast lids [0x0-0xe] of switch Lid 1 guid 0x1 (MF0;ib-leaf-1:X/U1):\n"
     "0x000b 009 : (Channel Adapter portguid 0x1: 'gpu-01 mlx5_0')\n",
     "line 2: switch 'ib-leaf-1' sends LID 0x000b out of port 9"),
])
def test_bad_route_files_are_one_line_naming_file_and_line_exit_2(tmp_path, text, expect):
    bad = tmp_path / "routes.txt"
    bad.write_text(text)
    res = subprocess.run(
        [sys.executable, "-m", "fabriccheck", "topology", "import", "--ibnetdiscover",
         str(IBNET), "--routes", str(bad)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and expect in lines[0], res.stderr
    assert "Traceback" not in res.stderr


def test_routes_key_on_a_roce_topology_or_a_missing_file_is_refused(tmp_path):
    path = imported(tmp_path, DUMP)
    text = path.read_text()
    (tmp_path / "roce.yaml").write_text(text.replace("fabric: infiniband", "fabric: roce"))
    with pytest.raises(ConfigError, match="routes"):
        load_topology(tmp_path / "roce.yaml")
    (tmp_path / "gone.yaml").write_text(text.replace("dump_lfts_fattree_2x2.txt", "nope.txt"))
    with pytest.raises(ConfigError, match="no such routes file"):
        load_topology(tmp_path / "gone.yaml")


def test_ports_survive_import_show_and_name_the_cable(tmp_path):
    topo = load_topology(imported(tmp_path))
    link = topo.links[link_key("ib-leaf-1", "ib-spine-2")]
    assert link.port_at("ib-leaf-1") == (32,) and link.port_at("ib-spine-2") == (1,)
    assert "ib-leaf-1 port 32" in link.describe() and "ib-spine-2 port 1" in link.describe()
    shown = [x for x in topo.to_contract()["links"]
             if {x["a"], x["b"]} == {"ib-leaf-1", "ib-spine-2"}]
    assert shown and {tuple(shown[0]["a_port"]), tuple(shown[0]["b_port"])} == {(32,), (1,)}
