"""traceroute / tracepath text -> the hops of one path, and the switch links they cross (pure).

A RoCE flow's ECMP path is set by its 5-tuple. A traceroute that sends its probes with the
flow's own 5-tuple (``traceroute -n -T --sport=SPORT -p DPORT DST`` for an iperf3 flow pinned
with ``--cport SPORT``; ``-U --sport=SPORT -p 4791`` for RoCEv2's UDP) is hashed like the flow,
so its hops are the flow's path (007, R-Pingmesh). Both tools' formats are read:

- traceroute (Debian ``traceroute`` 2.x)::

    traceroute to 10.2.0.1 (10.2.0.1), 30 hops max, 60 byte packets
     1  10.1.0.0  0.265 ms
     2  leaf-2 (10.200.0.3)  0.145 ms  0.120 ms  *
     3  * * *

- tracepath (iputils)::

     1?: [LOCALHOST]                      pmtu 1500
     1:  10.1.0.0                                              0.083ms
     2:  no reply
     4:  10.2.0.1                                              0.090ms reached

:func:`path_links` maps the answering addresses to switches (a router interface address ->
switch map, e.g. the routed lab's ``hops`` in its inventory) and returns the links crossed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from fabriccheck.errors import ParseError
from fabriccheck.models import LinkKey, link_key

_TR_HEAD = re.compile(r"^traceroute to (?P<name>\S+) \((?P<ip>[0-9a-fA-F.:]+)\)")
_TR_HOP = re.compile(r"^\s*(?P<ttl>\d+)\s+(?P<rest>.*)$")
_TR_ADDR = re.compile(r"(?:(?P<name>[^\s()*]+) \((?P<ip>[0-9a-fA-F.:]+)\)|(?P<bare>"
                      r"\d{1,3}(?:\.\d{1,3}){3}|[0-9a-fA-F]*:[0-9a-fA-F:]+))(?=\s|$)")
_TP_HOP = re.compile(r"^\s*(?P<ttl>\d+)(?P<q>\??):\s+(?P<rest>.*)$")
_TP_ADDR = re.compile(r"^(?:(?P<name>[^\s()]+) \((?P<ip>[0-9a-fA-F.:]+)\)"
                      r"|(?P<bare>[0-9a-fA-F.:]+))")


@dataclass(frozen=True)
class Hop:
    """One TTL: the addresses that answered (several when probes took different paths)."""

    ttl: int
    addresses: tuple[str, ...]


@dataclass(frozen=True)
class TraceResult:
    """A parsed trace: ``tool`` (traceroute | tracepath), destination, hops, reached or not."""

    tool: str
    destination: str
    hops: tuple[Hop, ...]
    reached: bool

    @property
    def answered(self) -> tuple[str | None, ...]:
        """Per TTL the address that answered (the first one when several), None when silent."""
        return tuple(h.addresses[0] if h.addresses else None for h in self.hops)


def parse_traceroute(text: str) -> TraceResult:
    """Parse traceroute or tracepath output (detected from the text).

    Lines starting with ``#`` are comments. Raises :class:`ParseError` when the text is neither.

    >>> r = parse_traceroute("traceroute to 10.2.0.1 (10.2.0.1), 30 hops max\\n"
    ...                      " 1  10.1.0.0  0.2 ms\\n 2  *\\n 3  10.2.0.1  0.3 ms\\n")
    >>> r.answered, r.reached
    (('10.1.0.0', None, '10.2.0.1'), True)
    """
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if any(_TR_HEAD.match(ln) for ln in lines):
        return _traceroute(lines)
    if any(_TP_HOP.match(ln) for ln in lines):
        return _tracepath(lines)
    raise ParseError("neither traceroute nor tracepath output", tool="traceroute",
                     excerpt=text[:200], hint="give the text of `traceroute -n ...`")


def _traceroute(lines: list[str]) -> TraceResult:
    dest = ""
    hops: dict[int, list[str]] = {}
    for ln in lines:
        head = _TR_HEAD.match(ln)
        if head:
            dest = head["ip"]
            continue
        m = _TR_HOP.match(ln)
        if not m:
            continue
        addrs = hops.setdefault(int(m["ttl"]), [])
        for a in _TR_ADDR.finditer(m["rest"]):
            ip = a["ip"] or a["bare"]
            if ip not in addrs:
                addrs.append(ip)
    return _result("traceroute", dest, hops, reached=None)


def _tracepath(lines: list[str]) -> TraceResult:
    hops: dict[int, list[str]] = {}
    reached_at = None
    for ln in lines:
        m = _TP_HOP.match(ln)
        if not m or m["q"]:
            continue  # "1?: [LOCALHOST]" is the sender itself
        addrs = hops.setdefault(int(m["ttl"]), [])
        rest = m["rest"].strip()
        if rest.startswith("no reply") or rest.startswith("["):
            continue
        a = _TP_ADDR.match(rest)
        if a:
            ip = a["ip"] or a["bare"]
            if ip not in addrs:
                addrs.append(ip)
            if rest.rstrip().endswith("reached"):
                reached_at = ip
    return _result("tracepath", reached_at or "", hops, reached=reached_at is not None)


def _result(tool: str, dest: str, hops: dict[int, list[str]], reached: bool | None) -> TraceResult:
    out = tuple(Hop(ttl, tuple(hops[ttl])) for ttl in sorted(hops))
    if reached is None:
        reached = bool(dest) and any(dest in h.addresses for h in out)
    return TraceResult(tool=tool, destination=dest, hops=out, reached=reached)


def path_switches(trace: TraceResult, hop_names: Mapping[str, str]) -> tuple[str, ...] | None:
    """The switches the trace crossed, in order; None when it does not give one whole path.

    Every hop before the destination must have answered with exactly one address known to
    ``hop_names`` (two answers on one TTL mean the probes did not share a path; a silent hop
    hides a switch), and the destination must have been reached.
    """
    if not trace.reached:
        return None
    switches: list[str] = []
    for hop in trace.hops:
        if trace.destination in hop.addresses:
            return tuple(switches)
        if len(hop.addresses) != 1 or hop.addresses[0] not in hop_names:
            return None
        switches.append(hop_names[hop.addresses[0]])
    return None


def path_links(trace: TraceResult, hop_names: Mapping[str, str]) -> tuple[LinkKey, ...] | None:
    """The switch-to-switch links of the traced path (None: not learned, see path_switches).

    >>> t = parse_traceroute("traceroute to 10.2.0.1 (10.2.0.1), 30 hops max\\n"
    ...     " 1  10.1.0.0  0.2 ms\\n 2  10.200.0.3  0.1 ms\\n 3  10.200.0.6  0.1 ms\\n"
    ...     " 4  10.2.0.1  0.2 ms\\n")
    >>> names = {"10.1.0.0": "leaf-1", "10.200.0.3": "spine-2", "10.200.0.6": "leaf-2"}
    >>> [tuple(k) for k in path_links(t, names)]
    [('leaf-1', 'spine-2'), ('leaf-2', 'spine-2')]
    """
    sws = path_switches(trace, hop_names)
    if sws is None:
        return None
    return tuple(link_key(a, b) for a, b in zip(sws, sws[1:], strict=False) if a != b)
