"""The kernel-log judge: every stamp format, Xids and driver lines by meaning, multi-line reports,
"since the last check", truncation, detection, and the catalogue it reads."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.probes.node.catalogue import builtin_catalogue, load_catalogue
from fabriccheck.probes.node.judge import NodeContext, detect_node_tool, judge_node_text
from fabriccheck.probes.node.kernel import judge_kernel_log, looks_like_kernel_log
from tests.conftest import LOCAL_FIXTURES

FIX = LOCAL_FIXTURES / "node"
CAT = builtin_catalogue()
UTC = timezone.utc


def fixture(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def judge(text: str, **context):
    return judge_kernel_log(text, CAT, NodeContext(**context))


def checks(report, severity: str | None = None) -> set[str]:
    return {f.check for f in report.findings if severity in (None, f.severity)}


# ---- every fixture: verdict, the checks that fire, the part they name ------------------------
CASES = [
    # file, verdict, {check: part} that must be among the findings (with that severity)
    ("kernel-dmesg-raw-xid79-one-gpu.txt", "fault",
     {("xid-79", "fault"): "gpu 0000:db:00.0", ("xid-13", "info"): "gpu 0000:2a:00.0"}),
    ("kernel-dmesg-T-xid48.txt", "fault",
     {("xid-48", "fault"): "gpu 0000:3b:00.0", ("xid-63", "warn"): "gpu 0000:3b:00.0",
      ("xid-94", "warn"): "gpu 0000:3b:00.0"}),
    ("kernel-dmesg-iso-xid119-gsp.txt", "fault", {("xid-119", "fault"): "gpu 0000:5d:00.0"}),
    ("kernel-journal-short-app-xids.txt", "healthy",
     {("xid-13", "info"): "gpu 0000:18:00.0", ("xid-43", "info"): "gpu 0000:18:00.0",
      ("xid-31", "info"): "gpu 0000:2a:00.0", ("xid-45", "info"): "gpu 0000:3a:00.0"}),
    ("kernel-journal-short-iso-xid63.txt", "warn", {("xid-63", "warn"): "gpu 0000:9b:00.0"}),
    ("kernel-journal-short-precise-xid92.txt", "warn", {("xid-92", "warn"): "gpu 0000:cb:00.0"}),
    ("kernel-journal-short-monotonic-xid94.txt", "warn",
     {("xid-94", "warn"): "gpu 0000:ba:00.0"}),
    ("kernel-journal-short-full-xid79.txt", "fault", {("xid-79", "fault"): "gpu 0009:01:00.0"}),
    ("kernel-kernlog-xid95.txt", "fault", {("xid-95", "fault"): "gpu 0000:4e:00.0"}),
    ("kernel-syslog-mixed-programs.txt", "warn", {("xid-94", "warn"): "gpu 0000:4e:00.0"}),
    ("kernel-rfc5424-mlx5-cmd-timeout.txt", "fault",
     {("kern-mlx5-cmd-timeout", "fault"): "nic 0000:3c:00.0"}),
    ("kernel-dmesg-fallen-off-bus-no-xid.txt", "fault",
     {("kern-nvrm-fallen-off-bus", "fault"): "gpu 0000:b3:00.0"}),
    ("kernel-dmesg-x-mlx5-benign.txt", "healthy",
     {("kern-mlx5-cmd-failed", "info"): "nic 0000:1a:00.0",
      ("kern-mlx5-pcie-power", "info"): "nic 0000:1a:00.0",
      ("kern-mlx5-module-plug", "info"): "nic 0000:1b:00.1",
      ("kern-link-down", "info"): "nic enp27s0f1np1"}),
    ("kernel-dmesg-mlx5-health-fatal.txt", "fault",
     {("kern-mlx5-health", "fault"): "nic 0000:5c:00.0",
      ("kern-mlx5-health-issue", "fault"): "nic 0000:5c:00.0"}),
    ("kernel-dmesg-mlx5-health-warning.txt", "warn",
     {("kern-mlx5-health-issue", "warn"): "nic 0000:9c:00.0"}),
    ("kernel-dmesg-mlx5-cable-error.txt", "fault",
     {("kern-mlx5-module-error", "fault"): "nic 0000:4d:00.0"}),
    ("kernel-dmesg-peermem.txt", "warn", {("kern-peermem-invalid-context", "warn"): "node"}),
    ("kernel-dmesg-rminit-failed.txt", "fault",
     {("kern-nvrm-init-failed", "fault"): "gpu 0000:41:00.0"}),
    ("kernel-dmesg-aer.txt", "fault",
     {("kern-pcie-aer-fatal", "fault"): "pcie 0000:18:00.0 (nvidia)",
      ("kern-pcie-aer-corrected", "info"): "pcie 0000:00:1c.5 (pcieport)"}),
    ("kernel-dmesg-aer-nvme-fatal.txt", "warn",
     {("kern-pcie-aer-fatal", "warn"): "pcie 0000:c1:00.0 (nvme)"}),
    ("kernel-dmesg-link-flap.txt", "warn",
     {("kern-link-down", "warn"): "nic enp27s0f0np0", ("kern-link-down", "info"):
      "nic enp27s0f1np1"}),
    ("kernel-dmesg-oom-segfault.txt", "healthy",
     {("kern-oom", "info"): "node", ("kern-segfault", "info"): "node"}),
    ("kernel-journal-week-old-xid79.txt", "fault", {("xid-79", "fault"): "gpu 0000:db:00.0"}),
    ("kernel-journal-two-boots.txt", "healthy", {}),
    ("kernel-dmesg-nvlink5.txt", "warn",
     {("xid-144", "warn"): "gpu 0008:01:00.0", ("xid-149", "warn"): "gpu 0008:01:00.0",
      ("xid-154", "info"): "gpu 0008:01:00.0"}),
    ("kernel-dmesg-nvlink5-fatal.txt", "fault",
     {("xid-149", "fault"): "gpu 0009:01:00.0", ("xid-154", "fault"): "gpu 0009:01:00.0"}),
    ("kernel-dmesg-sxid.txt", "fault",
     {("kern-sxid-fatal", "fault"): "pcie 0000:06:00.0 (nvswitch)",
      ("kern-sxid-nonfatal", "info"): "pcie 0000:08:00.0 (nvswitch)"}),
    ("kernel-journal-no-entries.txt", "healthy", {}),
    ("kernel-dmesg-unknown-xid.txt", "warn", {("xid-default", "warn"): "gpu 0000:18:00.0"}),
    ("kernel-dmesg-truncated-stamp.txt", "warn", {}),
    ("kernel-dmesg-truncated-xid.txt", "warn", {}),
]


@pytest.mark.parametrize("name, verdict, expected", CASES, ids=[c[0] for c in CASES])
def test_each_fixture_gets_its_verdict_and_names_the_part(name, verdict, expected):
    report = judge_node_text(fixture(name), "kernel-log")
    assert report.tool == "kernel-log"
    assert report.node_verdict == verdict, [f.to_json() for f in report.findings]
    got = {(f.check, f.severity, f.part) for f in report.findings}
    for (check, severity), part in expected.items():
        assert (check, severity, part) in got, (check, severity, part, got)
    for f in report.findings:  # every finding is explained and traceable
        assert f.what and f.line and f.source, f


def test_every_fixture_is_written_here_and_says_what_it_models():
    names = sorted(p.name for p in FIX.glob("kernel-*"))
    assert set(names) == {c[0] for c in CASES}
    for name in names:
        first = fixture(name).splitlines()[0]
        assert first.startswith("# source: written for fabriccheck, modelled on "), name


@pytest.mark.parametrize("name", [c[0] for c in CASES if "syslog-mixed" not in c[0]])
def test_each_kernel_log_fixture_is_detected_as_one(name):
    assert detect_node_tool(fixture(name).partition("\n")[2]) == "kernel-log"


# ---- the rules the brief names ---------------------------------------------------------------
def xid_line(n: int, bus: str = "0000:3b:00", rest: str = "pid=1, name=python3, Ch 00000008",
             stamp: str = "[ 100.000001]") -> str:
    return f"{stamp} NVRM: Xid (PCI:{bus}): {n}, {rest}\n"


@pytest.mark.parametrize("n", [79, 48, 119, 95, 62, 64, 74, 109, 120, 136, 140, 143, 46])
def test_a_fault_xid_alone_names_the_xid_and_the_gpu(n):
    report = judge(xid_line(n, "0000:CB:00"))
    assert report.node_verdict == "fault"
    (f,) = report.findings
    assert f.check == f"xid-{n}" and f.part == "gpu 0000:cb:00.0"
    assert f"Xid {n}" in f.what and "0000:cb:00" in f.what


@pytest.mark.parametrize("n", [13, 31, 43, 45, 8, 32, 38, 68, 69, 121])
def test_application_xids_alone_are_info_the_gpu_keeps_serving(n):
    report = judge(xid_line(n))
    assert report.node_verdict == "healthy"
    assert [f.severity for f in report.findings] == ["info"]


@pytest.mark.parametrize("n, rest", [
    (63, "Row Remapper: New row (0x0000000b1e40a2c0) marked for remapping, reset gpu to activate."),
    (63, "Dynamic Page Retirement: New retired page, reload the driver to activate. (0x12345)"),
    (94, "Contained: SM (0x1). RST: No, D-RST: No"),
    (92, "High single-bit ECC error rate"),
])
def test_memory_events_that_need_no_drain_are_listed(n, rest):
    report = judge(xid_line(n, rest=rest))
    assert report.node_verdict == "warn" and checks(report) == {f"xid-{n}"}


@pytest.mark.parametrize("root, check, verdict", [
    (149, "xid-149", "fault"), (145, "xid-145", "fault"), (48, "xid-48", "fault"),
    (13, "xid-13", "healthy"), (777, "xid-default", "warn"),
])
def test_xid_45_is_judged_by_the_xid_that_caused_it(root, check, verdict):
    line = xid_line(45, rest=f"pid=18, name=python3, Ch 00000001 caused by previous Xid {root}")
    report = judge(line)
    assert report.node_verdict == verdict and checks(report) == {check}
    assert f"caused by Xid {root}" in report.findings[0].what
    assert report.facts["caused_by_xids"] == [root] and report.facts["xids"] == [45]


def test_repeated_identical_events_are_one_finding_with_a_count():
    text = "".join(xid_line(94, "0000:19:00", stamp=f"[ {100 + i}.5]") for i in range(9))
    report = judge(text)
    (f,) = report.findings
    assert "(seen 9 times)" in f.what and report.facts["xid_counts"] == {"94": 9}
    assert report.facts["events"] == 9


def test_the_access_reg_failure_from_a_user_tool_is_info():
    line = ("[ 812.100] mlx5_core 0000:d2:00.0: mlx5_cmd_out_err:838:(pid 1441871): "
            "ACCESS_REG(0x805) op_mod(0x1) failed, status bad parameter(0x3), syndrome (0x6c4d4c),"
            " err(-22)\n")
    report = judge(line * 3)
    assert report.node_verdict == "healthy"
    assert checks(report, "info") == {"kern-mlx5-cmd-failed"}
    status_internal = line.replace("bad parameter(0x3)", "internal error(0x1)")
    assert judge(status_internal).node_verdict == "healthy"  # the status name is not a health word


@pytest.mark.parametrize("line", [
    "mlx5_core 0000:3c:00.0: cmd_work_handler:938:(pid 7): cmd[0]: ACCESS_REG(0x805) timeout",
    "mlx5_core 0000:3c:00.0: wait_func:1195:(pid 7): ACCESS_REG(0x805) canceled on out of queue "
    "timeout.",
    "mlx5_core 0000:3c:00.0: poll_health:835:(pid 0): Fatal error 1 detected",
    "mlx5_core 0000:3c:00.0: mlx5_enter_error_state:... internal state error detected",
    "mlx5_core 0000:3c:00.0: print_health_info:424:(pid 0): PCI slot is unavailable",
    "mlx5_core 0000:3c:00.0: mlx5_port_module_event:1131:(pid 0): Port module event[error]: "
    "module 0, Cable error, Power budget exceeded",
])
def test_nic_failures_are_faults_on_that_nic(line):
    report = judge(f"[ 5.0] {line}\n")
    assert report.node_verdict == "fault" and report.findings[0].part == "nic 0000:3c:00.0"


def test_a_health_dump_is_one_event_not_one_per_line():
    report = judge_node_text(fixture("kernel-dmesg-mlx5-health-fatal.txt"), "kernel-log")
    assert report.facts["events"] == 3  # miss count, the health report, the fatal reporter
    assert all("assert_var" not in f.line and "synd 0x" not in f.line for f in report.findings)


def test_a_gsp_timeout_dump_counts_its_xid_lines_only():
    report = judge_node_text(fixture("kernel-dmesg-iso-xid119-gsp.txt"), "kernel-log")
    assert report.facts["xid_counts"] == {"119": 3} and report.facts["events"] == 3
    assert report.facts["kernel"] == "6.5.0-1020-nvidia"


def test_fallen_off_the_bus_without_a_xid_names_the_gpu_from_the_first_line():
    report = judge_node_text(fixture("kernel-dmesg-fallen-off-bus-no-xid.txt"), "kernel-log")
    f = next(f for f in report.findings if f.check == "kern-nvrm-fallen-off-bus")
    assert f.part == "gpu 0000:b3:00.0" and report.facts["xids"] == []


def test_a_fallen_off_report_beside_its_xid_79_is_not_a_second_finding():
    report = judge_node_text(fixture("kernel-dmesg-raw-xid79-one-gpu.txt"), "kernel-log")
    assert "kern-nvrm-fallen-off-bus" not in checks(report)
    assert report.facts["gpus_pci"] == ["0000:2a:00", "0000:db:00"]


def test_a_port_the_topology_does_not_use_is_info():
    text = fixture("kernel-dmesg-link-flap.txt")
    assert judge_node_text(text, "kernel-log", context=NodeContext(
        used_ports=frozenset({"enp27s0f1np1"}))).node_verdict == "healthy"
    assert judge_node_text(text, "kernel-log", context=NodeContext(
        used_ports=frozenset({"enp27s0f0np0"}))).node_verdict == "warn"


def test_a_flood_of_corrected_pcie_errors_is_a_warn():
    one = ("[ {t}.1] pcieport 0000:00:01.0: PCIe Bus Error: severity=Corrected, type=Physical "
           "Layer, (Receiver ID)\n")
    assert judge(one.format(t=5)).node_verdict == "healthy"
    report = judge("".join(one.format(t=5 + i) for i in range(100)))
    assert report.node_verdict == "warn" and "(seen 100 times)" in report.findings[0].what


def test_a_user_process_trap_is_a_segfault_and_a_kernel_oops_is_a_warn():
    trap = ("[ 9.1] traps: python3[4242] general protection fault ip:7f0a1b2c sp:7ffd0000 error:0 "
            "in libc.so.6[7f0a1b000000+195000]\n")
    assert checks(judge(trap)) == {"kern-segfault"} and judge(trap).node_verdict == "healthy"
    oops = ("[ 9.1] general protection fault, probably for non-canonical address "
            "0xdead000000000100: 0000 [#1] PREEMPT SMP NOPTI\n")
    assert checks(judge(oops)) == {"kern-oops"} and judge(oops).node_verdict == "warn"


def test_an_unknown_xid_is_a_warn_that_says_to_look_it_up():
    (f,) = judge(xid_line(199)).findings
    assert f.severity == "warn" and f.check == "xid-default" and "look it up" in f.what


# ---- since the last check --------------------------------------------------------------------
def test_a_week_old_xid_does_not_count_after_the_check_that_saw_it():
    text = fixture("kernel-journal-week-old-xid79.txt")
    since = datetime(2026, 11, 20, tzinfo=UTC)
    report = judge(text, since=since)
    assert report.node_verdict == "healthy" and "xid-79" not in checks(report)
    assert report.facts["scope"] == "since 2026-11-20T00:00:00+00:00"
    assert report.facts["events_before_since"] == 2
    assert report.facts["xids"] == [13]
    assert judge(text).facts["scope"] == "since boot"
    assert judge(text).node_verdict == "fault"


def test_a_naive_since_is_utc():
    text = fixture("kernel-journal-week-old-xid79.txt")
    naive = judge(text, since=datetime(2026, 11, 20))
    aware = judge(text, since=datetime(2026, 11, 20, 1, tzinfo=timezone(timedelta(hours=1))))
    assert naive.facts["xids"] == aware.facts["xids"] == [13]


@pytest.mark.parametrize("name, since, kept", [
    ("kernel-dmesg-T-xid48.txt", datetime(2026, 11, 26, 23, 0, 2), ["94"]),
    ("kernel-dmesg-iso-xid119-gsp.txt", datetime(2026, 11, 26, 23, 0, 5), ["119"]),
    ("kernel-journal-short-iso-xid63.txt", datetime(2026, 11, 26, 23, 10, 45), []),
    ("kernel-journal-short-precise-xid92.txt", datetime(2026, 11, 26, 23, 0, 1), ["92"]),
    ("kernel-journal-short-full-xid79.txt", datetime(2026, 11, 26, 23, 0, 2), []),
    ("kernel-kernlog-xid95.txt", datetime(2026, 11, 26, 23, 0), ["95"]),
    ("kernel-rfc5424-mlx5-cmd-timeout.txt", datetime(2026, 11, 26, 23, 0, 5), []),
])
def test_since_applies_to_every_absolute_stamp_format(name, since, kept):
    report = judge_node_text(fixture(name), "kernel-log", context=NodeContext(since=since))
    assert list(report.facts["xid_counts"]) == kept
    assert report.facts["scope"].startswith("since 2026-11-26T")


def test_since_uptime_applies_to_seconds_stamps_of_the_same_boot():
    text = fixture("kernel-dmesg-raw-xid79-one-gpu.txt")
    report = judge(text, since_uptime_s=8000.0)
    assert report.facts["xids"] == [79] and report.facts["scope"] == "since 8000 s after boot"
    assert judge(text, since_uptime_s=9125.0).node_verdict == "healthy"
    # an uptime past the log's last line is another (earlier) boot's: the whole log counts
    assert judge(text, since_uptime_s=50_000.0).facts["xids"] == [13, 79]


def test_since_uptime_of_another_boot_is_not_used():
    text = ("-- Boot 9d8c7b6a5f4e4d3c8b2a1f0e9d8c7b6a --\n"
            "[ 8123.402117] gpu-node-07 kernel: " + xid_line(79, stamp="").lstrip()
            + "[ 9500.000001] gpu-node-07 kernel: mlx5_core 0000:1a:00.0 ibp26s0: Link up\n")
    assert judge(text, since_uptime_s=9000.0,
                 boot_id="9d8c7b6a5f4e4d3c8b2a1f0e9d8c7b6a").node_verdict == "healthy"
    other = judge(text, since_uptime_s=9000.0, boot_id="00000000000000000000000000000000")
    assert other.node_verdict == "fault" and other.facts["scope"] == "since boot"
    assert other.facts["boot_id"] == "9d8c7b6a5f4e4d3c8b2a1f0e9d8c7b6a"


def test_an_earlier_boot_in_the_journal_does_not_count():
    report = judge_node_text(fixture("kernel-journal-two-boots.txt"), "kernel-log")
    assert report.node_verdict == "healthy" and report.facts["events_before_last_boot"] == 1
    assert report.facts["boot_id"] == "9d8c7b6a5f4e4d3c8b2a1f0e9d8c7b6a"
    assert report.facts["nvidia_driver"] == "535.161.08"


def test_journal_stamps_without_a_year_cross_new_year_from_since():
    text = ("Dec 30 23:59:00 h kernel: " + xid_line(79, stamp="").lstrip()
            + "Jan  2 00:00:01 h kernel: " + xid_line(48, stamp="").lstrip())
    report = judge(text, since=datetime(2026, 12, 31, tzinfo=UTC))
    assert report.facts["xids"] == [48]
    assert report.facts["last_stamp"] == "2027-01-02T00:00:01+00:00"
    old = judge("Nov 20 04:12:40 h kernel: " + xid_line(79, stamp="").lstrip(),
                since=datetime(2026, 11, 28, tzinfo=UTC))
    assert old.node_verdict == "healthy"  # an old log is not moved into next year


@pytest.mark.parametrize("name, last", [
    ("kernel-dmesg-raw-xid79-one-gpu.txt", 9131.55421),
    ("kernel-dmesg-T-xid48.txt", "2026-11-26T23:00:02+00:00"),
    ("kernel-dmesg-iso-xid119-gsp.txt", "2026-11-26T23:00:13.105812+00:00"),
    ("kernel-journal-short-monotonic-xid94.txt", 8123.40216),
    ("kernel-journal-short-full-xid79.txt", "2026-11-26T23:00:01+00:00"),
    ("kernel-rfc5424-mlx5-cmd-timeout.txt", "2026-11-26T23:00:12.001100+00:00"),
])
def test_the_last_stamp_is_the_next_checks_since(name, last):
    assert judge_node_text(fixture(name), "kernel-log").facts["last_stamp"] == last


# ---- incomplete, empty, not a kernel log ----------------------------------------------------
@pytest.mark.parametrize("name, words", [
    ("kernel-dmesg-truncated-stamp.txt", "the last line is cut"),
    ("kernel-dmesg-truncated-xid.txt", "cut inside a Xid line"),
])
def test_a_cut_last_line_is_incomplete_never_healthy(name, words):
    report = judge_node_text(fixture(name), "kernel-log")
    assert not report.complete and words in report.reason and report.node_verdict == "warn"
    assert report.facts["xids"] == []  # "Xid ... 7" cut from a longer number is not Xid 7


def test_a_complete_last_line_without_its_newline_is_fine():
    report = judge(xid_line(13).rstrip("\n"))
    assert report.complete and report.node_verdict == "healthy"


@pytest.mark.parametrize("text", ["", "dmesg: read kernel buffer failed: Operation not permitted"])
def test_no_kernel_lines_is_incomplete(text):
    report = judge(text)
    assert not report.complete and "no kernel log lines" in report.reason
    assert report.node_verdict == "warn"


def test_no_new_journal_entries_is_healthy_and_complete():
    report = judge_node_text(fixture("kernel-journal-no-entries.txt"), "kernel-log")
    assert report.complete and report.node_verdict == "healthy" and report.facts["events"] == 0


def test_another_programs_syslog_line_quoting_a_xid_does_not_count():
    report = judge_node_text(fixture("kernel-syslog-mixed-programs.txt"), "kernel-log")
    assert report.facts["xids"] == [94]


# ---- detection ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "n1:2:3 [0] NCCL INFO Bootstrap\n[ 5.1] NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off\n",
    "[ 5.1] NVRM: Xid (PCI:0000:18:00): 79, x\n[rank0]: ProcessGroupNCCL watchdog timeout\n",
    "Traceback (most recent call last):\n  File \"train.py\", line 1\n[ 5.1] NVRM: Xid (PCI:0)\n",
    "[ 5.1] ok\ntorch.distributed.DistBackendError: NCCL error\n",
    "Nov 26 23:00:01 h sshd[1]: Accepted\nNov 26 23:00:02 h systemd[1]: Started\n",
    "2026-11-26T23:00:01Z INFO step 100 loss 2.1\n2026-11-26T23:00:02Z INFO step 101\n",
    "CA 'mlx5_0'\n\tCA type: MT4129\n\tPort 1:\n\t\tState: Active\n",
    "",
])
def test_job_logs_and_other_outputs_are_not_kernel_logs(text):
    assert not looks_like_kernel_log(text)


def test_a_kernel_log_is_detected_through_the_judge_entry_point():
    text = fixture("kernel-dmesg-T-xid48.txt")
    assert judge_node_text(text).tool == "kernel-log"  # detected, the source line stripped


# ---- the catalogue it reads ------------------------------------------------------------------
REQUIRED = [8, 13, 31, 32, 38, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109, 119,
            120, 121, 136, 140, 143, *range(144, 151), 154]


def test_the_catalogue_has_a_sourced_entry_for_every_required_xid():
    for n in REQUIRED:
        e = CAT.entry(f"xid-{n}")
        assert e.match["xid"] == n and "Xid" in e.source and e.part == "gpu", n
    assert {CAT.entry(f"xid-{n}").severity for n in (79, 48, 119, 95)} == {"fault"}
    assert {CAT.entry(f"xid-{n}").severity for n in (13, 31, 43, 45)} == {"info"}
    assert {CAT.entry(f"xid-{n}").severity for n in (63, 94)} == {"warn"}
    assert CAT.entry("xid-92").severity in ("warn", "info")
    assert CAT.entry("xid-default").severity == "warn"
    for e in CAT.with_prefix("kern-"):
        assert e.source.strip() and e.match.get("text"), e.id


def test_a_spec_override_changes_the_grade():
    cat = load_catalogue({"xid-63": {"severity": "fault"}})
    assert judge_kernel_log(xid_line(63), cat, None).node_verdict == "fault"
    cat = load_catalogue({"kern-mlx5-health": {"match": {"text": ["site-specific death"]}}})
    line = "[ 1.0] mlx5_core 0000:3c:00.0: site-specific death\n"
    assert judge_kernel_log(line, cat, None).node_verdict == "fault"
    assert judge(line).node_verdict == "healthy"


# ---- properties ----------------------------------------------------------------------------------
INFO_XIDS = sorted(int(e.id[4:]) for e in CAT.with_prefix("xid-")
                   if e.severity == "info" and e.id != "xid-default" and not e.params)
FAULT_XIDS = sorted(int(e.id[4:]) for e in CAT.with_prefix("xid-")
                    if e.severity == "fault" and not e.params)
BUSES = st.builds("{:04x}:{:02x}:00".format, st.integers(0, 9), st.integers(1, 255))
BENIGN = [
    "mlx5_core 0000:1a:00.0: mlx5_cmd_out_err:838:(pid 7): ACCESS_REG(0x805) op_mod(0x1) failed, "
    "status bad parameter(0x3), syndrome (0x6c4d4c), err(-22)",
    "mlx5_core 0000:1a:00.0: mlx5_pcie_event:299:(pid 9): Detected insufficient power on the PCIe "
    "slot (27W).",
    "mlx5_core 0000:1a:00.0: Port module event: module 1, Cable unplugged",
    "mlx5_core 0000:1a:00.0: firmware version: 28.39.1002",
    "python3[88301]: segfault at 7f797fe00000 ip 00007f7c7ac69996 sp 00007f7c12fd7c30 error 4",
    "Out of memory: Killed process 88123 (python3) total-vm:812341232kB",
    "usb 1-10: New USB device found, idVendor=1604, idProduct=10c0",
    "nvidia-nvswitch3: SXid (PCI:0000:08:00.0): 22013, Non-fatal, Link 60 Minion Link DLREQ",
]
info_line = st.one_of(
    st.builds(lambda n, b: f"NVRM: Xid (PCI:{b}): {n}, pid=1, name=python3, Ch 00000008",
              st.sampled_from(INFO_XIDS), BUSES),
    st.sampled_from(BENIGN))
STAMPS = st.sampled_from(["[{t:12.6f}] ", "2026-11-26T23:{m:02d}:01,123456+00:00 ",
                          "Nov 26 23:{m:02d}:01 gpu-node-07 kernel: ",
                          "kern  :info  : [{t:12.6f}] "])


@settings(max_examples=60)
@given(st.lists(info_line, min_size=1, max_size=30), STAMPS, st.data())
def test_info_lines_never_make_a_fault_and_one_fault_xid_anywhere_does(lines, stamp, data):
    def stamped(i, msg):
        return stamp.format(t=10.0 + i, m=i % 60) + msg + "\n"

    text = "".join(stamped(i, m) for i, m in enumerate(lines))
    report = judge(text)
    assert report.node_verdict == "healthy" and report.complete
    n = data.draw(st.sampled_from(FAULT_XIDS))
    bus = data.draw(BUSES)
    at = data.draw(st.integers(0, len(lines)))
    bad = f"NVRM: Xid (PCI:{bus}): {n}, pid='<unknown>', name=<unknown>, something broke"
    text = "".join(stamped(i, m) for i, m in enumerate(lines[:at] + [bad] + lines[at:]))
    report = judge(text)
    assert report.node_verdict == "fault"
    faults = report.of("fault")
    assert [f.part for f in faults] == [f"gpu {bus}.0"] and f"Xid {n}" in faults[0].what
