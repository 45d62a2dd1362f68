"""iperf3 output: ``iperf3 -J`` JSON (client or server) and the plain-text client summary."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from fabriccheck.probes._text import (
    clean_line,
    dedupe_errors,
    json_number,
    split_label,
    to_float,
    to_int,
)
from fabriccheck.probes.results import (
    FAILED,
    INCOMPLETE,
    OK,
    UNPARSEABLE,
    Iperf3Result,
    ToolError,
)

_UNIT = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_LINE_RE = re.compile(
    r"^\[\s*(?P<id>\d+|SUM)\](?:\[(?P<dir>[RT]X-[CS])\])?\s+(?P<start>[\d.]+)-\s*(?P<end>[\d.]+)\s+sec\s+(?P<xfer>[\d.]+)\s+"
    r"(?P<xu>[KMGT]?)Bytes\s+(?P<bw>[\d.]+)\s+(?P<bu>[KMGT]?)bits/sec(?P<rest>.*)$"
)
#: UDP ``lost/total (pct%)``
_LOST_RE = re.compile(r"(\d+)/(\d+) \(([\d.e+-]+)%\)")
_PROTOCOL_RE = re.compile(r"Starting Test: protocol: (\w+)")
_ERROR_RE = re.compile(r"iperf3?: (?:error|interrupt) - (.*)$")


def parse_iperf3(text: str) -> Iperf3Result:
    """Parse iperf3 output, JSON (``-J``) or plain text.

    Parameters
    ----------
    text
        What ``iperf3 -c ...`` (or ``-s``) printed.

    Returns
    -------
    Iperf3Result
        ``sent_gbps``/``received_gbps`` from ``end.sum_sent``/``end.sum_received`` (JSON) or the
        final ``sender``/``receiver`` lines (``[SUM]`` ones when several streams), in Gb/s.
        ``failed`` when iperf3 reports an error, ``incomplete`` when it stopped before its
        summary (aborted, killed, truncated JSON), ``unparseable`` when it is not iperf3 output.

    Examples
    --------
    >>> r = parse_iperf3("[  5]   0.00-10.00  sec  42.8 GBytes  36.7 Gbits/sec  3148   sender")
    >>> r.status, r.sent_gbps, r.retransmits
    ('ok', 36.7, 3148)
    """
    start = text.find("{")
    if start != -1 and not text[:start].strip(" \t\r\n"):
        return _parse_json(text, start)
    return _parse_text(text)


def _parse_json(text: str, start: int) -> Iperf3Result:
    try:
        doc, _end = json.JSONDecoder().raw_decode(text, start)
    except (json.JSONDecodeError, RecursionError):
        return Iperf3Result(INCOMPLETE, reason="JSON output cut short (iperf3 killed or hung?)")
    if not isinstance(doc, dict):
        return Iperf3Result(UNPARSEABLE, reason="JSON that is not an iperf3 report")
    if "event" in doc:  # --json-stream: one {"event", "data"} object per line
        doc = _from_stream(text)
    start_d = _dict(doc.get("start"))
    end = _dict(doc.get("end"))
    test_start = _dict(start_d.get("test_start"))
    protocol = test_start.get("protocol") if isinstance(test_start.get("protocol"), str) else None
    streams = _int(test_start.get("num_streams"))
    if streams is None and isinstance(start_d.get("connected"), list):
        streams = len(start_d["connected"]) or None
    errors = []
    if isinstance(doc.get("error"), str):
        errors.append(ToolError(_error_kind(doc["error"]), doc["error"][:300],
                                peer=_peer(start_d)))
    sent, received = _dict(end.get("sum_sent")), _dict(end.get("sum_received"))
    udp_sum = _dict(end.get("sum"))
    sent_gbps = _gbps(sent.get("bits_per_second"))
    received_gbps = _gbps(received.get("bits_per_second"))
    lost = None
    if sent_gbps is None and udp_sum:  # UDP (and old versions): one `sum`
        sent_gbps = _gbps(udp_sum.get("bits_per_second"))
        lost = _num(udp_sum.get("lost_percent"))
        if sent_gbps is not None and lost is not None:
            received_gbps = sent_gbps * (1 - lost / 100.0)
    duration = _num(sent.get("seconds")) or _num(udp_sum.get("seconds"))
    if errors:
        status, reason = FAILED, errors[0].message
    elif not start_d and not end:
        status, reason = UNPARSEABLE, "JSON without iperf3's start/end sections"
    elif sent_gbps is None and received_gbps is None:
        status, reason = INCOMPLETE, "no end summary (test aborted after connecting?)"
    else:
        status, reason = OK, ""
    return Iperf3Result(
        status=status,
        sent_gbps=sent_gbps,
        received_gbps=received_gbps,
        retransmits=_int(sent.get("retransmits")),
        duration_s=duration,
        streams=streams,
        errors=tuple(errors),
        reason=reason,
        protocol=protocol,
        lost_percent=lost,
    )


@dataclass
class _Text:
    """What the plain-text lines said so far."""

    finals: dict[tuple[str, str], tuple[float, int | None, float]] = field(default_factory=dict)
    lost: dict[str, float] = field(default_factory=dict)
    ids: set[str] = field(default_factory=set)
    intervals: int = 0
    errors: list[ToolError] = field(default_factory=list)
    recognized: int = 0
    protocol: str | None = None
    summary: bool = False  # after iperf3's ``- - - -`` line: the final totals
    server: bool = False


def _parse_text(text: str) -> Iperf3Result:
    st = _Text()
    for lineno, raw in enumerate(text.splitlines(), 1):
        _feed_text(st, clean_line(raw).strip(), lineno)
    key = "SUM" if any(k[0] == "SUM" for k in st.finals) else (
        min(st.ids, key=int) if st.ids else None)
    sender, receiver = st.finals.get((key, "sender")), st.finals.get((key, "receiver"))
    lost = st.lost.get(key or "")
    if sender and not receiver and lost is not None:  # UDP: what arrived, as -J reports it
        receiver = (sender[0] * (1 - lost / 100.0), None, sender[2])
    errors_t = dedupe_errors(st.errors)
    if errors_t:
        status, reason = FAILED, errors_t[0].message
    elif sender or receiver:
        status, reason = OK, ""
    elif st.recognized:
        status, reason = INCOMPLETE, f"no sender/receiver summary after {st.intervals} interval(s)"
    else:
        status = UNPARSEABLE if text.strip() else INCOMPLETE
        reason = "no iperf3 interval or summary line" if text.strip() else "no output"
    return Iperf3Result(
        status=status,
        sent_gbps=sender[0] if sender else None,
        received_gbps=receiver[0] if receiver else None,
        retransmits=sender[1] if sender else None,
        duration_s=(sender or receiver)[2] if (sender or receiver) else None,
        streams=len(st.ids) or None,
        errors=errors_t,
        reason=reason,
        protocol=st.protocol or ("UDP" if st.lost else None),
        lost_percent=lost,
    )


def _feed_text(st: _Text, s: str, lineno: int) -> None:
    m = _LINE_RE.match(s)
    if m is None and s[:1] != "[":
        rest = split_label(s)  # pdsh `host: ` on every line
        m = _LINE_RE.match(rest.strip()) if rest else None
    if m:
        st.recognized += 1
        _feed_interval(st, m)
        return
    e = _ERROR_RE.search(s)
    if e:
        st.errors.append(ToolError(_error_kind(e.group(1)), e.group(1)[:300], line=lineno))
        st.recognized += 1
        return
    p = _PROTOCOL_RE.search(s)
    if p:
        st.protocol = p.group(1).upper()
    if s.startswith("[ ID]"):
        st.protocol = st.protocol or ("UDP" if "Jitter" in s or "Datagrams" in s else
                                      "TCP" if "Retr" in s else None)
    if s.startswith("- - - -"):
        st.summary = True
    if s.startswith(("Server listening", "Accepted connection")):
        st.server = True
    if s.startswith(("Connecting to host", "Server listening", "Accepted connection",
                     "iperf Done", "[ ID]", "Starting Test:")):
        st.recognized += 1


def _feed_interval(st: _Text, m: re.Match[str]) -> None:
    rest = m["rest"].split()
    role = rest[-1] if rest and rest[-1] in ("sender", "receiver") else None
    if m["dir"] and m["dir"] != "TX-C":  # --bidir: judge the client -> server direction
        return
    if m["id"] != "SUM":
        st.ids.add(m["id"])
    bw = to_float(m["bw"])
    lost_m = _LOST_RE.search(m["rest"])
    if role is None and st.summary and lost_m and bw is not None:
        role = "receiver" if st.server else "sender"  # old UDP totals carry no role word
    if role is None or bw is None:
        st.intervals += 1
        return
    retr = to_int(rest[0]) if role == "sender" and len(rest) >= 2 and not lost_m else None
    seconds = (to_float(m["end"]) or 0.0) - (to_float(m["start"]) or 0.0)
    st.finals[(m["id"], role)] = (bw * _UNIT[m["bu"]] / 1e9, retr, seconds)
    if lost_m:
        lost, total = int(lost_m.group(1)), int(lost_m.group(2))
        st.lost[m["id"]] = 100.0 * lost / total if total else float(lost_m.group(3))


def _from_stream(text: str) -> dict[str, Any]:
    """An ``iperf3 --json-stream`` run folded into the ``-J`` document shape."""
    doc: dict[str, Any] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            ev = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue  # a line cut by a kill: the events before it still count
        if not isinstance(ev, dict):
            continue
        kind, data = ev.get("event"), ev.get("data")
        if kind in ("start", "end"):
            doc[kind] = data
        elif kind == "error":
            doc["error"] = data if isinstance(data, str) else json.dumps(data)
    return doc


def _error_kind(message: str) -> str:
    low = message.lower()
    if "busy" in low:
        return "busy"
    if "interrupt" in low or "terminated" in low or "signal" in low:
        return "interrupted"
    if "timeout" in low or "timed out" in low or "idle" in low:
        return "timeout"
    if any(w in low for w in ("connect", "refused", "route", "resolve", "socket", "reset")):
        return "connect"
    return "error"


def _peer(start: dict[str, Any]) -> str | None:
    c = _dict(start.get("connecting_to"))
    host = c.get("host")
    return host if isinstance(host, str) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


_num = json_number


def _int(value: Any) -> int | None:
    v = _num(value)
    return int(v) if v is not None else None


def _gbps(bits_per_second: Any) -> float | None:
    v = _num(bits_per_second)
    return v / 1e9 if v is not None else None
