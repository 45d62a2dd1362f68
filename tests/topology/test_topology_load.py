"""Loading and validating topology files: every bad-input kind is one line naming file and field."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from fabriccheck.errors import ConfigError
from fabriccheck.topology import bundled_topologies, load_topology
from tests.conftest import REPO

GOOD = """\
name: t
fabric: roce
spec: lab-tcp
gpus_per_node: 0
nodes:
  - {name: h1, nics: [{name: eth0, rail: 0, gbps: 1}]}
  - {name: h2, nics: [eth0]}
switches:
  - {name: leaf-1, tier: leaf}
  - {name: leaf-2, tier: leaf}
  - {name: spine-1, tier: spine}
links:
  - {a: h1/eth0, b: leaf-1, gbps: 1}
  - {a: h2/eth0, b: leaf-2, gbps: 1}
  - {a: leaf-1, b: spine-1, gbps: 1}
  - {a: leaf-2, b: spine-1, gbps: 1}
"""


def write(tmp_path: Path, text: str, name: str = "topo.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def edit(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new)


def test_explicit_form_loads(tmp_path):
    topo = load_topology(write(tmp_path, GOOD), require_tree=True)
    assert sorted(topo.nodes) == ["h1", "h2"]
    assert topo.spec == "lab-tcp" and topo.gpus_per_node == 0
    # a NIC given by name only takes its rail from its position and its speed from its link
    nic = topo.nodes["h2"].nics[0]
    assert (nic.rail, nic.gbps) == (0, 1.0)
    assert topo.leaf_of("h1/eth0") == "leaf-1"
    assert topo.switches["spine-1"].tier == "spine"


# (description, file text, field the error must name, words the message must contain)
BAD = [
    ("malformed yaml", "name: t\nfabric: [roce\n", "line", "malformed YAML"),
    ("duplicate key", GOOD + "name: again\n", "line", "duplicate key"),
    ("not a mapping", "- a\n- b\n", None, "expected a mapping"),
    ("unknown top field", GOOD + "colour: red\n", "colour", "unknown field"),
    ("missing name", GOOD.replace("name: t\n", ""), "name", "missing"),
    ("unknown fabric", edit("fabric: roce", "fabric: ethernet"), "fabric", "unknown value"),
    ("unknown tier", edit("tier: spine", "tier: super"), "switches[2].tier", "unknown value"),
    ("unknown node field", edit("{name: h2, nics", "{name: h2, colour: 1, nics"),
     "nodes[1].colour", "unknown field"),
    ("missing link end", edit("{a: h2/eth0, b: leaf-2, gbps: 1}", "{a: h2/eth0, gbps: 1}"),
     "links[1].b", "missing"),
    ("link to unknown switch", edit("{a: leaf-2, b: spine-1", "{a: leaf-9, b: spine-1"),
     "links[3].a", "unknown switch"),
    ("link to unknown node", edit("{a: h2/eth0, b: leaf-2", "{a: h9/eth0, b: leaf-2"),
     "links[1].a", "unknown node"),
    ("link to unknown NIC", edit("{a: h1/eth0, b: leaf-1", "{a: h1/eth7, b: leaf-1"),
     "links[0].a", "no NIC"),
    ("NIC on no switch", edit("  - {a: h1/eth0, b: leaf-1, gbps: 1}\n", ""), "links",
     "on no switch"),
    ("NIC on two switches", GOOD + "  - {a: h1/eth0, b: leaf-2, gbps: 1}\n", "links",
     "on two switches"),
    ("duplicate node", edit("{name: h2, nics", "{name: h1, nics"), "nodes[1].name", "duplicate"),
    ("duplicate switch", edit("{name: leaf-2, tier", "{name: leaf-1, tier"), "switches[1].name",
     "duplicate"),
    ("duplicate NIC", edit("nics: [eth0]", "nics: [eth0, eth0]"), "nodes[1].nics[1].name",
     "duplicate NIC"),
    ("duplicate link", GOOD + "  - {a: spine-1, b: leaf-1, gbps: 1}\n", "links[4]",
     "duplicate link"),
    ("zero gbps", edit("{a: leaf-1, b: spine-1, gbps: 1}", "{a: leaf-1, b: spine-1, gbps: 0}"),
     "links[2].gbps", "positive"),
    ("negative NIC gbps", edit("rail: 0, gbps: 1}", "rail: 0, gbps: -5}"), "nodes[0].nics[0].gbps",
     "positive"),
    ("disconnected", edit("  - {a: leaf-2, b: spine-1, gbps: 1}\n", ""), "links", "disconnected"),
    ("generator and lists", "name: g\nfabric: roce\ngenerator: {kind: fat-tree, nodes: 2}\n"
     "nodes: []\n", "nodes", "cannot also list"),
    ("unknown generator kind", "name: g\nfabric: roce\ngenerator: {kind: torus, nodes: 8}\n",
     "generator.kind", "unknown kind 'torus'"),
    ("unknown generator param", "name: g\nfabric: roce\ngenerator: {kind: rail-optimized, "
     "nodes: 8, spines: 1, colour: 3}\n", "generator.colour", "unknown field"),
    ("missing generator param", "name: g\nfabric: roce\ngenerator: {kind: rail-optimized}\n",
     "generator.nodes", "missing"),
    ("non-positive generator param", "name: g\nfabric: roce\ngenerator: {kind: rail-optimized, "
     "nodes: 0}\n", "generator.nodes", ">= 1"),
    ("gpus given twice", "name: g\nfabric: roce\ngpus_per_node: 4\ngenerator: {kind: "
     "rail-optimized, nodes: 8, gpus_per_node: 8, spines: 1}\n", "gpus_per_node", "differs"),
    ("generator without spines", "name: g\nfabric: roce\ngenerator: {kind: rail-optimized, "
     "nodes: 64, nodes_per_leaf: 32}\n", "generator.spines", "spine"),
]


BAD += [
    ("typo with hint", edit("switches:", "switchs:"), "switchs", "did you mean 'switches'"),
    ("gbps as text", edit("{a: leaf-1, b: spine-1, gbps: 1}", "{a: leaf-1, b: spine-1, gbps: 1G}"),
     "links[2].gbps", "expected a number, got the string '1G'"),
    ("count as float", edit("{a: leaf-1, b: spine-1, gbps: 1}",
                            "{a: leaf-1, b: spine-1, gbps: 1, count: 1.5}"),
     "links[2].count", "expected an integer"),
    ("rail as bool", edit("rail: 0,", "rail: true,"), "nodes[0].nics[0].rail",
     "expected an integer, got the boolean True"),
    ("two NICs on one rail", edit("{name: h2, nics: [eth0]}", "{name: h2, nics: [{name: eth0, "
                                  "rail: 0}, {name: eth1, rail: 0, gbps: 1}]}"),
     "nodes[1].nics[1].rail", "two NICs on rail 0"),
    ("node name a number", edit("{name: h2, nics", "{name: 2, nics"), "nodes[1].name",
     "expected a string, got the integer 2"),
    ("generator param typo", "name: g\nfabric: roce\ngenerator: {kind: rail-optimized, nodes: 8, "
     "spine: 1}\n", "generator.spine", "did you mean 'spines'"),
    ("generator kind a list", "name: g\nfabric: roce\ngenerator: {kind: [fat-tree], nodes: 8}\n",
     "generator.kind", "unknown kind ['fat-tree']"),
    ("generator tiers 4", "name: g\nfabric: roce\ngenerator: {kind: fat-tree, tiers: 4, "
     "nodes: 8}\n",
     "generator.tiers", "unknown value 4"),
]


@pytest.mark.parametrize("text,field,words", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_file_is_one_line_naming_file_and_field(tmp_path, text, field, words):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    message = str(info.value)
    assert message.startswith(f"{path}:" if field else str(path))
    if field:
        assert info.value.field is not None and info.value.field.startswith(field), message
    assert words in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "text,field,words", [b[1:] for b in BAD[:12]], ids=[b[0] for b in BAD[:12]]
)
def test_cli_validate_bad_file_exit_2(tmp_path, text, field, words):
    path = write(tmp_path, text)
    result = CliRunner().invoke(app, ["topology", "validate", str(path)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1  # what, where and the hint on one line
    first = lines[0]
    assert first.startswith(f"error: {path}")
    assert words in first


def test_cycle_refused_only_when_tree_required(tmp_path):
    cyclic = edit("  - {name: spine-1, tier: spine}\n",
                  "  - {name: spine-1, tier: spine}\n  - {name: spine-2, tier: spine}\n")
    cyclic += "  - {a: leaf-1, b: spine-2, gbps: 1}\n  - {a: leaf-2, b: spine-2, gbps: 1}\n"
    path = write(tmp_path, cyclic)
    assert len(load_topology(path).switches) == 4
    with pytest.raises(ConfigError, match="cycle .* must be a tree"):
        load_topology(path, require_tree=True)
    runner = CliRunner()
    assert runner.invoke(app, ["topology", "validate", str(path)]).exit_code == 0
    result = runner.invoke(app, ["topology", "validate", "--tree", str(path)])
    assert result.exit_code == 2 and "cycle" in result.stderr


def test_missing_file_and_unknown_name(tmp_path):
    with pytest.raises(ConfigError, match="no such file or bundled topology"):
        load_topology(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="no such file"):
        load_topology("not-a-bundled-topology")


def test_bundled_name_resolves_and_lab_files_are_trees():
    names = bundled_topologies()
    assert {"roce-rail-64", "ib-fattree-128", "ib-rail-1024", "ib-rail-4096",
            "ib-fattree3-512", "lab-4", "lab-8"} <= set(names)
    for name in ("lab-4", "lab-8"):
        topo = load_topology(name, require_tree=True)
        assert all(n.startswith("host") for n in topo.nodes)
        assert {nic.name for nic in topo.nics.values()} <= {"eth0", "eth1"}
        assert all(sw.startswith(("leaf-", "spine-")) for sw in topo.switches)
        assert topo.spec == "lab-tcp"
    lab8 = load_topology("lab-8")
    assert len(lab8.nodes) == 8 and lab8.rails == 2 and len(lab8.switches) == 5
    # rail-aligned: each leaf carries one rail only
    for leaf in (s for s in lab8.switches if s.startswith("leaf")):
        rails = {lab8.nics[n].rail for n, sw in lab8.attachment.items() if sw == leaf}
        assert len(rails) == 1
    lab4 = load_topology("lab-4")
    assert (len(lab4.nodes), lab4.rails, len(lab4.switches)) == (4, 1, 3)


def test_subprocess_validate_bad_file(tmp_path):
    path = write(tmp_path, edit("{a: h2/eth0, b: leaf-2", "{a: h9/eth0, b: leaf-2"))
    proc = subprocess.run(
        [sys.executable, "-m", "fabriccheck", "topology", "validate", str(path)],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert lines[0] == f"error: {path}:links[1].a: unknown node 'h9' in 'h9/eth0'"
    assert "Traceback" not in proc.stderr


# ---- fuzz: any mangled file is a ConfigError, never a traceback ---------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fabriccheck.topology.fields import parse_yaml  # noqa: E402
from fabriccheck.topology.load import topology_from_dict  # noqa: E402
from tests.yamlfuzz import assert_one_line_config_error_or_ok, mangle  # noqa: E402

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 5), st.floats(allow_nan=True),
    st.text(max_size=6), st.sampled_from(["leaf", "h1/eth0", "leaf-1", "spine-1", "roce"]),
)
_values = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4),
                                                                            inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_mangled_topology_never_crashes(data):
    doc = parse_yaml(GOOD, "good.yaml")
    mangle(data, doc, _values)
    assert_one_line_config_error_or_ok(topology_from_dict, doc)
