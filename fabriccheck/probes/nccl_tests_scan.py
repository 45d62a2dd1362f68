"""The fast path of nccl-tests parsing: a compiled table scan over a clean output (issue 30).

:func:`scan_nccl_tests` reads an output in a few ``re`` calls over the whole text instead of
feeding the state machine of :mod:`fabriccheck.probes.nccl_tests` line by line: one
``fullmatch`` recognises the clean shape (the header, rank and NCCL INFO lines, the current
13-column table, the footer) and splits it into head, rows and footer; ``findall`` then reads
each kind of line. It returns the fields the state machine would have built, or None for
anything it does not recognise with certainty (errors, warnings, launcher prefixes, other
layouts, a second test, a row cut short, ...), which the caller hands to the state machine.

Every line kind below is one the state machine reads in exactly one way (its checks that come
before are ruled out by the kind's shape or by :data:`_UNSAFE`), so the two agree field for
field; ``tests/probes/test_parse_fastpath.py`` checks that on every fixture, on thousands of
simulated outputs and on mutated ones.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from fabriccheck.probes._text import to_float
from fabriccheck.probes.nccl_transport import TransportReader
from fabriccheck.probes.results import NcclRow

#: ``# nThread 1 nGpus 8 minBytes ...``; rccl-tests: ``# nThreads: 1 nGpus: 2 nRanks: 1 ...``
HEADER_RE = re.compile(r"^\s*#?\s*nThreads?:?\s+(\d+)\s+nGpus:?\s+(\d+)\b(.*)$")
#: rccl-tests header names -> nccl-tests ones
_HEADER_ALIASES = {"warmupIters": "warmup iters"}
#: ``key[:] value`` pairs; keys of at most 4 bounded words, so a long line stays linear
_KV_RE = re.compile(r"([A-Za-z_]\w{0,31}(?: [A-Za-z_]\w{0,31}){0,3}):?\s+(-?\d+)(?:\((\w+)\))?")

#: anything but printable ASCII, tab and newline: other line breaks (``splitlines`` splits on
#: them), CR, ANSI escapes, Unicode spaces; such text goes to the state machine
_UNPLAIN_RE = re.compile(r"[^\t\n -~]")
#: substrings that make a line an error, a cut IB completion or a launcher tag wherever they sit
_UNSAFE = (": Test ", "Got completion from peer", "Connection closed by remote peer", "<std")

#: the parts of a line kind below end at its newline, so each line is read one way only and a
#: text that does not fit fails in linear time (no part of a line can be read twice)
_INFO = (r"(?P<host>[A-Za-z0-9][\w.-]*):(?P<pid>\d+):\d+ \[(?P<dev>\d+)\] (?:\S+:\d+ )?"
         r"NCCL INFO (?P<msg>[^\n]*)\n")
_RANK = (r"\#[ \t]*Rank[ \t]+(?P<rank>\d+)[ \t]+(?:Group[ \t]+\d+[ \t]+)?Pid[ \t]+(?P<rpid>\d+)"
         r"[ \t]+on[ \t]+(?P<rhost>[\w.-]+)[ \t]+device[ \t]+(?P<rdev>\d+)[ \t]+\[[^\]\n]*\]"
         r"[^\n:\[]*\n")
_HEADER = r"\#[ \t]*nThreads?:?[ \t]+\d+[ \t]+nGpus:?[ \t]+\d+\b[^\n\[]*\n"
#: ``#`` lines the state machine counts as recognised and otherwise ignores (the version line,
#: ``Using devices``, the units line) and the column names of the current layout
_COUNTED = (r"\#[ \t]*(?:nccl-tests version[ \t][^\n:\[]*\n|Using devices[ \t]*\n"
            r"|\(B\)[ \t]+\(elements\)(?:[ \t]+\((?:us|GB/s)\)){6}[ \t]*\n"
            r"|size[ \t]+count[ \t]+type[ \t]+redop[ \t]+root"
            r"(?:[ \t]+time[ \t]+algbw[ \t]+busbw[ \t]+\#wrong){2}[ \t]*\n)")
_START = r"\#[ \t]*Collective test starting:[ \t]*(?P<start>\w+)[ \t]*\n"
#: lines without any effect: ``#``, the out-of-place/in-place line, ``NCCL version``, blank
_QUIET = r"(?:\#(?:[ \t]+out-of-place[ \t]+in-place)?|NCCL version [\w.+-]+|)[ \t]*\n"
_NUM = r"\d+(?:\.\d+)?(?:e[+-]\d\d?)?"
_HALF = rf"[ \t]+({_NUM})[ \t]+({_NUM})[ \t]+({_NUM})[ \t]+(\d{{1,20}}|N/A)"
#: a result row of the current layout: size count type redop root, two halves
_ROW = (rf"[ \t]*(\d{{1,20}})[ \t]+(\d{{1,20}})[ \t]+([A-Za-z]\w*)[ \t]+([A-Za-z]\w*)"
        rf"[ \t]+(-?\d{{1,20}}){_HALF}{_HALF}[ \t]*\n")
_OOB = (r"\#[ \t]*Out of bounds values[ \t]*:[ \t]*(?P<oob>\d+)(?:[ \t]*(?P<oob_st>OK|FAILED))?"
        rf"[ \t]*\n(?:{_QUIET})*")
_AVG = (r"\#[ \t]*Avg bus bandwidth[ \t]*:[ \t]*(?P<avg>[^ \t\n]+)"
        rf"(?:[ \t]+(?P<avg_st>OK|FAILED))?[ \t]*\n(?:{_QUIET})*")
_END = rf"\#[ \t]*Collective test concluded:[ \t]*(?P<end>\w+)[ \t]*\n(?:{_QUIET})*"

#: one line of the head, its kind told by which groups are set (``findall`` tuples)
_HEAD_LINE = (rf"{_INFO}|{_RANK}|(?P<header>{_HEADER})|(?P<counted>{_COUNTED})|{_START}"
              rf"|{_QUIET}")


def _bare(pattern: str) -> str:
    """``pattern`` without capturing groups (a validating pass is faster without them)."""
    return re.sub(r"(?<!\\)\((?:\?P<\w+>)?(?!\?)", "(?:", pattern)


#: the whole clean output: head lines, result rows, footer lines (each part may be empty; each
#: run of quiet lines after the head follows a line only the footer has, so where the parts
#: meet is never in doubt)
_SHAPE_RE = re.compile(
    rf"(?P<head>(?:{_bare(_HEAD_LINE)})*)(?P<rows>(?:{_bare(_ROW)})*)"
    rf"(?:{_OOB})?(?:{_AVG})?(?:{_END})?")
_HEAD_LINE_RE = re.compile(_HEAD_LINE)
_ROW_RE = re.compile(_ROW)
#: ``nranks 16`` in an NCCL INFO line (the scan and the state machine keep the last one)
NRANKS_RE = re.compile(r"\bnranks (\d+)")


class NcclScan(NamedTuple):
    """What a clean output holds, named as the fields of the state machine's ``_State``."""

    headers: list[dict[str, int]]
    ranks: dict[int, set[tuple[str, int]]]
    rank_hosts: list[str]
    rows: list[NcclRow]
    row_lines: list[int]
    info_hosts: list[str]
    collective: str | None
    oob: int | None
    oob_failed: bool
    avg: float | None
    avg_failed: bool
    footer: bool
    recognized: int
    nranks: int | None
    transport: TransportReader


def header_fields(m: re.Match[str]) -> dict[str, int]:
    """The parameters of a ``# nThread ...`` header line matched by :data:`HEADER_RE`.

    >>> header_fields(HEADER_RE.match("# nThread 1 nGpus 8 minBytes 8 warmup iters: 5"))
    {'nThread': 1, 'nGpus': 8, 'minBytes': 8, 'warmup iters': 5}
    """
    hdr = {"nThread": int(m.group(1)), "nGpus": int(m.group(2))}
    for k, v, _unit in _KV_RE.findall(m.group(3)[:2000]):
        k = k.strip()
        hdr[_HEADER_ALIASES.get(k, k)] = int(v)
    return hdr


def collective_name(program: str) -> str:
    """The collective a binary runs: ``all_reduce_perf`` (or ``..._perf_mpi``) -> ``all_reduce``.

    >>> collective_name("all_reduce_perf_mpi")
    'all_reduce'
    """
    return re.sub(r"_perf(_mpi)?$", "", program)


def scan_nccl_tests(text: str) -> NcclScan | None:
    """The fields of a clean nccl-tests output, or None when it is not one for sure.

    >>> s = scan_nccl_tests('''# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor)
    ...            8             2     float     sum      -1    135.8    0.00    0.00      0'''
    ...     '''    123.5    0.00    0.00      0
    ... # Out of bounds values : 0 OK
    ... # Avg bus bandwidth    : 0 ''')
    >>> s.rows[0].time_inplace_us, s.row_lines, s.footer, s.recognized
    (123.5, [2], True, 4)
    >>> scan_nccl_tests("n1: Test NCCL failure common.cu:1 'unhandled cuda error'") is None
    True
    """
    if not text.endswith("\n"):
        text += "\n"  # the last line ends like the others (splitlines reads the same lines)
    if _UNPLAIN_RE.search(text) is not None or any(u in text for u in _UNSAFE):
        return None
    m = _SHAPE_RE.fullmatch(text)
    if m is None:
        return None
    rows = _rows(m["rows"])
    first = text.count("\n", 0, m.start("rows")) + 1
    head = _head(m["head"])
    start, recognized = head.pop("start"), head.pop("recognized")
    collective = m["end"] or start
    footer = [g for g in (m["oob"], m["avg"], m["end"]) if g is not None]
    return NcclScan(
        **head, rows=rows, row_lines=list(range(first, first + len(rows))),
        collective=collective_name(collective) if collective else None,
        oob=int(m["oob"]) if m["oob"] is not None else None, oob_failed=m["oob_st"] == "FAILED",
        avg=to_float(m["avg"]) if m["avg"] is not None else None,
        avg_failed=m["avg_st"] == "FAILED", footer=bool(footer),
        recognized=recognized + len(rows) + len(footer),
    )  # fmt: skip


def _head(head: str) -> dict:
    """The head's fields (one ``findall`` over its lines, each told apart by its groups): the
    headers, ranks, NCCL INFO lines (hosts, transport, the last ``nranks N``), the last
    ``starting`` collective and how many lines the state machine counts as recognised."""
    transport = TransportReader()
    headers: list[dict[str, int]] = []
    ranks: dict[int, set[tuple[str, int]]] = {}
    rank_hosts: list[str] = []
    info_hosts: list[str] = []
    nranks = start = None
    counted = 0
    for host, pid, dev, msg, rank, rpid, rhost, rdev, hdr, cnt, name in _HEAD_LINE_RE.findall(head):
        if host:
            info_hosts.append(host)
            transport.feed(host, pid, dev, msg)
            if "nranks" in msg and (n := NRANKS_RE.search(msg)):
                nranks = int(n.group(1))
        elif rank:
            ranks.setdefault(int(rank), set()).add((rhost, int(rpid)))
            transport.note_rank(int(rank), rhost, rpid, rdev)
            rank_hosts.append(rhost)
        elif hdr:
            headers.append(header_fields(HEADER_RE.match(hdr.strip())))
        elif cnt or name:
            counted += 1
            start = name or start
    return {"headers": headers, "ranks": ranks, "rank_hosts": rank_hosts,
            "info_hosts": info_hosts, "nranks": nranks, "transport": transport, "start": start,
            "recognized": len(rank_hosts) + len(headers) + counted}


def _rows(block: str) -> list[NcclRow]:
    """The result rows of the current layout (validation on: ``#wrong`` counts, or ``N/A``)."""
    return [NcclRow(
        size_bytes=int(size), count=int(count), dtype=dtype, redop=redop, root=int(root),
        time_us=float(t), algbw_gbps=float(alg), busbw_gbps=float(bus), wrong=_wrong(wrong),
        time_inplace_us=float(t_ip), algbw_inplace_gbps=float(alg_ip),
        busbw_inplace_gbps=float(bus_ip), wrong_inplace=_wrong(wrong_ip),
    ) for (size, count, dtype, redop, root, t, alg, bus, wrong, t_ip, alg_ip, bus_ip, wrong_ip)
        in _ROW_RE.findall(block)]  # fmt: skip


def _wrong(cell: str) -> int | None:
    """A ``#wrong`` cell as the state machine reads it (through a float, ``N/A`` is None)."""
    return None if cell == "N/A" else int(float(cell))
