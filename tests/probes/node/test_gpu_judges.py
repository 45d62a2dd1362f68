"""The GPU judges (nvidia-smi table, -L, -q, -q -x, topo -m, nvlink -s; rocm-smi, amd-smi):
detection, the verdict and the parts named on fixtures written for fabriccheck, the rules one
by one on small texts, and invariants over generated ``nvidia-smi -q`` outputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.probes._text import strip_source_line
from fabriccheck.probes.node import (
    NODE_TOOLS,
    amd,
    smi_fabric,
    smi_nvlink,
    smi_query,
    smi_table,
    smi_xml,
)
from fabriccheck.probes.node.catalogue import builtin_catalogue, load_catalogue
from fabriccheck.probes.node.judge import NodeContext, detect_node_tool, judge_node_text
from tests.conftest import LOCAL_FIXTURES

NODE = LOCAL_FIXTURES / "node"
GPU_FIXTURES = sorted(p for p in NODE.glob("*") if p.name.startswith(("nvidia-smi", "amd",
                                                                      "rocm")))
MODULES = (smi_query, smi_xml, smi_table, smi_nvlink, smi_fabric, amd)


def read(name: str) -> str:
    return strip_source_line((NODE / name).read_text(encoding="utf-8"))


def judge(name: str, **context):
    return judge_node_text(read(name), context=NodeContext(**context))


def bad(report) -> set[tuple[str, str, str]]:
    """(severity, check, part) of the fault and warn findings."""
    return {(f.severity, f.check, f.part) for f in report.findings if f.severity != "info"}


# ---- every fixture: tool, verdict, the parts named ------------------------------------------
CASES = {
    # name: (tool, verdict, {(severity, check, part)} of fault/warn findings)
    "nvidia-smi-table-535-8xh100-healthy.txt": ("nvidia-smi", "healthy", set()),
    "nvidia-smi-table-550-err-gpu-lost.txt": ("nvidia-smi", "fault", {
        ("fault", "gpu-err-field", "gpu 2"), ("fault", "gpu-lost", "gpu 0000:47:00.0")}),
    "nvidia-smi-table-470-volatile-ecc.txt": ("nvidia-smi", "fault", {
        ("fault", "gpu-ecc-volatile-uncorrectable", "gpu 1")}),
    "nvidia-smi-table-truncated.txt": ("nvidia-smi", "warn", set()),
    "nvidia-smi-table-mig.txt": ("nvidia-smi", "healthy", set()),
    "nvidia-smi-driver-unreachable.txt": ("nvidia-smi", "fault", {
        ("fault", "gpu-driver-unreachable", "node")}),
    "nvidia-smi-version-mismatch.txt": ("nvidia-smi", "fault", {
        ("fault", "gpu-driver-unreachable", "node")}),
    "nvidia-smi-L-8xa100-healthy.txt": ("nvidia-smi-L", "healthy", set()),
    "nvidia-smi-L-gpu-lost.txt": ("nvidia-smi-L", "fault", {
        ("fault", "gpu-lost", "gpu 0000:DB:00.0")}),
    "nvidia-smi-L-mig-r470.txt": ("nvidia-smi-L", "healthy", set()),
    "nvidia-smi-q-535-4xh100-busy-healthy.txt": ("nvidia-smi-q", "healthy", set()),
    "nvidia-smi-q-550-2xh100-fabric-in-progress.txt": ("nvidia-smi-q", "fault", {
        ("fault", "gpu-fabric-not-ready", "gpu 00000000:18:00.0"),
        ("fault", "gpu-fabric-not-ready", "gpu 00000000:2A:00.0")}),
    "nvidia-smi-q-535-a100-aggregate-uncorrectable.txt": ("nvidia-smi-q", "warn", {
        ("warn", "gpu-ecc-aggregate-uncorrectable", "gpu 00000000:2A:00.0")}),
    "nvidia-smi-q-535-h100pcie-width-x8.txt": ("nvidia-smi-q", "fault", {
        ("fault", "gpu-pcie-width-degraded", "gpu 00000000:2A:00.0")}),
    "nvidia-smi-q-470-v100-retired-pages-pending.txt": ("nvidia-smi-q", "fault", {
        ("fault", "gpu-retired-pages-pending", "gpu 00000000:1B:00.0"),
        ("warn", "gpu-ecc-aggregate-uncorrectable", "gpu 00000000:1B:00.0")}),
    "nvidia-smi-q-550-4xh100-hw-thermal.txt": ("nvidia-smi-q", "fault", {
        ("fault", "gpu-hw-thermal-slowdown", "gpu 00000000:3A:00.0")}),
    "nvidia-smi-q-d-ecc-truncated.txt": ("nvidia-smi-q", "warn", set()),
    "nvidia-smi-q-d-pcie-idle-gen1.txt": ("nvidia-smi-q", "healthy", set()),
    "nvidia-smi-q-d-performance-sw-thermal.txt": ("nvidia-smi-q", "warn", {
        ("warn", "gpu-sw-thermal-slowdown", "gpu 00000000:C1:00.0")}),
    "nvidia-smi-qx-v12-4xh100-remap-failure.xml": ("nvidia-smi-qx", "fault", {
        ("fault", "gpu-row-remap-failure", "gpu 00000000:3A:00.0"),
        ("warn", "gpu-row-remap-bank-exhausted", "gpu 00000000:3A:00.0")}),
    "nvidia-smi-qx-v11-2xv100-healthy.xml": ("nvidia-smi-qx", "healthy", set()),
    "nvidia-smi-qx-v10-truncated.xml": ("nvidia-smi-qx", "warn", set()),
    "nvidia-smi-qx-v12-570-recovery-reset.xml": ("nvidia-smi-qx", "fault", {
        ("fault", "gpu-ecc-volatile-uncorrectable", "gpu 00000000:2A:00.0"),
        ("fault", "gpu-reset-required", "gpu 00000000:2A:00.0")}),
    "nvidia-smi-topo-m-8xh100-nics-tabs.txt": ("nvidia-smi-topo", "healthy", set()),
    "nvidia-smi-topo-m-8xa100-gpu5-nvlink-down.txt": ("nvidia-smi-topo", "fault", {
        ("fault", "gpu-topo-nvlink-degraded", "gpu 5")}),
    "nvidia-smi-topo-m-dgx1-v100-mesh.txt": ("nvidia-smi-topo", "healthy", set()),
    "nvidia-smi-nvlink-s-8xh100-one-inactive.txt": ("nvidia-smi-nvlink", "fault", {
        ("fault", "gpu-nvlink-inactive", "gpu 6")}),
    "nvidia-smi-nvlink-s-pcie-no-bridge.txt": ("nvidia-smi-nvlink", "healthy", set()),
    "nvidia-smi-nvlink-s-truncated.txt": ("nvidia-smi-nvlink", "warn", set()),
    "nvidia-smi-nvlink-s-v100-slow-link.txt": ("nvidia-smi-nvlink", "warn", {
        ("warn", "gpu-nvlink-slow", "gpu 2")}),
    "rocm-smi-concise-rocm5-4xmi250.txt": ("rocm-smi", "healthy", set()),
    "rocm-smi-concise-rocm6-truncated.txt": ("rocm-smi", "warn", set()),
    "rocm-smi-pcie-x8-text.txt": ("rocm-smi", "fault", {
        ("fault", "amd-pcie-width-degraded", "gpu 1")}),
    "rocm-smi-json-truncated.txt": ("rocm-smi", "warn", set()),
    "rocm-smi-json-idle-low-dpm.txt": ("rocm-smi", "healthy", set()),
    "amd-smi-metric-pcie-replays.txt": ("amd-smi", "warn", {
        ("warn", "amd-pcie-replays", "gpu 1")}),
    "amd-smi-static-metric-width-x8.txt": ("amd-smi", "fault", {
        ("fault", "amd-pcie-width-degraded", "gpu 1")}),
    "amd-smi-metric-json-ecc.txt": ("amd-smi", "healthy", set()),
}


def test_every_gpu_fixture_has_a_case_and_says_what_it_models():
    assert {p.name for p in GPU_FIXTURES} == set(CASES)
    for p in GPU_FIXTURES:
        first = p.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# source: written for fabriccheck, modelled on "), p.name


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_is_detected_and_judged(name):
    tool, verdict, named = CASES[name]
    assert detect_node_tool(read(name)) == tool
    report = judge(name)
    assert report.tool == tool
    assert report.node_verdict == verdict, [f.to_json() for f in report.findings]
    assert bad(report) == named
    assert report.complete == (verdict != "warn" or bool(named)), report.reason
    for f in report.findings:  # every finding says where it was read and what to do
        assert f.source and (f.fix or f.severity == "info")


# ---- detection is strict -----------------------------------------------------------------------
NOT_GPU = [
    "# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5\n"
    "#  Rank  0 Group  0 Pid  12345 on     node-1 device  0 [0x18] NVIDIA H100 80GB HBM3\n",
    "node-1:12345:12345 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
    "node-1:12345:12345 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB\n",
    "[  812.401233] NVRM: GPU at PCI:0000:18:00: GPU-5a1c0e7d\n"
    "[  812.401240] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.\n",
    "CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n",
    "18:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)\n",
    "Connecting to host 10.0.0.2, port 5201\n[  5] local 10.0.0.1 port 40000 connected\n",
    "Job log: running nvidia-smi\n+------+\n| NVIDIA-SMI 535.54.03   Driver Version: 535.54.03 |\n"
    "epoch 1 loss 0.4\nepoch 2 loss 0.3\nstep 3\nstep 4\n",
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\nTraining started on GPU 0\n",
    '{"results": [{"busbw": 370.2}]}',
    "<html><body><nvidia_smi_log/></body></html>",
]


@pytest.mark.parametrize("text", NOT_GPU, ids=range(len(NOT_GPU)))
def test_other_outputs_are_not_taken_for_a_gpu_tool(text):
    for predicate in (smi_xml.looks_like_xml, smi_query.looks_like_query,
                      smi_table.looks_like_table, smi_table.looks_like_list,
                      smi_table.looks_like_topo, smi_nvlink.looks_like_nvlink,
                      amd.looks_like_rocm_smi, amd.looks_like_amd_smi):
        assert not predicate(text), predicate.__name__


def test_the_repo_fixtures_of_other_tools_are_not_gpu_outputs():
    others = [p for p in LOCAL_FIXTURES.rglob("*") if p.is_file() and p not in GPU_FIXTURES
              and p.stat().st_size < 2_000_000]
    assert len(others) > 20
    for p in others:
        text = strip_source_line(p.read_text(encoding="utf-8", errors="replace"))
        tool = detect_node_tool(text)
        if p.parent.name in ("preflight", "nvl72") and "nvidia-smi" in p.name:
            continue  # the preflight's and the NVL72 tests' own nvidia-smi fixtures
        if p.parent.name == "smi-trays":
            continue  # nvl72/smi-trays: GB200 trays' nvidia-smi -q named by host (topology import)
        assert not (tool or "").startswith(("nvidia-smi", "rocm", "amd")), (p, tool)


def test_detectors_look_only_at_the_head_of_a_long_text():
    tail = "\n" + "x" * 5_000_000
    assert smi_query.looks_like_query(read("nvidia-smi-q-d-pcie-idle-gen1.txt") + tail)
    assert not smi_table.looks_like_table("padding line\n" * 300 + read(
        "nvidia-smi-table-535-8xh100-healthy.txt"))


# ---- nvidia-smi -q rules --------------------------------------------------------------------
def q_text(*sections: str, attached: int | None = None) -> str:
    n = attached if attached is not None else len(sections)
    head = ("\n==============NVSMI LOG==============\n\nDriver Version : 550.90.07\n"
            f"CUDA Version : 12.4\n\nAttached GPUs : {n}\n")
    return head + "".join(sections)


def section(bus: str = "00000000:18:00.0", *, product: str = "NVIDIA H100 80GB HBM3",
            extra: str = "", virt: str = "None", width: str = "16x", gen: int = 5,
            util: int = 0, idle: str = "Active") -> str:
    return (f"GPU {bus}\n    Product Name : {product}\n    GPU Virtualization Mode\n"
            f"        Virtualization Mode : {virt}\n    PCI\n        GPU Link Info\n"
            f"            PCIe Generation\n                Max : 5\n                Current : "
            f"{gen}\n            Link Width\n                Max : 16x\n"
            f"                Current : {width}\n        Replays Since Reset : 0\n"
            f"    Clocks Event Reasons\n        Idle : {idle}\n        HW Slowdown : Not Active\n"
            f"    Utilization\n        Gpu : {util} %\n{extra}    Processes : None\n\n")


def test_a_pending_remap_is_a_fault_even_with_every_ecc_counter_at_zero():
    extra = ("    ECC Errors\n        Volatile\n            DRAM Uncorrectable : 0\n"
             "        Aggregate\n            DRAM Uncorrectable : 0\n    Remapped Rows\n"
             "        Correctable Error : 0\n        Uncorrectable Error : 1\n"
             "        Pending : Yes\n        Remapping Failure Occurred : No\n")
    report = judge_node_text(q_text(section(extra=extra)))
    assert bad(report) == {("fault", "gpu-row-remap-pending", "gpu 00000000:18:00.0")}
    assert report.facts["volatile_uncorrectable_ecc"] == 0
    assert report.facts["remapped_rows_pending"] is True


def test_nested_mig_devices_are_not_gpus_and_their_errors_count_for_their_gpu():
    mig = ("    MIG Device\n        Index : 0\n        ECC Errors\n            Volatile\n"
           "                SRAM Uncorrectable : {n}\n    MIG Device\n        Index : 1\n"
           "        ECC Errors\n            Volatile\n                SRAM Uncorrectable : 0\n")
    healthy = judge_node_text(q_text(section(extra=mig.format(n=0))))
    assert healthy.facts["gpus"] == 1 and healthy.facts["mig_devices"] == 2
    assert healthy.node_verdict == "healthy"
    broken = judge_node_text(q_text(section(extra=mig.format(n=2))))
    assert bad(broken) == {("fault", "gpu-ecc-volatile-uncorrectable", "gpu 00000000:18:00.0")}


@pytest.mark.parametrize("product, virt, peers_wider, severity", [
    ("NVIDIA H100 PCIe", "None", False, "fault"),        # bare metal: NVML's max is the slot's
    ("Tesla T4", "Pass-Through", False, "info"),         # a VM cannot see the physical slot
    ("NVIDIA H100 80GB HBM3", "Pass-Through", False, "fault"),  # an SXM module is wired x16
    ("Tesla T4", "Pass-Through", True, "fault"),         # its peers run wider
])
def test_a_narrow_pcie_link(product, virt, peers_wider, severity):
    gpus = [section(product=product, virt=virt, width="8x")]
    if peers_wider:
        gpus.append(section("00000000:2A:00.0", product=product, virt=virt))
    report = judge_node_text(q_text(*gpus))
    width = [f for f in report.findings if f.check.startswith("gpu-pcie-width")]
    assert [(f.severity, f.part) for f in width] == [(severity, "gpu 00000000:18:00.0")]


def test_a_slow_pcie_link_is_power_saving_when_idle_and_a_warning_when_busy():
    idle = judge_node_text(q_text(section(gen=1)))
    assert idle.node_verdict == "healthy"
    assert [f.check for f in idle.findings if f.check.startswith("gpu-pcie")] == [
        "gpu-pcie-gen-idle"]
    busy = judge_node_text(q_text(section(gen=3, util=95, idle="Not Active")))
    assert bad(busy) == {("warn", "gpu-pcie-gen-degraded", "gpu 00000000:18:00.0")}


@pytest.mark.parametrize("state, status, verdict", [
    ("Completed", "Success", "healthy"), ("N/A", "N/A", "healthy"),
    ("Not Supported", "N/A", "healthy"), ("In Progress", "N/A", "fault"),
    ("Not Started", "N/A", "fault"), ("Completed", "Failure", "fault"),
])
def test_fabric_state(state, status, verdict):
    extra = f"    Fabric\n        State : {state}\n        Status : {status}\n"
    assert judge_node_text(q_text(section(extra=extra))).node_verdict == verdict


@pytest.mark.parametrize("extra, check", [
    ("    GPU Reset Status\n        Reset Required : Yes\n", "gpu-reset-required"),
    ("    GPU Recovery Action : Drain and Reset\n", "gpu-reset-required"),
    ("    Fan Speed : ERR!\n", "gpu-err-field"),
    ("    ECC Errors\n        Aggregate\n            SRAM Threshold Exceeded : Yes\n",
     "gpu-ecc-sram-threshold"),
    ("    ECC Errors\n        Channel Repair Pending : Yes\n", "gpu-memory-repair-pending"),
    ("    Retired Pages\n        Single Bit ECC : 50\n        Double Bit ECC : 12\n"
     "        Pending Page Blacklist : No\n", "gpu-retired-pages-limit"),
])
def test_each_fault_rule_names_its_gpu(extra, check):
    report = judge_node_text(q_text(section(extra=extra)))
    assert ("fault", check, "gpu 00000000:18:00.0") in bad(report)


def test_aggregate_single_bit_errors_alone_are_recorded_not_judged():
    extra = ("    ECC Errors\n        Volatile\n            Single Bit\n"
             "                Total : 0\n            Double Bit\n                Total : 0\n"
             "        Aggregate\n            Single Bit\n                Total : 3\n"
             "            Double Bit\n                Total : 0\n")
    report = judge_node_text(q_text(section(extra=extra)))
    assert report.node_verdict == "healthy"
    assert "gpu-ecc-correctable" in {f.check for f in report.of("info")}


def test_fewer_gpus_than_the_spec_is_a_fault_and_a_filtered_query_is_not():
    text = q_text(section(), attached=8)  # nvidia-smi -q -i 0 on an 8-GPU node
    assert judge_node_text(text, context=NodeContext(expected_gpus=8)).node_verdict == "healthy"
    seven = judge_node_text(q_text(section(), attached=7),
                            context=NodeContext(expected_gpus=8))
    assert bad(seven) == {("fault", "gpu-count-missing", "node")}


def test_a_block_header_with_nothing_under_it_is_incomplete():
    report = judge_node_text(q_text(section()) + "GPU 00000000:2A:00.0\n    Remapped Rows\n")
    assert not report.complete and report.node_verdict == "warn"


def test_a_spec_override_changes_a_severity():
    text = read("nvidia-smi-q-d-performance-sw-thermal.txt")
    cat = load_catalogue({"gpu-sw-thermal-slowdown": {"severity": "fault"}})
    assert judge_node_text(text, catalogue=cat).node_verdict == "fault"
    cat = load_catalogue({"gpu-pcie-replays": {"params": {"warn_replays": 10}}})
    report = judge_node_text(read("nvidia-smi-q-d-pcie-idle-gen1.txt"), catalogue=cat)
    assert bad(report) == {("warn", "gpu-pcie-replays", "gpu 00000000:2A:00.0")}


# ---- XML -------------------------------------------------------------------------------------
def test_text_and_xml_give_the_same_judgement_of_the_same_state():
    xml = read("nvidia-smi-qx-v12-4xh100-remap-failure.xml")
    faulty = xml[xml.index('<gpu id="00000000:3A:00.0">'):]
    faulty = faulty[:faulty.index("</gpu>")]
    assert "<remapped_row_failure>Yes" in faulty and "<dram_uncorrectable>0" in faulty
    text = q_text(section("00000000:3A:00.0", extra="    Remapped Rows\n"
                          "        Correctable Error : 0\n        Uncorrectable Error : 9\n"
                          "        Pending : No\n        Remapping Failure Occurred : Yes\n"))
    from_text = {(f.check, f.part) for f in judge_node_text(text).findings
                 if f.check.startswith("gpu-row-remap")}
    from_xml = {(f.check, f.part) for f in judge_node_text(xml).findings
                if f.check.startswith("gpu-row-remap") and "3A" in f.part}
    assert ("gpu-row-remap-failure", "gpu 00000000:3A:00.0") in from_text & from_xml


def test_cut_xml_keeps_what_it_read_and_is_never_healthy():
    xml = read("nvidia-smi-qx-v12-4xh100-remap-failure.xml")
    cut = xml[:xml.index("<temperature>", xml.index('<gpu id="00000000:3A:00.0">'))]
    report = judge_node_text(cut)
    assert not report.complete and "cut" in report.reason
    assert ("fault", "gpu-row-remap-failure", "gpu 00000000:3A:00.0") in bad(report)
    for n in range(0, len(xml), 997):  # any cut: a verdict, never an exception or "healthy"
        assert judge_node_text(xml[:n], tool="nvidia-smi-qx").node_verdict != "healthy"


def test_xml_with_entities_is_refused():
    evil = ('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaa">]>\n'
            "<nvidia_smi_log><attached_gpus>&a;</attached_gpus></nvidia_smi_log>")
    report = judge_node_text(evil)
    assert report.tool == "nvidia-smi-qx" and not report.complete and "entities" in report.reason


# ---- table, -L, topo, nvlink -------------------------------------------------------------------
def test_the_table_facts_count_gpus_not_mig_devices_or_processes():
    mig = judge("nvidia-smi-table-mig.txt")
    assert mig.facts["gpus"] == 1 and mig.facts["mig_devices"] == 2
    assert {f.check for f in mig.findings} == {"gpu-mig-enabled"}
    busy = judge("nvidia-smi-table-470-volatile-ecc.txt")
    assert busy.facts["gpus"] == 4 and busy.facts["volatile_uncorr_ecc_column"] == 2
    assert busy.facts["driver"] == "470.161.03"
    assert judge("nvidia-smi-table-535-8xh100-healthy.txt", expected_gpus=8).node_verdict == (
        "healthy")


def test_list_counts_top_level_gpus_only():
    r470 = judge("nvidia-smi-L-mig-r470.txt")
    assert r470.facts["gpus"] == 2 and r470.facts["mig_devices"] == 7
    assert r470.facts["mig_profiles"] == ["1g.5gb"] * 7
    lost = judge("nvidia-smi-L-gpu-lost.txt", expected_gpus=8)
    assert ("fault", "gpu-count-missing", "node") in bad(lost) and lost.facts["gpus"] == 7
    assert judge("nvidia-smi-L-8xa100-healthy.txt", expected_gpus=8).node_verdict == "healthy"


def test_topo_tabs_and_spaces_read_the_same():
    tabs = read("nvidia-smi-topo-m-8xh100-nics-tabs.txt")
    spaces = re.sub(r"\t", "    ", tabs)
    for text in (tabs, spaces):
        report = judge_node_text(text)
        assert report.facts == {"gpus": 8, "nics": 4, "numa_nodes": 2, "gpu_pair_link": "NV18"}
    mesh = judge("nvidia-smi-topo-m-dgx1-v100-mesh.txt")
    assert {f.check for f in mesh.findings} == {"gpu-topo-irregular"}


def test_topo_a_gpu_with_fewer_links_than_its_peers():
    text = read("nvidia-smi-topo-m-8xh100-nics-tabs.txt")
    lines = text.splitlines()
    for i, ln in enumerate(lines):  # GPU3 lost one NVLink: NV17 to every peer
        cells = ln.split("\t")
        if cells[0] == "GPU3":
            lines[i] = "\t".join(c.replace("NV18", "NV17") for c in cells)
        elif cells[0].startswith("GPU") and len(cells) > 4:
            cells[4] = "NV17"
            lines[i] = "\t".join(cells)
    report = judge_node_text("\n".join(lines))
    assert bad(report) == {("fault", "gpu-topo-nvlink-degraded", "gpu 3")}


def test_nvlink_all_inactive_is_a_fault_on_an_sxm_module_and_nothing_on_a_pcie_card():
    text = read("nvidia-smi-nvlink-s-pcie-no-bridge.txt")
    assert {f.check for f in judge_node_text(text).findings} == {"gpu-nvlink-absent"}
    sxm = text.replace("A100 80GB PCIe", "NVIDIA H100 80GB HBM3")
    assert bad(judge_node_text(sxm)) == {("fault", "gpu-nvlink-inactive", "gpu 0"),
                                         ("fault", "gpu-nvlink-inactive", "gpu 1")}
    lone = "\n".join(sxm.splitlines()[:2])  # a 1-GPU VM of an HGX board: no NVLink peer
    assert judge_node_text(lone).node_verdict == "healthy"


def test_nvlink_fewer_links_than_the_model_has():
    text = read("nvidia-smi-nvlink-s-8xh100-one-inactive.txt")
    short = "\n".join(ln for ln in text.splitlines()
                      if not re.fullmatch(r"\s*Link 1[67]: .*", ln))  # 16 of 18 listed
    report = judge_node_text(short)
    assert ("fault", "gpu-nvlink-missing-links", "gpu 0") in bad(report)
    assert report.facts["links_per_gpu"] == 16


def test_nvidia_messages_name_the_gpu_in_every_mode():
    cat = builtin_catalogue()
    lines = {
        "WARNING: infoROM is corrupted at gpu 0000:3B:00.0": ("gpu-inforom-corrupted",
                                                              "gpu 0000:3B:00.0"),
        "Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error": (
            "gpu-lost", "gpu 0000:3B:00.0"),
        "No devices were found": ("gpu-none-found", "node"),
    }
    for line, (check, part) in lines.items():
        assert [(f.check, f.part) for f in smi_query.message_findings(line, cat)] == [
            (check, part)]
    table = read("nvidia-smi-table-535-8xh100-healthy.txt")
    report = judge_node_text(table + "WARNING: infoROM is corrupted at gpu 0000:DB:00.0\n")
    assert bad(report) == {("fault", "gpu-inforom-corrupted", "gpu 0000:DB:00.0")}
    assert report.facts["inforom_corrupted_gpu"] == "0000:DB:00.0"


# ---- AMD ---------------------------------------------------------------------------------------
def test_amd_low_dpm_level_is_power_saving_but_a_narrow_top_level_is_a_fault():
    text = read("rocm-smi-json-idle-low-dpm.txt")
    report = judge_node_text(text)
    assert {f.check for f in report.of("info")} >= {"amd-pcie-speed-idle"}
    busy = text.replace('"GPU use (%)": "0"', '"GPU use (%)": "88"', 1)
    assert bad(judge_node_text(busy)) == {("warn", "amd-pcie-speed-degraded", "gpu 0")}
    narrow = text.replace('"0 (2.5GT/s x16)", "0": "2.5GT/s x16 *", "1": "16.0GT/s x16"',
                          '"1 (16.0GT/s x8)", "0": "2.5GT/s x16", "1": "16.0GT/s x16"', 1)
    assert bad(judge_node_text(narrow)) == {("fault", "amd-pcie-width-degraded", "gpu 0")}


def test_amd_a_narrow_low_dpm_level_is_not_a_narrow_link():
    text = ("GPU[0]\t\t: pcie clock level: 0 (2.5GT/s x1)\nGPU[0]\t\t: 0: 2.5GT/s x1 *\n"
            "GPU[0]\t\t: 1: 16.0GT/s x16\nGPU[0]\t\t: GPU use (%): 0\n")
    report = judge_node_text(text, tool="rocm-smi")
    assert [(f.severity, f.check) for f in report.findings] == [("info", "amd-pcie-speed-idle")]


def test_amd_facts():
    report = judge("amd-smi-metric-pcie-replays.txt")
    assert report.facts["gpus_shown"] == 2 and report.facts["replay_count"] == [0, 4210]
    mi300 = judge("rocm-smi-concise-rocm6-truncated.txt", expected_gpus=8)
    assert ("fault", "amd-count-missing", "node") in bad(mi300)
    assert mi300.facts["partitions"] == "NPS1, SPX" and mi300.facts["power_cap_w"] == 750


# ---- the catalogue and the code agree ---------------------------------------------------------
def test_every_check_the_code_names_is_in_the_catalogue_with_a_source():
    cat = builtin_catalogue()
    named = set()
    for mod in MODULES:
        named |= set(re.findall(r'"((?:gpu|amd)-[a-z0-9-]+)"', Path(mod.__file__).read_text()))
    named -= set(NODE_TOOLS)  # "amd-smi" is a tool, not a check
    assert named, "no check ids found in the GPU modules"
    missing = sorted(c for c in named if c not in cat)
    assert not missing
    for e in cat.with_prefix("gpu-") + cat.with_prefix("amd-"):
        assert e.source.strip() and e.fix.strip(), e.id
        assert e.id in named, f"{e.id} is never used"


# ---- properties over generated nvidia-smi -q ---------------------------------------------------
PRODUCTS = ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA H200", "NVIDIA L40S")


@st.composite
def healthy_query(draw):
    """A whole ``nvidia-smi -q`` of 1-8 healthy GPUs with random harmless fields."""
    n = draw(st.integers(1, 8))
    product = draw(st.sampled_from(PRODUCTS))
    events = draw(st.sampled_from(("Clocks Event Reasons", "Clocks Throttle Reasons")))
    old_ecc = draw(st.booleans())
    out = [f"\n==============NVSMI LOG==============\n\nTimestamp : Mon Jan  5 10:00:00 2026\n"
           f"Driver Version : {draw(st.sampled_from(('470.199.02', '535.161.08', '570.86.15')))}"
           f"\nCUDA Version : 12.2\n\nAttached GPUs : {n}\n"]
    for i in range(n):
        busy = draw(st.booleans())
        gen = 5 if busy else draw(st.integers(1, 5))
        sbe, replays = draw(st.integers(0, 500)), draw(st.integers(0, 999))
        pad = " " * draw(st.integers(1, 30))
        ecc = (("            Single Bit\n                Total : {c}\n            Double Bit\n"
                "                Total : 0\n") if old_ecc else
               ("            SRAM Correctable : 0\n            SRAM Uncorrectable : 0\n"
                "            DRAM Correctable : {c}\n            DRAM Uncorrectable : 0\n"))
        out.append(
            f"GPU 00000000:{0x18 + 0x11 * i:02X}:00.0\n    Product Name{pad}: {product}\n"
            f"    PCI\n        GPU Link Info\n            PCIe Generation\n"
            f"                Max : 5\n                Current : {gen}\n"
            f"            Link Width\n                Max : 16x\n                Current : 16x\n"
            f"        Replays Since Reset : {replays}\n    {events}\n"
            f"        Idle : {'Not Active' if busy else 'Active'}\n"
            f"        SW Power Cap : {draw(st.sampled_from(('Active', 'Not Active')))}\n"
            f"        HW Slowdown : Not Active\n            HW Thermal Slowdown : Not Active\n"
            f"            HW Power Brake Slowdown : Not Active\n"
            f"        SW Thermal Slowdown : Not Active\n    Utilization\n"
            f"        Gpu : {draw(st.integers(1, 100)) if busy else 0} %\n"
            f"    ECC Errors\n        Volatile\n{ecc.format(c=0)}        Aggregate\n"
            f"{ecc.format(c=sbe)}    Remapped Rows\n"
            f"        Correctable Error : {draw(st.integers(0, 31))}\n"
            f"        Uncorrectable Error : {draw(st.integers(0, 3))}\n"
            f"        Pending : No\n        Remapping Failure Occurred : No\n"
            f"    Temperature\n        GPU Current Temp : {draw(st.integers(20, 80))} C\n"
            f"    Fabric\n        State : {draw(st.sampled_from(('Completed', 'N/A')))}\n"
            f"        Status : Success\n    Processes : None\n\n")
    return "".join(out), n


@settings(max_examples=60)
@given(healthy_query())
def test_a_healthy_query_is_never_a_fault_and_is_read_whole(sample):
    text, n = sample
    assert detect_node_tool(text) == "nvidia-smi-q"
    report = judge_node_text(text, context=NodeContext(expected_gpus=n))
    assert report.node_verdict == "healthy", [f.to_json() for f in report.findings
                                              if f.severity != "info"]
    assert report.complete and report.facts["gpus"] == n


@settings(max_examples=60)
@given(healthy_query(), st.data())
def test_a_pending_remap_faults_exactly_its_gpu(sample, data):
    text, n = sample
    k = data.draw(st.integers(0, n - 1))
    sections = re.split(r"(?m)^(?=GPU [0-9A-F]{8}:)", text)
    bus = sections[k + 1].split()[1]
    sections[k + 1] = sections[k + 1].replace("        Pending : No",
                                              "        Pending : Yes", 1)
    report = judge_node_text("".join(sections))
    assert {f.part for f in report.of("fault")} == {f"gpu {bus}"}
    assert {f.check for f in report.of("fault")} == {"gpu-row-remap-pending"}


@settings(max_examples=40)
@given(healthy_query(), st.data())
def test_a_query_cut_inside_a_section_is_never_healthy(sample, data):
    text, n = sample
    lines = text.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("GPU ")]
    if n < 2:
        return
    k = data.draw(st.integers(1, n - 1))  # cut inside a section after the first
    first = starts[k] + 1
    last = (starts[k + 1] if k + 1 < n else len(lines)) - 3  # before its last field
    cut = data.draw(st.integers(first, max(first, last)))
    report = judge_node_text("\n".join(lines[:cut]) + "\n")
    assert report.node_verdict != "healthy", report.reason


_FACT_ORDER = """
import json, sys
sys.path.insert(0, {repo!r})
from tests.probes.node.test_gpu_judges import judge
print(json.dumps([list(judge(n).facts) for n in {names!r}]))
"""


def test_facts_come_in_the_same_order_whatever_the_hash_seed():
    """A report's facts (the run JSON, the history) list their keys in one order in every
    process: AMD counters were once ordered by a set's iteration (``PYTHONHASHSEED``)."""
    import subprocess
    import sys

    from tests.conftest import REPO

    names = [p.name for p in GPU_FIXTURES if p.name.startswith(("amd", "rocm"))]
    code = _FACT_ORDER.format(repo=str(REPO), names=names)
    orders = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env={"PYTHONHASHSEED": str(seed), "PATH": "/usr/bin"},
                             cwd=REPO).stdout for seed in (1, 2, 3, 4)}
    assert len(orders) == 1 and names, orders
