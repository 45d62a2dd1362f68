"""The fast path of perftest parsing: a compiled table scan over a clean client output (issue 30).

:func:`scan_perftest` recognises, in one ``fullmatch``, the common shape of an ``ib_*_bw`` /
``ib_*_lat`` client output: the header box, the address lines, the column header, the result
rows and their closing separator. It returns those parts as text for
:mod:`fabriccheck.probes.perftest` to read (which reads them exactly as its line-by-line state
machine would), or None for anything else: errors, a server's ``Waiting for client``, an echoed
command line, launcher prefixes, interleaved client and server, unusual lines.

Each part below is one the state machine reads in exactly one way (its checks that come first
are ruled out by the part's shape or by :data:`_UNSAFE`);
``tests/probes/test_parse_fastpath.py`` holds the two to the same results.
"""

from __future__ import annotations

import re
from typing import NamedTuple

#: what a line may hold: printable ASCII and tabs only (every pattern below is built of these
#: classes and compiled ``re.ASCII``), so other line breaks, CR, escapes and Unicode spaces send
#: a text to the state machine
_ANY = r"[\t -~]"
_NO_COLON = r"[\t -9;-~]"
#: substrings that change how the state machine reads a line wherever they sit: a program name
#: (``ib_write_bw`` echoed), the server's wait, an ``mpirun --tag-output`` tag
_UNSAFE = ("ib_", "Waiting for client", "<std")

#: each part ends at its newline and no two parts start alike, so a line is read one way only
#: and a text that does not fit fails in linear time
_SEP = r"[ \t]*-{20,}[ \t]*\n"
_WARNING = r"[ \t]*WARNING: BW peak won't be measured in this run\.[ \t]*\n"
_TITLE = r"[ \t]*(?P<title>[A-Za-z_][\w \t]*? (?:BW|Latency) Test)[ \t]*\n"
#: ``key : value`` lines (which keys, and what they hold, :mod:`perftest` decides)
_BOX = rf"(?P<box>(?:[ \t]*[A-Za-z]{_NO_COLON}*:{_ANY}*\n)+)"
_ADDR = (r"[ \t]*(?:local|remote) address: LID [0-9A-Fa-fx]+"
         r"(?:[ \t]+(?:QPN|PSN|RKey|VAddr|OUT)[ \t]+0x[0-9A-Fa-f]+)*[ \t]*\n")
_GID = r"[ \t]*GID: [0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4})*[ \t]*\n"
_SHAPE_RE = re.compile(
    rf"(?:{_WARNING})?(?:{_SEP})+{_TITLE}{_BOX}(?:{_SEP})+(?P<addr>(?:{_ADDR}|{_GID})+)"
    rf"(?:{_SEP})+[ \t]*(?P<cols>\#bytes{_ANY}*)\n(?P<rows>(?:[ \t]*\d[\d. \t]*\n)*)"
    rf"(?P<sep>{_SEP})?(?:[ \t]*\n)*", re.ASCII)
_ADDR_RE = re.compile(r"(local|remote) address: LID ([0-9A-Fa-fx]+)")


class PerftestScan(NamedTuple):
    """The parts of a clean perftest client output."""

    title: str
    box: str  #: the header box's ``key : value`` lines
    addresses: list[tuple[str, str]]  #: (``local`` | ``remote``, LID) in order
    columns: str  #: the column header line, stripped
    rows: list[str]  #: the result rows' lines
    closed: bool  #: a separator follows the last row (or there is none)


def scan_perftest(text: str) -> PerftestScan | None:
    """The parts of a clean perftest client output, or None when it is not one for sure.

    >>> s = scan_perftest('''--------------------------------------------------------
    ...                     RDMA_Write BW Test
    ...  Dual-port       : OFF\\t\\tDevice         : mlx5_0
    ... --------------------------------------------------------
    ...  local address: LID 0x01 QPN 0x0091 PSN 0x8e6c84
    ...  remote address: LID 0x02 QPN 0x0092 PSN 0x0c3a51
    ... --------------------------------------------------------
    ...  #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
    ...  65536      5000             390.12            389.93\\t\\t     0.743912
    ... --------------------------------------------------------''')
    >>> s.title, s.addresses, s.rows, s.closed
    ('RDMA_Write BW Test', [('local', '0x01'), ('remote', '0x02')], [' 65536      5000             390.12            389.93\\t\\t     0.743912'], True)
    """  # noqa: E501
    if not text.endswith("\n"):
        text += "\n"  # the last line ends like the others (splitlines reads the same lines)
    if any(u in text for u in _UNSAFE):
        return None
    m = _SHAPE_RE.fullmatch(text)
    if m is None:
        return None
    rows = m["rows"].splitlines()
    return PerftestScan(title=m["title"], box=m["box"], addresses=_ADDR_RE.findall(m["addr"]),
                        columns=m["cols"].strip(), rows=rows,
                        closed=not rows or m["sep"] is not None)
