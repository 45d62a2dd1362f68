"""NVLink-domain evidence judged from the suite's own fixtures (tests/fixtures/nvl72, modelled on
the real formats): ``nvidia-smi -q`` Fabric sections, ``nvidia-smi nvlink -s`` on GB200 trays,
and the preflight's ``imex`` output (``nvidia-imex-ctl -q`` / ``-N``)."""

from __future__ import annotations

import pytest

from fabriccheck.probes._text import strip_source_line
from fabriccheck.probes.node.catalogue import builtin_catalogue
from fabriccheck.probes.node.imex import IMEX_COMMAND, parse_domain
from fabriccheck.probes.node.judge import detect_node_tool, judge_node_text
from fabriccheck.probes.node.smi_fabric import parse_fabric
from fabriccheck.probes.signal_value import node_reading
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "nvl72"


def read(name: str) -> str:
    return strip_source_line((FIXTURES / name).read_text(encoding="utf-8"))


def checks(report, severity: str | None = None) -> list[str]:
    return sorted(f.check for f in report.findings
                  if severity is None or f.severity == severity)


@pytest.mark.parametrize(("name", "tool", "verdict", "faults", "warns"), [
    ("nvidia-smi-q-gb200-fabric-healthy.txt", "nvidia-smi-q", "healthy", [], []),
    ("nvidia-smi-q-gb200-fabric-in-progress.txt", "nvidia-smi-q", "fault",
     ["gpu-fabric-not-ready"], []),
    ("nvidia-smi-q-gb200-zero-cluster.txt", "nvidia-smi-q", "fault",
     ["gpu-fabric-no-cluster"] * 4, []),
    ("nvidia-smi-q-gb200-split-clique.txt", "nvidia-smi-q", "fault", ["gpu-fabric-split"], []),
    ("nvidia-smi-q-gb200-bandwidth-degraded.txt", "nvidia-smi-q", "warn", [],
     ["gpu-fabric-bandwidth"]),
    ("nvidia-smi-q-h200-zero-cluster.txt", "nvidia-smi-q", "healthy", [], []),
    ("nvidia-smi-nvlink-gb200-switch-side.txt", "nvidia-smi-nvlink", "warn", [],
     ["gpu-nvlink-switch-side"]),
    ("nvidia-smi-nvlink-gb200-one-port.txt", "nvidia-smi-nvlink", "fault",
     ["gpu-nvlink-inactive"], []),
    ("imex-healthy-18.txt", "imex", "healthy", [], []),
    ("imex-one-unavailable.txt", "imex", "warn", [], ["imex-domain-degraded"]),
    ("imex-not-installed.txt", "imex", "fault", ["imex-not-ready"], []),
])
def test_fixture_is_detected_and_judged(name, tool, verdict, faults, warns):
    text = read(name)
    assert detect_node_tool(text) == tool
    report = judge_node_text(text)
    assert report.tool == tool and report.complete, report.reason
    assert report.node_verdict == verdict, [f.to_json() for f in report.findings]
    assert checks(report, "fault") == faults
    assert checks(report, "warn") == warns


def test_the_fabric_sections_are_read_per_gpu():
    gpus = parse_fabric(read("nvidia-smi-q-gb200-fabric-in-progress.txt"))
    assert [g["state"] for g in gpus] == ["Completed", "In Progress", "Completed", "Completed"]
    assert gpus[0]["gpu"] == "00000008:01:00.0" and gpus[0]["product"] == "NVIDIA GB200"
    assert gpus[0]["clique"] == "32766" and gpus[0]["summary"] == "Healthy"
    assert gpus[0]["bandwidth"] == "Full"


def test_the_tray_reports_its_clique_as_a_setting_for_the_rack_comparison():
    report = judge_node_text(read("nvidia-smi-q-gb200-fabric-healthy.txt"))
    assert report.facts["config"] == {
        "nvlink_clique": "9c6f5af3-53bf-49b5-a436-b66766c413c3/32766"}
    assert report.facts["config_severity"] == {"nvlink_clique": "fault"}
    assert report.facts["fabric"] == {"gpus": 4, "registered": 4, "cliques": [
        "9c6f5af3-53bf-49b5-a436-b66766c413c3/32766"]}
    # a split tray has no one clique to compare
    assert "config" not in judge_node_text(read("nvidia-smi-q-gb200-split-clique.txt")).facts
    # nor has a single-node HGX
    assert "fabric" not in judge_node_text(read("nvidia-smi-q-h200-zero-cluster.txt")).facts


def test_switch_side_needs_the_same_links_on_every_gpu_of_a_multi_node_tray():
    text = read("nvidia-smi-nvlink-gb200-switch-side.txt")
    report = judge_node_text(text)
    (f,) = report.findings
    assert "NVLink 6, 7 inactive on all 4 GPUs" in f.what and f.part == "node"
    # an HGX's NVSwitches sit in the node: the same pattern there is the node's fault
    hgx = judge_node_text(text.replace("NVIDIA GB200", "NVIDIA H100 80GB HBM3"))
    assert checks(hgx, "fault") == ["gpu-nvlink-inactive"] * 4
    # one GPU differing (GPU 0's link 6 up): no switch-side reading, the GPUs are faulted
    odd = text.replace("\t Link 6: <inactive>", "\t Link 6: 50 GB/s", 1)
    assert odd != text
    assert checks(judge_node_text(odd), "fault") == ["gpu-nvlink-inactive"] * 4


def test_imex_domain_table_is_read():
    d = parse_domain(read("imex-one-unavailable.txt"))
    assert len(d["nodes"]) == 18 and d["domain_state"] == "DEGRADED"
    assert d["nodes"][3] == {"index": 3, "address": "10.12.0.13", "state": "UNAVAILABLE"}
    assert d["matrix"][3] == ["I"] * 18 and d["matrix"][0][3] == "N"
    assert d["matrix"][17] == ["C"] * 3 + ["N"] + ["C"] * 14


def test_imex_pair_not_connected_warns_and_a_cut_output_is_incomplete():
    text = read("imex-healthy-18.txt")
    rows = text.splitlines()
    i = next(k for k, ln in enumerate(rows) if ln.startswith("       5        "))
    rows[i] = rows[i][:-1] + "D"
    report = judge_node_text("\n".join(rows) + "\n", "imex")
    assert checks(report, "warn") == ["imex-domain-degraded"]
    assert "5" in report.findings[0].what
    cut = judge_node_text(text.split("Domain State")[0], "imex")
    assert not cut.complete and cut.node_verdict == "warn"


def test_imex_daemon_not_ready_faults_the_tray():
    text = read("imex-healthy-18.txt").replace("== imex_status\nREADY", "== imex_status\n"
                                               "UNAVAILABLE", 1)
    report = judge_node_text(text, "imex")
    assert checks(report, "fault") == ["imex-not-ready"]
    assert "UNAVAILABLE" in report.findings[0].what


def test_the_preflight_parser_counts_faults():
    assert node_reading(read("imex-not-installed.txt"), "node-imex").value == 1
    assert node_reading(read("imex-healthy-18.txt"), "node-imex").value == 0
    assert IMEX_COMMAND.startswith("echo '== imex_status'; nvidia-imex-ctl -q 2>&1")


def test_every_nvl_check_is_in_the_catalogue_with_a_source():
    cat = builtin_catalogue()
    for check in ("gpu-fabric-no-cluster", "gpu-fabric-bandwidth", "gpu-fabric-split",
                  "gpu-fabric-clique-peers", "gpu-nvlink-switch-side", "imex-not-ready",
                  "imex-domain-degraded"):
        e = cat.entry(check)
        assert e.source.strip() and e.fix.strip()


def test_parse_detects_and_judges_the_fixtures(capsys):
    import json

    from fabriccheck.cli.main import main

    code = main(["parse", str(FIXTURES / "imex-not-installed.txt"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["tool"] == "imex" and doc["node_verdict"] == "fault"
    assert doc["findings"][0]["check"] == "imex-not-ready"


def test_every_link_down_on_every_gpu_is_the_trays_fault():
    text = read("nvidia-smi-nvlink-gb200-switch-side.txt").replace("50 GB/s", "<inactive>")
    assert checks(judge_node_text(text, "nvidia-smi-nvlink"), "fault") != []
    assert "gpu-nvlink-switch-side" not in checks(judge_node_text(text, "nvidia-smi-nvlink"))
