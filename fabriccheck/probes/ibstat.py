"""``ibstat``: per CA and port, the state, physical state and rate (pure).

The format: ``CA 'mlx5_0'`` headers, tab-indented ``key: value`` lines, ``Port 1:`` sections with
``State: Active``, ``Physical state: LinkUp``, ``Rate: 400``, ``Link layer: InfiniBand``.
"""

from __future__ import annotations

import re

from fabriccheck.errors import ParseError

_CA = re.compile(r"^CA '([^']+)'\s*$")
_PORT = re.compile(r"^\s+Port (\d+):\s*$")
_KV = re.compile(r"^\s+([A-Za-z][A-Za-z ]*?):\s*(.*?)\s*$")


def parse_ibstat(text: str) -> dict[str, dict[int, dict[str, str]]]:
    """``{ca: {port: {"State": "Active", "Rate": "400", ...}}}``.

    >>> parse_ibstat("CA 'mlx5_0'\\n\\tPort 1:\\n\\t\\tState: Active\\n\\t\\tRate: 400\\n")
    {'mlx5_0': {1: {'State': 'Active', 'Rate': '400'}}}
    """
    out: dict[str, dict[int, dict[str, str]]] = {}
    ca: str | None = None
    port: int | None = None
    for line in text.splitlines():
        if m := _CA.match(line):
            ca, port = m[1], None
            out[ca] = {}
        elif (m := _PORT.match(line)) and ca is not None:
            port = int(m[1])
            out[ca][port] = {}
        elif (m := _KV.match(line)) and ca is not None and port is not None:
            out[ca][port][m[1]] = m[2]
    if not out:
        raise ParseError("no CA sections", tool="ibstat", excerpt=text)
    return out


def active_ports(text: str) -> float:
    """Ports of all CAs in ``State: Active`` with ``Physical state: LinkUp``."""
    return float(sum(1 for ports in parse_ibstat(text).values() for p in ports.values()
                     if p.get("State") == "Active" and p.get("Physical state") == "LinkUp"))


def min_rate_gbps(text: str) -> float:
    """The lowest ``Rate`` over all ports (Gb/s)."""
    rates = [float(p["Rate"]) for ports in parse_ibstat(text).values() for p in ports.values()
             if p.get("Rate", "").replace(".", "", 1).isdigit()]
    if not rates:
        raise ParseError("no 'Rate:' lines", tool="ibstat", excerpt=text)
    return min(rates)
