"""Which tool printed a text, and the one entry point from a test's raw output to its result."""

from __future__ import annotations

import re
from dataclasses import replace

from fabriccheck.errors import ParseError
from fabriccheck.models import RawResult, Test
from fabriccheck.probes import TOOLS
from fabriccheck.probes._text import strip_source_line
from fabriccheck.probes.iperf3 import parse_iperf3
from fabriccheck.probes.job_triage import scan_with_triage
from fabriccheck.probes.nccl_tests import parse_nccl_tests
from fabriccheck.probes.nccl_tests_json import looks_like_nccl_tests_json
from fabriccheck.probes.perftest import parse_perftest
from fabriccheck.probes.perftest_json import looks_like_perftest_json
from fabriccheck.probes.results import (
    FAILED,
    INCOMPLETE,
    OK,
    UNPARSEABLE,
    Iperf3Result,
    NcclLogScan,
    NcclTestsResult,
    PerftestResult,
    ToolError,
)

Result = NcclTestsResult | PerftestResult | Iperf3Result | NcclLogScan

#: probe -> tool whose output it prints (allreduce-cpu prints a nccl-tests table)
PROBE_TOOLS = {"nccl": "nccl-tests", "allreduce-cpu": "nccl-tests", "ib_write_bw": "perftest",
               "iperf3": "iperf3"}

_SIGNS: dict[str, re.Pattern[str]] = {
    "iperf3": re.compile(
        r"\"(?:connecting_to|intervals|sum_sent|cookie)\"|^Connecting to host .*, port \d+|"
        r"^iperf Done\.|^\[ ID\] Interval|^\[\s*(?:\d+|SUM)\]\s+[\d.]+-\s*[\d.]+\s+sec\s|"
        r"^iperf3: (?:error|interrupt) - |^Server listening on \d+", re.M),
    "perftest": re.compile(
        r"(?:BW|Latency) Test\s*$|#bytes\s+#iterations|Waiting for client to connect|"
        r"\b(?:local|remote) address: LID|\bib_(?:write|read|send|atomic)_(?:bw|lat)\b|"
        r"Unable to init the socket connection|Failed to modify QP|ethernet_read_keys|"
        r"Couldn't connect to \S+:\d+|Unable to Connect the HCA's|Parser function exited|"
        r"Completion with error at (?:client|server)|Failed to complete run_iter_\w+", re.M),
    "nccl-tests": re.compile(
        r"nThreads?:? \d+ nGpus:? \d+|^\s*#?\s*size\s+count\s+type\b|Out of bounds values\s*:|"
        r"Avg bus bandwidth\s*:|: Test (?:NCCL|CUDA) failure|Collective test (?:starting|"
        r"concluded)|\b\w+_perf(?:_mpi)?\b|^\s*\d+\s+\d+\s+[a-z]\w*\s+(?:\w+\s+)?-?[\d.]+\s+"
        r"[\d.]+\s+[\d.]+\s+[\d.]+\s+(?:\d+|N/A|[\d.e+-]+)\s+[\d.]+|"
        # a row tagged per write by the launcher: `[0]   1048576  262144  float  sum  -1[0]  ...`
        r"^\s*\[\d+\]\s*\d+\s+\d+\s+[a-z]\w*\s+(?:\w+\s+)?-?\d+\[\d+\]\s", re.M),
    "nccl-log": re.compile(
        r"NCCL (?:INFO|WARN|ERROR)|ProcessGroupNCCL|Watchdog caught|\bXid \(|NVRM:|"
        r"ChildFailedError|torch\.distributed|mlx5_core|segfault at|Got completion from peer|"
        r"fallen off the bus|Root Cause \(first observed failure\)", re.M),
}
_WS_RUN_RE = re.compile(r"[ \t]{2,}")
#: a tool's own signs beat the NCCL lines that ride along in its output
_PRIORITY = ("iperf3", "perftest", "nccl-tests", "nccl-log")


def detect_tool(text: str) -> str:
    """Name the tool that printed ``text``: ``nccl-tests``, ``perftest``, ``iperf3`` or
    ``nccl-log``.

    Raises
    ------
    ParseError
        When nothing in the text belongs to any of them (empty text too).

    Examples
    --------
    >>> detect_tool("# nThread 1 nGpus 8 minBytes 8 maxBytes 128")
    'nccl-tests'
    >>> detect_tool("n1:2:3 [0] NCCL WARN oops")
    'nccl-log'
    """
    text = strip_source_line(text)
    if looks_like_nccl_tests_json(text):
        return "nccl-tests"
    if looks_like_perftest_json(text):
        return "perftest"
    head = _WS_RUN_RE.sub(" ", text[:200_000])  # signs' `\s*` then stay linear
    counts = {tool: len(_SIGNS[tool].findall(head)) for tool in _PRIORITY}
    if counts["nccl-tests"] and counts["nccl-tests"] >= counts["perftest"]:
        counts["perftest"] = 0  # ib_* names never appear in nccl-tests output, the reverse may
    for tool in _PRIORITY:
        if counts[tool]:
            return tool
    excerpt = text.strip().splitlines()[0][:120] if text.strip() else ""
    raise ParseError("not the output of nccl-tests, perftest, iperf3 or a NCCL job log",
                     tool="detect", excerpt=excerpt,
                     hint="name the tool with --tool, or check the file is tool output")


def parse_text(text: str, tool: str | None = None) -> Result:
    """Parse ``text`` with the parser of ``tool`` (detected when None).

    Raises
    ------
    ParseError
        When ``tool`` is unknown, or when it is None and the tool cannot be detected.
    """
    text = strip_source_line(text)
    tool = tool or detect_tool(text)
    if tool == "nccl-tests":
        return parse_nccl_tests(text)
    if tool == "perftest":
        return parse_perftest(text)
    if tool == "iperf3":
        return parse_iperf3(text)
    if tool == "nccl-log":
        return scan_with_triage(text)
    raise ParseError(f"unknown tool {tool!r}", tool="detect", hint=f"use one of {TOOLS}")


def parse_raw(test: Test, raw: RawResult) -> NcclTestsResult | PerftestResult | Iperf3Result:
    """The parsed result of one executed test; never raises.

    Picks the parser by ``test.probe`` (``nccl`` and ``allreduce-cpu`` print nccl-tests tables,
    ``ib_write_bw`` perftest, ``iperf3`` iperf3), reads stdout then stderr, and folds in what
    the executor saw: a timeout makes the result ``incomplete`` (``failed`` if errors were
    printed first), an unreachable host or executor error ``incomplete``, a non-zero exit code
    of an otherwise clean run ``failed``. Empty or garbled output gives ``incomplete`` or
    ``unparseable``.
    """
    tool = PROBE_TOOLS.get(test.probe)
    empty = {"nccl-tests": NcclTestsResult, "perftest": PerftestResult, "iperf3": Iperf3Result}
    cls = empty.get(tool or "", NcclTestsResult)
    if tool is None:
        return cls(UNPARSEABLE, reason=f"no parser for probe {test.probe!r}")
    if raw.unreachable:
        hosts = ", ".join(raw.unreachable)
        err = ToolError("unreachable", f"host(s) not reachable: {hosts}", host=raw.unreachable[0])
        return cls(INCOMPLETE, errors=(err,), reason=f"unreachable: {hosts}")
    text = raw.stdout if tool == "iperf3" and raw.stdout.strip() else (
        raw.stdout + ("\n" + raw.stderr if raw.stderr else ""))
    try:
        result = parse_text(text, tool)
    except ParseError as exc:
        return cls(UNPARSEABLE, reason=str(exc))
    except Exception as exc:  # a parser bug must not stop a sweep: record it as a result
        return cls(UNPARSEABLE, reason=f"parser error {type(exc).__name__}: {exc}"[:300])
    if tool == "iperf3" and raw.stderr and result.status != FAILED:
        extra = parse_iperf3(raw.stderr).errors
        if extra:
            result = replace(result, status=FAILED, errors=result.errors + extra,
                             reason=extra[0].message)
    return _fold_executor(result, raw)


def _fold_executor(result, raw: RawResult):
    if raw.timed_out:
        err = ToolError("timeout", f"killed after {raw.duration_s:g} s: the tool hung")
        status = FAILED if result.errors else INCOMPLETE
        reason = result.errors[0].message if result.errors else (
            f"timed out after {raw.duration_s:g} s" + (f"; {result.reason}" if result.reason
                                                       else ""))
        return replace(result, status=status, errors=result.errors + (err,), reason=reason)
    if raw.error:
        return replace(result, status=INCOMPLETE if result.status == OK else result.status,
                       reason=f"executor: {raw.error}"[:300])
    if raw.exit_code not in (0, None) and result.status == OK:
        err = ToolError("exit_code", f"exited with code {raw.exit_code}",
                        status=str(raw.exit_code))
        return replace(result, status=FAILED, errors=result.errors + (err,), reason=err.message)
    return result
