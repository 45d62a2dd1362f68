"""nccl-tests stdout (all_reduce_perf & co.): result rows, rank lines, footer and failures.

Every layout of tool-formats.md §1 is read: the current (v2.17+, 118-char rows) and the
2022-08..2025-10 formats (``#wrong`` and ``root``), the pre-2022-08 format (``error`` column, no
``root``, blank ``redop``), pre-2019 output without ``#`` prefixes, ``-S`` timestamps, ``-I 1``
per-iteration columns, launcher prefixes (even inside a row), NCCL log lines anywhere, several
tables, and the output of a non-MPI build started by a multi-process launcher. Rows are split on
whitespace, never on column positions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabriccheck.probes._failure_lines import launcher_error, test_failure_error, usage_error
from fabriccheck.probes._text import (
    NCCL_LINE_RE,
    clean_line,
    dedupe_errors,
    ib_completion_cut,
    joins_wrapped,
    nccl_line_error,
    ordered_unique,
    split_label,
    to_float,
)
from fabriccheck.probes.nccl_tests_json import (
    looks_like_nccl_tests_json,
    parse_nccl_tests_json,
)
from fabriccheck.probes.nccl_tests_rows import ROW_PREFIX_RE, ROW_START_RE, Schema, parse_row
from fabriccheck.probes.nccl_tests_scan import HEADER_RE as _HEADER_RE
from fabriccheck.probes.nccl_tests_scan import NRANKS_RE, header_fields, scan_nccl_tests
from fabriccheck.probes.nccl_tests_scan import collective_name as _collective
from fabriccheck.probes.nccl_transport import TransportReader
from fabriccheck.probes.results import (
    FAILED,
    INCOMPLETE,
    OK,
    UNPARSEABLE,
    NcclRow,
    NcclTestsResult,
    ToolError,
)

_RANK_RE = re.compile(
    r"^\s*#?\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<dev>\d+)\s+\[(?P<pci>[^\]]*)\]\s*(?P<name>.*)$"
)
_OOB_RE = re.compile(r"^\s*#?\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_AVG_RE = re.compile(r"^\s*#?\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
_STARTING_RE = re.compile(r"Collective test (starting|concluded):\s*(\S+)")
_PROGRAM_RE = re.compile(r"(?:^|[\s/])(\w+?)_perf(?:_mpi)?(?:\s|$)")
@dataclass
class _State:
    headers: list[dict[str, int]] = field(default_factory=list)
    ranks: dict[int, set[tuple[str, int]]] = field(default_factory=dict)
    rank_hosts: list[str] = field(default_factory=list)
    schema: Schema = field(default_factory=Schema)
    rows: list[NcclRow] = field(default_factory=list)
    row_lines: list[int] = field(default_factory=list)
    errors: list[ToolError] = field(default_factory=list)
    warnings: list[ToolError] = field(default_factory=list)
    info_hosts: list[str] = field(default_factory=list)
    collective: str | None = None
    oob: int | None = None
    oob_failed: bool = False
    avg: float | None = None
    avg_failed: bool = False
    footer: bool = False
    recognized: int = 0
    nranks: int | None = None
    #: set once a second test starts after the first one's footer (several tests run one after
    #: another into one file): the names seen, and nothing more of them is read
    later_tests: list[str] | None = None
    later_awaiting: bool = False  # a later test was announced, its header not yet seen
    next_name: str | None = None  # a collective announced after the first test's footer
    #: the NCCL INFO lines that say which network each rank used (probes.nccl_transport)
    transport: TransportReader = field(default_factory=TransportReader)


def parse_nccl_tests(text: str) -> NcclTestsResult:
    """Parse what an nccl-tests binary printed.

    Parameters
    ----------
    text
        stdout (optionally followed by stderr) of ``all_reduce_perf`` & co., launcher prefixes
        and interleaved NCCL lines included; or the ``-J`` JSON report.

    Returns
    -------
    NcclTestsResult
        ``ok`` with the footer printed and no error; ``failed`` when the text names a failure
        (``nccl``, ``cuda``, ``test_failure``, ``timeout``, ``wrong_results``, ``setup``,
        ``usage``, ``ib_completion``, ``socket``, ``bandwidth``, ``launcher``); ``incomplete``
        when the output stops early (no rows, or rows without footer); ``unparseable`` when
        nothing in it is nccl-tests output.

    Examples
    --------
    >>> r = parse_nccl_tests('''# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor)
    ...            8             2     float     sum      -1    135.8    0.00    0.00      0'''
    ...     '''    123.5    0.00    0.00      0
    ... # Out of bounds values : 0 OK
    ... # Avg bus bandwidth    : 0 ''')
    >>> r.status, len(r.rows), r.rows[0].wrong
    ('ok', 1, 0)
    """
    if looks_like_nccl_tests_json(text):
        return parse_nccl_tests_json(text)
    fast = parse_nccl_tests_fast(text)  # a clean output in a few regex calls
    return fast if fast is not None else _finish(_read_lines(text), text)


def parse_nccl_tests_fast(text: str) -> NcclTestsResult | None:
    """What :func:`parse_nccl_tests` returns for ``text`` when its fast path
    (:func:`~fabriccheck.probes.nccl_tests_scan.scan_nccl_tests`) recognises it, else None."""
    scan = scan_nccl_tests(text)
    return None if scan is None else _finish(_State(**scan._asdict()), text)


def parse_nccl_tests_reference(text: str) -> NcclTestsResult:
    """:func:`parse_nccl_tests` by the line-by-line state machine alone: the reference the fast
    path is held to (it reads every layout and failure; the fast path only clean outputs)."""
    if looks_like_nccl_tests_json(text):
        return parse_nccl_tests_json(text)
    return _finish(_read_lines(text), text)


def _read_lines(text: str) -> _State:
    """Feed every line to the state machine (rejoining lines a terminal wrapped)."""
    st = _State()
    pending: tuple[int, str] | None = None  # a line a terminal or web page may have wrapped
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = clean_line(raw)
        if pending is not None:
            if _rejoin(st, pending, line):
                pending = None
                continue
            if ib_completion_cut(pending[1]):
                _feed(st, pending[1], pending[0])
            pending = None
        if "NCCL WARN" in line and ib_completion_cut(line):
            pending = (lineno, line)  # fed with its rest, or alone, on the next line
        elif not _feed(st, line, lineno) and ROW_START_RE.match(line):
            pending = (lineno, line)  # a row start that is no row: its rest may follow
    if pending is not None and ib_completion_cut(pending[1]):
        _feed(st, pending[1], pending[0])
    return st


def _rejoin(st: _State, pending: tuple[int, str], line: str) -> bool:
    """Join ``line`` to the ``pending`` one when the two make exactly one result row, or finish
    a cut IB completion WARN (the next line being no record of its own)."""
    lineno, first = pending
    joined = f"{first} {line.strip()}"
    if not line.strip():
        return False
    if ib_completion_cut(first):
        if not joins_wrapped(line):
            return False
        _feed(st, joined, lineno)
        return True
    row = parse_row(joined, st.schema)
    return row is not None and _add_row(st, row, lineno)


def _feed(st: _State, line: str, lineno: int, depth: int = 0) -> bool:
    s = line.strip()
    if not s:
        return True
    if st.later_tests is not None:  # a second test after the first one's footer
        _feed_later_test(st, s)
        return True
    err = test_failure_error(s, lineno) if "Test " in s else None
    if err is not None:
        st.errors.append(err)
        st.recognized += 1
        return True
    if "NCCL " in s:
        m = NCCL_LINE_RE.search(s)
        if m:
            _feed_nccl_line(st, m, lineno)
            return True
    if s[0].isdigit() and _feed_row(st, s, lineno):  # the common line first
        return True
    if _feed_meta(st, s, lineno) or _feed_row(st, s, lineno):
        return True
    err = usage_error(s, lineno) or launcher_error(s, lineno)
    if err is not None:
        st.errors.append(err)
        st.recognized += err.kind != "launcher"
        return True
    if "_perf" in s and (st.collective is None or (st.footer and st.rows)):
        m = _PROGRAM_RE.search(s)
        if m and st.collective is None:
            st.collective = _collective(m.group(1) + "_perf")
            return True
        if m:  # a banner or command after the first test's footer announces the next one
            st.next_name = _collective(m.group(1) + "_perf")
            return True
    rest = split_label(s) if depth == 0 else None  # pdsh `host: ` on every line
    if rest is not None:
        return _feed(st, rest, lineno, depth + 1)
    return False


def _feed_later_test(st: _State, s: str) -> None:
    """Name the tests after the first: a ``starting`` line, a banner or command naming a
    ``*_perf`` binary announce one (its header then belongs to it); a header nobody announced
    is one more test whose name is not known (``?``) until a name follows."""
    tests = st.later_tests
    assert tests is not None
    m = _STARTING_RE.search(s)
    name = _collective(m.group(2)) if m and m.group(1) == "starting" else None
    if name is None and "_perf" in s and not s.startswith("#"):
        p = _PROGRAM_RE.search(s)
        name = _collective(p.group(1) + "_perf") if p else None
    if name:
        if tests and tests[-1] == "?":
            tests[-1] = name
        elif not (tests and tests[-1] == name and st.later_awaiting):
            tests.append(name)
        st.later_awaiting = True
    elif _HEADER_RE.match(s):
        if not st.later_awaiting:
            tests.append("?")
        st.later_awaiting = False


def _feed_nccl_line(st: _State, m: re.Match[str], lineno: int) -> None:
    st.info_hosts.append(m["host"])
    if m["level"] == "INFO":
        st.transport.feed(m["host"], m["pid"], m["dev"], m["msg"])
    err = nccl_line_error(m, lineno)
    if err is not None:
        st.errors.append(err)
    elif m["level"] in ("WARN", "ERROR"):
        st.warnings.append(ToolError("nccl_warn", m["msg"].strip()[:300], host=m["host"],
                                     line=lineno))
    n = NRANKS_RE.search(m["msg"]) if "nranks" in m["msg"] else None  # a literal test first
    if n:
        st.nranks = int(n.group(1))


def _feed_meta(st: _State, s: str, lineno: int) -> bool:
    m = _HEADER_RE.match(s)
    if m:
        hdr = header_fields(m)
        if _another_test(st, hdr):
            st.later_tests, st.later_awaiting = [st.next_name or "?"], False
            return True
        st.headers.append(hdr)
        st.recognized += 1
        return True
    m = _RANK_RE.match(s)
    if m:
        rank, host = int(m["rank"]), m["host"]
        st.ranks.setdefault(rank, set()).add((host, int(m["pid"])))
        st.transport.note_rank(rank, host, m["pid"], m["dev"])
        st.rank_hosts.append(host)
        st.recognized += 1
        return True
    body = s[1:].strip() if s.startswith("#") else s
    toks = body.split()
    if len(toks) >= 4 and toks[:3] == ["size", "count", "type"]:
        st.schema = Schema(has_root="root" in toks, rel_error="error" in toks)
        st.recognized += 1
        return True
    m = _OOB_RE.match(s)
    if m:
        st.oob, st.oob_failed, st.footer = int(m.group(1)), m.group(2) == "FAILED", True
        st.recognized += 1
        return True
    m = _AVG_RE.match(s)
    if m:
        st.avg, st.avg_failed, st.footer = to_float(m.group(1)), m.group(2) == "FAILED", True
        st.recognized += 1
        return True
    m = _STARTING_RE.search(s)
    if m and m.group(1) == "starting" and st.footer and st.rows:
        st.next_name = _collective(m.group(2))  # the header that follows decides
        return True
    if m:
        st.collective = _collective(m.group(2))
        st.footer = st.footer or m.group(1) == "concluded"
        st.recognized += 1
        return True
    if s.startswith("# error:"):
        st.errors.append(ToolError("nccl", s[len("# error:"):].strip()[:300], line=lineno))
        return True
    if s.startswith("#"):
        if "nccl-tests version" in s or "Using devices" in s or "(GB/s)" in s:
            st.recognized += 1
        return True
    return False


def _another_test(st: _State, hdr: dict[str, int]) -> bool:
    """A header after the first test's footer starts another test when it names another
    collective or other parameters. The same test again is left to the non-MPI-build check
    (identical single-process tests look just like that)."""
    if not (st.footer and st.rows):
        return False
    other = st.next_name is not None and st.next_name != st.collective
    return other or bool(st.headers and hdr != st.headers[0])


def _feed_row(st: _State, s: str, lineno: int) -> bool:
    if not s[:1].isdigit() and not s.startswith(("[", "-")) and ":" not in s[:64]:
        return False
    row = parse_row(s, st.schema)
    if row is None:
        stripped = ROW_PREFIX_RE.sub("", s, count=1)
        if stripped == s:
            return False
        row = parse_row(stripped, st.schema)
        if row is None:
            return False
    return _add_row(st, row, lineno)


def _add_row(st, row, lineno: int) -> bool:
    """Keep a parsed table row (and the line it came from)."""
    st.rows.append(row)
    st.row_lines.append(lineno)
    st.recognized += 1
    return True


def _interleaved(rows: list[NcclRow]) -> bool:
    """True when independent size sweeps are interleaved (several single-process tests writing
    to one stream); ``-N`` cycles, ``-d all`` and ``-o all`` only repeat whole sweeps."""
    last: dict[tuple, int] = {}
    peak_before_drop: dict[tuple, int] = {}
    peak: dict[tuple, int] = {}
    for r in rows:
        key = (r.dtype, r.redop, r.root)
        if key in last and r.size_bytes < last[key]:
            peak_before_drop[key] = peak[key]
        elif key in peak_before_drop and r.size_bytes > peak_before_drop[key]:
            return True
        last[key] = r.size_bytes
        peak[key] = max(peak.get(key, 0), r.size_bytes)
    return False


def _setup_errors(st: _State) -> list[ToolError]:
    why = []
    if len(st.headers) > 1:
        why.append(f"{len(st.headers)} '# nThread' headers")
    dup = sorted(r for r, who in st.ranks.items() if len(who) > 1)
    if dup:
        hosts = ", ".join(sorted({h for h, _ in st.ranks[dup[0]]}))
        why.append(f"rank {dup[0]} printed by {len(st.ranks[dup[0]])} processes ({hosts})")
    if _interleaved(st.rows):
        why.append("result rows of independent sweeps interleave")
    if not why:
        return []
    msg = ("non-MPI nccl-tests build launched by a multi-process launcher (mpirun/srun): every "
           "process ran its own single-process test (" + "; ".join(why) + "); rebuild with "
           "MPI=1 or start one process per test")
    return [ToolError("setup", msg)]


def _footer_errors(st: _State) -> list[ToolError]:
    out = []
    bad = [(r, ln) for r, ln in zip(st.rows, st.row_lines, strict=True)
           if (r.wrong or 0) > 0 or (r.wrong_inplace or 0) > 0]
    if bad:
        r, ln = bad[0]
        total = sum((x.wrong or 0) + (x.wrong_inplace or 0) for x, _ in bad)
        out.append(ToolError(
            "wrong_results",
            f"{len(bad)} row(s) with wrong results ({total} wrong elements summed over ranks), "
            f"first at {r.size_bytes} B: #wrong {r.wrong} out-of-place, {r.wrong_inplace} "
            "in-place (data corruption; nccl-tests cannot say which rank)", line=ln))
    elif st.oob_failed or (st.oob or 0) > 0:
        out.append(ToolError("wrong_results", f"Out of bounds values : {st.oob} FAILED "
                             "(data check failed; nccl-tests cannot say which rank)"))
    if st.avg_failed:
        out.append(ToolError("bandwidth", f"Avg bus bandwidth {st.avg} GB/s FAILED "
                             "(below 0.9 x NCCL_TESTS_MIN_BW)"))
    return out


def _hosts(st: _State, error_hosts: list[str]) -> tuple[str, ...]:
    """Hosts from the rank lines and errors; NCCL log-line prefixes only when no rank line
    names a host (they may be placeholders, e.g. ``hostname:3442:3442``)."""
    if st.rank_hosts:
        return ordered_unique([*st.rank_hosts, *error_hosts])
    return ordered_unique([*error_hosts, *st.info_hosts])


def _finish(st: _State, text: str) -> NcclTestsResult:
    errors = _setup_errors(st) + st.errors + _footer_errors(st)
    if st.later_tests is not None:
        later = ", ".join(st.later_tests) or "?"
        st.warnings.append(ToolError(
            "several_tests", f"the output holds more tests after the first ({later}); only "
            f"the first ({st.collective or '?'}) is read: parse each test's output apart"))
    primary = {e.host for e in errors if e.kind in ("nccl", "cuda", "timeout")}
    errors = [e for e in errors if not (e.kind == "test_failure" and e.host in primary)]
    if any(e.kind != "launcher" for e in errors):
        errors = [e for e in errors if e.kind != "launcher"] + [
            e for e in errors if e.kind == "launcher"]
    hdr = st.headers[0] if st.headers else {}
    error_hosts = [e.host for e in errors if e.host]
    last = st.rows[-1].size_bytes if st.rows else None
    if errors:
        status, reason = FAILED, errors[0].message
    elif st.recognized == 0:
        status = INCOMPLETE if not text.strip() else UNPARSEABLE
        reason = "no output" if not text.strip() else "no nccl-tests header, row or failure line"
    elif not st.rows:
        status, reason = INCOMPLETE, "no result rows (killed or hung before the first size?)"
    elif not st.footer:
        status = INCOMPLETE
        reason = f"output stops after {len(st.rows)} row(s) (last size {last} B), no footer"
    else:
        status, reason = OK, ""
    return NcclTestsResult(
        status=status,
        rows=tuple(st.rows),
        collective=st.collective,
        hosts=_hosts(st, error_hosts),
        ranks=len(st.ranks) or (st.nranks or 0),
        avg_busbw_gbps=st.avg,
        errors=dedupe_errors(errors),
        reason=reason,
        warnings=dedupe_errors(st.warnings),
        min_bytes=hdr.get("minBytes"),
        max_bytes=hdr.get("maxBytes"),
        validation=hdr.get("validation"),
        out_of_bounds=st.oob,
        transport=st.transport.ranks(multi_host=len(set(st.rank_hosts or st.info_hosts)) > 1),
    )
