"""perftest output (ib_write_bw, ib_read_bw, ib_send_bw, ib_*_lat): header box, tables, errors.

Reads client and server output, loopback runs whose two sides interleave line by line, BW tables
in Gb/s (``--report_gbits``) or MiB/s (``MB/sec`` before 2024-03, ``MiB/sec`` since; both 2^20
bytes, converted to Gb/s), latency tables, and every failure class of tool-formats.md §2.5.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from fabriccheck.probes._text import clean_line, dedupe_errors, split_label, to_float, to_int
from fabriccheck.probes.perftest_json import (
    MIBPS_TO_GBPS,
    looks_like_perftest_json,
    parse_perftest_json,
)
from fabriccheck.probes.perftest_scan import PerftestScan, scan_perftest
from fabriccheck.probes.results import (
    FAILED,
    INCOMPLETE,
    OK,
    UNPARSEABLE,
    PerftestLatencyRow,
    PerftestResult,
    PerftestRow,
    ToolError,
)

_TITLE_RE = re.compile(r"^\s*(\S.*?\b(?:BW|Latency) Test)\s*$")
_BOX_KEYS = {
    "Dual-port", "Number of qps", "Connection type", "PCIe relax order", "ibv_wr* API",
    "TX depth", "RX depth", "CQ Moderation", "CQE Poll Batch", "Mtu", "Link type", "GID index",
    "Max inline data", "Outstand reads", "rdma_cm QPs", "Data ex. method", "NUMA node",
    "Device", "Transport type", "Using SRQ", "Lock-free", "Using Enhanced Reorder", "Using DDP",
}  # fmt: skip
_ADDR_RE = re.compile(r"^\s*(local|remote) address:\s*LID\s+(\S+)")
_SEP_RE = re.compile(r"^\s*-{20,}\s*$")
_COL_RE = re.compile(
    r"#bytes|#iterations|BW peak\[([^\]]+)\]|BW average\[([^\]]+)\]|MsgRate\[[^\]]+\]"
    r"|t_min|t_max|t_typical|t_avg|t_stdev|99\.9% percentile|99% percentile|tps average|#sl"
)
_PROGRAM_RE = re.compile(r"\b(ib_(?:write|read|send|atomic)_(?:bw|lat))\b")
_DEVICE_ARG_RE = re.compile(r"(?:\s-d\s*|--ib-dev[= ])(\S+)")

#: (regex, kind) in the order they are tried; tool-formats.md §2.5
_ERRORS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"Error: (?:BW result is below bw limit|Msg rate\s+is below msg_rate limit)"),
     "bw_limit"),
    (re.compile(r"Parser function exited with Error|invalid option|unrecognized option|"
                r"CUDA DMA-BUF cannot be used without CUDA|supports CUDA latency tests with"),
     "usage"),
    (re.compile(r"Unable to find the Infiniband/RoCE device|Couldn't get context for the device|"
                r"Couldn't allocate MR|Couldn't create IB resources|No IB devices found|"
                r"IB device \S+ not found|Couldn't get device|Failed to open device|"
                r"[Uu]nable to (?:open|get) (?:the )?device|couldn't load driver"), "device"),
    (re.compile(r"rdma_resolve_addr failed|rdma_resolve_route|ADDR_ERROR|ROUTE_ERROR|"
                r"Unable to connect \(retries|rdma_cm event|rdma_connect|"
                r"Failed to create (?:rdma_cm|event channel)|rdma_bind_addr"), "rdma_cm"),
    (re.compile(r"Failed to modify QP|Unable to Connect the HCA's through the link|"
                r"Found Incompatibility issue with GID types|Couldn't create QP|"
                r"Failed to create QP"), "qp"),
    (re.compile(r"Completion with error|Failed status|Poll send CQ error|Couldn't post send|"
                r"Couldn't post recv|Failed to complete run_iter|poll CQ failed|"
                r"^\s*[sr]cnt=\d+"), "ib_completion"),
    (re.compile(r"Couldn't connect to|Unable to open file descriptor for socket connection|"
                r"Unable to init the socket connection|Couldn't listen to port|"
                r"Unable to set up socket connection|Failed to exchange data between server and "
                r"clients|ethernet_read_keys|ethernet_write_keys|Couldn't read remote address|"
                r"Couldn't parse line|Unable to read to socket|Unable to write to socket|"
                r"Couldn't exchange|Failed to exchange|Connection refused|No route to host|"
                r"getaddrinfo|Couldn't resolve"), "connect"),
    (re.compile(r"initializing CUDA failed|cuMemAlloc\(\) error|CUDA error|"
                r"Couldn't allocate GPU memory|No CUDA devices|cuInit"), "cuda"),
    (re.compile(r"^\s*Couldn't |^\s*Unable to |^\s*Failed to "), "error"),
]
_PEER_RE = re.compile(r"Couldn't connect to (\S+?)(?::(\d+))?\s*$")
_STATUS_RE = re.compile(r"Failed status[- ](?:(?P<name>[\w ]+?) \()?(?P<n>\d+)\)?:.*?syndrom "
                        r"(?P<syn>0x[0-9a-fA-F]+)|status=(?P<n2>\d+)")


@dataclass
class _State:
    test: str | None = None
    program: str | None = None
    box: dict[str, str] = field(default_factory=dict)
    device_arg: str | None = None
    waiting: bool = False
    lids: dict[str, list[str]] = field(default_factory=lambda: {"local": [], "remote": []})
    cols: list[str] = field(default_factory=list)
    unit: str | None = None
    latency: bool = False
    rows: list[PerftestRow] = field(default_factory=list)
    lat_rows: list[PerftestLatencyRow] = field(default_factory=list)
    closed: bool = True  # a separator followed the last row
    errors: list[ToolError] = field(default_factory=list)
    warnings: list[ToolError] = field(default_factory=list)
    recognized: int = 0


def parse_perftest(text: str) -> PerftestResult:
    """Parse what a perftest binary printed (client, server, or both interleaved).

    Parameters
    ----------
    text
        stdout and/or stderr of ``ib_write_bw`` & co., or its ``--out_json`` report
        (:mod:`fabriccheck.probes.perftest_json`).

    Returns
    -------
    PerftestResult
        BW rows in Gb/s (``bw_avg_gbps``, ``bw_peak_gbps``), latency rows in microseconds,
        ``test``/``device``/``link_type`` from the header box, and errors with ``kind`` one of
        ``usage``, ``device``, ``connect``, ``rdma_cm``, ``qp``, ``ib_completion``, ``bw_limit``,
        ``cuda``, ``error``. ``ok`` when a table closed with its separator, ``incomplete`` when
        output stops before that, ``failed`` when an error is printed.

    Examples
    --------
    >>> r = parse_perftest(''' #bytes #iterations BW peak[MiB/sec] BW average[MiB/sec] MsgRate[Mpps]
    ...  65536      1000             46567.34            46557.03\t\t     0.744912
    ... -----------------------------------------------------------------''')
    >>> r.status, round(r.rows[0].bw_avg_gbps, 2)
    ('ok', 390.55)
    """
    if looks_like_perftest_json(text):
        return parse_perftest_json(text)
    fast = parse_perftest_fast(text)  # a clean client output in one regex call
    return fast if fast is not None else _finish(_read_lines(text), text)


def parse_perftest_fast(text: str) -> PerftestResult | None:
    """What :func:`parse_perftest` returns for ``text`` when its fast path
    (:func:`~fabriccheck.probes.perftest_scan.scan_perftest`) reads it, else None."""
    scan = scan_perftest(text)
    st = _scanned_state(scan) if scan is not None else None
    return None if st is None else _finish(st, text)


def parse_perftest_reference(text: str) -> PerftestResult:
    """:func:`parse_perftest` by the line-by-line state machine alone: the reference the fast
    path is held to (it reads every side, table and failure; the fast path only clean ones)."""
    if looks_like_perftest_json(text):
        return parse_perftest_json(text)
    return _finish(_read_lines(text), text)


def _read_lines(text: str) -> _State:
    st = _State()
    for lineno, raw in enumerate(text.splitlines(), 1):
        _feed(st, clean_line(raw), lineno)
    return st


#: the column layouts the fast path reads: a BW table, a latency table
_FAST_COLS = (
    ["#bytes", "#iterations", "bw_peak", "bw_avg", "msg_rate"],
    ["#bytes", "#iterations", "t_min", "t_max", "t_typical", "t_avg", "t_stdev",
     "99% percentile", "99.9% percentile"],
)
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")


def _scanned_state(scan: PerftestScan) -> _State | None:
    """The state the state machine reaches on the scanned output, or None when a part is not
    one it reads plainly (a box line of another kind, other columns, a row it would warn on)."""
    box = _box_block(scan.box)
    if box is None or " Test" in scan.columns:
        return None
    st = _State(test=scan.title, box=dict(box[0]), recognized=1 + box[1])
    for side, lid in scan.addresses:
        st.lids[side].append(lid)
    st.recognized += len(scan.addresses)
    _feed_columns(st, scan.columns)
    if st.cols not in _FAST_COLS:
        return None
    for line in scan.rows:
        toks = line.split()
        if len(toks) != len(st.cols) or not all(_NUMBER_RE.fullmatch(t) for t in toks):
            return None
        if len(toks[0]) > 20 or len(toks[1]) > 20 or "." in toks[0] or "." in toks[1]:
            return None
        _add_row(st, dict(zip(st.cols, [int(toks[0]), int(toks[1]),
                                        *map(float, toks[2:])], strict=True)))
    st.closed = scan.closed
    return st


@functools.lru_cache(maxsize=1024)
def _box_block(block: str) -> tuple[tuple[tuple[str, str], ...], int] | None:
    """The header box (key -> value, first one kept) of the box lines ``block`` and how many
    lines it holds, or None when a line is not a box line to the state machine. Kept: a NIC's
    box is the same in each of its tests."""
    box: dict[str, str] = {}
    lines = block.splitlines()
    for line in lines:
        pairs = _box_pairs(line)
        if " Test" in line or "#bytes" in line or not pairs or pairs[0][0] not in _BOX_KEYS:
            return None
        for key, value in pairs:
            if key in _BOX_KEYS:
                box.setdefault(key, value)
    return tuple(box.items()), len(lines)


def _feed(st: _State, line: str, lineno: int, depth: int = 0) -> None:
    s = line.strip()
    if not s:
        return
    # each pattern is tried only on lines holding its literal part (the same matches, cheaper)
    if s[0] == "-" and _SEP_RE.match(s):
        st.closed = True
        return
    if "Waiting for client" in s:
        st.waiting = True
        st.recognized += 1
        return
    if st.program is None and "ib_" in s:
        m = _PROGRAM_RE.search(s)
        if m:
            st.program = m.group(1)
            d = _DEVICE_ARG_RE.search(s)
            st.device_arg = d.group(1) if d else None
            st.recognized += 1
            return
    m = _TITLE_RE.match(s) if " Test" in s else None
    if m:
        label = split_label(s)  # titles hold no `: `; a `host: ` label is not the title
        st.test = label.strip() if label else m.group(1)
        st.recognized += 1
        return
    if "#bytes" in s:
        _feed_columns(st, s)
        return
    if ":" in s and _feed_box(st, line):
        return
    m = _ADDR_RE.match(s) if "address:" in s else None
    if m:
        st.lids[m.group(1)].append(m.group(2))
        st.recognized += 1
        return
    if st.cols and s[0].isdigit() and _feed_row(st, s, lineno):
        return
    is_error = any(rx.search(s) for rx, _ in _ERRORS)
    rest = split_label(s) if depth == 0 and not is_error else None  # pdsh `host: ` labels
    if rest is not None and rest.strip():
        before = st.recognized
        _feed(st, " " + rest, lineno, depth + 1)
        if st.recognized > before:
            return
    _feed_error(st, s, lineno)


def _feed_columns(st: _State, s: str) -> None:
    cols, unit = [], None
    for m in _COL_RE.finditer(s):
        tok = m.group(0)
        if tok.startswith("BW peak"):
            tok, unit = "bw_peak", m.group(1)
        elif tok.startswith("BW average"):
            tok, unit = "bw_avg", m.group(2)
        elif tok.startswith("MsgRate"):
            tok = "msg_rate"
        cols.append(tok)
    if len(cols) < 3:
        return
    st.cols, st.latency = cols, "bw_avg" not in cols
    st.unit = unit or st.unit
    st.recognized += 1


def _feed_box(st: _State, line: str) -> bool:
    pairs = _box_pairs(line)
    if not pairs or pairs[0][0] not in _BOX_KEYS:
        return False
    for key, value in pairs:
        if key in _BOX_KEYS:
            st.box.setdefault(key, value)
    st.recognized += 1
    return True


@functools.lru_cache(maxsize=4096)
def _box_pairs(line: str) -> tuple[tuple[str, str], ...]:
    """``key : value`` pairs of a header-box line, one or two of them, separated by tabs or
    (pasted text) spaces; a value is one token. Linear in the line, whatever it holds; kept
    (a NIC's box lines are the same in each of its tests: half the parse's time).

    >>> _box_pairs(" Dual-port       : OFF          Device: rxe0")
    (('Dual-port', 'OFF'), ('Device', 'rxe0'))
    """
    pairs: list[tuple[str, str]] = []
    rest = line
    while ":" in rest and len(pairs) < 4:
        key, _, after = rest.partition(":")
        toks = after.split(None, 1)
        pairs.append((key.strip(), toks[0] if toks else ""))
        rest = toks[1] if len(toks) > 1 else ""
    return tuple(pairs)


_INT_COLS = ("#bytes", "#iterations", "#sl")


def _feed_row(st: _State, s: str, lineno: int) -> bool:
    toks = s.split()
    cols = st.cols
    if len(toks) > len(cols) + 4 or len(toks) < 3:
        return False
    vals = [to_int(t) if c in _INT_COLS else to_float(t) for c, t in zip(cols, toks, strict=False)]
    keys = [i for i, c in enumerate(cols) if c in ("#bytes", "#iterations")]
    if "#bytes" not in cols or any(i >= len(vals) or vals[i] is None or vals[i] < 0
                                   for i in keys):
        return False
    if len(toks) >= len(cols) and all(v is not None for v in vals):
        _add_row(st, dict(zip(cols, vals, strict=True)))
        return True
    # columns run together (``2465.901216.65``) or missing: keep only the values before the
    # first unreadable one, which sit in their own columns for sure; never guess the rest
    bad = next((i for i, v in enumerate(vals) if v is None), None)
    if bad is None or bad <= max(keys) + 1 or len(toks) > len(cols):
        st.warnings.append(ToolError(
            "row_format", f"line {lineno}: result row with {len(toks)} values for "
            f"{len(cols)} columns; not read (columns run together?)", line=lineno))
        st.recognized += 1
        return True
    st.warnings.append(ToolError(
        "row_format", f"line {lineno}: columns run together from {cols[bad]!r} on "
        f"({toks[bad]!r}); kept the first {bad} values", line=lineno))
    _add_row(st, dict(zip(cols[:bad], vals[:bad], strict=True)))
    return True


def _add_row(st: _State, nums: dict[str, float | int | None]) -> None:
    size, iters = int(nums["#bytes"] or 0), nums.get("#iterations")
    iters = int(iters) if iters is not None else None
    if st.latency:
        st.lat_rows.append(PerftestLatencyRow(
            size_bytes=size, iterations=iters, t_min_us=nums.get("t_min"),
            t_max_us=nums.get("t_max"), t_typical_us=nums.get("t_typical"),
            t_avg_us=nums.get("t_avg"), t_stdev_us=nums.get("t_stdev"),
            t_p99_us=nums.get("99% percentile"), t_p999_us=nums.get("99.9% percentile"),
        ))  # fmt: skip
    else:
        factor = 1.0 if st.unit and st.unit.startswith("Gb") else MIBPS_TO_GBPS
        peak, avg = nums.get("bw_peak"), nums.get("bw_avg")
        st.rows.append(PerftestRow(
            size_bytes=size, iterations=iters,
            bw_peak_gbps=None if peak is None else peak * factor,
            bw_avg_gbps=None if avg is None else avg * factor,
            msg_rate_mpps=nums.get("msg_rate"),
        ))  # fmt: skip
    st.closed = False
    st.recognized += 1


def _feed_error(st: _State, s: str, lineno: int) -> None:
    kind = next((k for rx, k in _ERRORS if rx.search(s)), None)
    if kind is None:
        return
    peer = status = vendor = None
    m = _PEER_RE.search(s)
    if m:
        peer = m.group(1) + (f":{m.group(2)}" if m.group(2) else "")
    m = _STATUS_RE.search(s)
    if m:
        status, vendor = m["n"] or m["n2"], m["syn"]
    st.errors.append(ToolError(kind, s[:300], status=status, vendor_err=vendor, peer=peer,
                               line=lineno))
    st.recognized += 1


def _dedupe_rows(rows: list) -> tuple:
    """Loopback runs print every row twice (client and server side): keep one of each."""
    return tuple(dict.fromkeys(rows))


def _finish(st: _State, text: str) -> PerftestResult:
    device = st.box.get("Device") or st.device_arg
    errors = [e if e.hca else _with_hca(e, device) for e in st.errors]
    has_rows = bool(st.rows or st.lat_rows)
    client = "TX depth" in st.box or bool(st.program and not st.waiting)
    side = ("both" if st.waiting and client else "server" if st.waiting else
            "client" if client or has_rows else None)
    local, remote = st.lids["local"], st.lids["remote"]
    loopback = bool(local and remote and set(local) & set(remote) and
                    not any(lid in ("0", "0x0000", "0000") for lid in local))
    if errors:
        status, reason = FAILED, errors[0].message
    elif st.recognized == 0:
        status = UNPARSEABLE if text.strip() else INCOMPLETE
        reason = "no perftest header, table or error line" if text.strip() else "no output"
    elif not has_rows and st.warnings:
        status, reason = INCOMPLETE, st.warnings[0].message
    elif not has_rows:
        status, reason = INCOMPLETE, "no result rows (waiting for the peer, killed or hung?)"
    elif not st.closed:
        status, reason = INCOMPLETE, "result table not closed by its separator (output cut)"
    else:
        status, reason = OK, ""
    return PerftestResult(
        status=status,
        test=st.test,
        device=device,
        link_type=st.box.get("Link type"),
        side=side,
        rows=_dedupe_rows(st.rows),
        latency_rows=_dedupe_rows(st.lat_rows),
        errors=dedupe_errors(errors),
        reason=reason,
        program=st.program,
        unit=st.unit,
        loopback=loopback,
        warnings=tuple(st.warnings),
    )


def _with_hca(e: ToolError, device: str | None) -> ToolError:
    from dataclasses import replace

    return replace(e, hca=device) if device else e
