"""The configuration judges (``node-config``, ``nic-config``; docs/config-checks.md) on fixtures
written for them (tests/fixtures/config): each misconfiguration found against the spec's
``config:`` block or its own rule, nothing found without a reference, truncation never healthy;
the spec's ``config:`` block validated and carried to the catalogue."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from typer.testing import CliRunner

import fabriccheck.cli.main  # noqa: F401  (registers every command module on app)
from fabriccheck.cli.app import app
from fabriccheck.errors import ConfigError
from fabriccheck.planning.preflight import NIC_CONFIG_IB, NIC_CONFIG_ROCE, NODE_CONFIG
from fabriccheck.probes._text import strip_source_line
from fabriccheck.probes.node import config, config_nic
from fabriccheck.probes.node.catalogue import builtin_catalogue, load_catalogue
from fabriccheck.probes.node.findings import FAULT, INFO, WARN
from fabriccheck.probes.node.judge import detect_node_tool, judge_node_text
from fabriccheck.probes.signal_command import render_signal
from fabriccheck.probes.signal_value import node_reading
from fabriccheck.schema.spec import ConfigBlock
from fabriccheck.specs import CONFIG_CHECKS, config_checks, load_spec, spec_from_dict
from fabriccheck.topology.fields import read_yaml
from tests.conftest import LOCAL_FIXTURES, REPO

FIXTURES = LOCAL_FIXTURES / "config"
CORPUS = REPO.parent / "shared" / "corpus" / "node"
ROCE = load_catalogue(load_spec("h100-roce400").node_checks)
IB = load_catalogue(load_spec("h100-ndr400-ib").node_checks)
BARE = builtin_catalogue()


def read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def flagged(report) -> set[tuple[str, str, str]]:
    return {(f.severity, f.check, f.part) for f in report.findings if f.severity != INFO}


GPUS_0_3 = {(FAULT, "cfg-gpu-nic", f"gpu {g}") for g in range(4)}
ACS_PORTS = {"0000:17:00.0", "0000:17:01.0", "0000:29:00.0", "0000:39:00.0", "0000:39:01.0",
             "0000:4c:00.0", "0000:5c:00.0", "0000:5c:01.0", "0000:99:00.0", "0000:99:01.0",
             "0000:aa:00.0", "0000:b9:00.0", "0000:b9:01.0", "0000:cb:00.0", "0000:da:00.0",
             "0000:da:01.0"}
# fixture, tool, the spec's catalogue, verdict, complete, the warn/fault (severity, check, part)
CASES = [
    ("node-config-healthy.txt", "node-config", ROCE, "healthy", True, set()),
    ("node-config-healthy.txt", "node-config", BARE, "healthy", True, set()),
    ("node-config-dgx-12-nics.txt", "node-config", IB, "healthy", True, set()),
    ("node-config-open-dmabuf.txt", "node-config", ROCE, "healthy", True, set()),
    ("node-config-no-peermem.txt", "node-config", ROCE, "fault", True,
     {(FAULT, "cfg-gpudirect", "node")}),
    ("node-config-no-peermem.txt", "node-config", BARE, "healthy", True, set()),
    ("node-config-acs-enabled.txt", "node-config", BARE, "fault", True,
     {(FAULT, "cfg-acs", f"pcie {p} (Broadcom / LSI PEX890xx PCIe Gen 5 Switch)")
      for p in ACS_PORTS}),
    ("node-config-numa-sys.txt", "node-config", BARE, "fault", True, GPUS_0_3),
    ("node-config-numa-sys.txt", "node-config", IB, "fault", True, GPUS_0_3),
    ("node-config-numa-node.txt", "node-config", BARE, "healthy", True, set()),
    ("node-config-numa-node.txt", "node-config", IB, "fault", True,
     {(FAULT, "cfg-gpu-nic", f"gpu {g}") for g in range(8)}),
    ("node-config-not-root.txt", "node-config", ROCE, "healthy", True, set()),
    ("node-config-truncated.txt", "node-config", ROCE, "warn", False, set()),
    ("nic-config-roce-healthy.txt", "nic-config", ROCE, "healthy", True, set()),
    ("nic-config-roce-healthy.txt", "nic-config", BARE, "healthy", True, set()),
    ("nic-config-roce-pfc-off.txt", "nic-config", ROCE, "fault", True,
     {(FAULT, "cfg-pfc", "nic mlx5_3"), (FAULT, "cfg-ecn", "nic mlx5_3")}),
    ("nic-config-roce-pfc-off.txt", "nic-config", BARE, "healthy", True, set()),
    ("nic-config-roce-gid-v1.txt", "nic-config", ROCE, "fault", True,
     {(FAULT, "cfg-gid", "nic mlx5_3")}),
    ("nic-config-roce-mtu-1500.txt", "nic-config", ROCE, "fault", True,
     {(FAULT, "cfg-mtu", "nic mlx5_3")}),
    ("nic-config-roce-old-firmware.txt", "nic-config", ROCE, "healthy", True, set()),
    ("nic-config-roce-pcp-old-qos.txt", "nic-config", ROCE, "fault", True,
     {(FAULT, "cfg-trust", "nic mlx5_3")}),
    ("nic-config-roce-no-mlnx-qos.txt", "nic-config", ROCE, "warn", True,
     {(WARN, "cfg-unverified", "nic mlx5_3")}),
    ("nic-config-roce-no-mlnx-qos.txt", "nic-config", BARE, "healthy", True, set()),
    ("nic-config-roce-truncated.txt", "nic-config", ROCE, "warn", False,
     {(WARN, "cfg-unverified", "nic mlx5_3")}),
    ("nic-config-ib-healthy.txt", "nic-config", IB, "healthy", True, set()),
    ("nic-config-ib-mtu-2048.txt", "nic-config", IB, "fault", True,
     {(FAULT, "cfg-mtu", "nic mlx5_3")}),
]


@pytest.mark.parametrize("name, tool, cat, verdict, complete, expected", CASES,
                         ids=[f"{c[0]}-{'spec' if c[2] is not BARE else 'bare'}" for c in CASES])
def test_fixture_is_detected_and_judged(name, tool, cat, verdict, complete, expected):
    text = read(name)
    assert detect_node_tool(strip_source_line(text)) == tool
    report = judge_node_text(text, catalogue=cat)
    assert report.tool == tool
    assert (report.node_verdict, report.complete) == (verdict, complete), report.findings
    assert flagged(report) == expected
    for f in report.findings:
        assert f.fix or f.severity == INFO, f.check


def test_every_fixture_is_a_case_and_says_what_it_models():
    named = {c[0] for c in CASES}
    for path in FIXTURES.iterdir():
        assert path.name in named, f"{path.name} is not judged by any case"
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# source: written for fabriccheck, modelled on ")


@pytest.mark.parametrize("name, setting, value", [
    ("node-config-healthy.txt", "gpu_driver", "550.90.07"),
    ("node-config-healthy.txt", "gpudirect", "on"),
    ("node-config-healthy.txt", "nic_driver", "24.07-0.6.1"),
    ("node-config-healthy.txt", "gpu_nic", "PIX"),
    ("node-config-healthy.txt", "acs", "off"),
    ("node-config-acs-enabled.txt", "acs", "redirect"),
    ("node-config-no-peermem.txt", "gpudirect", "off"),
    ("node-config-open-dmabuf.txt", "gpudirect", "on"),
    ("node-config-numa-node.txt", "gpu_nic", "NODE"),
    ("node-config-not-root.txt", "nic_driver", "inbox"),
    ("nic-config-roce-healthy.txt", "firmware", "28.41.1000"),
    ("nic-config-roce-healthy.txt", "mtu", 9000),
    ("nic-config-roce-healthy.txt", "trust", "dscp"),
    ("nic-config-roce-healthy.txt", "pfc", "3"),
    ("nic-config-roce-healthy.txt", "ecn", "0-7"),
    ("nic-config-roce-healthy.txt", "gid", "0:v1 1:v2 2:v1 3:v2"),
    ("nic-config-roce-pfc-off.txt", "pfc", "none"),
    ("nic-config-roce-pfc-off.txt", "ecn", "none"),
    ("nic-config-roce-pcp-old-qos.txt", "pfc", "3,4"),
    ("nic-config-roce-old-firmware.txt", "firmware", "28.39.1002"),
    ("nic-config-ib-mtu-2048.txt", "mtu", 2048),
])
def test_settings_are_read_for_the_peers(name, setting, value):
    facts = judge_node_text(read(name)).facts
    assert facts["config"][setting] == value
    assert set(facts["config_severity"]) == set(facts["config"])


def test_what_the_judge_decided_is_not_judged_again_by_the_peers():
    spec = judge_node_text(read("nic-config-roce-healthy.txt"), catalogue=ROCE).facts
    assert spec["config_judged"] == ["ecn", "gid", "mtu", "pfc", "trust"]
    assert judge_node_text(read("nic-config-roce-healthy.txt")).facts["config_judged"] == []
    node = judge_node_text(read("node-config-healthy.txt")).facts
    assert node["config_judged"] == ["acs"]  # its own rule; gpu_nic PIX: left to the peers
    assert node["config_class"] == ("8 GPUs, 8 NICs; Broadcom / LSI PEX890xx PCIe Gen 5 Switch, "
                                    "Mellanox Technologies MT2910 Family [ConnectX-7], NVIDIA "
                                    "Corporation Device 2330")  # the SKU: counts and models
    assert judge_node_text(read("nic-config-ib-healthy.txt")).facts["config_class"] == \
        "MT_0000000838 InfiniBand"


def test_dmabuf_is_gpudirect_without_the_peer_memory_module():
    r = judge_node_text(read("node-config-open-dmabuf.txt"), catalogue=ROCE)
    assert r.facts["gpudirect_via"] == "dmabuf" and r.facts["gpu_driver_open"] is True
    assert [f.check for f in r.of(INFO) if "dmabuf" in f.check] == ["cfg-gpudirect-dmabuf"]


def test_acs_on_root_ports_or_storage_switches_is_recorded_not_judged():
    healthy = judge_node_text(read("node-config-healthy.txt"))
    assert {f.check for f in healthy.of(INFO)} == {"cfg-acs-host"}
    assert all("no GPU or NIC below it" in f.what for f in healthy.of(INFO))
    bad = judge_node_text(read("node-config-acs-enabled.txt"))
    assert bad.facts["acs_redirect_ports"] and all("ReqRedir+" in f.line for f in bad.of(FAULT))


def _topo(gpus: int, nic_of: dict[int, int]) -> str:
    """A ``topo -m`` of ``gpus`` GPUs on two sockets and NICs ``{nic: the GPU beside it}``."""
    sock = {g: g * 2 // gpus for g in range(gpus)}

    def cell(g, n):
        return "PIX" if nic_of[n] == g else ("NODE" if sock[g] == sock[nic_of[n]] else "SYS")

    head = "\t" + "\t".join([*(f"GPU{g}" for g in range(gpus)), *(f"NIC{n}" for n in nic_of),
                              "CPU Affinity", "NUMA Affinity"])
    rows = [f"GPU{g}\t" + "\t".join([*(" X " if h == g else "NV18" for h in range(gpus)),
                                      *(cell(g, n) for n in nic_of), "0-55", str(sock[g])])
            for g in range(gpus)]
    rows += [f"NIC{n}\t" + "\t".join(cell(g, n) for g in range(gpus)) for n in nic_of]
    legend = "".join(f"  NIC{n}: mlx5_{n}\n" for n in nic_of)
    return "\n".join([head, *rows]) + "\n\nNIC Legend:\n\n" + legend


def test_fewer_nics_than_gpus_judges_each_nics_nearest_gpu():
    """Two NICs for eight GPUs (one per socket): GPUs 1-7 have no NIC of their own by design;
    the NICs are judged, each beside a GPU."""
    text = _topo(8, {0: 0, 1: 4})
    assert config.nearest(text, "NIC") == {"mlx5_0": ("GPU0", "PIX"), "mlx5_1": ("GPU4", "PIX")}
    body = f"== topo\n{text}== end\n"
    report = judge_node_text(body, "node-config", catalogue=IB)
    assert not report.of(FAULT) and report.facts["config"]["gpu_nic"] == "PIX"
    assert report.facts["nic_gpu_pairs"] == {"mlx5_0": "GPU0 PIX", "mlx5_1": "GPU4 PIX"}
    far = judge_node_text(f"== topo\n{_topo(8, {0: 0, 1: 1})}== end\n", "node-config",
                          catalogue=load_catalogue({"cfg-gpu-nic": {"params": {"expect": "PIX"}}}))
    assert not far.of(FAULT)  # both NICs beside a GPU: the spec holds
    # a NIC per GPU, both on GPU1's socket: GPU0 reaches one only across the sockets
    per_gpu = judge_node_text(f"== topo\n{_topo(2, {0: 1, 1: 1})}== end\n", "node-config")
    assert flagged(per_gpu) == {(FAULT, "cfg-gpu-nic", "gpu 0")}
    # every pair at SYS is the platform (a VM hiding its PCIe tree), not a misseated card
    vm = re.sub(r"\b(PIX|NODE)\b", "SYS", _topo(4, {0: 0, 1: 1, 2: 2, 3: 3}))
    assert not judge_node_text(f"== topo\n{vm}== end\n", "node-config").of(FAULT)


def test_the_real_xe9680_lspci_has_acs_only_above_its_nvswitches():
    path = CORPUS / "lspci-vvv_gpud_xe9680_8xh100.txt"
    if not path.exists():
        pytest.skip(f"{path}: the node corpus (../shared/corpus/node) is not here")
    report = judge_node_text("== acs\n" + path.read_text(encoding="utf-8") + "== end\n",
                             "node-config")
    assert report.facts["config"]["acs"] == "off"
    assert not report.of(FAULT) and report.of(INFO)  # the redirecting bridges are recorded


def test_a_host_without_the_tools_is_unread_never_a_fault():
    """The preflight's own commands on this machine (no GPU, no RDMA tools): every setting is
    unread, nothing is judged wrong."""
    for command, parser in ((NODE_CONFIG, "node-config"), (NIC_CONFIG_IB, "nic-config"),
                            (NIC_CONFIG_ROCE, "nic-config")):
        run = subprocess.run(["sh", "-c", render_signal(command, {"nic": "mlx5_0"})],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0 and run.stdout.rstrip().endswith("== end")
        reading = node_reading(run.stdout, parser, catalogue=BARE)
        assert reading.value == 0 and not [f for f in reading.findings if f.severity == WARN]


def test_parse_reads_the_sectioned_outputs():
    res = CliRunner().invoke(app, ["parse", str(FIXTURES / "nic-config-roce-pfc-off.txt"),
                                   "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["tool"] == "nic-config" and out["facts"]["config"]["pfc"] == "none"


@pytest.mark.parametrize("text", [
    "== mtu\n9000\n",  # a section, but not a first one of either tool
    "hca_id:\tmlx5_0\n\tfw_ver:\t\t28.41.1000\n",
    "driver: mlx5_core\nversion: 24.07-0.6.1\n",
])
def test_the_predicates_claim_only_sectioned_outputs(text):
    assert not config.looks_like_node_config(text) and not config.looks_like_nic_config(text)


@pytest.mark.parametrize("text, tool", [
    ("== qos\nPriority trust state: dscp\n== end\n", "nic-config"),
    ("== topo\nNo devices were found\n== end\n", "node-config"),
])
def test_a_missing_first_section_is_incomplete(text, tool):
    report = judge_node_text(text, tool)
    assert not report.complete and report.node_verdict == WARN


# ---- the spec's config block -------------------------------------------------------------------
def test_every_config_setting_sets_a_catalogue_entry_that_exists():
    cat = builtin_catalogue()
    assert set(CONFIG_CHECKS) == set(ConfigBlock.model_fields)
    every = {name: 1 for name in ConfigBlock.model_fields}
    spec_cat = load_catalogue(config_checks(every))
    for check, param in CONFIG_CHECKS.values():
        assert check in cat and spec_cat.param(check, param) == 1, (check, param)
        assert param in ("expect", "index")
    assert set(config.SETTING_CHECKS.values()) <= set(cat.entries)


def _spec(**config_block):
    data = read_yaml(str(REPO / "test_specs" / "h100-roce400.yaml"))
    data = {**data, "config": config_block} if config_block else \
        {k: v for k, v in data.items() if k != "config"}
    return spec_from_dict(data, source="spec.yaml")


def test_the_config_block_becomes_the_entries_params_and_node_checks_win():
    spec = _spec(mtu=4200, gid_index=1, roce_version=2)
    cat = load_catalogue(spec.node_checks)
    assert cat.param("cfg-mtu", "expect") == 4200 and cat.param("cfg-gid", "index") == 1
    assert _spec().node_checks == {} and _spec().config == {}
    over = config_checks({"mtu": 9000}, {"cfg-mtu": {"params": {"expect": 4200}}})
    assert over["cfg-mtu"]["params"]["expect"] == 4200


@pytest.mark.parametrize("block, words", [
    ({"mtu": 100000}, "config.mtu"),
    ({"pfc_priority": 9}, "config.pfc_priority"),
    ({"gid_index": 3}, "gid_index needs roce_version"),
    ({"gpudirect": "yes"}, "config.gpudirect"),
    ({"gpu_nic": "FAR"}, "config.gpu_nic"),
    ({"mtu_bytes": 9000}, "unknown field 'mtu_bytes'"),
    ({"ecn": "on"}, "config.ecn"),
])
def test_a_bad_config_block_is_one_line_naming_the_field(block, words):
    with pytest.raises(ConfigError) as exc:
        _spec(**block)
    assert words in str(exc.value) and "spec.yaml" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_roce_settings_in_an_infiniband_spec_are_refused():
    data = read_yaml(str(REPO / "test_specs" / "h100-ndr400-ib.yaml"))
    with pytest.raises(ConfigError, match=r"config\.pfc_priority.*RoCE setting"):
        spec_from_dict({**data, "config": {"pfc_priority": 3}}, source="ib.yaml")


def test_the_bundled_specs_name_the_fabrics_settings():
    assert load_spec("h100-roce400").config == {
        "gpudirect": "required", "gpu_nic": "PXB", "mtu": 9000, "pfc_priority": 3,
        "trust": "dscp", "ecn": True, "gid_index": 3, "roce_version": 2}
    for name in ("h100-ndr400-ib", "a100-hdr200-ib"):
        assert load_spec(name).config == {"gpudirect": "required", "gpu_nic": "PXB", "mtu": 4096}
    assert load_spec("lab-tcp").config == {}


def test_the_docs_describe_every_setting_and_entry():
    doc = (REPO / "docs" / "config-checks.md").read_text(encoding="utf-8")
    for name in ConfigBlock.model_fields:
        assert f"`{name}`" in doc, name
    for check in builtin_catalogue().with_prefix("cfg-"):
        assert f"`{check.id}`" in doc, check.id
    assert "mlnx_qos" in doc and "ACSCtl" in doc and "`config`" in doc


def test_nic_module_helpers():
    assert config_nic.prio_text([0, 1, 2, 3]) == "0-3"
    assert config_nic.gid_type("IB/RoCE v1") == "v1"
