"""The NIC port, counter and PCIe judges (``ports``, ``counters``, ``pcie``) on fixtures written
for them (tests/fixtures/node), in and out of the topology's context, and their invariants."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import fabriccheck.cli.main  # noqa: F401  (registers every command module on app)
from fabriccheck.cli.app import app
from fabriccheck.planning.preflight import COUNTER_WINDOW_S
from fabriccheck.probes._text import strip_source_line
from fabriccheck.probes.node import counters, pcie, ports
from fabriccheck.probes.node.catalogue import builtin_catalogue, load_catalogue
from fabriccheck.probes.node.findings import FAULT, INFO, WARN
from fabriccheck.probes.node.judge import NodeContext, detect_node_tool, judge_node_text
from tests.conftest import LOCAL_FIXTURES

NODE = LOCAL_FIXTURES / "node"
PREFLIGHT = LOCAL_FIXTURES / "preflight"
CAT = builtin_catalogue()
MY_PREFIXES = ("ibstat", "ibstatus", "sysfs", "perfquery", "ethtool", "lspci")
PREDICATES = {
    "ibstat": ports.looks_like_ibstat, "ibstatus": ports.looks_like_ibstatus,
    "ib-sysfs": ports.looks_like_sysfs_text, "ethtool": ports.looks_like_ethtool,
    "perfquery": counters.looks_like_perfquery, "ethtool-S": counters.looks_like_ethtool_stats,
    "lspci": pcie.looks_like_lspci,
}


def read(name: str) -> str:
    return (NODE / name).read_text(encoding="utf-8")


def judge(name: str, **context):
    return judge_node_text(read(name), context=NodeContext(**context))


def flagged(report) -> set[tuple[str, str, str]]:
    """The warn and fault findings as (severity, check, part)."""
    return {(f.severity, f.check, f.part) for f in report.findings if f.severity != INFO}


# fixture, tool, verdict, complete, the warn/fault findings (severity, check, part) exactly
CASES = [
    ("ibstat-ndr-healthy.txt", "ibstat", "healthy", True, set()),
    ("ibstat-port-polling.txt", "ibstat", "fault", True,
     {(FAULT, "port-ib-down", "port mlx5_2/1")}),
    ("ibstat-rate-degraded.txt", "ibstat", "fault", True,
     {(FAULT, "port-rate-low", "port mlx5_3/1")}),
    ("ibstat-mixed-models.txt", "ibstat", "healthy", True, set()),
    ("ibstat-eth-down.txt", "ibstat", "healthy", True, set()),
    ("ibstat-ibpanic.txt", "ibstat", "warn", False, {(WARN, "port-tool-error", "nic mlx5_2")}),
    ("ibstat-truncated.txt", "ibstat", "warn", False,
     {(WARN, "port-incomplete", "port mlx5_2/1")}),
    ("ibstat-init-no-sm.txt", "ibstat", "fault", True,
     {(FAULT, "port-ib-down", "port mlx5_1/1")}),
    ("ibstat-old-dual-port.txt", "ibstat", "healthy", True, set()),
    ("ibstat-eth-vf.txt", "ibstat", "healthy", True, set()),
    ("ibstatus-ndr-healthy.txt", "ibstatus", "healthy", True, set()),
    ("ibstatus-port-down.txt", "ibstatus", "fault", True,
     {(FAULT, "port-ib-down", "port mlx5_1/1")}),
    ("ibstatus-width-1x.txt", "ibstatus", "fault", True,
     {(FAULT, "port-rate-low", "port mlx5_2/1")}),
    ("ibstatus-eth-vf.txt", "ibstatus", "healthy", True, set()),
    ("ibstatus-roce.txt", "ibstatus", "healthy", True, set()),
    ("ibstatus-truncated.txt", "ibstatus", "warn", False,
     {(WARN, "port-incomplete", "port mlx5_2/1")}),
    ("sysfs-grep-healthy.txt", "ib-sysfs", "healthy", True, set()),
    ("sysfs-grep-port-down.txt", "ib-sysfs", "fault", True,
     {(FAULT, "port-ib-down", "port mlx5_1/1")}),
    ("sysfs-grep-counters.txt", "ib-sysfs", "warn", True,
     {(WARN, "ctr-symbol-errors", "port mlx5_0/1"), (WARN, "ctr-link-downed", "port mlx5_0/1")}),
    ("sysfs-head-roce-pcie-x8.txt", "ib-sysfs", "fault", True,
     {(FAULT, "pcie-nic-width", "pcie mlx5_4 (sysfs)")}),
    ("ethtool-400g-up.txt", "ethtool", "healthy", True, set()),
    ("ethtool-link-down.txt", "ethtool", "healthy", True, set()),
    ("ethtool-below-supported.txt", "ethtool", "healthy", True, set()),
    ("ethtool-two-ports-one-slow.txt", "ethtool", "healthy", True, set()),
    ("ethtool-truncated.txt", "ethtool", "warn", False, {(WARN, "port-incomplete", "nic eth2")}),
    ("ethtool-half-duplex.txt", "ethtool", "warn", True, {(WARN, "eth-duplex-half", "nic eno1")}),
    ("ethtool-i-mlx5.txt", "ethtool", "healthy", True, set()),
    ("perfquery-basic-zero.txt", "perfquery", "healthy", True, set()),
    ("perfquery-basic-lifetime.txt", "perfquery", "warn", True,
     {(WARN, "ctr-symbol-errors", "port lid377/1"), (WARN, "ctr-saturated", "port lid377/1"),
      (WARN, "ctr-link-downed", "port lid377/1"), (WARN, "ctr-rcv-errors", "port lid377/1")}),
    ("perfquery-twice-below-warn.txt", "perfquery", "healthy", True, set()),
    ("perfquery-twice-warn.txt", "perfquery", "warn", True,
     {(WARN, "ctr-symbol-errors", "port lid212/1")}),
    ("perfquery-twice-fault.txt", "perfquery", "fault", True,
     {(FAULT, "ctr-symbol-errors", "port lid213/1"), (FAULT, "ctr-rcv-errors", "port lid213/1")}),
    ("perfquery-x-two-ports.txt", "perfquery", "fault", True,
     {(FAULT, "ctr-symbol-errors", "port lid402/2"),
      (FAULT, "ctr-link-recovery", "port lid402/2")}),
    ("perfquery-twice-no-window.txt", "perfquery", "warn", False,
     {(WARN, "ctr-window-unknown", "port lid214/1")}),
    ("perfquery-E-twice.txt", "perfquery", "fault", True,
     {(FAULT, "ctr-rcv-error-details", "port lid515/1")}),
    ("perfquery-twice-reset.txt", "perfquery", "warn", True,
     {(WARN, "ctr-counter-reset", "port lid216/1")}),
    ("perfquery-x-twice-congestion.txt", "perfquery", "warn", True,
     {(WARN, "ctr-xmit-discards", "port lid610/1"), (WARN, "ctr-xmit-wait", "port lid610/1")}),
    ("perfquery-twice-truncated.txt", "perfquery", "warn", False,
     {(WARN, "port-incomplete", "port lid217/1")}),
    ("perfquery-preflight-uptime.txt", "perfquery", "warn", True,
     {(WARN, "ctr-link-downed", "port lid618/1")}),
    ("ethtool-S-preflight-uptime.txt", "ethtool-S", "healthy", True, set()),
    ("ethtool-S-healthy.txt", "ethtool-S", "healthy", True, set()),
    ("ethtool-S-twice-fcs-fault.txt", "ethtool-S", "fault", True,
     {(FAULT, "ctr-eth-frame-errors", "nic eth2"), (FAULT, "ctr-eth-symbol-errors", "nic eth2")}),
    ("ethtool-S-twice-discards.txt", "ethtool-S", "warn", True,
     {(WARN, "ctr-eth-discards", "nic")}),
    ("ethtool-S-lifetime-errors.txt", "ethtool-S", "warn", True,
     {(WARN, "ctr-eth-frame-errors", "nic"), (WARN, "ctr-eth-link-down", "nic")}),
    ("ethtool-S-two-nics.txt", "ethtool-S", "fault", True,
     {(FAULT, "ctr-eth-link-down", "nic eth3")}),
    ("ethtool-S-twice-below-warn.txt", "ethtool-S", "healthy", True, set()),
    ("lspci-vv-gpu-x8.txt", "lspci", "fault", True,
     {(FAULT, "pcie-gpu-width", "pcie 2a:00.0 (NVIDIA Corporation GH100 [H100 SXM5 80GB])")}),
    ("lspci-vv-nic-gen4.txt", "lspci", "warn", True,
     {(WARN, "pcie-nic-speed", "pcie 1a:00.0 (Mellanox Technologies MT2910 Family [ConnectX-7])")}),
    ("lspci-vv-gpu-idle.txt", "lspci", "healthy", True, set()),
    ("lspci-vv-old-format.txt", "lspci", "fault", True,
     {(FAULT, "pcie-gpu-width",
       "pcie 3b:00.0 (NVIDIA Corporation GV100GL [Tesla V100 SXM2 32GB])")}),
    ("lspci-vvv-bridges-downgraded.txt", "lspci", "healthy", True, set()),
    ("lspci-vv-not-root.txt", "lspci", "warn", False,
     {(WARN, "pcie-no-link-info", "pcie 18:00.0 (NVIDIA Corporation GH100 [H100 SXM5 80GB])"),
      (WARN, "pcie-no-link-info",
       "pcie 1a:00.0 (Mellanox Technologies MT2910 Family [ConnectX-7])")}),
    ("lspci-vv-nn-mi300x.txt", "lspci", "fault", True,
     {(FAULT, "pcie-gpu-width", "pcie 25:00.0 (Advanced Micro Devices, Inc. [AMD/ATI] Aqua "
       "Vanjaram [Instinct MI300X])")}),
    ("lspci-vv-truncated.txt", "lspci", "warn", False,
     {(WARN, "pcie-no-link-info", "pcie 2a:00.0 (NVIDIA Corporation GH100 [H100 SXM5 80GB])")}),
    ("lspci-plain-hgx.txt", "lspci", "healthy", True, set()),
]


@pytest.mark.parametrize(("name", "tool", "verdict", "complete", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_fixture_is_detected_and_judged(name, tool, verdict, complete, expected):
    text = strip_source_line(read(name))
    assert detect_node_tool(text) == tool
    report = judge_node_text(text)
    assert report.tool == tool
    assert report.node_verdict == verdict, [f.what for f in report.findings]
    assert report.complete is complete, report.reason
    assert flagged(report) == expected
    assert all(f.source and f.fix for f in report.findings)  # every finding says why and what


def test_every_fixture_is_a_case_and_says_what_it_models():
    mine = sorted(p.name for p in NODE.iterdir() if p.name.startswith(MY_PREFIXES))
    assert mine == sorted(c[0] for c in CASES)
    for name in mine:
        assert read(name).startswith("# source: written for fabriccheck, modelled on "), name


def test_predicates_claim_only_their_own_fixtures():
    for case in CASES:
        text = strip_source_line(read(case[0]))
        claimed = {tool for tool, pred in PREDICATES.items() if pred(text)}
        assert claimed == {case[1]}, (case[0], claimed)


NOT_MINE = [
    "#  Rank  0 Group  0 Pid  40612 on gpu-node-1 device  0 [0x18] NVIDIA H100 80GB HBM3\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
    "   134217728      33554432     float     sum      -1   1234.5  108.72  190.26      0\n",
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
    " 65536      5000             392.11             391.87               0.747\n",
    "[  5]   0.00-10.00  sec  27.4 GBytes  23.5 Gbits/sec    0             sender\n",
    "gpu-node-1:40612:40612 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB\n",
    "[ 9122.401113] NVRM: Xid (PCI:0000:db:00): 79, pid=2764, name=nvidia-smi, GPU has fallen "
    "off the bus.\n[ 3.184417] mlx5_core 0000:1a:00.0: 504.112 Gb/s available PCIe bandwidth "
    "(32.0 GT/s PCIe x16 link)\n",
    "==============NVSMI LOG==============\n\nDriver Version : 550.90.07\n"
    "    PCI\n        Bus Id : 00000000:18:00.0\n        GPU Link Info\n"
    "            PCIe Generation\n                Max : 5\n                Current : 1\n",
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5a1c0e7d-3b2f-4c18-9e0a-71d2c4b6f801)\n",
    "state: 4: ACTIVE\nrate: 400 Gb/sec (4X NDR)\n",
]


@pytest.mark.parametrize("text", NOT_MINE, ids=range(len(NOT_MINE)))
def test_predicates_refuse_other_tools(text):
    assert not {tool for tool, pred in PREDICATES.items() if pred(text)}


def test_predicates_refuse_the_repos_other_fixtures():
    others = [p for sub in ("nccl-tests", "perftest", "nccl-logs", "traceroute", "ibnetdiscover")
              for p in (LOCAL_FIXTURES / sub).glob("**/*") if p.is_file()]
    assert others
    for p in others:
        text = p.read_text(encoding="utf-8", errors="replace")
        assert not {t for t, pred in PREDICATES.items() if pred(text)}, p


# --- the topology's context ---------------------------------------------------------------------


def test_an_unused_ethernet_port_down_is_info_a_used_one_a_fault():
    unknown = judge("ibstat-eth-down.txt")
    assert {f.check for f in unknown.findings} == {"port-unused-down"}
    assert {f.severity for f in unknown.findings} == {INFO}
    used = judge("ibstat-eth-down.txt", used_ports=frozenset({"mlx5_0", "mlx5_2", "mlx5_3"}))
    assert flagged(used) == {(FAULT, "port-eth-down", "port mlx5_2/1")}
    assert [f.severity for f in used.findings if f.part == "port mlx5_4/1"] == [INFO]


def test_an_ib_port_the_topology_does_not_use_is_not_drained():
    report = judge("ibstat-port-polling.txt",
                   used_ports=frozenset({"mlx5_0", "mlx5_1", "mlx5_3"}))
    assert report.node_verdict == "healthy"
    assert [(f.severity, f.check) for f in report.findings] == [(INFO, "port-unused-down")]


def test_a_used_roce_port_down_faults():
    report = judge("ibstatus-roce.txt", used_ports=frozenset({"mlx5_0", "mlx5_1", "mlx5_2"}))
    assert flagged(report) == {(FAULT, "port-eth-down", "port mlx5_2/1")}


def test_a_netdev_names_the_used_port():
    down = judge("ethtool-link-down.txt", used_ports=frozenset({"eth3"}))
    assert flagged(down) == {(FAULT, "port-eth-down", "nic eth3")}
    slow = judge("ethtool-two-ports-one-slow.txt", used_ports=frozenset({"eth2", "eth3"}))
    assert flagged(slow) == {(FAULT, "port-rate-low", "nic eth3"),
                             (WARN, "eth-speed-below-supported", "nic eth3")}
    below = judge("ethtool-below-supported.txt", used_ports=frozenset({"eth2"}))
    assert flagged(below) == {(WARN, "eth-speed-below-supported", "nic eth2")}


def test_a_vf_is_never_compared_with_the_fabric_ports():
    for name in ("ibstat-eth-vf.txt", "ibstatus-eth-vf.txt"):
        report = judge(name, used_ports=frozenset({f"mlx5_{i}" for i in range(8)}))
        assert report.node_verdict == "healthy"
        assert [f.check for f in report.findings] == ["port-eth-vf-rate"]


def test_different_nic_models_are_not_peers_but_the_same_model_is():
    assert judge("ibstat-mixed-models.txt").findings == ()
    degraded = judge("ibstat-rate-degraded.txt")
    assert "3 InfiniBand MT4129 peers reach 400" in degraded.of(FAULT)[0].what


# --- counter windows ------------------------------------------------------------------------------


def test_the_contexts_window_completes_a_two_read_text():
    text = read("perfquery-twice-no-window.txt")
    fast = judge_node_text(text, context=NodeContext(window_s=5))
    assert fast.complete and flagged(fast) == {(FAULT, "ctr-symbol-errors", "port lid214/1")}
    slow = judge_node_text(text, context=NodeContext(window_s=3600))  # +6 in an hour: 6/h
    assert slow.complete and slow.node_verdict == "healthy"


@pytest.mark.parametrize(("name", "window_s", "source"), [
    ("perfquery-twice-below-warn.txt", 900, "text"),  # date +%s stamps
    ("perfquery-twice-warn.txt", 60, "text"),  # a set -x "+ sleep 60" line
    ("perfquery-x-two-ports.txt", 10, "text"),  # an echoed command line
    ("ethtool-S-twice-below-warn.txt", 3600, "text"),
    ("ethtool-S-two-nics.txt", 5, "text"),
])
def test_the_window_is_read_from_the_text(name, window_s, source):
    facts = judge(name).facts
    assert (facts["window_s"], facts["window_source"], facts["reads"]) == (window_s, source, 2)


def test_the_preflight_counter_reads_are_judged_with_its_window():
    """The preflight runs ``read; sleep 5; read`` and prints only the two reads."""
    def reads_only(name: str) -> str:  # drop the fixture's "# models ..." line
        text = (PREFLIGHT / name).read_text(encoding="utf-8")
        return "\n".join(x for x in text.splitlines() if not x.startswith("# models"))

    pq = reads_only("perfquery-twice.txt")
    assert "sleep" not in pq
    report = judge_node_text(pq, "perfquery", context=NodeContext(window_s=COUNTER_WINDOW_S))
    assert report.complete
    assert {(f.severity, f.check) for f in report.findings if f.severity == FAULT} == {
        (FAULT, "ctr-symbol-errors"), (FAULT, "ctr-rcv-errors")}
    eth = reads_only("ethtool-S-twice.txt")
    healthy = judge_node_text(eth, "ethtool-S", context=NodeContext(window_s=COUNTER_WINDOW_S))
    assert healthy.complete and healthy.node_verdict == "healthy"
    assert healthy.facts["growth"] == {"rx_corrected_bits_phy": 28}
    ib = judge_node_text(reads_only("ibstat-2ca.txt"), "ibstat")
    assert flagged(ib) == {(FAULT, "port-ib-down", "port mlx5_1/1")}


def test_with_the_uptime_a_lifetime_total_is_a_rate_since_boot_and_never_a_fault():
    flapping = judge("perfquery-preflight-uptime.txt", window_s=COUNTER_WINDOW_S)
    assert flapping.facts["uptime_s"] == 90125.31
    assert flagged(flapping) == {(WARN, "ctr-link-downed", "port lid618/1")}
    assert "6/h" in flapping.of(WARN)[0].what
    # the same single read: 12 errors and 3 link-downs are a lot for an hour, nothing for 40 days
    text = read("ethtool-S-lifetime-errors.txt")
    young = judge_node_text(text, context=NodeContext(uptime_s=3600))
    assert flagged(young) == {(WARN, "ctr-eth-frame-errors", "nic"),
                              (WARN, "ctr-eth-link-down", "nic")}
    old = judge_node_text(text, context=NodeContext(uptime_s=40 * 86400))
    assert old.node_verdict == "healthy"
    huge = judge_node_text(read("perfquery-basic-lifetime.txt"),
                           context=NodeContext(uptime_s=600))
    assert not huge.of(FAULT) and huge.of(WARN)
    sysfs = judge_node_text(read("sysfs-grep-counters.txt"),
                            context=NodeContext(uptime_s=30 * 86400))
    assert sysfs.node_verdict == "healthy"  # 37 symbol errors and 2 link-downs in 30 days


def test_congestion_growing_in_an_unknown_window_leaves_the_judgement_complete():
    report = judge("perfquery-preflight-uptime.txt")
    assert report.complete and "window unknown" in " ".join(f.what for f in report.findings)
    assert report.facts["window_source"] == "unknown"


def test_a_single_read_is_never_a_fault_however_large():
    report = judge("perfquery-basic-lifetime.txt")
    assert not report.of(FAULT)
    assert all("lifetime count" in f.what for f in report.findings if f.check != "ctr-saturated")


def test_a_saturated_congestion_counter_is_not_a_warning():
    wait = "PortXmitWait:".ljust(33, ".")
    text = (f"# Port counters: Lid 9 port 1 (CapMask: 0x5A00)\n{wait}4294967295\n"
            f"sleep 5\n# Port counters: Lid 9 port 1 (CapMask: 0x5A00)\n{wait}4294967295\n")
    assert judge_node_text(text).node_verdict == "healthy"
    symbols = text.replace("PortXmitWait:", "SymbolErrorCounter:").replace("4294967295", "65535")
    assert flagged(judge_node_text(symbols)) == {(WARN, "ctr-saturated", "port lid9/1")}


def test_an_ipoib_netdev_down_is_an_infiniband_port():
    text = "Settings for ib0:\n\tSpeed: Unknown!\n\tPort: Other\n\tLink detected: no\n"
    assert flagged(judge_node_text(text)) == {(FAULT, "port-ib-down", "nic ib0")}


def test_thresholds_and_severities_come_from_the_catalogue():
    text = read("perfquery-twice-fault.txt")
    lenient = load_catalogue({"ctr-symbol-errors": {"params": {"fault_per_hour": 1e6}},
                              "ctr-rcv-errors": {"params": {"fault_per_hour": 1e6}}})
    assert judge_node_text(text, catalogue=lenient).node_verdict == "warn"
    strict = load_catalogue({"port-unused-down": {"severity": "warn"}})
    assert judge_node_text(read("ibstat-eth-down.txt"), catalogue=strict).node_verdict == "warn"


# --- facts --------------------------------------------------------------------------------------


def test_port_facts():
    f = judge("ibstat-ndr-healthy.txt").facts
    assert (f["ib_ports"], f["ib_ports_active"], f["ib_rate_gbps"], f["ib_port_state"]) == (
        4, 4, 400, "Active")
    assert (f["eth_ports"], f["eth_rate_gbps"], f["ports_active"], f["fw"]) == (
        1, 200, 5, "28.42.1000")
    assert f["ports"][0] == {"port": "mlx5_0/1", "state": "Active", "phys_state": "LinkUp",
                             "rate_gbps": 400, "link_layer": "InfiniBand", "ca_type": "MT4129",
                             "fw": "28.42.1000"}
    down = judge("ibstat-eth-down.txt").facts
    assert (down["eth_ports"], down["eth_ports_active"], down["eth_ports_down"],
            down["eth_down_phys_state"]) == (3, 1, 2, "Disabled")
    vf = judge("ibstatus-eth-vf.txt").facts
    assert (vf["ib_ports"], vf["ib_port_state"], vf["eth_reported_rate"]) == (
        8, "ACTIVE", "40 Gb/sec (4X QDR)")
    assert judge("ibstat-ibpanic.txt").facts["tool_error"] == "ibpanic mlx5_2"


def test_ethtool_facts():
    info = judge("ethtool-i-mlx5.txt").facts
    assert (info["driver"], info["firmware_version"], info["bus_info"]) == (
        "mlx5_core", "28.41.1000 (MT_0000000838)", "0000:1a:00.0")
    link = judge("ethtool-400g-up.txt").facts["interfaces"][0]
    assert link == {"name": "eth2", "speed_mbps": 400000, "duplex": "Full",
                    "link_detected": True, "port": "Direct Attach Copper",
                    "supported_max_mbps": 400000}


def test_counter_facts():
    x = judge("perfquery-x-two-ports.txt").facts
    assert x["ports"]["lid402/2"]["growth"]["SymbolErrorCounter"] == 25
    assert x["ports"]["lid401/1"]["symbol_errors"] == 2
    assert x["ports"]["lid401/1"]["node_type"] == "ca"
    e = judge("perfquery-E-twice.txt").facts
    assert (e["lid"], e["port"], e["local_physical_errors"]) == (515, 1, 52)
    two = judge("ethtool-S-two-nics.txt").facts
    assert set(two["nics"]) == {"eth2", "eth3"}
    assert two["nics"]["eth3"]["growth"] == {"link_down_events_phy": 2}
    assert judge("ethtool-S-healthy.txt").facts["driver"] == "mlx5"


def test_pcie_facts():
    plain = judge("lspci-plain-hgx.txt").facts
    assert (plain["gpus"], plain["gpu_device_id"], plain["cx7_ib_controllers"],
            plain["cx6dx_eth_controllers"]) == (8, "H100 SXM5 80GB", 8, 2)
    assert plain["devices_by_class"]["Bridge"] == 4 and plain["links_read"] == 0
    vvv = judge("lspci-vvv-bridges-downgraded.txt").facts
    assert vvv["gpu_link"] == {"speed_gts": 32, "width": 16, "status": "ok"}
    assert (vvv["downgraded_lines"], vvv["downgraded_on_gpu_or_nic"]) == (4, 0)
    assert vvv["pcie_width"] == [16, 16]
    idle = judge("lspci-vv-gpu-idle.txt").facts
    assert idle["gpu_link"] == {"speed_gts": 2.5, "width": 16, "status": "downgraded"}


# --- sysfs port folders -------------------------------------------------------------------------


def test_a_sysfs_port_folder_given_as_files():
    up = {"state": "4: ACTIVE\n", "phys_state": "5: LinkUp\n", "rate": "400 Gb/sec (4X NDR)\n",
          "link_layer": "InfiniBand\n", "lid": "0x65\n"}
    assert ports.judge_sysfs_files(up, CAT, NodeContext()).node_verdict == "healthy"
    roce_down = {**up, "state": "1: DOWN\n", "phys_state": "3: Disabled\n",
                 "link_layer": "Ethernet\n"}
    assert ports.judge_sysfs_files(roce_down, CAT, NodeContext()).node_verdict == "healthy"
    no_rate = {"state": "4: ACTIVE\n"}
    partial = ports.judge_sysfs_files(no_rate, CAT, NodeContext())
    assert not partial.complete and partial.node_verdict == "warn"
    counted = {**up, "counters/symbol_error": "12\n", "counters/link_downed": "0\n"}
    lifetime = ports.judge_sysfs_files(counted, CAT, NodeContext())
    assert flagged(lifetime) == {(WARN, "ctr-symbol-errors", "port")}


def test_parse_reads_a_sysfs_port_folder(tmp_path):
    for name, value in {"state": "1: DOWN", "phys_state": "2: Polling",
                        "rate": "10 Gb/sec (4X SDR)", "link_layer": "InfiniBand"}.items():
        (tmp_path / name).write_text(value + "\n")
    res = CliRunner().invoke(app, ["parse", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert (data["tool"], data["node_verdict"]) == ("ib-sysfs", "fault")
    assert data["findings"][0]["check"] == "port-ib-down"


# --- the catalogue --------------------------------------------------------------------------------


def test_the_nic_catalogue_entries():
    nic = [e for e in CAT.entries.values()
           if e.id.startswith(("port-", "ctr-", "pcie-", "eth-"))]
    assert len(nic) >= 30
    for e in nic:
        assert e.source and e.fix and e.what, e.id
        if e.match.get("counters") or e.match.get("patterns"):
            assert "warn_per_hour" in e.params and "fault_per_hour" in e.params, e.id
            if e.params["fault_per_hour"] is not None:
                assert e.severity == FAULT and e.params["fault_per_hour"] > 0, e.id
            else:
                assert e.severity != FAULT, e.id


# --- invariants (hypothesis) --------------------------------------------------------------------

IB_BITS = {"SymbolErrorCounter": 16, "LinkErrorRecoveryCounter": 8, "LinkDownedCounter": 8,
           "PortRcvErrors": 16, "PortRcvRemotePhysicalErrors": 16, "PortXmitDiscards": 16,
           "LocalLinkIntegrityErrors": 4, "ExcessiveBufferOverrunErrors": 4}


def pq_block(lid: int, port: int, values: dict[str, int], data: int) -> str:
    lines = [f"# Port counters: Lid {lid} port {port} (CapMask: 0x5A00)",
             "PortSelect:".ljust(33, ".") + str(port)]
    lines += [f"{k}:".ljust(33, ".") + str(v) for k, v in values.items()]
    lines += ["PortXmitData:".ljust(33, ".") + str(data), "PortXmitWait:".ljust(33, ".") + "0"]
    return "\n".join(lines) + "\n"


counter_values = st.fixed_dictionaries(
    {k: st.integers(0, (1 << bits) - 2) for k, bits in IB_BITS.items()})


@settings(max_examples=60)
@given(st.lists(counter_values, min_size=1, max_size=4),
       st.one_of(st.none(), st.floats(1, 86_400)), st.booleans())
def test_counters_that_do_not_grow_are_never_a_fault(values, window_s, with_sleep):
    first = "".join(pq_block(10 + i, 1, v, 1000) for i, v in enumerate(values))
    last = "".join(pq_block(10 + i, 1, v, 999_999) for i, v in enumerate(values))
    text = first + ("sleep 5\n" if with_sleep else "") + last
    report = judge_node_text(text, context=NodeContext(window_s=window_s))
    assert report.node_verdict == "healthy" and report.complete


@settings(max_examples=60)
@given(st.data())
def test_growth_above_the_fault_rate_faults_exactly_that_port(data):
    fault_ids = [e.id for e in CAT.with_prefix("ctr-")
                 if e.params.get("fault_per_hour") is not None
                 and set(e.match.get("counters", [])) & set(IB_BITS)]
    check = data.draw(st.sampled_from(fault_ids))
    entry = CAT.entry(check)
    name = next(n for n in entry.match["counters"] if n in IB_BITS)
    top = (1 << IB_BITS[name]) - 2
    rate, least = float(entry.params["fault_per_hour"]), int(entry.params["fault_min_count"])
    window_max = max(1, int((top - least - 1) * 3600 / rate) - 1)
    window_s = data.draw(st.integers(1, min(window_max, 7200)))
    need = max(least, math.floor(rate * window_s / 3600) + 1)
    start = data.draw(st.integers(0, top - need))
    delta = data.draw(st.integers(need, top - start))
    n = data.draw(st.integers(1, 4))
    bad = data.draw(st.integers(0, n - 1))
    zero = dict.fromkeys(IB_BITS, 0)
    first = "".join(pq_block(20 + i, 1, {**zero, name: start}, 5) for i in range(n))
    last = "".join(pq_block(20 + i, 1, {**zero, name: start + (delta if i == bad else 0)}, 9)
                   for i in range(n))
    report = judge_node_text(first + last, context=NodeContext(window_s=window_s))
    assert {(f.check, f.part) for f in report.of(FAULT)} == {(check, f"port lid{20 + bad}/1")}


ETH_ERRORS = ["rx_crc_errors_phy", "rx_symbol_err_phy", "rx_pcs_symbol_err_phy",
              "link_down_events_phy", "rx_discards_phy", "rx_out_of_buffer", "tx_errors_phy"]


@settings(max_examples=40)
@given(st.fixed_dictionaries({k: st.integers(0, 10**12) for k in ETH_ERRORS}),
       st.integers(0, 10**9), st.floats(1, 86_400))
def test_ethtool_counters_that_do_not_grow_are_never_flagged(values, traffic, window_s):
    def block(extra: int) -> str:
        body = {"rx_packets_phy": 10**9 + extra, "rx_corrected_bits_phy": 5 + extra, **values}
        return "NIC statistics:\n" + "".join(f"     {k}: {v}\n" for k, v in body.items())

    report = judge_node_text(block(0) + block(traffic), context=NodeContext(window_s=window_s))
    assert report.node_verdict == "healthy"


lanes = st.sampled_from([1, 2, 4, 8, 16])
speeds = st.sampled_from([2.5, 5.0, 8.0, 16.0, 32.0, 64.0])


@settings(max_examples=80)
@given(st.sampled_from([("3D controller", "NVIDIA Corporation GH100 [H100 SXM5 80GB]"),
                        ("Infiniband controller",
                         "Mellanox Technologies MT2910 Family [ConnectX-7]"),
                        ("PCI bridge", "Broadcom / LSI PEX890xx PCIe Gen 5 Switch")]),
       lanes, lanes, speeds, speeds, st.booleans())
def test_a_pcie_link_faults_only_a_gpu_or_nic_that_lost_lanes(device, cap_w, sta_w, cap_s,
                                                              sta_s, annotated):
    sta_w, sta_s = min(sta_w, cap_w), min(sta_s, cap_s)
    note_s = (" (downgraded)" if sta_s < cap_s else " (ok)") if annotated else ""
    note_w = (" (downgraded)" if sta_w < cap_w else " (ok)") if annotated else ""
    text = (f"18:00.0 {device[0]}: {device[1]}\n"
            f"\t\tLnkCap:\tPort #0, Speed {cap_s:g}GT/s, Width x{cap_w}, ASPM not supported\n"
            f"\t\tLnkSta:\tSpeed {sta_s:g}GT/s{note_s}, Width x{sta_w}{note_w}\n")
    report = judge_node_text(text, "lspci")
    lost = sta_w < cap_w and device[0] != "PCI bridge"
    assert (report.node_verdict == "fault") is lost
    if device[0] == "3D controller" and not lost:
        assert report.node_verdict == "healthy"  # a slower idle GPU is power saving


def ibstat_ca(name: str, state: str, phys: str, rate: int, layer: str) -> str:
    return (f"CA '{name}'\n\tCA type: MT4129\n\tNumber of ports: 1\n"
            f"\tFirmware version: 28.42.1000\n\tPort 1:\n\t\tState: {state}\n"
            f"\t\tPhysical state: {phys}\n\t\tRate: {rate}\n\t\tLink layer: {layer}\n")


eth_port = st.tuples(st.sampled_from([("Active", "LinkUp"), ("Down", "Disabled"),
                                      ("Down", "Polling")]), st.sampled_from([25, 40, 100, 200]))


@settings(max_examples=60)
@given(st.integers(1, 8), st.sampled_from([100, 200, 400]), st.lists(eth_port, max_size=4),
       st.one_of(st.none(), st.integers(0, 7)))
def test_only_an_ib_port_down_or_slow_faults_and_it_is_named(n_ib, rate, eth, bad):
    bad = None if bad is None or bad >= n_ib else bad
    text = "".join(ibstat_ca(f"mlx5_{i}", *(("Down", "Polling") if i == bad else
                                           ("Active", "LinkUp")), rate, "InfiniBand")
                   for i in range(n_ib))
    text += "".join(ibstat_ca(f"mlx5_{n_ib + j}", s, p, r, "Ethernet")
                    for j, ((s, p), r) in enumerate(eth))
    report = judge_node_text(text)
    expected = set() if bad is None else {("port-ib-down", f"port mlx5_{bad}/1")}
    assert {(f.check, f.part) for f in report.of(FAULT)} == expected
    assert not report.of(WARN)
