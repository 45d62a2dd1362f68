"""Job-log lines: hard-wrapped NCCL WARN and PyTorch records joined back into one line each."""

from __future__ import annotations

import re

from fabriccheck.probes._text import NCCL_LINE_RE

#: a line that starts a new record (so it never continues a hard-wrapped one)
_RECORD_START_RE = re.compile(
    r"^(?:\s|#|\d+: |\[\d+(?:,\d+)?\]|\[rank\d+\]|\([^)]*pid=\d+\)|[\w.-]+/\d+ \[\d+\]:"
    r"|[EWIF]\d{4} |\[[EWIF]\d{0,4}[ \]]|[A-Za-z0-9][\w.-]*:\d+:\d+ \[|Traceback|[\w.]+(?:Error|"
    r"Exception|Warning)\b|[A-Z][a-z]{2} [ \d]\d \d\d:|\d{4}-\d\d-\d\d|\[\s*\d+\.\d+\])")
_OPEN_RECORD_RE = re.compile(r"NCCL (?:WARN|ERROR)|\[(?:PG[^\]]*?)?Rank \d+\]|ProcessGroupNCCL")
_MAX_JOINED = 6


def unwrap_lines(text: str) -> list[tuple[int, str]]:
    """Lines with their 1-based numbers, a hard-wrapped NCCL WARN or PyTorch record joined back
    into its first line (a continuation starts no record of its own and follows an open one).

    >>> unwrap_lines("h:1:2 [0] NCCL WARN Got completion from peer 10.0.0.2<5> with error 12, len"
    ...              "\\n0, vendor err 129 (Recv)\\nh:1:2 [0] NCCL INFO x")[0][1][-28:]
    'len 0, vendor err 129 (Recv)'
    """
    out: list[tuple[int, str]] = []
    joined = 0
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r\n")
        if out and _continues(out[-1][1], line) and joined < _MAX_JOINED:
            out[-1] = (out[-1][0], out[-1][1].rstrip() + " " + line.strip())
            joined += 1
            continue
        out.append((lineno, line))
        joined = 0
    return out


def _continues(prev: str, line: str) -> bool:
    s = line.strip()
    if not s or _RECORD_START_RE.match(line) or prev.rstrip().endswith("."):
        return False
    if not _OPEN_RECORD_RE.search(prev) or NCCL_LINE_RE.search(line) or "[Rank" in line:
        return False
    return s[0].islower() or s[0].isdigit() or bool(re.match(r"\w+=", s)) or \
        prev.rstrip().endswith(("]", ",", ":"))
