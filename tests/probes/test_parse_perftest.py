"""perftest parser: every shared fixture, units, latency tables and the §2.5 error classes."""

from __future__ import annotations

import pytest

from fabriccheck.probes.perftest import MIBPS_TO_GBPS, parse_perftest
from tests.conftest import read_fixture

PT = "perftest/"


def _parse(name: str):
    return parse_perftest(read_fixture(PT + name))


def test_write_bw_gbits_client():
    r = _parse("ib_write_bw_ndr400_cx7_gbits_client_ok.txt")
    assert r.status == "ok"
    assert (r.test, r.device, r.link_type, r.side, r.program, r.unit) == (
        "RDMA_Write BW Test", "mlx5_0", "IB", "client", "ib_write_bw", "Gb/sec")
    (row,) = r.rows  # the `Conflicting CPU frequency` line inside the table is skipped
    assert (row.size_bytes, row.iterations, row.bw_peak_gbps, row.bw_avg_gbps) == (
        65536, 5000, 392.38, 392.34)
    assert row.msg_rate_mpps == 0.748336
    assert r.bw_at(65536) == 392.34 and not r.loopback and not r.errors


def test_read_bw_gbits_client():
    r = _parse("ib_read_bw_ndr400_cx7_gbits_client_ok.txt")
    assert r.status == "ok" and r.test == "RDMA_Read BW Test"
    assert [(x.size_bytes, x.bw_avg_gbps, x.bw_peak_gbps) for x in r.rows] == [
        (65536, 328.61, 328.64)]


def test_send_bw_mibsec_is_converted_to_gbits():
    r = _parse("ib_send_bw_ndr400_cx7_mibsec_client_ok.txt")
    assert r.status == "ok" and r.test == "Send BW Test" and r.unit == "MiB/sec"
    (row,) = r.rows
    assert row.bw_avg_gbps == pytest.approx(46557.03 * 2**20 * 8 / 1e9)
    assert row.bw_avg_gbps == pytest.approx(390.55, abs=0.01)
    assert row.bw_peak_gbps == pytest.approx(46567.34 * MIBPS_TO_GBPS)


def test_send_lat_table_with_tabs():
    r = _parse("ib_send_lat_ndr400_cx7_client_ok.txt")
    assert r.status == "ok" and r.test == "Send Latency Test" and not r.rows
    (lat,) = r.latency_rows
    assert (lat.size_bytes, lat.iterations, lat.t_min_us, lat.t_max_us, lat.t_typical_us) == (
        2, 1000, 1.24, 5.19, 1.27)
    assert (lat.t_avg_us, lat.t_stdev_us, lat.t_p99_us, lat.t_p999_us) == (1.27, 0.0, 1.37, 5.19)


def test_all_sizes_excerpt_six_decimals_and_no_closing_separator():
    r = _parse("ib_write_bw_all_sizes_gbits_ib_client.txt")
    assert r.status == "incomplete" and "separator" in r.reason
    assert [(x.size_bytes, x.bw_avg_gbps) for x in r.rows] == [
        (2, 0.042185), (4, 0.084457), (8, 0.17)]
    assert r.rows[0].bw_peak_gbps == 0.042350


def test_loopback_8m_interleaved_client_and_server():
    r = _parse("ib_write_bw_hdr_loopback_8M_interleaved.txt")
    assert r.status == "ok" and r.side == "both" and r.loopback
    assert r.device == "ib0" and r.unit == "MB/sec"
    (row,) = r.rows  # both sides print the same row: kept once
    assert row.bw_avg_gbps == pytest.approx(24056.72 * MIBPS_TO_GBPS)
    assert row.bw_avg_gbps == pytest.approx(201.8, abs=0.01)


def test_loopback_all_sizes_heavily_interleaved():
    r = _parse("ib_write_bw_hdr_loopback_all_sizes_interleaved.txt")
    assert r.status == "ok" and r.side == "both" and r.loopback
    assert len(r.rows) == 23
    assert [x.size_bytes for x in r.rows] == [2**k for k in range(1, 24)]
    assert r.rows[11].bw_avg_gbps == pytest.approx(9948.41 * MIBPS_TO_GBPS)  # 4096: wide row
    assert r.bw_at() == pytest.approx(23240.68 * MIBPS_TO_GBPS)
    assert r.link_type == "IB"


def test_use_cuda_server_preamble_waits_for_client():
    r = _parse("ib_write_bw_use_cuda_server_preamble.txt")
    assert r.status == "incomplete" and not r.errors  # `inline size set to 0` is a notice
    assert (r.side, r.test, r.device) == ("server", "RDMA_Write BW Test", "mlx5_0")


def test_connect_error_names_peer_and_device():
    r = _parse("ib_write_bw_connect_error.txt")
    assert r.status == "failed"
    assert [e.kind for e in r.errors] == ["connect", "connect"]
    assert r.errors[0].peer == "192.168.125.211:18515"
    assert {e.hca for e in r.errors} == {"rocep133s0f0"}  # from the echoed `-d`
    assert "Unable to init the socket connection" in r.errors[1].message


def test_rdma_cm_rts_error_classes():
    r = _parse("ib_write_bw_rdma_cm_modify_qp_rts_error.txt")
    assert r.status == "failed"
    assert [e.kind for e in r.errors] == ["connect", "connect", "connect", "qp", "qp"]
    assert r.errors[0].message == "ethernet_read_keys: Couldn't read remote address"
    assert r.errors[3].message == "Failed to modify QP to RTS"


@pytest.mark.parametrize("line, kind", [
    (" Parser function exited with Error", "usage"),
    (" Unable to find the Infiniband/RoCE device", "device"),
    (" Couldn't get context for the device", "device"),
    ("Couldn't allocate MR", "device"),
    ("Couldn't listen to port 18515", "connect"),
    ("Failed to modify QP 73 to RTR", "qp"),
    (" Found Incompatibility issue with GID types.", "qp"),
    ("rdma_resolve_addr failed", "rdma_cm"),
    ("Received 10 times ADDR_ERROR", "rdma_cm"),
    ("Unable to connect (retries = 10)", "rdma_cm"),
    ("Error: BW result is below bw limit", "bw_limit"),
    ("Error: Msg rate  is below msg_rate limit", "bw_limit"),
    ("Couldn't post send: qp 0 scnt=10 || err=12 tx_depth=128", "ib_completion"),
])  # fmt: skip
def test_error_classes(line, kind):
    r = parse_perftest(line + "\n")
    assert r.status == "failed" and r.errors[0].kind == kind


def test_completion_error_carries_status_and_syndrome():
    text = (" Completion with error at client\n"
            " Failed status-transport retry counter exceeded (12): wr_id 0 syndrom 0x81\n"
            " scnt=128, ccnt=0\n Failed to complete run_iter_bw function successfully\n")
    r = parse_perftest(text)
    assert r.status == "failed"
    assert {e.kind for e in r.errors} == {"ib_completion"}
    (s,) = [e for e in r.errors if e.status]
    assert (s.status, s.vendor_err) == ("12", "0x81")
    old = parse_perftest(" Failed status 12: wr_id 0 syndrom 0x81\n")
    assert (old.errors[0].status, old.errors[0].vendor_err) == ("12", "0x81")


def test_roce_gid_lines_and_duration_mode_latency():
    text = ("                    RDMA_Write Latency Test\n"
            " Dual-port       : OFF\t\tDevice         : mlx5_3\n"
            " Link type       : Ethernet\n GID index       : 3\n"
            "-" * 87 + "\n local address: LID 0000 QPN 0x0108 PSN 0x5d5a0e\n"
            " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:255:255:05\n"
            " remote address: LID 0000 QPN 0x0109 PSN 0x1c2a5b\n" + "-" * 87 + "\n"
            " #bytes        #iterations       t_avg[usec]    tps average\n"
            " 2             4983164          1.20           832215.03\n" + "-" * 87 + "\n")
    r = parse_perftest(text)
    assert r.status == "ok" and r.link_type == "Ethernet" and r.device == "mlx5_3"
    assert not r.loopback  # RoCE prints LID 0000 on both sides
    (lat,) = r.latency_rows
    assert (lat.size_bytes, lat.iterations, lat.t_avg_us, lat.t_min_us) == (2, 4983164, 1.20, None)


@pytest.mark.parametrize("text, status", [("", "incomplete"), ("total nonsense\n", "unparseable")])
def test_empty_and_garbage(text, status):
    assert parse_perftest(text).status == status


def test_roce_server_duration_mode_mibsec_two_qps():
    r = _parse("ib_write_bw_roce_server_duration_mibsec_2qp_synthetic.txt")
    assert r.status == "ok" and r.side == "server" and r.link_type == "Ethernet"
    assert r.device == "mlx5_3" and not r.loopback
    (row,) = r.rows
    assert row.bw_peak_gbps == 0.0  # duration mode does not measure the peak
    assert row.iterations == 5537480
    assert row.bw_avg_gbps == pytest.approx(46131.94 * MIBPS_TO_GBPS)


def test_bidirectional_below_limit_keeps_the_row():
    r = _parse("ib_write_bw_bidir_gbits_below_limit_synthetic.txt")
    assert r.test == "RDMA_Write Bidirectional BW Test" and r.side == "client"
    assert r.status == "failed" and [e.kind for e in r.errors] == ["bw_limit"]
    assert r.errors[0].hca == "mlx5_1" and not r.loopback
    assert r.bw_at() == 196.57


def test_synthetic_perftest_fixtures_carry_their_source_line():
    from tests.conftest import LOCAL_FIXTURES

    for path in (LOCAL_FIXTURES / "perftest").glob("*.txt"):
        assert path.read_text().startswith("# source: written from the printf formats"), path
