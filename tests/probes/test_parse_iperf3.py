"""iperf3 parser: every shared JSON and text fixture, asserting the reported numbers."""

from __future__ import annotations

import pytest

from fabriccheck.probes.iperf3 import parse_iperf3
from tests.conftest import read_fixture


def _parse(name: str):
    return parse_iperf3(read_fixture("iperf3/" + name))


def test_json_tcp_1stream_with_omitted_intervals():
    r = _parse("iperf3_J_tcp_1stream_v3.9_omit3_cross_cloud_client.txt")
    assert r.status == "ok" and r.protocol == "TCP" and r.streams == 1
    assert r.sent_gbps == pytest.approx(0.146801271, rel=1e-6)
    assert r.received_gbps == pytest.approx(0.147130623, rel=1e-6)
    assert r.retransmits == 196 and r.duration_s == pytest.approx(9.999957)
    assert r.bw_gbps == r.received_gbps


def test_json_bytes_mode():
    r = _parse("iperf3_J_v3.6_tcp_bytes_mode_200MB_client.txt")
    assert r.status == "ok"
    assert r.sent_gbps == pytest.approx(0.102028493, rel=1e-6)
    assert r.received_gbps == pytest.approx(0.100334486, rel=1e-6)
    assert r.retransmits == 0 and r.duration_s == pytest.approx(16.448756, rel=1e-6)


def test_json_received_zero_is_reported_not_hidden():
    r = _parse("iperf3_J_v3.9_tcp_10KB_bytes_mode_received_zero.txt")
    assert r.status == "ok"
    assert r.received_gbps == 0.0 and r.sent_gbps == pytest.approx(0.348884956, rel=1e-6)


def test_json_error_control_socket():
    r = _parse("iperf3_J_v3.6_error_control_socket_closed.txt")
    assert r.status == "failed"
    (e,) = r.errors
    assert e.kind == "connect" and e.message == "error - control socket has closed unexpectedly"
    assert e.peer == "34.134.37.72" and r.sent_gbps is None


def test_json_aborted_after_connect_is_incomplete():
    r = _parse("iperf3_J_v3.9_no_test_start_empty_intervals.txt")
    assert r.status == "incomplete" and not r.errors and r.sent_gbps is None
    assert r.streams == 1  # one connected socket


def test_text_1stream_omitted_intervals():
    r = _parse("iperf3_text_client_tcp_1stream_omit_sender_receiver.txt")
    assert r.status == "ok"
    assert (r.sent_gbps, r.received_gbps, r.retransmits, r.streams) == (0.133, 0.133, 153, 1)


def test_text_zerocopy_retransmits():
    r = _parse("iperf3_text_client_zerocopy_40g_retransmits.txt")
    assert (r.status, r.sent_gbps, r.received_gbps, r.retransmits) == ("ok", 36.7, 36.7, 3148)
    assert r.duration_s == 10.0


def test_text_parallel_streams_use_sum_lines():
    r = _parse("iperf3_text_client_P3_loopback_sum_lines.txt")
    assert r.status == "ok" and r.streams == 3
    assert (r.sent_gbps, r.received_gbps, r.retransmits) == (22.3, 22.2, 0)


def test_text_sum_lines_only():
    r = _parse("iperf3_text_client_P16_sum_lines_only_excerpt.txt")
    assert (r.status, r.sent_gbps, r.received_gbps, r.retransmits) == ("ok", 35.2, 35.2, 0)
    assert r.duration_s == 30.0


def test_truncated_json_and_text_errors():
    full = read_fixture("iperf3/iperf3_J_tcp_1stream_v3.9_omit3_cross_cloud_client.txt")
    cut = parse_iperf3(full[: len(full) // 2])
    assert cut.status == "incomplete" and "JSON" in cut.reason
    err = parse_iperf3("iperf3: error - unable to connect to server: Connection refused\n")
    assert err.status == "failed" and err.errors[0].kind == "connect"
    busy = parse_iperf3("iperf3: error - the server is busy running a test. try again later\n")
    assert busy.errors[0].kind == "busy"


def test_udp_json_sum():
    text = ('{"start": {"test_start": {"protocol": "UDP", "num_streams": 1}}, "intervals": [],'
            ' "end": {"sum": {"seconds": 10.0, "bits_per_second": 1e9, "lost_percent": 5.0}}}')
    r = parse_iperf3(text)
    assert r.status == "ok" and r.protocol == "UDP" and r.lost_percent == 5.0
    assert r.sent_gbps == 1.0 and r.received_gbps == pytest.approx(0.95)


@pytest.mark.parametrize("text, status", [
    ("", "incomplete"), ("hello\n", "unparseable"), ("[1, 2]", "unparseable"),
    ('{"foo": 1}', "unparseable"),
    ("Connecting to host 10.0.0.2, port 5201\n[  5] local 10.0.0.1 port 1 connected\n",
     "incomplete"),
])  # fmt: skip
def test_empty_garbage_and_hung(text, status):
    assert parse_iperf3(text).status == status


def test_text_bidir_judges_client_to_server():
    text = (
        "[  5][TX-C]   0.00-10.00  sec  10.9 GBytes  9.39 Gbits/sec   12             sender\n"
        "[  5][TX-C]   0.00-10.00  sec  10.9 GBytes  9.38 Gbits/sec                  receiver\n"
        "[  7][RX-C]   0.00-10.00  sec  8.20 GBytes  7.04 Gbits/sec    3             sender\n"
        "[  7][RX-C]   0.00-10.00  sec  8.19 GBytes  7.03 Gbits/sec                  receiver\n")
    r = parse_iperf3(text)
    assert (r.sent_gbps, r.received_gbps, r.retransmits) == (9.39, 9.38, 12)


def test_text_udp_loss():
    text = (
        "[  5]   0.00-10.00  sec  1.25 MBytes  1.05 Mbits/sec  0.000 ms  0/906 (0%)  sender\n"
        "[  5]   0.00-10.04  sec  1.25 MBytes  1.04 Mbits/sec  0.017 ms  9/906 (1%)  receiver\n")
    r = parse_iperf3(text)
    # the loss comes from the datagram counts (9/906), not the rounded "(1%)"
    assert r.protocol == "UDP" and r.retransmits is None
    assert r.lost_percent == pytest.approx(100 * 9 / 906)
    assert r.received_gbps == pytest.approx(0.00104)


def test_text_old_udp_summary_without_role_word():
    """iperf3 3.0/3.1 (e.g. the Windows builds) print the UDP totals with no sender/receiver
    word; the client line is the sent rate, the loss comes from the datagram counts."""
    text = (
        "# models: iperf 3.1 Windows build, UDP client (-u -b 0), Bandwidth column\n"
        "[  4] local 10.0.0.4 port 49526 connected to 10.0.0.3 port 5201\n"
        "[ ID] Interval           Transfer     Bandwidth       Total Datagrams\n"
        "[  4]   0.00-1.00   sec   159 MBytes  1.34 Gbits/sec  20398\n"
        "- - - - - - - - - - - - - - - - - - - - - - - - -\n"
        "[ ID] Interval           Transfer     Bandwidth       Jitter    Lost/Total Datagrams\n"
        "[  4]   0.00-3.00   sec   492 MBytes  1.38 Gbits/sec  0.072 ms  35148/62949 (56%)\n"
        "[  4] Sent 62949 datagrams\n\niperf Done.\n")
    r = parse_iperf3(text)
    assert (r.status, r.protocol, r.sent_gbps) == ("ok", "UDP", 1.38)
    assert r.lost_percent == pytest.approx(55.836, abs=1e-3)
    assert r.received_gbps == pytest.approx(1.38 * (1 - 0.55836), rel=1e-3)
    server = parse_iperf3("Server listening on 5201\n" + text.replace("[  4] Sent", "x"))
    assert server.received_gbps == 1.38 and server.sent_gbps is None


def test_text_protocol_from_the_text():
    tcp = parse_iperf3("Starting Test: protocol: TCP, 1 streams, 131072 byte blocks\n"
                       "[  5]   0.00-10.04  sec  25.7 GBytes  22.0 Gbits/sec    receiver\n")
    assert (tcp.protocol, tcp.received_gbps, tcp.sent_gbps) == ("TCP", 22.0, None)
    retr = parse_iperf3("[ ID] Interval           Transfer     Bitrate         Retr\n"
                        "[  5]   0.00-10.00  sec  1.09 GBytes   933 Mbits/sec    0  sender\n")
    assert retr.protocol == "TCP"


def test_json_stream_events():
    text = (
        '{"event":"start","data":{"test_start":{"protocol":"TCP","num_streams":2}}}\n'
        '{"event":"interval","data":{}}\n'
        '{"event":"end","data":{"sum_sent":{"seconds":5,"bits_per_second":9.4e9,'
        '"retransmits":2},"sum_received":{"seconds":5,"bits_per_second":9.3e9}}}\n')
    r = parse_iperf3(text)
    assert (r.status, r.sent_gbps, r.received_gbps, r.streams) == ("ok", 9.4, 9.3, 2)
    killed = parse_iperf3(text.rsplit("\n", 2)[0] + "\n")
    assert killed.status == "incomplete"
    err = parse_iperf3('{"event":"error","data":"unable to connect to server: '
                       'Connection refused"}\n')
    assert err.status == "failed" and err.errors[0].kind == "connect"
