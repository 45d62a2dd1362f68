"""Launcher prefixes (Ray/SkyPilot, mpirun --tag-output, srun -l, pdsh), ANSI noise, rccl-tests
header fields and perftest rows whose columns ran together."""

from __future__ import annotations

import pytest

from fabriccheck.probes._text import clean_line, split_label
from fabriccheck.probes.detect import detect_tool, parse_text
from fabriccheck.probes.nccl_tests import parse_nccl_tests
from fabriccheck.probes.perftest import parse_perftest
from tests.conftest import LOCAL_FIXTURES, read_fixture


def _local(relpath: str) -> str:
    """A fixture of this suite without its first ``# source:`` line."""
    assert (LOCAL_FIXTURES / relpath).exists(), relpath
    return read_fixture(relpath)


@pytest.mark.parametrize(("line", "want"), [
    ("(head, rank=0, pid=3808) [1,0]<stdout>:# Using devices", "# Using devices"),
    ("(pid=123, ip=10.0.0.2) iperf Done.", "iperf Done."),
    ("(MyActor pid=7) n1:2:3 [0] NCCL WARN x", "n1:2:3 [0] NCCL WARN x"),
    ("(raylet) hello [repeated 3x across cluster]", "hello"),
    ("[1,0]<stdout>:# nThread 1 nGpus 1", "# nThread 1 nGpus 1"),
    ("[prterun-h-1@1,3]<stderr>: Couldn't connect to 10.0.0.1:18515",
     "Couldn't connect to 10.0.0.1:18515"),
    ("12: # Avg bus bandwidth    : 1.5", "# Avg bus bandwidth    : 1.5"),
    ("\x1b[1;32m[  5]   0.00-1.00   sec\x1b[0m", "[  5]   0.00-1.00   sec"),
    ("trainer/0 [0]:[rank0]: boom", "[rank0]: boom"),
    ("   1024   16  float", "   1024   16  float"),  # a row is not an srun label
])
def test_clean_line_strips_launcher_prefixes(line, want):
    assert clean_line(line) == want


def test_split_label_is_only_a_fallback():
    assert split_label("node-3: # nThread 1 nGpus 8") == "# nThread 1 nGpus 8"
    assert split_label("# nThread 1 nGpus 8") is None


def test_skypilot_ray_and_tag_output_prefixes():
    text = _local("nccl-tests/nccl_allgather_2node_skypilot_ray_and_tag_output_synthetic.txt")
    assert detect_tool(text) == "nccl-tests"
    r = parse_nccl_tests(text)
    assert r.status == "ok" and r.ranks == 4
    assert r.hosts == ("node-head", "node-worker1")
    assert [(x.size_bytes, x.redop, x.busbw_gbps) for x in r.rows] == [
        (1024, "none", 0.03), (2048, "none", 0.05)]
    assert (r.min_bytes, r.max_bytes, r.validation) == (1024, 2048, 1)


@pytest.mark.parametrize("label", ["srun", "pdsh", "ansi"])
def test_every_line_labelled(label):
    text = _local("nccl-tests/nccl_allgather_2node_skypilot_ray_and_tag_output_synthetic.txt")
    lines = [clean_line(x) for x in text.splitlines()]
    wrap = {"srun": "0: {}", "pdsh": "node-head: {}", "ansi": "\x1b[0m{}\x1b[K"}[label]
    r = parse_text("\n".join(wrap.format(x) for x in lines))
    assert r.status == "ok" and len(r.rows) == 2 and r.rows[1].busbw_inplace_gbps == 0.05


def test_rccl_header_variant():
    name = "nccl-tests/rccl_allreduce_header_variant_init_failure_synthetic.txt"
    r = parse_nccl_tests(_local(name))
    assert (r.min_bytes, r.max_bytes, r.validation) == (8, 134217728, 1)
    assert r.status == "failed" and r.ranks == 2 and r.hosts == ("gpu-box-1",)
    assert r.errors[0].kind == "nccl" and r.errors[0].host == "gpu-box-1"


def test_info_line_prefix_is_not_a_host_when_rank_lines_name_them():
    text = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) validation: 1\n"
            "#  Rank  0 Group  0 Pid  1 on real-host device  0 [0000:04:00] GPU\n"
            "hostname:3442:3442 [0] NCCL INFO Launch mode Parallel\n")
    assert parse_nccl_tests(text).hosts == ("real-host",)
    assert parse_nccl_tests(text.split("\n", 2)[2]).hosts == ("hostname",)  # no rank lines


def test_perftest_merged_columns_kept_in_part_with_a_warning():
    r = parse_perftest(_local("perftest/ib_send_lat_server_merged_columns_synthetic.txt"))
    assert r.status == "ok" and r.side == "server" and r.device == "rxe0"
    (row,) = r.latency_rows
    assert (row.size_bytes, row.iterations, row.t_min_us, row.t_max_us) == (2, 1000, 453.06,
                                                                           37330.73)
    assert (row.t_typical_us, row.t_avg_us) == (692.41, 928.05)
    assert row.t_stdev_us is None and row.t_p99_us is None and row.t_p999_us is None
    (w,) = r.warnings
    assert w.kind == "row_format" and "t_stdev" in w.message and w.line == 14


def test_perftest_row_short_of_columns_is_not_guessed():
    """All numbers readable but one column missing: which one is unknown, so no row."""
    head = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]"
            "    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]\n")
    r = parse_perftest(head + " 2       1000  1.24  5.19  1.27  1.27  0.00  5.19\n")
    assert r.latency_rows == () and r.status == "incomplete"
    assert "8 values for 9 columns" in r.reason and "hung" not in r.reason


def test_detects_rows_tagged_per_write_without_a_header():
    """A launcher that tags every write leaves `[0]` at the start and inside each row."""
    text = ("[0]      1048576        262144     float     sum      -1[0]    1626.5    0.64    1.24"
            "      0[0]    2302.3    0.46    0.87      0\n")
    assert detect_tool(text) == "nccl-tests"
    (row,) = parse_text(text).rows
    assert (row.size_bytes, row.busbw_gbps, row.busbw_inplace_gbps) == (1048576, 1.24, 0.87)


def test_detects_a_bare_perftest_completion_error():
    text = ("Completion with error at client\n  Failed status 4: wr_id 0 syndrom 0x51\n"
            "scnt=828, ccnt=700\n  Failed to complete run_iter_bw function successfully\n")
    assert detect_tool(text) == "perftest"
    r = parse_text(text)
    assert r.status == "failed" and r.errors[1].status == "4" and r.errors[1].vendor_err == "0x51"


def test_row_wrapped_onto_two_lines_is_joined_only_when_exact():
    head = "# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) validation: 1\n"
    row = ("           8             2     float     sum      -1    135.8    0.00    0.00      0"
           "    123.5    0.00    0.00      0")
    foot = "\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0 \n"
    wrapped = head + row[:80] + "\n" + row[80:] + foot
    r = parse_nccl_tests(wrapped)
    assert r.status == "ok" and len(r.rows) == 1 and r.rows[0].time_inplace_us == 123.5
    cut = head + row[:80] + "\n# Out of bounds values : 0 OK\n"  # killed mid-row: no row
    assert parse_nccl_tests(cut).rows == ()


def test_wrapped_ib_completion_warn_inside_nccl_tests_output():
    text = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) validation: 1\n"
            "node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion "
            "from peer 10.2.0.5<33092> with error 12, opcode 0, len\n"
            "0, vendor err 129 (Recv)\n"
            "node-2:5776:5902 [0] NCCL INFO transport/net.cc:1134 -> 6\n")
    (e,) = [x for x in parse_nccl_tests(text).errors if x.kind == "ib_completion"]
    assert (e.host, e.status, e.vendor_err, e.peer) == ("node-2", "12", "129", "10.2.0.5")


@pytest.mark.parametrize(("header", "row", "avg"), [
    (" #bytes    #sl      #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
     " 65536      3          5000           391.25             390.87               0.745523",
     390.87),  # --raw_qos: the #sl column sits before #iterations
    (" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]   "
     "BW Port1[Gb/sec]   MsgRate Port1[Mpps]   BW Port2[Gb/sec]   MsgRate Port2[Mpps]",
     " 65536      5000           391.25             390.87\t\t   0.745523        195.4"
     "            0.372            195.4            0.372", 390.87),  # --report-per-port
])
def test_perftest_qos_and_per_port_layouts(header, row, avg):
    sep = "-" * 87
    r = parse_perftest("\n".join([header, row, sep]))
    assert r.status == "ok" and r.rows[0].size_bytes == 65536 and r.rows[0].iterations == 5000
    assert r.rows[0].bw_avg_gbps == avg and r.rows[0].bw_peak_gbps == 391.25


def test_several_tests_one_after_another_read_the_first_with_a_warning():
    """A script running several *_perf binaries into one file (rccl-tests users do): the first
    test is read, the rest named in a warning -- never mixed into one table."""
    def one(name: str, busbw: str) -> str:
        return (f"======== {name}_perf ========\n# Collective test starting: {name}_perf\n"
                "# nThread 1 nGpus 8 minBytes 8 maxBytes 8 step: 2(factor) validation: 1\n"
                f"           8             2     float     sum      -1    13.5    0.00  {busbw}"
                f"      0    12.3    0.00  {busbw}      0\n"
                "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1 \n#\n"
                f"# Collective test concluded: {name}_perf\n\n")
    r = parse_nccl_tests(one("all_reduce", "1.00") + one("reduce_scatter", "9.00")
                         + one("all_gather", "7.00"))
    assert r.status == "ok" and r.collective == "all_reduce"
    assert [x.busbw_gbps for x in r.rows] == [1.0] and not r.errors
    (w,) = [x for x in r.warnings if x.kind == "several_tests"]
    assert "(reduce_scatter, all_gather)" in w.message


def test_the_same_test_twice_is_still_the_non_mpi_check():
    one = ("# Collective test starting: all_reduce_perf\n"
           "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) validation: 1\n"
           "#  Rank  0 Group  0 Pid {pid} on {host} device  0 [0000:04:00] GPU\n"
           "           8             2     float     sum      -1    13.5    0.00    1.00      0"
           "    12.3    0.00    1.00      0\n"
           "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1 \n")
    r = parse_nccl_tests(one.format(pid=1, host="a") + one.format(pid=2, host="b"))
    assert r.status == "failed" and r.errors[0].kind == "setup"
    assert not [w for w in r.warnings if w.kind == "several_tests"]
