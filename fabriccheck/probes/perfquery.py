"""``perfquery``: an InfiniBand port's PMA counters, and how much the error counters grew (pure).

``perfquery -C <hca> -P <port>`` prints ``# Port counters: Lid 27 port 1 (CapMask: 0x5A00)``
then ``Name:....value`` lines (``SymbolErrorCounter:..............0``). The preflight reads the
counters twice, a few seconds apart, in one command, and judges the growth (a counter that
grew during the window is a link going bad now; a large absolute value may be years old).
"""

from __future__ import annotations

import re

from fabriccheck.errors import ParseError

_HEADER = re.compile(r"^# Port (?:extended )?counters:.*$", re.M)
_COUNTER = re.compile(r"^([A-Za-z0-9]+):\.*(\S+)\s*$", re.M)

#: counters that count errors (IBTA PortCounters); their growth is judged
ERROR_COUNTERS = (
    "SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
    "PortRcvRemotePhysicalErrors", "PortXmitDiscards", "LocalLinkIntegrityErrors",
    "ExcessiveBufferOverrunErrors",
)


def parse_perfquery(text: str) -> list[dict[str, int]]:
    """One ``{counter: value}`` per ``# Port counters`` block, in order.

    >>> parse_perfquery("# Port counters: Lid 3 port 1\\nSymbolErrorCounter:.....12\\n")
    [{'SymbolErrorCounter': 12}]
    """
    heads = list(_HEADER.finditer(text))
    if not heads:
        raise ParseError("no '# Port counters' block", tool="perfquery", excerpt=text)
    out = []
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out.append({m[1]: int(m[2], 0) for m in _COUNTER.finditer(text, h.end(), end)
                    if re.fullmatch(r"0x[0-9a-fA-F]+|\d+", m[2])})
    return out


def error_growth(text: str) -> float:
    """How much the error counters grew between the first and the last block.

    Raises
    ------
    ParseError
        Fewer than two blocks (a single read says nothing about now), or no error counter.
    """
    blocks = parse_perfquery(text)
    if len(blocks) < 2:
        raise ParseError("needs two reads to judge growth", tool="perfquery", excerpt=text,
                         hint="read twice: perfquery ...; sleep 5; perfquery ...")
    first, last = blocks[0], blocks[-1]
    names = [n for n in ERROR_COUNTERS if n in first and n in last]
    if not names:
        raise ParseError("no error counters", tool="perfquery", excerpt=text)
    return float(sum(max(0, last[n] - first[n]) for n in names))
