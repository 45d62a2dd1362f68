"""The rack's fabric manager as a GB200 compute tray sees it (docs/nvl72.md): the domain check's
``fabric_manager`` and ``fabric_state`` sections, judged from the suite's own fixtures
(tests/fixtures/nvl72/domain-fm-*, modelled on the real formats). Healthy lines never drain."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.probes._text import strip_source_line
from fabriccheck.probes.node.catalogue import builtin_catalogue
from fabriccheck.probes.node.fabric_manager import judge_fabric_manager, parse_fabric_states
from fabriccheck.probes.node.imex import IMEX_COMMAND
from fabriccheck.probes.node.judge import detect_node_tool, judge_node_text
from fabriccheck.probes.signal_value import node_reading
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "nvl72"


def read(name: str) -> str:
    return strip_source_line((FIXTURES / name).read_text(encoding="utf-8"))


def by_severity(report) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in report.findings:
        out.setdefault(f.severity, []).append(f.check)
    return out


def test_the_domain_check_reads_the_fabric_manager_after_imex():
    sections = [part.split("'")[1] for part in IMEX_COMMAND.split("echo ")[1:]]
    assert sections == ["== imex_status", "== imex_domain", "== fabric_manager",
                        "== fabric_state", "== end"]
    assert "systemctl is-active nvidia-fabricmanager 2>&1" in IMEX_COMMAND
    assert ("nvidia-smi --query-gpu=index,fabric.state,fabric.status --format=csv,noheader 2>&1"
            in IMEX_COMMAND)


def test_a_configured_tray_without_its_own_fabric_manager_is_healthy():
    text = read("domain-fm-healthy.txt")
    assert detect_node_tool(text) == "imex"
    report = judge_node_text(text)
    assert report.complete and report.node_verdict == "healthy" and report.findings == ()
    assert report.facts["fm_service"] == "inactive" and report.facts["fm_configured"] == "4/4"
    assert node_reading(text, "node-imex").value == 0


def test_a_tray_the_fabric_manager_never_configured_is_a_fault_naming_the_fabric_manager():
    report = judge_node_text(read("domain-fm-not-started.txt"))
    assert by_severity(report) == {"fault": ["fabric-manager-not-ready"]}
    (f,) = report.findings
    assert "configured none of the tray's 4 GPUs" in f.what and f.part == "node"
    assert f.line == "0, Not Started, [N/A]"
    assert "NVSwitch trays" in f.fix and "NMX-Controller" in f.fix
    assert report.facts["fm_configured"] == "0/4"
    assert node_reading(read("domain-fm-not-started.txt"), "node-imex").value == 1


def test_one_gpu_still_registering_is_named():
    report = judge_node_text(read("domain-fm-one-in-progress.txt"))
    assert by_severity(report) == {"fault": ["fabric-manager-not-ready"]}
    assert report.findings[0].what.endswith("GPU 2 registration in progress")
    assert report.facts["fm_configured"] == "3/4"


def test_a_registration_that_failed_names_its_status():
    text = read("domain-fm-healthy.txt").replace("1, Completed, Success",
                                                 "1, Completed, Failure", 1)
    (f,) = judge_node_text(text).findings
    assert f.check == "fabric-manager-not-ready" and "GPU 1 Completed, status Failure" in f.what


def test_the_trays_own_unit_failing_is_recorded_never_drained():
    report = judge_node_text(read("domain-fm-local-unit-failed.txt"))
    assert by_severity(report) == {"info": ["fabric-manager-local"]}
    assert report.node_verdict == "healthy"
    assert node_reading(read("domain-fm-local-unit-failed.txt"), "node-imex").value == 0


def test_no_systemd_and_an_output_from_before_the_sections_are_judged_as_before():
    report = judge_node_text(read("domain-fm-no-systemctl.txt"))
    assert report.node_verdict == "healthy" and report.facts["fm_configured"] == "4/4"
    old = judge_node_text(read("imex-healthy-18.txt"))
    assert old.node_verdict == "healthy" and "fm_configured" not in old.facts
    assert "fm_service" not in old.facts


def test_gpus_outside_any_fabric_are_not_judged():
    rows = "0, [N/A], [N/A]\n1, [Not Supported], [Not Supported]\n"
    assert judge_fabric_manager({"fabric_state": rows}, builtin_catalogue())[0] == []
    assert parse_fabric_states("nvidia-smi: command not found\n") == []


_HEALTHY_UNIT = st.sampled_from(["inactive", "unknown", "active", "failed", "activating",
                                 "sh: 1: systemctl: not found", ""])
_HEALTHY_ROW = st.sampled_from(["Completed, Success", "[N/A], [N/A]", "N/A, N/A",
                                "[Not Supported], [Not Supported]"])


@settings(max_examples=80, deadline=None)
@given(_HEALTHY_UNIT, st.lists(_HEALTHY_ROW, min_size=1, max_size=8), st.booleans())
def test_healthy_lines_never_drain(unit, rows, spaces):
    sep = ", " if spaces else ","
    state = "".join(f"{g}{sep}{r.replace(', ', sep)}\n" for g, r in enumerate(rows))
    text = read("domain-fm-healthy.txt")
    head, _ = text.split("== fabric_manager\n")
    text = f"{head}== fabric_manager\n{unit}\n== fabric_state\n{state}== end\n"
    report = judge_node_text(text, "imex")
    assert report.node_verdict == "healthy", [f.to_json() for f in report.findings]
    assert node_reading(text, "node-imex").value == 0
    assert {f.severity for f in report.findings} <= {"info"}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["Completed, Success", "Not Started, [N/A]",
                                 "In Progress, [N/A]", "Completed, Failure"]),
                min_size=1, max_size=8))
def test_any_gpu_not_configured_is_one_fault_for_the_tray(rows):
    state = "".join(f"{g}, {r}\n" for g, r in enumerate(rows))
    findings, facts = judge_fabric_manager({"fabric_state": state}, builtin_catalogue())
    bad = sum(r != "Completed, Success" for r in rows)
    assert len(findings) == (1 if bad else 0)
    assert facts["fm_configured"] == f"{len(rows) - bad}/{len(rows)}"
    if bad:
        assert findings[0].severity == "fault"
