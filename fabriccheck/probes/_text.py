"""Text helpers every parser shares: launcher prefixes, safe numbers, NCCL log-line shapes."""

from __future__ import annotations

import math
import re

from fabriccheck.probes.results import ToolError

#: `mpirun --tag-output` / prterun tags: ``[1,0]<stdout>:``, ``[prterun-h-1@1,0]<stderr>:``
TAG_RE = re.compile(r"\[[^\]\s]{0,64}?\d+,\d+\]<std(?:out|err)>:[ \t]?")
#: torchx / TorchElastic role prefixes: ``trainer/0 [0]:``
ROLE_RE = re.compile(r"^[\w.-]+/\d+ \[\d+\]:")
#: Ray / SkyPilot worker prefixes: ``(head, rank=0, pid=3808) ``, ``(pid=123, ip=10.0.0.2) ``,
#: ``(MyActor pid=7) ``, ``(raylet) ``; and Ray's dedup suffix ``[repeated 3x across cluster]``
RAY_RE = re.compile(r"^\((?:[^()\n]*\bpid=\d+[^()\n]*|raylet[^()\n]*|autoscaler[^()\n]*)\) ?")
RAY_REPEAT_RE = re.compile(r"\[repeated \d+x across cluster\]\s*$")
#: ``srun -l`` task labels: ``0: ``, ``12: ``
SRUN_RE = re.compile(r"^\s*\d+: ")
#: ``pdsh`` / ``clush`` host labels ``node-3: `` (ambiguous: only tried when a line is unknown)
LABEL_RE = re.compile(r"^(?:[A-Za-z0-9][\w.-]*|\d+):\s(.*)$")
#: ANSI colour / cursor escapes (terminal captures)
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\x1b[=>]")

#: ``<host>:<pid>:<tid> [<dev>] [<file>:<line>] NCCL <LEVEL> <msg>`` (search: may sit mid-line)
NCCL_LINE_RE = re.compile(
    r"(?P<host>[A-Za-z0-9][\w.-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?:(?P<src>\S+:\d+) )?NCCL (?P<level>INFO|WARN|ERROR|TRACE|ABORT) ?(?P<msg>.*)$"
)
#: both IB completion-error forms (older ``with error 4, opcode ...``; newer ``with status=12 ...``)
IB_COMPLETION_RE = re.compile(
    r"Got completion from peer (?P<peer>\S+?)<(?P<port>\d+)>\s*"
    r"with (?:error |status=)(?P<status>\d+)"
    r"(?:.*?vendor err (?P<verr>\d+))?(?:.*?\((?P<dir>Send|Recv)\))?(?:.*?\bhca (?P<hca>[\w.-]+))?"
)
#: socket failures NCCL reports between hosts
SOCKET_PEER_RE = re.compile(r"Connection closed by remote peer (?P<peer>[^\s<]+)(?:<\d+>)?")

IB_STATUS_NAMES = {
    "4": "local protection error",
    "5": "work request flushed",
    "10": "remote access error",
    "12": "transport retry counter exceeded",
    "13": "RNR retry counter exceeded",
}


def strip_source_line(text: str) -> str:
    """Drop a leading ``# source: ...`` line (the fixtures' provenance line)."""
    if text.startswith("# source:"):
        return text.partition("\n")[2]
    return text


def clean_line(line: str) -> str:
    """A line without trailing CR, ANSI escapes and launcher prefixes.

    Strips, in the order launchers nest them: Ray/SkyPilot ``(head, rank=0, pid=...)``, then
    ``mpirun --tag-output`` tags (anywhere in the line: some launchers tag every write), srun -l
    ``N:`` labels and torchx ``role/0 [0]:`` prefixes. The ambiguous pdsh ``host:`` label is
    left for :func:`split_label`, which a parser tries only on lines it does not recognise.

    >>> clean_line("(head, rank=0, pid=3808) [1,0]<stdout>:# nThread 1 nGpus 1\\r")
    '# nThread 1 nGpus 1'
    >>> clean_line("\\x1b[32m0: iperf Done.\\x1b[0m")
    'iperf Done.'
    """
    line = line.rstrip("\r\n")
    if "\x1b" in line:
        line = ANSI_RE.sub("", line)
    if line.startswith("("):
        line = RAY_RE.sub("", line, count=1)
        if line.endswith(("cluster]", "cluster] ")):
            line = RAY_REPEAT_RE.sub("", line).rstrip()
    if "<std" in line:
        line = TAG_RE.sub(" ", line)
        line = line[1:] if line.startswith(" ") and not line.startswith("  ") else line
    if ": " in line[:12]:
        line = SRUN_RE.sub("", line, count=1)
    if "/" in line and "]:" in line:
        line = ROLE_RE.sub("", line)
    return line


def split_label(line: str) -> str | None:
    """The text after a pdsh/clush ``host: `` label, or None when the line has none.

    >>> split_label("node-3: # nThread 1 nGpus 8")
    '# nThread 1 nGpus 8'
    """
    m = LABEL_RE.match(line.strip())
    return m.group(1) if m else None


def to_float(token: str) -> float | None:
    """``float(token)`` when it is a finite number, else None (``N/A``, ``nan``, garbage)."""
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def to_int(token: str) -> int | None:
    """``int(token)`` for a plain (optionally signed) integer, else None."""
    t = token[1:] if token[:1] in "+-" else token
    if not t.isascii() or not t.isdigit() or len(t) > 20:
        return None
    return int(token)


def ib_completion_error(msg: str, host: str | None, line: int | None) -> ToolError | None:
    """The IB completion error a NCCL WARN message describes, or None.

    >>> e = ib_completion_error("NET/IB : Got completion from peer 10.0.0.2<5> with status=12 "
    ...                         "opcode=0 len=0 vendor err 129 (Recv) hca mlx5_3", "n1", 1)
    >>> (e.kind, e.status, e.vendor_err, e.peer, e.hca)
    ('ib_completion', '12', '129', '10.0.0.2', 'mlx5_3')
    """
    m = IB_COMPLETION_RE.search(msg)
    if not m:
        return None
    status = m["status"]
    name = IB_STATUS_NAMES.get(status)
    text = f"IB completion error status {status}" + (f" ({name})" if name else "")
    if m["verr"]:
        text += f", vendor err {m['verr']}"
    text += f", peer {m['peer']}"
    return ToolError(
        kind="ib_completion",
        message=text,
        host=host,
        hca=m["hca"],
        status=status,
        peer=m["peer"],
        vendor_err=m["verr"],
        line=line,
    )


def nccl_line_error(m: re.Match[str], line: int | None) -> ToolError | None:
    """The error a matched NCCL WARN/INFO line names (IB completion, socket), or None."""
    msg = m["msg"]
    host = m["host"]
    if "Got completion from peer" in msg:
        return ib_completion_error(msg, host, line)
    s = SOCKET_PEER_RE.search(msg)
    if s:
        return ToolError("socket", msg.strip()[:200], host=host, peer=s["peer"], line=line)
    if m["level"] == "WARN" and ("socket" in msg.lower() or "Socket" in msg):
        return ToolError("socket", msg.strip()[:200], host=host, line=line)
    return None


def ib_completion_cut(line: str) -> bool:
    """True when ``line`` is a NCCL IB completion WARN cut before its end (a publication or a
    terminal wrapped it): it names the peer and status but not yet the direction. A parser
    then joins the next line when that one is no log record of its own
    (:func:`joins_wrapped`).

    >>> ib_completion_cut("n2:1:2 [0] net_ib.cc:1296 NCCL WARN NET/IB : Got completion from "
    ...                   "peer 10.2.0.5<33092> with error 12, opcode 0, len")
    True
    """
    return ("Got completion from peer" in line and IB_COMPLETION_RE.search(line) is not None
            and not re.search(r"\((?:Send|Recv)\)", line))


def joins_wrapped(line: str) -> bool:
    """True when ``line`` can be the wrapped rest of the line before it: not empty and not the
    start of a record (a NCCL log line, a ``#`` line, a table row, a launcher tag).

    >>> joins_wrapped("0, vendor err 129 (Recv)"), joins_wrapped("n2:1:2 [0] NCCL INFO x")
    (True, False)
    """
    s = line.strip()
    return bool(s) and not (NCCL_LINE_RE.search(s) or s.startswith(("#", "[", "("))
                            or re.match(r"\d+\s+\d+\s+[A-Za-z]", s))


def dedupe_errors(errors: list[ToolError]) -> tuple[ToolError, ...]:
    """Errors in first-seen order with exact repeats (kind, host, hca, message) folded into
    ``count``."""
    seen: dict[tuple, int] = {}
    out: list[ToolError] = []
    for e in errors:
        key = (e.kind, e.host, e.hca, e.rank, e.message)
        if key in seen:
            i = seen[key]
            prev = out[i]
            out[i] = _with_count(prev, (prev.count or 1) + (e.count or 1))
        else:
            seen[key] = len(out)
            out.append(e)
    return tuple(out)


def _with_count(e: ToolError, count: int) -> ToolError:
    from dataclasses import replace

    return replace(e, count=count)


def ordered_unique(items) -> tuple[str, ...]:
    """Items in first-seen order, without repeats or empties."""
    return tuple(dict.fromkeys(i for i in items if i))


def json_number(value: object) -> float | None:
    """A JSON value as a finite float (None for text, booleans, NaN or infinities).

    >>> json_number(3), json_number("3"), json_number(True), json_number(float("nan"))
    (3.0, None, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None
