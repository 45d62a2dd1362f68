"""The parsers' fast paths (issue 30) return what their state machines return, field for field.

``parse_nccl_tests`` and ``parse_perftest`` first try a compiled table scan
(:mod:`fabriccheck.probes.nccl_tests_scan`, :mod:`fabriccheck.probes.perftest_scan`) and hand
anything it does not recognise to the line-by-line state machine (``*_reference``). Held here:
on every output text of the fixtures (the repo's, and ``../shared``'s when present), on a few
thousand simulator outputs (seeds, faults, both tools, every size) and on clean outputs mutated
by hypothesis, the fast result equals the reference one (dataclass ``==``: rows, errors,
warnings, status, transport, ...) whenever the fast path answers, and the public function's
result always does; and the fast path does answer on the simulator's clean outputs, so these
checks cannot pass with a fast path that never runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.probes._text import strip_source_line
from fabriccheck.probes.nccl_tests import (
    parse_nccl_tests,
    parse_nccl_tests_fast,
    parse_nccl_tests_reference,
)
from fabriccheck.probes.perftest import (
    parse_perftest,
    parse_perftest_fast,
    parse_perftest_reference,
)
from fabriccheck.probes.results import FAILED
from tests.conftest import LOCAL_FIXTURES, SHARED_FIXTURES
from tests.probes.sim_outputs import sim_outputs

#: tool -> (fast path alone, state machine alone, public parser)
PARSERS: dict[str, tuple[Callable, Callable, Callable]] = {
    "nccl-tests": (parse_nccl_tests_fast, parse_nccl_tests_reference, parse_nccl_tests),
    "perftest": (parse_perftest_fast, parse_perftest_reference, parse_perftest),
}
SHARED = SHARED_FIXTURES.parent  # ../shared: fixtures/ and corpus/
TEXT_SUFFIXES = {".txt", ".log", ".out", ".json", ".md"}


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES)


def _same(tool: str, text: str) -> bool:
    """Assert the fast path (when it answers) and the public parser agree with the state
    machine on ``text``; True when the fast path answered."""
    fast, reference, public = PARSERS[tool]
    want = reference(text)
    got = fast(text)
    if got is not None:
        assert got == want
    assert public(text) == want
    return got is not None


def _both(text: str) -> None:
    for variant in {text, strip_source_line(text)}:  # as stored, and as parse_text reads it
        for tool in PARSERS:
            _same(tool, variant)


@pytest.mark.parametrize("path", _files(LOCAL_FIXTURES), ids=lambda p: p.name)
def test_repo_fixture_reads_the_same_both_ways(path):
    _both(path.read_text(encoding="utf-8", errors="replace"))


SHARED_FILES = (_files(SHARED / "fixtures") + _files(SHARED / "corpus")
                if SHARED.is_dir() else [])


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"third-party outputs are read in place from "
                    f"{SHARED} (never copied into the repo); it is absent here (set "
                    "FABRICCHECK_FIXTURES, or put shared/ beside the clone)")
@pytest.mark.parametrize("path", SHARED_FILES, ids=lambda p: str(p.relative_to(SHARED)))
def test_shared_output_reads_the_same_both_ways(path):
    _both(path.read_text(encoding="utf-8", errors="replace"))


def test_simulator_outputs_read_the_same_and_the_clean_ones_take_the_fast_path():
    outputs = sim_outputs()
    assert {tool for tool, _ in outputs} == set(PARSERS) and len(outputs) > 4000
    fell_back: dict[str, list[str]] = {tool: [] for tool in PARSERS}
    for tool, text in outputs:
        if not _same(tool, text) and PARSERS[tool][1](text).status != FAILED:
            fell_back[tool].append(text)
    assert fell_back == {tool: [] for tool in PARSERS}, "clean outputs the fast path missed"


def _clean(tool: str) -> list[str]:
    """A spread of clean simulator outputs of ``tool`` (complete and cut short)."""
    texts = [t for k, t in sim_outputs((0,)) if k == tool]
    return [t for t in texts[::7] if PARSERS[tool][1](t).status != FAILED]


#: lines a mutation inserts: each one is read by the state machine in its own way
ODD_LINES = [
    "", "#", " ", "\t", "# Out of bounds values : 3 FAILED", "# Avg bus bandwidth : 1.5 FAILED",
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 1",
    "# Collective test starting: all_gather_perf", "# Collective test concluded: sendrecv_perf",
    "      1024           256     float     sum      -1    10.00    0.10    0.19       7    10.00"
    "    0.10    0.19       0",
    "      1024           256     float     sum      -1    10.00",
    "#  Rank  0 Group  0 Pid   4242 on   node-001 device  0 [0000:18:00] NVIDIA H100",
    "n1:1:2 [0] NCCL INFO comm 0x1 rank 3 nranks 16 cudaDev 3 busId 1000 - Init COMPLETE",
    "n1:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<5> with status=12 opcode=0",
    "n1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.1<0>",
    "node-1: Test NCCL failure common.cu:1279 'unhandled system error'",
    "srun: error: node-b: task 3: Exited with exit code 3", "invalid option -- 'z'",
    " Waiting for client to connect... *", "ib_write_bw -d mlx5_0 --report_gbits 10.0.0.2",
    " Couldn't connect to 10.0.0.2:18515", " Completion with error at client",
    " Failed status 12: wr_id 0 syndrom 0x81", " Device         : mlx5_9",
    " Link type       : Ethernet", " local address: LID 0x07 QPN 0x0091 PSN 0x8e6c84",
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]",
    " 65536      1000             46567.34            46557.03\t\t     0.744912",
    " 65536      1000             4656..34            46557.03\t\t     0.744912",
    " 2          1000           1.23           4.56         1.50        1.60        0.10",
    "-" * 87, " WARNING: BW peak won't be measured in this run.", "[1,0]<stdout>:#",
    "(pid=12) # Using devices", "0: # Using devices", "text\rwith a carriage return",
    "caf\u00e9 \u2028 line", "\x1b[32m# Using devices\x1b[0m",
]
MUTATION = st.one_of(
    st.tuples(st.just("drop"), st.integers(0, 10_000)),
    st.tuples(st.just("dup"), st.integers(0, 10_000)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.sampled_from(ODD_LINES)),
    st.tuples(st.just("label"), st.integers(0, 10_000)),
    st.tuples(st.just("cut"), st.integers(0, 1_000_000)),
)


def _mutate(text: str, mutations) -> str:
    """``text`` with lines dropped, duplicated, inserted or given a pdsh ``host: `` label, or
    cut at a character."""
    lines = text.split("\n")
    for kind, at, *extra in mutations:
        i = at % len(lines)
        if kind == "drop" and len(lines) > 1:
            del lines[i]
        elif kind == "dup":
            lines.insert(i, lines[i])
        elif kind == "insert":
            lines.insert(i, extra[0])
        elif kind == "label":
            lines[i] = "node-7: " + lines[i]
        elif kind == "cut":
            joined = "\n".join(lines)
            lines = joined[:at % (len(joined) + 1)].split("\n")
    return "\n".join(lines)


@pytest.mark.parametrize("tool", sorted(PARSERS))
@settings(max_examples=40)  # a 32-rank nccl-tests output read twice: ~0.1 s an example
@given(data=st.data(), mutations=st.lists(MUTATION, min_size=1, max_size=4))
def test_mutated_clean_output_reads_the_same_both_ways(tool, data, mutations):
    text = data.draw(st.sampled_from(_clean(tool)), label="clean output")
    _same(tool, _mutate(text, mutations))
