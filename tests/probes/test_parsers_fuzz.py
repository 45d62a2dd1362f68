"""Property tests: mutated real outputs never crash a parser; results stay well-formed."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabriccheck.errors import ParseError
from fabriccheck.models import RawResult, Test
from fabriccheck.probes.detect import detect_tool, parse_raw
from fabriccheck.probes.iperf3 import parse_iperf3
from fabriccheck.probes.nccl_log import scan_nccl_log
from fabriccheck.probes.nccl_tests import parse_nccl_tests
from fabriccheck.probes.perftest import parse_perftest
from fabriccheck.probes.to_json import result_to_json
from tests.conftest import LOCAL_FIXTURES, SHARED_FIXTURES, read_fixture

STATUSES = {"ok", "failed", "incomplete", "unparseable"}
TEXTS = [read_fixture(f"{d}/{p.name}")
         for root in (SHARED_FIXTURES, LOCAL_FIXTURES)
         for d in ("nccl-tests", "perftest", "iperf3", "nccl-logs")
         for p in sorted((root / d).glob("*.txt"))]
PARSERS = [parse_nccl_tests, parse_perftest, parse_iperf3, scan_nccl_log]
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def mutated(draw) -> str:
    text = draw(st.sampled_from(TEXTS))
    lines = text.splitlines(keepends=True)
    op = draw(st.sampled_from(["truncate", "delete", "duplicate", "shuffle", "bytes", "empty",
                               "splice", "none"]))
    if op == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    if op == "delete" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        j = draw(st.integers(i, min(len(lines), i + 5)))
        return "".join(lines[:i] + lines[j:])
    if op == "duplicate" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        return "".join(lines[: i + 1] + lines[i:])
    if op == "shuffle":
        return "".join(draw(st.permutations(lines)))
    if op == "bytes":
        pos = draw(st.integers(0, len(text)))
        junk = draw(st.binary(max_size=40)).decode("latin-1")
        return text[:pos] + junk + text[pos:]
    if op == "splice":  # another tool's output glued in
        other = draw(st.sampled_from(TEXTS))
        pos = draw(st.integers(0, len(text)))
        return text[:pos] + other[: draw(st.integers(0, len(other)))] + text[pos:]
    if op == "empty":
        return ""
    return text


def _finite(x) -> bool:
    return x is None or (isinstance(x, (int, float)) and math.isfinite(x))


def _check(result) -> None:
    assert result.status in STATUSES
    if result.status != "ok":
        assert result.reason
    for row in getattr(result, "rows", ()):
        assert all(_finite(v) for v in vars(row).values() if not isinstance(v, str))
    for row in getattr(result, "latency_rows", ()):
        assert all(_finite(v) for v in vars(row).values())
    for name in ("sent_gbps", "received_gbps", "duration_s", "avg_busbw_gbps"):
        assert _finite(getattr(result, name, None))
    result_to_json(result)


@SETTINGS
@given(mutated(), st.sampled_from(PARSERS))
def test_parsers_never_raise_on_mutated_outputs(text, parser):
    try:
        result = parser(text)
    except ParseError:
        return
    _check(result)


@SETTINGS
@given(mutated(), st.sampled_from(["nccl", "allreduce-cpu", "ib_write_bw", "iperf3"]),
       st.booleans(), st.sampled_from([0, 1, 3, None]))
def test_parse_raw_never_raises(text, probe, timed_out, code):
    raw = RawResult("t", stdout=text, stderr=text[:100], exit_code=code, timed_out=timed_out)
    _check(parse_raw(Test("t", probe, ("a", "b")), raw))


@SETTINGS
@given(mutated())
def test_detect_raises_only_parse_error(text):
    try:
        assert detect_tool(text) in ("nccl-tests", "perftest", "iperf3", "nccl-log")
    except ParseError:
        pass


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=400))
def test_arbitrary_text(text):
    for parser in PARSERS:
        _check(parser(text))
