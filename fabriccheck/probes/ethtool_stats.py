"""``ethtool -S <netdev>``: a NIC's statistics, and how much its error counters grew (pure).

The format: ``NIC statistics:`` then indented ``name: value`` lines. On mlx5 the physical-layer
errors are ``rx_symbol_err_phy`` (symbols FEC could not correct), ``rx_crc_errors_phy``,
``link_down_events_phy`` and the PCS counters; ``rx_corrected_bits_phy`` counts what FEC fixed
and is not an error. Like :mod:`.perfquery`, the preflight reads twice and judges the growth.
"""

from __future__ import annotations

import re

from fabriccheck.errors import ParseError

_HEADER = re.compile(r"^NIC statistics:\s*$", re.M)
_STAT = re.compile(r"^\s+([\w.\[\]-]+):\s*(\d+)\s*$", re.M)

#: physical-layer error counters whose growth is judged (older kernels: *_errors_phy)
ERROR_STATS = (
    "rx_symbol_err_phy", "rx_symbol_errors_phy", "rx_crc_errors_phy", "link_down_events_phy",
    "rx_pcs_symbol_err_phy", "rx_in_range_len_errors_phy", "rx_out_of_range_len_phy",
)


def parse_ethtool_stats(text: str) -> list[dict[str, int]]:
    """One ``{name: value}`` per ``NIC statistics:`` block, in order.

    >>> parse_ethtool_stats("NIC statistics:\\n     rx_crc_errors_phy: 3\\n")
    [{'rx_crc_errors_phy': 3}]
    """
    heads = list(_HEADER.finditer(text))
    if not heads:
        raise ParseError("no 'NIC statistics:' block", tool="ethtool -S", excerpt=text)
    out = []
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out.append({m[1]: int(m[2]) for m in _STAT.finditer(text, h.end(), end)})
    return out


def error_growth(text: str) -> float:
    """How much the physical-layer error counters grew between the first and last block."""
    blocks = parse_ethtool_stats(text)
    if len(blocks) < 2:
        raise ParseError("needs two reads to judge growth", tool="ethtool -S", excerpt=text,
                         hint="read twice: ethtool -S dev; sleep 5; ethtool -S dev")
    first, last = blocks[0], blocks[-1]
    names = [n for n in ERROR_STATS if n in first and n in last]
    if not names:
        raise ParseError("no *_phy error counters (not an mlx5 NIC?)", tool="ethtool -S",
                         excerpt=text)
    return float(sum(max(0, last[n] - first[n]) for n in names))
