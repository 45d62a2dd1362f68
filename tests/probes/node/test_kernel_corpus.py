"""The kernel-log judge on published kernel logs: ``../shared/corpus/node`` (its ``dmesg_*`` and
``journal_*`` entries, verdicts and facts from ``expected.json``) and the ``dmesg`` / ``journalctl``
captures among ``../shared/fixtures/nccl-logs``. Third-party text is read where it is, never
copied here; the tests skip when ``../shared`` is absent."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from fabriccheck.probes.node.judge import NodeContext, judge_node_text
from tests.conftest import REPO, SHARED_ABSENT, SHARED_FIXTURES

CORPUS = REPO.parent / "shared" / "corpus" / "node"
ENTRIES = ([e for e in json.loads((CORPUS / "expected.json").read_text())
            if e["file"].startswith(("dmesg_", "journal_"))] if CORPUS.is_dir() else [])
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(),
                                  reason=f"third-party corpus not present at {CORPUS}")
#: facts the judge reports under expected.json's names
FACT_KEYS = ("xids", "xid_counts", "xid_count", "gpu_pci", "gpus_pci", "caused_by_xids",
             "peermem_invalid_context_lines", "row_remap_pending", "kernel", "nvidia_driver",
             "mlx5_insufficient_power_warnings", "mlx5_cable_unplugged", "mlx5_cable_plugged")


def read(path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


@needs_corpus
def test_the_corpus_has_the_four_kernel_logs():
    assert len(ENTRIES) == 4


@needs_corpus
@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["file"])
def test_each_corpus_kernel_log_is_detected_and_judged_as_expected(entry):
    report = judge_node_text(read(CORPUS / entry["file"]))  # detected, as check.py's CLI run
    assert report.tool == "kernel-log" and report.complete
    want = entry["verdict"]
    got = report.node_verdict
    assert got in ("healthy", "warn") if want == "benign-noise" else got == want, (
        [f.to_json() for f in report.findings])
    compared = [k for k in FACT_KEYS if k in entry["facts"]]
    assert compared, entry["file"]
    for key in compared:
        assert report.facts.get(key) == entry["facts"][key], key


@needs_corpus
def test_the_boot_log_full_of_mlx5_noise_has_no_warning_at_all():
    report = judge_node_text(read(CORPUS / "dmesg_gpud_xe9680_boot_mlx5-pcie-power.txt"))
    assert report.node_verdict == "healthy" and not report.of("warn")
    assert report.facts["mlx5_fw"] == ["22.38.1002", "28.39.1002"]


@needs_corpus
@pytest.mark.parametrize("since, verdict, xids, peermem", [
    (datetime(2024, 11, 15, 12, 0, tzinfo=timezone.utc), "fault", [48, 63, 94], 20),
    (datetime(2024, 11, 15, 12, 2, 4, tzinfo=timezone.utc), "warn", [], 20),
    (datetime(2024, 11, 16, tzinfo=timezone.utc), "healthy", [], None),
])
def test_since_the_last_check_on_a_published_log(since, verdict, xids, peermem):
    text = read(CORPUS / "dmesg_gpud_h100_xid48-63-94_peermem.txt")
    report = judge_node_text(text, context=NodeContext(since=since))
    assert report.node_verdict == verdict and report.facts["xids"] == xids
    assert report.facts.get("peermem_invalid_context_lines") == peermem
    assert report.facts["scope"] == f"since {since.isoformat()}"


@needs_corpus
def test_xid_45_lines_are_judged_by_their_nvlink_cause_on_each_gpu():
    report = judge_node_text(read(CORPUS / "journal_ogkm1150_xid45-after-nvlink-xid.txt"))
    assert {(f.check, f.part) for f in report.of("fault")} == {
        ("xid-149", "gpu 0000:dc:00.0"), ("xid-145", "gpu 0000:ed:00.0"),
        ("xid-145", "gpu 0000:ba:00.0"), ("xid-145", "gpu 0000:97:00.0")}


# ---- the kernel logs among the NCCL-log fixtures -------------------------------------------------
NCCL_DIR = SHARED_FIXTURES / "nccl-logs"
#: file -> (verdict, a check among the findings, its part), as a careful operator reads it
KERNEL_CAPTURES = {
    "dmesg_ctime_xid119_gsp_rpc_timeout_xe9680.txt": ("fault", "xid-119", "gpu 0000:9b:00.0"),
    "dmesg_ctime_xid13_sm_exception_xid109_ctx_switch_timeout.txt":
        ("fault", "xid-109", "gpu 0000:cb:00.0"),
    "dmesg_decode_iso_libnccl_segfault.txt": ("healthy", "kern-segfault", "node"),
    "dmesg_nvrm_fallen_off_bus_no_xid_570_open.txt":
        ("fault", "kern-nvrm-fallen-off-bus", "gpu 0000:b3:00.0"),
    "dmesg_xid74_nvlink_fatal.txt": ("fault", "xid-74", "gpu 0000:2d:00.0"),
    "dmesg_xid79_gpu_fallen_off_bus.txt": ("fault", "xid-79", "gpu 0000:5d:00.0"),
    "dmesg_xid79_probe_failed_after_reload.txt":
        ("fault", "kern-nvrm-fallen-off-bus", "gpu 0000:5d:00.0"),
    "journalctl_k_mlx5_ib_port_link_init_active_boot_excerpt.txt": ("healthy", None, None),
    "journalctl_mlx5_eth_link_up_flapping.txt": ("warn", "kern-link-down", "nic eth1"),
}


@pytest.mark.skipif(not NCCL_DIR.is_dir(), reason=SHARED_ABSENT)
@pytest.mark.parametrize("name", sorted(KERNEL_CAPTURES))
def test_published_kernel_captures_are_judged_as_an_operator_would(name):
    verdict, check, part = KERNEL_CAPTURES[name]
    report = judge_node_text(read(NCCL_DIR / name), "kernel-log")
    assert report.node_verdict == verdict, [f.to_json() for f in report.findings]
    if check:
        assert (check, part) in {(f.check, f.part) for f in report.findings}
