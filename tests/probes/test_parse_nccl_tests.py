"""nccl-tests parser: every shared fixture and synthetic layout, asserting what the text says."""

from __future__ import annotations

import pytest

from fabriccheck.probes.nccl_tests import parse_nccl_tests
from tests.conftest import LOCAL_FIXTURES, read_fixture

NT = "nccl-tests/"


def _parse(name: str):
    return parse_nccl_tests(read_fixture(NT + name))


def _kinds(result) -> list[str]:
    return [e.kind for e in result.errors]


# --- real published outputs -------------------------------------------------------------------


def test_a3mega_2node_16gpu_ok():
    r = _parse("nccl_allreduce_h100_2node_16gpu_gcp_a3mega_ok.txt")
    assert r.status == "ok" and r.reason == ""
    assert len(r.rows) == 31
    assert r.max_busbw_gbps == 338.82
    assert r.avg_busbw_gbps == pytest.approx(70.742)
    assert r.hosts == ("ztan-mig-235z", "ztan-mig-gq73")
    assert r.ranks == 16
    assert (r.min_bytes, r.max_bytes, r.validation, r.out_of_bounds) == (8, 8589934592, 1, 0)
    first, last = r.rows[0], r.rows[-1]
    assert (first.size_bytes, first.count, first.dtype, first.redop, first.root) == (
        8, 2, "float", "sum", -1)
    assert (first.time_us, first.time_inplace_us) == (135.8, 123.5)
    assert (last.size_bytes, last.busbw_gbps, last.busbw_inplace_gbps) == (
        8589934592, 338.82, 337.35)
    assert last.time_us == 47535.0 and last.algbw_gbps == 180.71
    assert all(row.wrong == 0 and row.wrong_inplace == 0 for row in r.rows)
    assert r.busbw_at(2**31) == 318.40
    assert not r.errors


def test_ring_4x200g_excerpt_starting_at_column_header():
    r = _parse("nccl_allreduce_2node_ring_4x200g_ok.txt")
    assert r.status == "ok"
    assert [row.size_bytes for row in r.rows] == [2**k for k in range(29, 34)]
    assert r.max_busbw_gbps == 97.37  # 4 GiB row, out-of-place
    assert r.rows[0].time_inplace_us == 9676.9
    assert r.rows[-1].time_us == 158070.0  # time printed without decimals
    assert r.avg_busbw_gbps == pytest.approx(95.3009)
    assert r.hosts == () and r.ranks == 0


def test_a100_old_format_error_column_na_and_info_line():
    r = _parse("nccl_allreduce_a100_1node_old_format_nocheck.txt")
    assert r.status == "ok"
    assert len(r.rows) == 34  # the NCCL INFO line between header and rows is skipped
    assert r.max_busbw_gbps == 235.26
    assert r.rows[-1].busbw_inplace_gbps == 235.03
    assert all(row.root is None and row.redop == "sum" for row in r.rows)
    assert all(row.wrong is None and row.max_rel_error is None for row in r.rows)  # N/A
    assert r.validation == 0 and r.ranks == 8
    # rank lines name the hosts; the NCCL INFO line's `hostname:3442:3442` prefix is no host
    assert r.hosts == ("localhost",)
    assert r.rows[0].size_bytes == 0 and r.rows[22].time_us == 112.0


def test_alltoall_old_format_blank_redop():
    r = _parse("nccl_alltoall_a100_1node_old_format_nocheck.txt")
    assert r.status == "ok" and len(r.rows) == 34
    assert all(row.redop is None and row.root is None for row in r.rows)
    assert r.max_busbw_gbps == 224.31
    assert r.rows[-1].algbw_gbps == 256.36 and r.rows[-1].busbw_inplace_gbps == 226.16
    assert r.avg_busbw_gbps == pytest.approx(58.6481)


def test_sendrecv_excerpt_without_footer_is_incomplete():
    r = _parse("nccl_sendrecv_a100_1node_8gpu_ok.txt")
    assert r.status == "incomplete" and "no footer" in r.reason
    assert r.collective == "sendrecv"  # from the echoed command line
    assert len(r.rows) == 4 and r.max_busbw_gbps == 195.10
    assert all(row.wrong == 0 and row.wrong_inplace is None for row in r.rows)  # in-place N/A


def test_single_rank_alltoall_busbw_zero_and_overwide_number():
    r = _parse("nccl_alltoall_1gpu_busbw0_inplace_na.txt")
    assert r.status == "ok"
    (row,) = r.rows
    assert row.redop == "none" and row.busbw_gbps == 0.0 and row.busbw_inplace_gbps == 0.0
    assert row.algbw_gbps == 1715.44 and row.algbw_inplace_gbps == 43046.10
    assert row.wrong == 0 and row.wrong_inplace is None
    assert r.avg_busbw_gbps == 0.0 and r.hosts == ("GENOA-01",) and r.ranks == 1


def test_wrong_nonzero_is_wrong_results():
    r = _parse("nccl_allreduce_dgx_h100_wrong_nonzero.txt")
    assert r.status == "failed"
    assert _kinds(r) == ["wrong_results"]
    assert "237858" in r.errors[0].message and "524288" in r.errors[0].message
    assert [row.size_bytes for row in r.rows] == [8, 262144, 524288]  # `...` line skipped
    assert (r.rows[-1].wrong, r.rows[-1].wrong_inplace) == (237858, 238038)


def test_old_format_out_of_bounds_failed_without_hash_prefixes():
    r = _parse("nccl_allgather_out_of_bounds_failed_old_format.txt")
    assert r.status == "failed" and _kinds(r) == ["wrong_results"]
    assert r.out_of_bounds == 2
    assert r.collective == "all_gather"
    (row,) = r.rows
    assert row.redop is None and row.root is None and row.wrong is None
    assert (row.max_rel_error, row.max_rel_error_inplace) == (1.0, 1.0)
    assert row.busbw_gbps == 129.05 and row.time_inplace_us == 29169.0
    assert r.avg_busbw_gbps == pytest.approx(128.942)


def test_nonmpi_build_interleaved_rows_is_setup_error():
    r = _parse("nccl_allreduce_nonmpi_build_duplicated_rows.txt")
    assert r.status == "failed" and _kinds(r) == ["setup"]
    assert "non-MPI" in r.errors[0].message and "interleave" in r.errors[0].message
    assert len(r.rows) == 10


def test_midrun_failures_name_every_host():
    r = _parse("nccl_allreduce_h100_multinode_midrun_cuda_error.txt")
    assert r.status == "failed"
    assert len(r.rows) == 5 and r.max_busbw_gbps == 367.29
    assert r.rows[-1].size_bytes == 17179869184
    assert [(e.kind, e.host, e.count) for e in r.errors] == [
        ("nccl", "HCA-128", None), ("nccl", "HCA-108", 2), ("nccl", "HCA-107", None)]
    assert "unhandled cuda error" in r.errors[0].message
    assert r.hosts == ("HCA-128", "HCA-108", "HCA-107")


def test_init_failure_names_host_after_rank_lines():
    r = _parse("nccl_allreduce_init_failure_internal_error.txt")
    assert r.status == "failed" and not r.rows
    assert [(e.kind, e.host) for e in r.errors] == [("nccl", "fengyun")]
    assert "internal error" in r.errors[0].message
    assert r.hosts == ("fengyun416", "fengyun") and r.ranks == 4


def test_nccl_failure_with_mpirun_exit_code():
    r = _parse("nccl_allreduce_test_nccl_failure_mpirun_exit3.txt")
    assert r.status == "failed"
    assert [(e.kind, e.host) for e in r.errors] == [
        ("nccl", "pkb-aa8dbd1b-1"), ("nccl", "pkb-aa8dbd1b-0"), ("launcher", None)]
    assert r.errors[0].message == "NCCL failure: unhandled system error"
    assert r.errors[-1].status == "3"


def test_older_ib_completion_warn_lines():
    r = _parse("nccl_warn_net_ib_completion_error4_vendor81_older.txt")
    assert r.status == "failed"
    assert [(e.kind, e.host, e.status, e.vendor_err) for e in r.errors] == [
        ("ib_completion", "H100-2", "4", "81"), ("ib_completion", "H100-1", "4", "81")]
    assert r.errors[0].peer == "fe80::966d:ae03:8b:df78%ib0"


# --- synthetic outputs in formats not among the shared fixtures ---------------------------------


def test_current_format_118_char_rows():
    text = read_fixture(NT + "nccl_allreduce_v2.20_current_format_2node_synthetic.txt")
    rows = [ln for ln in text.splitlines() if ln[:1] == " " and ln.split()[0].isdigit()]
    assert {len(ln) for ln in rows} == {118}
    r = parse_nccl_tests(text)
    assert r.status == "ok" and r.collective == "all_reduce"
    assert len(r.rows) == 5 and r.max_busbw_gbps == 369.62
    assert r.hosts == ("node-017", "node-018") and r.ranks == 16
    assert r.rows[0].time_us == 5750.04 and r.rows[1].time_us == 11176.6


@pytest.mark.parametrize("name", [
    "nccl_allreduce_v2.20_per_iter_I1_synthetic.txt",
    "nccl_allreduce_v2.20_timestamps_S1_synthetic.txt",
    "nccl_allreduce_v2.20_per_write_prefix_midrow_synthetic.txt",
])  # fmt: skip
def test_extra_columns_and_prefixes_keep_the_numbers(name):
    r = _parse(name)
    assert r.status == "ok", r.reason
    assert [row.size_bytes for row in r.rows] == [2**k for k in range(30, 35)]
    assert all(row.wrong == 0 and row.wrong_inplace == 0 for row in r.rows)
    assert r.max_busbw_gbps == r.rows[-1].busbw_gbps
    assert r.ranks == 16


def test_per_iter_columns_are_not_mistaken_for_values():
    r = _parse("nccl_allreduce_v2.20_per_iter_I1_synthetic.txt")
    last = r.rows[-1]
    assert (last.time_us, last.busbw_gbps, last.time_inplace_us, last.busbw_inplace_gbps) == (
        89315.6, 360.66, 90208.8, 357.09)


def test_wrong_count_printed_by_percent_g():
    r = _parse("nccl_allreduce_v2.20_wrong_g_format_synthetic.txt")
    assert r.status == "failed" and _kinds(r) == ["wrong_results"]
    bad = [row for row in r.rows if row.wrong]
    assert [(row.size_bytes, row.wrong, row.wrong_inplace) for row in bad] == [
        (4294967296, 1234570, 1000000)]  # `1.23457e+06` and `1e+06`
    assert r.out_of_bounds == 2


def test_nonmpi_two_headers_and_rank0_twice():
    r = _parse("nccl_allreduce_nonmpi_two_headers_rank0_twice_synthetic.txt")
    assert r.status == "failed" and _kinds(r) == ["setup"]
    msg = r.errors[0].message
    assert "2 '# nThread' headers" in msg and "node-021, node-022" in msg


def test_tag_output_midrun_failure_names_host_and_hca():
    r = _parse("nccl_allreduce_v2.20_tag_output_midrun_nccl_failure_synthetic.txt")
    assert r.status == "failed"
    assert len(r.rows) == 3 and r.hosts == ("node-017", "node-018") and r.ranks == 16
    e = r.errors[0]
    assert (e.kind, e.host, e.hca, e.status, e.vendor_err, e.peer) == (
        "ib_completion", "node-018", "mlx5_3", "12", "129", "10.1.0.17")
    assert _kinds(r)[-1] == "launcher"


def test_synthetic_fixtures_carry_their_source_line():
    for path in (LOCAL_FIXTURES / "nccl-tests").glob("*.txt"):
        assert path.read_text().startswith("# source: written from the "), path


# --- edge cases written inline ---------------------------------------------------------------

HEADER = (
    "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 1 "
    "iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0\n#\n# Using devices\n"
    "#  Rank  0 Group  0 Pid   1001 on     node-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
    "#  Rank  1 Group  0 Pid   1002 on     node-b device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
    "#\n#       size         count      type   redop    root     time   algbw   busbw  #wrong"
    "     time   algbw   busbw  #wrong\n"
)
ROWS = [
    "     1048576        262144     float     sum      -1   100.00   10.49   10.49       0"
    "   100.00   10.49   10.49       0",
    "     2097152        524288     float     sum      -1   150.00   13.98   13.98       0"
    "   150.00   13.98   13.98       0",
    "     4194304       1048576     float     sum      -1   200.00   20.97   20.97       0"
    "   200.00   20.97   20.97       0",
]
FOOTER = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 15.15 \n"


def test_truncated_mid_table_is_incomplete_with_rows_so_far():
    text = HEADER + ROWS[0] + "\n" + ROWS[1][:40]
    r = parse_nccl_tests(text)
    assert r.status == "incomplete" and len(r.rows) == 1
    assert "1048576" in r.reason


def test_header_only_is_incomplete():
    r = parse_nccl_tests(HEADER)
    assert r.status == "incomplete" and not r.rows and r.hosts == ("node-a", "node-b")


def test_run_cycles_repeat_the_sweep_without_setup_error():
    text = HEADER + "\n".join(ROWS + ROWS) + "\n" + FOOTER
    r = parse_nccl_tests(text)
    assert r.status == "ok" and len(r.rows) == 6


def test_op_all_sweeps_per_redop_without_setup_error():
    rows = ROWS + [row.replace(" sum ", " max ") for row in ROWS]
    r = parse_nccl_tests(HEADER + "\n".join(rows) + "\n" + FOOTER)
    assert r.status == "ok" and {row.redop for row in r.rows} == {"sum", "max"}


def test_pdsh_host_labels_on_every_line():
    plain = HEADER + "\n".join(ROWS) + "\n" + FOOTER
    text = "".join(f"node-a: {ln}\n" for ln in plain.splitlines())
    r = parse_nccl_tests(text)
    assert r.status == "ok" and len(r.rows) == 3 and r.hosts == ("node-a", "node-b")


@pytest.mark.parametrize("line, kind, host", [
    ("node-b: Test CUDA failure common.cu:891 'an illegal memory access was encountered'",
     "cuda", "node-b"),
    ("node-a: Test timeout (30s) common.cu:1024", "timeout", "node-a"),
    (" .. node-b pid 1002: Test failure common.cu:915", "test_failure", "node-b"),
    ("invalid option 'x'", "usage", None),
    ("Invalid number of GPUs: 8 requested but only 4 were found.", "setup", None),
    ("# error: NET/IB : Got async event : port error", "nccl", None),
])  # fmt: skip
def test_failure_lines(line, kind, host):
    r = parse_nccl_tests(HEADER + ROWS[0] + "\n" + line + "\n")
    assert r.status == "failed"
    assert (r.errors[0].kind, r.errors[0].host) == (kind, host)


def test_stack_frames_fold_into_the_primary_failure():
    text = ("node-b: Test NCCL failure common.cu:345 'unhandled system error'\n"
            " .. node-b pid 7: Test failure common.cu:393\n .. node-b pid 7: Test failure a.cu:1\n")
    r = parse_nccl_tests(text)
    assert [(e.kind, e.host) for e in r.errors] == [("nccl", "node-b")]


def test_new_warn_form_names_the_hca_and_table_goes_on():
    warn = ("node-b:1002:1090 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB: Got completion "
            "from peer 10.0.0.1<45021> with status=12 opcode=0 len=0 vendor err 129 (Recv) "
            "localGid ::ffff:10.0.0.2 remoteGids::ffff:10.0.0.1 hca mlx5_2")
    r = parse_nccl_tests(HEADER + ROWS[0] + "\n" + warn + "\n" + ROWS[1] + "\n")
    assert len(r.rows) == 2 and r.status == "failed"
    (e,) = r.errors
    assert (e.host, e.hca, e.status, e.peer, e.vendor_err) == (
        "node-b", "mlx5_2", "12", "10.0.0.1", "129")


def test_benign_warn_is_a_warning_not_an_error():
    warn = "node-a:1001:1001 [0] init.cc:123 NCCL WARN Missing ibv_reg_dmabuf_mr, using fallback"
    r = parse_nccl_tests(HEADER + warn + "\n" + "\n".join(ROWS) + "\n" + FOOTER)
    assert r.status == "ok" and [w.kind for w in r.warnings] == ["nccl_warn"]


def test_min_bw_footer_failed():
    r = parse_nccl_tests(HEADER + "\n".join(ROWS) + "\n# Out of bounds values : 0 OK\n"
                         "# Avg bus bandwidth    : 15.15 FAILED\n")
    assert r.status == "failed" and _kinds(r) == ["bandwidth"]


def test_old_error_column_small_value_is_not_a_failure():
    text = ("#       size         count    type   redop     time   algbw   busbw  error     time"
            "   algbw   busbw  error\n"
            "           8             2   float     sum    158.3    0.00    0.00  1e-07    158.4"
            "    0.00    0.00  0e+00\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0\n")
    r = parse_nccl_tests(text)
    assert r.status == "ok"
    assert (r.rows[0].max_rel_error, r.rows[0].wrong) == (1e-07, None)


@pytest.mark.parametrize("text, status", [
    ("", "incomplete"), ("   \n\n", "incomplete"), ("hello world\nfoo bar\n", "unparseable")])
def test_empty_and_garbage(text, status):
    r = parse_nccl_tests(text)
    assert r.status == status and not r.rows and r.reason


@pytest.mark.parametrize("glue", ["[1,3]<stdout>:", "trainer/0 [0]:", "node-a: ", "[3]"])
def test_launcher_prefix_inside_a_row(glue):
    head, tail = ROWS[2][:52], ROWS[2][52:]  # the preamble printf, then the two body printfs
    r = parse_nccl_tests(HEADER + ROWS[0] + "\n" + ROWS[1] + "\n" + head + glue + tail + "\n"
                         + FOOTER)
    assert r.status == "ok", r.reason
    assert [(x.size_bytes, x.busbw_gbps) for x in r.rows][-1] == (4194304, 20.97)


@pytest.mark.parametrize("line, kind, host, rank, status", [
    ("srun: error: node-b: task 1: Exited with exit code 3", "launcher", "node-b", 1, "3"),
    ("mpirun noticed that process rank 1 with PID 1002 on node node-b exited on signal 9 "
     "(Killed).", "launcher", "node-b", 1, "9"),
    ("slurmstepd: error: *** STEP 4242.0 ON node-b CANCELLED AT 2026-07-01T10:00:00 DUE TO "
     "TIME LIMIT ***", "timeout", "node-b", None, None),
])  # fmt: skip
def test_launcher_lines_name_the_host(line, kind, host, rank, status):
    r = parse_nccl_tests(HEADER + ROWS[0] + "\n" + line + "\n")
    assert r.status == "failed"
    e = r.errors[0]
    assert (e.kind, e.host, e.rank, e.status) == (kind, host, rank, status)
    assert "node-b" in r.hosts


def test_json_report_same_result_as_stdout():
    text = read_fixture(NT + "nccl_allreduce_v2.20_json_report_2node_synthetic.txt")
    r = parse_nccl_tests(text)
    assert r.status == "ok" and r.collective == "all_reduce"
    assert [x.size_bytes for x in r.rows] == [2**k for k in range(30, 35)]
    assert r.max_busbw_gbps == 369.62 and r.rows[0].root == -1 and r.rows[0].wrong == 0
    assert r.hosts == ("node-017", "node-018") and r.ranks == 16
    assert (r.min_bytes, r.max_bytes, r.validation, r.out_of_bounds) == (2**30, 2**34, 1, 0)
    cut = parse_nccl_tests(text[: len(text) // 2])
    assert cut.status == "incomplete"


def test_json_report_wrong_results_and_errors():
    doc = ('{"version":3,"nccl_version":22703,"config":{"devices":[]},"results":[{"size":8,'
           '"count":2,"type":"float","redop":"sum","root":"    -1","out_of_place":{"time":"nan",'
           '"alg_bw":0,"bus_bw":0,"nwrong":12},"in_place":{"time":1,"alg_bw":0,"bus_bw":0,'
           '"nwrong":null}}],"out_of_bounds":{"count":1,"okay":"false"},'
           '"average_bus_bandwidth":{"bandwidth":0,"okay":"unchecked"},'
           '"errors":["NET/IB : Got async event : port error"],"end_time":"x"}')
    r = parse_nccl_tests(doc)
    assert r.status == "failed" and [e.kind for e in r.errors] == ["nccl", "wrong_results"]
    assert r.rows[0].time_us is None and r.rows[0].wrong == 12 and r.rows[0].wrong_inplace is None
