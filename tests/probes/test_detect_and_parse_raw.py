"""Tool detection over every fixture, parse_raw over executor outcomes, and the JSON contract."""

from __future__ import annotations

import doctest
import json

import pytest

from fabriccheck.errors import ParseError
from fabriccheck.models import RawResult, Test
from fabriccheck.probes import (
    _failure_lines,
    _text,
    detect,
    iperf3,
    nccl_log,
    nccl_tests,
    nccl_tests_rows,
    perftest,
    perftest_json,
    to_json,
)
from fabriccheck.probes.detect import detect_tool, parse_raw, parse_text
from fabriccheck.probes.to_json import result_to_json
from tests.conftest import LOCAL_FIXTURES, SHARED_FIXTURES, read_fixture

DIRS = {"nccl-tests": "nccl-tests", "perftest": "perftest", "iperf3": "iperf3",
        "nccl-logs": "nccl-log"}
FIXTURES = sorted(
    (f"{d}/{p.name}", tool)
    for d, tool in DIRS.items()
    for root in (SHARED_FIXTURES, LOCAL_FIXTURES)
    for p in (root / d).glob("*.txt")
)
#: a NCCL WARN excerpt filed under nccl-tests/ holds no nccl-tests line: it is a job log
EXPECTED = {"nccl-tests/nccl_warn_net_ib_completion_error4_vendor81_older.txt": "nccl-log"}


def test_fixture_inventory_is_complete():
    assert len(FIXTURES) >= 13 + 10 + 9 + 23


@pytest.mark.parametrize("rel, tool", FIXTURES)
def test_detect_every_fixture(rel, tool):
    assert detect_tool(read_fixture(rel)) == EXPECTED.get(rel, tool)


@pytest.mark.parametrize("rel, tool", FIXTURES)
def test_contract_json_of_every_fixture(rel, tool):
    data = result_to_json(parse_text(read_fixture(rel), EXPECTED.get(rel, tool)))
    json.dumps(data)  # plain JSON types only
    assert list(data)[:3] == ["tool", "status", "reason"]
    assert data["status"] in ("ok", "failed", "incomplete", "unparseable")
    assert all({"kind", "message"} <= set(e) for e in data["errors"])
    if data["tool"] == "nccl-tests":
        assert {"rows", "max_busbw_gbps", "hosts", "errors"} <= set(data)
        for row in data["rows"]:
            assert {"size_bytes", "busbw_gbps", "busbw_inplace_gbps", "wrong"} <= set(row)
    if data["tool"] == "perftest":
        assert {"test", "device", "link_type", "rows", "latency_rows", "errors"} <= set(data)
        for row in data["rows"]:
            assert {"size_bytes", "bw_avg_gbps", "bw_peak_gbps"} <= set(row)


@pytest.mark.parametrize("text", ["", "\n\n", "just some words\n", "a,b,c\n1,2,3\n"])
def test_detect_rejects_unknown_text(text):
    with pytest.raises(ParseError) as exc:
        detect_tool(text)
    assert exc.value.tool == "detect"


def test_parse_text_unknown_tool():
    with pytest.raises(ParseError):
        parse_text("x", "hpl")


def test_docstring_examples_run():
    for mod in (_failure_lines, _text, detect, iperf3, nccl_log, nccl_tests, nccl_tests_rows,
                perftest, perftest_json, to_json):
        res = doctest.testmod(mod)
        assert res.failed == 0, mod.__name__


# --- parse_raw -------------------------------------------------------------------------------

NCCL_OK = read_fixture("nccl-tests/nccl_allreduce_2node_ring_4x200g_ok.txt")
PERF_OK = read_fixture("perftest/ib_write_bw_ndr400_cx7_gbits_client_ok.txt")
IPERF_OK = read_fixture("iperf3/iperf3_J_tcp_1stream_v3.9_omit3_cross_cloud_client.txt")


def _test(probe: str) -> Test:
    return Test("t1", probe, ("n1", "n2"))


@pytest.mark.parametrize("probe, text, cls", [
    ("nccl", NCCL_OK, "NcclTestsResult"), ("allreduce-cpu", NCCL_OK, "NcclTestsResult"),
    ("ib_write_bw", PERF_OK, "PerftestResult"), ("iperf3", IPERF_OK, "Iperf3Result"),
])  # fmt: skip
def test_parse_raw_picks_parser_by_probe(probe, text, cls):
    r = parse_raw(_test(probe), RawResult("t1", stdout=text))
    assert type(r).__name__ == cls and r.status == "ok"


def test_parse_raw_timeout_keeps_rows_and_is_incomplete():
    cut = NCCL_OK.split("# Out of bounds")[0]
    r = parse_raw(_test("nccl"), RawResult("t1", stdout=cut, exit_code=None, timed_out=True,
                                           duration_s=120.0))
    assert r.status == "incomplete" and len(r.rows) == 5 and r.errors[-1].kind == "timeout"
    assert "timed out after 120 s" in r.reason


def test_parse_raw_timeout_after_error_is_failed():
    text = NCCL_OK.split("# Out of bounds")[0] + "n2: Test NCCL failure common.cu:1 'x'\n"
    r = parse_raw(_test("nccl"), RawResult("t1", stdout=text, exit_code=None, timed_out=True))
    assert r.status == "failed" and [e.kind for e in r.errors] == ["nccl", "timeout"]


def test_parse_raw_unreachable_and_executor_error():
    r = parse_raw(_test("ib_write_bw"), RawResult("t1", unreachable=("n2",), exit_code=None))
    assert r.status == "incomplete" and r.errors[0].kind == "unreachable"
    assert r.errors[0].host == "n2"
    r2 = parse_raw(_test("nccl"), RawResult("t1", stdout=NCCL_OK, error="ssh channel closed"))
    assert r2.status == "incomplete" and "ssh channel closed" in r2.reason


def test_parse_raw_nonzero_exit_of_clean_output_is_failed():
    r = parse_raw(_test("ib_write_bw"), RawResult("t1", stdout=PERF_OK, exit_code=1))
    assert r.status == "failed" and r.errors[-1].kind == "exit_code"


def test_parse_raw_reads_stderr_errors():
    r = parse_raw(_test("ib_write_bw"), RawResult(
        "t1", stdout="", stderr="Couldn't connect to 10.0.0.2:18515\n", exit_code=1))
    assert r.status == "failed" and r.errors[0].peer == "10.0.0.2:18515"
    r2 = parse_raw(_test("iperf3"), RawResult(
        "t1", stdout=IPERF_OK, stderr="iperf3: error - the server is busy\n", exit_code=1))
    assert r2.status == "failed" and r2.errors[-1].kind == "busy"


@pytest.mark.parametrize("probe", ["nccl", "ib_write_bw", "iperf3", "allreduce-cpu"])
@pytest.mark.parametrize("stdout, status",
                         [("", "incomplete"), ("\x00\xff garbage", "unparseable")])
def test_parse_raw_empty_and_garbled(probe, stdout, status):
    r = parse_raw(_test(probe), RawResult("t1", stdout=stdout))
    assert r.status == status and r.reason


def test_parse_raw_unknown_probe():
    assert parse_raw(_test("hpl"), RawResult("t1", stdout="x")).status == "unparseable"
