"""The preflight tools' parsers on the repo's own fixtures (tests/fixtures/preflight/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabriccheck.errors import ParseError
from fabriccheck.probes import ethtool_stats, ib_sysfs, ibstat, kernel_log, nvidia_smi, perfquery

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "preflight"


def text(name: str) -> str:
    return (FIX / name).read_text()


def test_nvidia_smi_list_counts_the_gpus_it_lists():
    gpus = nvidia_smi.parse_gpu_list(text("nvidia-smi-L-7gpus.txt"))
    assert [g[0] for g in gpus] == list(range(7))
    assert nvidia_smi.gpu_count(text("nvidia-smi-L-7gpus.txt")) == 7.0


def test_nvidia_smi_query_finds_the_unhealthy_gpu_only():
    health = nvidia_smi.parse_gpu_health(text("nvidia-smi-q-2gpus.txt"))
    assert [g.bus_id for g in health] == ["00000000:18:00.0", "00000000:2A:00.0"]
    # GPU 0: aggregate (old) uncorrectable errors and volatile correctable ones: healthy
    assert health[0].problems == ()
    assert health[1].problems == ("DRAM Uncorrectable ECC errors (volatile): 1",
                                  "row remapping pending")
    assert nvidia_smi.unhealthy_gpus(text("nvidia-smi-q-2gpus.txt")) == 1.0
    assert nvidia_smi.gpu_count(text("nvidia-smi-q-2gpus.txt")) == 2.0


def test_nvidia_smi_without_devices_is_zero_and_garbage_is_an_error():
    assert nvidia_smi.gpu_count("No devices were found\n") == 0.0
    with pytest.raises(ParseError):
        nvidia_smi.gpu_count("bash: nvidia-smi: command not found")


def test_ibstat_ports():
    parsed = ibstat.parse_ibstat(text("ibstat-2ca.txt"))
    assert parsed["mlx5_0"][1]["State"] == "Active"
    assert parsed["mlx5_1"][1]["Physical state"] == "Polling"
    assert ibstat.active_ports(text("ibstat-2ca.txt")) == 1.0
    assert ibstat.min_rate_gbps(text("ibstat-2ca.txt")) == 10.0


def test_perfquery_growth_sums_error_counters_between_reads():
    blocks = perfquery.parse_perfquery(text("perfquery-twice.txt"))
    assert len(blocks) == 2 and blocks[0]["SymbolErrorCounter"] == 1187
    # symbol 1331-1187=144, recovery 2, downed 0, rcv errors 9; data counters ignored
    assert perfquery.error_growth(text("perfquery-twice.txt")) == 155.0


def test_perfquery_single_read_says_nothing_about_now():
    one = text("perfquery-twice.txt").split("# Port counters", 2)
    with pytest.raises(ParseError, match="two reads"):
        perfquery.error_growth("# Port counters" + one[1])


def test_ethtool_growth_ignores_fec_corrected_bits():
    blocks = ethtool_stats.parse_ethtool_stats(text("ethtool-S-twice.txt"))
    assert blocks[1]["rx_corrected_bits_phy"] - blocks[0]["rx_corrected_bits_phy"] == 28
    assert ethtool_stats.error_growth(text("ethtool-S-twice.txt")) == 0.0


def test_kernel_log_hardware_events_skip_application_xids():
    events = kernel_log.parse_kernel_log(text("dmesg-xid.txt"))
    assert [(e.kind, e.pci) for e in events] == [("xid", "PCI:0000:db:00"),
                                                  ("mlx5", "0000:9a:00.0")]
    assert events[0].detail == "79"
    assert kernel_log.hardware_events(text("dmesg-xid.txt")) == 2.0


def test_sysfs_readings():
    assert ib_sysfs.pcie_width_ratio(text("sysfs-pcie-width-x8.txt")) == 0.5
    assert ib_sysfs.pcie_link_ratio(text("sysfs-pcie-link-gen4.txt")) == 0.5
    with pytest.raises(ParseError, match="speeds"):
        ib_sysfs.pcie_link_ratio("16\n16\n")
    assert ib_sysfs.port_state("1: DOWN\n") == 1.0
    assert ib_sysfs.port_rate_gbps("200 Gb/sec (2X NDR)\n") == 200.0
    with pytest.raises(ParseError):
        ib_sysfs.pcie_width_ratio("16\n")
