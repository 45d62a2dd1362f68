"""perftest ``--out_json`` reports: BW and latency, the unit question, quirks, detection."""

from __future__ import annotations

import pytest

from fabriccheck.probes.detect import detect_tool, parse_text
from fabriccheck.probes.perftest import MIBPS_TO_GBPS
from fabriccheck.probes.perftest_json import parse_perftest_json
from fabriccheck.probes.to_json import result_to_json
from tests.conftest import read_fixture

BW = "perftest/ib_write_bw_out_json_report_gbits_then_table_header_synthetic.txt"
LAT = "perftest/ib_send_lat_out_json_server_synthetic.txt"


def test_bw_report_with_the_table_header_after_it():
    text = read_fixture(BW)
    assert detect_tool(text) == "perftest"
    r = parse_text(text)
    assert (r.status, r.test, r.device, r.link_type, r.side) == (
        "ok", "RDMA_Write BW Test", "mlx5_2", "Ethernet", "client")
    (row,) = r.rows
    assert (row.size_bytes, row.iterations, row.bw_avg_gbps, row.bw_peak_gbps) == (
        65536, 5000, 390.87, 391.25)
    assert row.msg_rate_mpps == 0.745523 and r.unit == "Gb/sec"


def test_bw_report_alone_gives_no_number_it_cannot_know():
    """The report does not say MiB/s or Gb/s: no number rather than a wrong one."""
    alone = read_fixture(BW).rsplit("\n #bytes", 1)[0]
    r = parse_text(alone)
    assert r.status == "incomplete" and r.rows == ()
    assert "does not record its BW unit" in r.reason and r.warnings[0].kind == "unit_unknown"
    assert result_to_json(r)["warnings"][0]["kind"] == "unit_unknown"
    mib = parse_perftest_json(alone, unit="MiB/sec")
    assert mib.rows[0].bw_avg_gbps == pytest.approx(390.87 * MIBPS_TO_GBPS)


def test_latency_report_server():
    r = parse_text(read_fixture(LAT))
    assert (r.status, r.test, r.side) == ("ok", "Send Latency Test", "server")
    (row,) = r.latency_rows
    assert (row.size_bytes, row.t_min_us, row.t_typical_us, row.t_p99_us, row.t_p999_us) == (
        2, 1.24, 1.27, 1.37, 5.19)


def test_raw_qos_unquoted_key_and_cut_report():
    text = read_fixture(BW).replace('"MsgSize": 65536,', '"MsgSize": 65536,\nsl: 3,')
    assert parse_text(text).rows[0].bw_avg_gbps == 390.87
    cut = read_fixture(BW)[:300]
    r = parse_text(cut)
    assert r.status == "incomplete" and "cut short" in r.reason
