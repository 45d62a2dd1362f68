"""Test specs: bundled files load, floors split healthy from half speed, bad files are one line."""

from __future__ import annotations

import doctest
import textwrap

import pytest

from fabriccheck import specs
from fabriccheck.errors import ConfigError
from fabriccheck.specs import PROBE_UNITS, bundled_specs, load_spec, resolve_spec
from fabriccheck.topology import generate, load_topology

JITTER = 0.03  # relative std-dev of a healthy measurement (docs/design.md faults file)
EXPECTED = {"h100-ndr400-ib", "h100-roce400", "a100-hdr200-ib", "lab-tcp"}


def test_bundled_specs_load_with_sku_facts():
    assert EXPECTED <= set(bundled_specs())
    h100 = load_spec("h100-ndr400-ib")
    assert (h100.fabric, h100.gpus_per_node, h100.nic_gbps) == ("infiniband", 8, 400)
    assert h100.intra_node_busbw_gbps == 480
    assert load_spec("a100-hdr200-ib").intra_node_busbw_gbps == 235
    assert load_spec("h100-roce400").fabric == "roce"
    lab = load_spec("lab-tcp")
    assert lab.gpus_per_node == 0 and lab.nic_gbps == 1
    assert {p.probe for p in lab.probes} == {"iperf3", "allreduce-cpu"}
    for name in EXPECTED - {"lab-tcp"}:
        spec = load_spec(name)
        assert {p.probe for p in spec.probes} == set(PROBE_UNITS)
        assert {p.group_size for p in spec.probes if p.probe == "nccl"} == {1, 2, 4, 8}
        assert all(p.expected is not None for p in spec.probes)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_floors_pass_healthy_and_fail_half_speed(name):
    for p in load_spec(name).probes:
        if name == "lab-tcp" and p.group_size == 1:
            continue  # loopback sanity check inside one lab host: no NIC on the path
        low, high = p.expected * (1 - 3 * JITTER), p.expected * (1 + 3 * JITTER)
        if p.lower_is_better:
            assert high < p.floor, p  # healthy latency + 3 sigma passes
            assert 2 * low > p.floor, p  # a doubled latency fails
        else:
            assert low > p.floor, p  # healthy - 3 sigma passes
            assert 0.5 * high < p.floor, p  # half speed + 3 sigma fails
            assert p.floor <= p.warn <= p.expected


def test_design_examples_of_half_speed():
    h100 = load_spec("h100-ndr400-ib")
    assert 196 < h100.lookup("ib_write_bw", 2).floor  # NDR NIC at 0.5
    two = h100.lookup("nccl", 2)
    assert two.expected / 2 < two.floor < two.expected * 0.97
    a100 = load_spec("a100-hdr200-ib")
    assert 98 < a100.lookup("ib_write_bw", 2).floor < 180  # HDR at 0.5 fails; Azure 180 passes


def test_lookup_exact_fallback_and_missing():
    spec = load_spec("h100-ndr400-ib")
    assert spec.lookup("nccl", 4).group_size == 4
    assert spec.lookup("nccl", 16).group_size == 8  # largest below
    assert spec.lookup("ib_write_bw", 2).size_bytes == 8 << 20
    assert spec.lookup("nccl", 2).size_bytes == 8 << 30
    assert spec.lookup("nccl", 2, collective="all_reduce").collective == "all_reduce"
    lat = spec.lookup("ib_write_lat", 2)
    assert lat.unit == "us" and lat.lower_is_better
    with pytest.raises(ConfigError, match="no entry for probe 'nccl'"):
        load_spec("lab-tcp").lookup("nccl", 2)


def test_resolve_spec_by_topology_flag_and_fabric(tmp_path):
    assert resolve_spec(None, load_topology("roce-rail-64")).name == "h100-roce400"
    assert resolve_spec(None, load_topology("lab-8")).name == "lab-tcp"
    assert resolve_spec("lab-tcp", load_topology("ib-fattree-128")).name == "lab-tcp"  # any
    hdr = generate({"kind": "fat-tree", "nodes": 4, "nodes_per_leaf": 2, "spines": 1,
                    "nic_gbps": 200}, name="t", fabric="infiniband")
    assert resolve_spec(None, hdr).name == "a100-hdr200-ib"
    ndr = generate({"kind": "fat-tree", "nodes": 4, "nodes_per_leaf": 2, "spines": 1},
                   name="t", fabric="infiniband")
    assert resolve_spec(None, ndr).name == "h100-ndr400-ib"
    with pytest.raises(ConfigError, match="is for infiniband but topology") as info:
        resolve_spec("h100-ndr400-ib", load_topology("roce-rail-64"))
    assert info.value.field == "fabric"
    # a spec path relative to the topology file
    (tmp_path / "my.yaml").write_text(
        (specs.SPEC_DIR / "lab-tcp.yaml").read_text().replace("name: lab-tcp", "name: mine"))
    topo = load_topology("lab-4")
    topo.spec, topo.source = "my.yaml", str(tmp_path / "topo.yaml")
    assert resolve_spec(None, topo).name == "mine"


GOOD = """\
name: s
sku: test
fabric: infiniband
gpus_per_node: 8
nic_gbps: 400
probes:
  nccl:
    groups:
      2: {size_bytes: 8G, expected: 370, warn: 340, floor: 315}
  ib_write_lat:
    unit: us
    groups:
      2: {size_bytes: 2, expected: 1.6, warn: 2.0, floor: 2.5}
"""


def bad(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


BAD = [
    ("unknown probe", bad("  ib_write_lat:", "  ib_read_bw:"), "probes.ib_read_bw", "unknown"),
    ("floor above warn", bad("warn: 340, floor: 315", "warn: 340, floor: 345"),
     "probes.nccl.groups.2.floor", "floor <= warn <= expected"),
    ("latency not reversed", bad("warn: 2.0, floor: 2.5", "warn: 2.0, floor: 1.8"),
     "probes.ib_write_lat.groups.2.floor", "floor >= warn >= expected"),
    ("group size zero", bad("      2: {size_bytes: 8G", "      0: {size_bytes: 8G"),
     "probes.nccl.groups.0", "positive integer"),
    ("group size text", bad("      2: {size_bytes: 8G", "      two: {size_bytes: 8G"),
     "probes.nccl.groups.two", "positive integer"),
    ("bad size", bad("size_bytes: 8G", "size_bytes: lots"), "probes.nccl.groups.2.size_bytes",
     "positive size"),
    ("wrong unit", bad("    unit: us", "    unit: ms"), "probes.ib_write_lat.unit",
     "unknown value"),
    ("missing expected", bad("expected: 370, ", ""), "probes.nccl.groups.2.expected", "missing"),
    ("negative floor", bad("warn: 340, floor: 315", "warn: 340, floor: -1"),
     "probes.nccl.groups.2.floor", "positive"),
    ("unknown collective", bad("  nccl:\n", "  nccl:\n    collective: scatter\n"),
     "probes.nccl.collective", "unknown value"),
    ("collective on ib", bad("    unit: us", "    unit: us\n    collective: all_reduce"),
     "probes.ib_write_lat.collective", "only the nccl probe"),
    ("missing sku", bad("sku: test\n", ""), "sku", "missing"),
    ("unknown fabric", bad("fabric: infiniband", "fabric: omnipath"), "fabric", "unknown value"),
    ("unknown field", GOOD + "colour: red\n", "colour", "unknown field"),
    ("malformed", GOOD + "probes: [\n", "line", "malformed YAML"),
]


SIGNAL = """\
signals:
  - {name: port-rate, level: 1, per: nic, command: "cat /sys/class/infiniband/{nic}/ports/1/rate",
     value: '(?P<value>\\d+) Gb/sec', unit: Gb/s, pass: {min: 400}, timeout_s: 10}
"""


def sig(old: str, new: str) -> str:
    assert old in SIGNAL
    return GOOD + SIGNAL.replace(old, new)


BAD += [
    ("timeout as text", GOOD + "timeout_s: 120s\n", "timeout_s", "expected a number"),
    ("gpus as bool", bad("gpus_per_node: 8", "gpus_per_node: true"), "gpus_per_node",
     "expected an integer, got the boolean True"),
    ("typo", bad("nic_gbps: 400", "nic_gpbs: 400"), "nic_gpbs", "did you mean 'nic_gbps'"),
    ("duplicate key", GOOD + "sku: again\n", "line", "duplicate key 'sku'"),
    ("signal unknown level", sig("level: 1", "level: 3"), "signals[0].level", "unknown value 3"),
    ("signal typo", sig("timeout_s: 10", "timeout: 10"), "signals[0].timeout",
     "did you mean 'timeout_s'"),
    ("signal no group", sig("(?P<value>", "("), "signals[0].value", "no group named 'value'"),
    ("signal bad regex", sig("(?P<value>", "(?P<value"), "signals[0].value",
     "not a regular expression"),
    ("signal both value and parser", sig("unit: Gb/s", "parser: ib-rate, unit: Gb/s"),
     "signals[0].value", "exactly one of"),
    ("signal no bound", sig("pass: {min: 400}", "pass: {}"), "signals[0].pass", "'min' or 'max'"),
    ("signal unknown placeholder", sig("{nic}/ports", "{nics}/ports"), "signals[0].command",
     "unknown placeholder {nics}"),
    ("signal nic placeholder per node", sig("per: nic", "per: node"), "signals[0].command",
     "{nic} needs per: nic"),
    ("signal duplicate name", GOOD + SIGNAL + SIGNAL.replace("signals:\n", ""),
     "signals[1].name", "duplicate signal name"),
]


@pytest.mark.parametrize("text,field,words", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_spec_is_one_line_naming_file_and_field(tmp_path, text, field, words):
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_spec(str(path))
    message = str(info.value)
    assert message.startswith(f"{path}:{field}"), message
    assert words in message and "\n" not in message


def test_good_spec_and_missing_spec(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(GOOD, encoding="utf-8")
    spec = load_spec(str(path))
    assert spec.lookup("nccl", 2).collective == "all_reduce"  # the default collective
    assert spec.lookup("nccl", 2).unit == "GB/s"  # the default unit
    with pytest.raises(ConfigError, match="no such spec"):
        load_spec("no-such-spec")


def test_signals_in_a_spec_and_in_their_own_file(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(GOOD + SIGNAL, encoding="utf-8")
    (signal,) = load_spec(str(path)).signals
    assert (signal.name, signal.level, signal.per, signal.pass_min, signal.pass_max) == (
        "port-rate", 1, "nic", 400, None)
    assert signal.timeout_s == 10 and signal.value.startswith("(?P<value>")
    own = tmp_path / "signals.yaml"
    own.write_text(SIGNAL, encoding="utf-8")
    assert specs.load_signals(str(own)) == (signal,)
    own.write_text(SIGNAL.replace("level: 1", "level: 1, colour: red"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"signals\[0\]\.colour: unknown field"):
        specs.load_signals(str(own))


def test_doctests():
    assert doctest.testmod(specs).failed == 0


# ---- fuzz: any mangled spec is a ConfigError, never a traceback -------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fabriccheck.topology.fields import parse_yaml  # noqa: E402
from tests.yamlfuzz import assert_one_line_config_error_or_ok, mangle  # noqa: E402

_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 9), st.floats(), st.text(max_size=5),
              st.sampled_from(["8M", "us", "GB/s", "nccl", "all_reduce"])),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.one_of(st.text(max_size=4), st.integers(-1, 9)), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_mangled_spec_never_crashes(data):
    doc = parse_yaml(GOOD, "good.yaml")
    mangle(data, doc, _values, into_lists=False)
    assert_one_line_config_error_or_ok(specs.spec_from_dict, doc)
