"""InfiniBand routes traced hop by hop: ``ibtracert`` output read into forwarding-table entries.

``ibtracert SRC DST`` (infiniband-diags) follows one destination LID through the switches'
linear forwarding tables and prints every hop::

    From ca {0xa088c20300bb0011} portnum 1 lid 11-11 "gpu-01 mlx5_0"
    [1] -> switch port {0xb83fd20300aa0001}[1] lid 1-1 "MF0;ib-leaf-1:MQM9700/U1"
    [31] -> switch port {0xb83fd20300aa0003}[1] lid 3-3 "MF0;ib-spine-1:MQM9700/U1"
    [2] -> switch port {0xb83fd20300aa0002}[31] lid 2-2 "MF0;ib-leaf-2:MQM9700/U1"
    [2] -> ca port {0xa088c20300bb0014}[1] lid 14-14 "gpu-04 mlx5_0"
    To ca {0xa088c20300bb0014} portnum 1 lid 14-14 "gpu-04 mlx5_0"

``[out] -> kind port {portguid}[in]``: the previous node left by port ``out`` and this one was
entered by port ``in``. Several traces may follow each other (``--ports-file``, or a loop in a
script), closed by ``N lid/guid pairs processed from FILE``. The simple format (``-n``:
``From {0x...}[1]``, ``[1] -> {0x...}[17]``, ``To {0x...}[1]``) names no node, so its GUIDs
are resolved from a ``dump_lfts.sh`` file given with it. ``ibwarn:`` lines (stderr captured
with ``2>&1``) are skipped; a trace they cut short (no ``To`` line) is refused.

Forwarding is by destination, so a trace to ``d`` says, for every switch on it, where that
switch sends ``d``: :func:`trace_entries` turns traces into the same switch -> {destination
NIC -> next hop} table the LFT dumps give (:mod:`fabriccheck.topology.routes`), checked against
the topology (every hop a link, out ports the cabled ones where the topology has port numbers,
two traces never disagreeing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabriccheck.errors import ConfigError
from fabriccheck.topology.discovery.ibnet_parse import clean_switch_name
from fabriccheck.topology.model import Topology

_GUID = r"\{?(0x[0-9a-fA-F]+)\}?"
_NAME = r'(?:\s+"(.*)")?'
_LIDS = r"(?:\s+lid\s+(\d+)(?:-\d+)?)?"
_END = re.compile(rf"^(From|To)\s+(?:(ca|switch|router|iwarp rnic|\?\?\?)\s+)?{_GUID}"
                  rf"(?:\s+portnum\s+(\d+)|\[(\d+)\]){_LIDS}{_NAME}\s*$")
_HOP = re.compile(rf"^\[(\d+)\]\s*->\s*(?:(ca|switch|router|iwarp rnic|\?\?\?)\s+port\s+)?"
                  rf"{_GUID}\[(\d+)\]{_LIDS}{_NAME}\s*$")
_MCAST = re.compile(r"^\[\d+\]\s*->\s*\w+\s+0x[0-9a-fA-F]+\[\d+\]")
_SKIP = re.compile(r"^(?:#.*|ib(?:warn|panic|error|exit)\b.*|\d+ lid/guid pairs processed.*)$",
                   re.IGNORECASE)
_HOST_NIC = re.compile(r"^(\S+)\s+((?:mlx\d+_|HCA-|hfi\d+_|qib|ibp|ib)\S*)$")


@dataclass(frozen=True)
class TraceHop:
    """One node of a trace: ``kind`` (ca | switch | router, "" in the simple format), its GUID,
    ``out_port`` the port the previous node left by (None for the ``From`` node), ``port`` the
    port entered (``portnum`` on From/To), its base LID, description, and the text line."""

    kind: str
    guid: str
    port: int
    out_port: int | None
    lid: int | None
    desc: str
    line: int


@dataclass
class Trace:
    """One ``ibtracert`` run: the source, the hops in order (the last is the destination port),
    the ``To`` node, and the file it came from."""

    src: TraceHop
    hops: list[TraceHop] = field(default_factory=list)
    dst: TraceHop | None = None
    source: str = "<routes>"


def looks_like_ibtracert(text: str) -> bool:
    """True when ``text`` holds an ibtracert ``From`` or hop line (so it is read as traces).

    >>> looks_like_ibtracert('From ca {0x1} portnum 1 lid 2-2 "h mlx5_0"')
    True
    >>> looks_like_ibtracert("Unicast lids [0x0-0x2] of switch Lid 1 guid 0x0a (sw):")
    False
    """
    for raw in text.splitlines()[:200]:
        line = raw.strip()
        if (line.startswith("From") and _END.match(line)) or _HOP.match(line) \
                or _MCAST.match(line):
            return True
    return False


def _hop(m: re.Match[str], no: int, *, end: bool) -> TraceHop:
    if end:
        port = int(m.group(4) or m.group(5))
        return TraceHop(m.group(2) or "", m.group(3).lower(), port, None,
                        int(m.group(6)) if m.group(6) else None, (m.group(7) or "").strip(), no)
    return TraceHop(m.group(2) or "", m.group(3).lower(), int(m.group(4)), int(m.group(1)),
                    int(m.group(5)) if m.group(5) else None, (m.group(6) or "").strip(), no)


def parse_ibtracert(text: str, *, source: str = "<routes>") -> list[Trace]:
    """Read ``ibtracert`` output (one trace or many, full or ``-n`` format) into traces.

    Raises
    ------
    ConfigError
        A line that is no trace line, a hop outside a trace, a trace without its ``To`` line
        (cut short), a multicast trace (``-m``), or no trace at all; the message names
        ``source`` and the line.

    Examples
    --------
    >>> t = parse_ibtracert('''From ca {0x0a} portnum 1 lid 2-2 "h1 mlx5_0"
    ... [1] -> switch port {0x0b}[7] lid 1-1 "MF0;leaf-0:X/U1"
    ... [3] -> ca port {0x0c}[1] lid 3-3 "h2 mlx5_0"
    ... To ca {0x0c} portnum 1 lid 3-3 "h2 mlx5_0"''')
    >>> [(h.out_port, h.desc, h.port) for h in t[0].hops]
    [(1, 'MF0;leaf-0:X/U1', 7), (3, 'h2 mlx5_0', 1)]
    """
    traces: list[Trace] = []
    cur: Trace | None = None
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or _SKIP.match(line):
            continue
        m = _END.match(line)
        if m and m.group(1) == "From":
            if cur is not None:
                raise _cut(cur, source)
            cur = Trace(_hop(m, no, end=True), source=source)
            continue
        if m:  # To
            if cur is None:
                raise ConfigError(f"line {no}: a 'To' line without its 'From' line",
                                  source=source, hint="the file looks cut at its start")
            cur.dst = _hop(m, no, end=True)
            traces.append(cur)
            cur = None
            continue
        m = _HOP.match(line)
        if m:
            if cur is None:
                raise ConfigError(f"line {no}: a hop outside any trace (no 'From' line above)",
                                  source=source, hint="the file looks cut at its start")
            cur.hops.append(_hop(m, no, end=False))
            continue
        if _MCAST.match(line) or (line.startswith("From ") and " port " in line):
            raise ConfigError(f"line {no}: a multicast trace (ibtracert -m) is no unicast route",
                              source=source, hint="trace unicast LIDs: ibtracert SRC DST")
        raise ConfigError(f"line {no}: not an ibtracert line: {line[:60]!r}", source=source,
                          hint="give ibtracert output only (no labels between traces)")
    if cur is not None:
        raise _cut(cur, source)
    if not traces:
        raise ConfigError("no ibtracert trace in the file", source=source,
                          hint="save the output of 'ibtracert SRC_LID DST_LID'")
    return traces


def _cut(trace: Trace, source: str) -> ConfigError:
    return ConfigError(
        f"line {trace.src.line}: the trace has no 'To' line (ibtracert stopped part-way)",
        source=source, hint="re-run that trace or remove it; an ibwarn line says why it stopped")


def ca_endpoint(desc: str) -> str | None:
    """The NIC endpoint a CA description names (``"gpu-01 mlx5_0"`` -> ``gpu-01/mlx5_0``).

    >>> ca_endpoint("gpu-01 mlx5_0"), ca_endpoint("MT4129 ConnectX7   Mellanox Technologies")
    ('gpu-01/mlx5_0', None)
    """
    m = _HOST_NIC.match(desc.strip())
    if m is None:
        return None
    host = re.sub(r"[\s/]+", "-", m.group(1))
    return f"{host}/{m.group(2)}"


def trace_entries(traces: list[Trace], topo: Topology, tables: dict[str, dict[str, str]],
                  *, guid_desc: dict[str, tuple[str, str]] | None = None) -> int:
    """Add what ``traces`` say to ``tables`` (switch -> {destination NIC -> next hop}).

    Traces to a destination outside ``topo`` (or to a switch) are skipped. Every hop must be a
    link of ``topo``; where the topology has port numbers a switch's out port must be one
    its link to the next hop has. ``guid_desc`` (port GUID -> (kind, description), from an LFT
    dump) names the nodes of ``-n`` traces. Returns the number of traces used.

    Raises
    ------
    ConfigError
        A node without a name, a switch the topology does not have, a hop that is no link,
        an out port the topology cables elsewhere, or two traces (or a trace and a table)
        disagreeing where a switch sends a destination; the message names file and line.
    """
    names = guid_desc or {}
    ports = {(end, other): lk.port_at(end) for lk in topo.links.values()
             for end, other in ((lk.a, lk.b), (lk.b, lk.a))}
    seen: dict[tuple[str, str], int] = {}
    used = 0
    for tr in traces:
        last = tr.hops[-1] if tr.hops else tr.dst
        assert last is not None
        dst = _node_name(last, topo, names, tr.source)
        if dst is None or dst not in topo.nics:
            continue
        path = [tr.src, *tr.hops]
        walk = [_node_name(h, topo, names, tr.source, need=i > 0) for i, h in enumerate(path)]
        for i in range(len(path) - 1):
            a, b, hop = walk[i], walk[i + 1], path[i + 1]
            if a is None or (a not in topo.switches and a not in topo.nics):
                continue  # a source CA unnamed (-n) or outside the topology: no forwarding fact
            if b is None or (a, b) not in ports:
                raise ConfigError(
                    f"line {hop.line}: {a} -> {b or hop.desc or hop.guid} is not a link "
                    f"of topology {topo.name!r}", source=tr.source,
                    hint="import the topology from the same fabric (ibnetdiscover)")
            if a not in topo.switches:
                continue
            cabled = ports[(a, b)]
            if cabled and hop.out_port not in cabled:
                raise ConfigError(
                    f"line {hop.line}: switch {a!r} leaves by port {hop.out_port} toward "
                    f"{b!r}, which the topology cables to port {','.join(map(str, cabled))}",
                    source=tr.source, hint="import the topology from the same fabric")
            table = tables.setdefault(a, {})
            before = table.get(dst)
            if before is not None and before != b:
                where = seen.get((a, dst))
                was = f"line {where}" if where else "the forwarding tables"
                raise ConfigError(
                    f"line {hop.line}: switch {a!r} sends {dst} to {b!r} here but to "
                    f"{before!r} at {was}", source=tr.source,
                    hint="take every trace (and table) from one settled fabric, to base LIDs")
            table[dst] = b
            seen.setdefault((a, dst), hop.line)
        used += 1
    return used


_KINDS = {"Switch": "switch", "Channel Adapter": "ca", "Router": "router"}


def _node_name(hop: TraceHop, topo: Topology, names: dict[str, tuple[str, str]], source: str,
               *, need: bool = True) -> str | None:
    """The topology name of a trace node: a switch name, or a CA's NIC endpoint (None: a CA
    outside the topology, or, with ``need`` False, one no description names)."""
    kind, desc = hop.kind, hop.desc
    if not desc:
        known_kind, desc = names.get(hop.guid, ("", ""))
        kind = kind or _KINDS.get(known_kind, "")
    if not desc:
        if not need:
            return None
        raise ConfigError(f"line {hop.line}: node {hop.guid} has no name (ibtracert -n?)",
                          source=source, hint="run ibtracert without -n, or give a "
                          "dump_lfts.sh file of the same fabric with it (--routes)")
    if kind != "switch":
        return ca_endpoint(desc)
    name = clean_switch_name(desc)
    if name not in topo.switches:
        raise ConfigError(f"line {hop.line}: switch {name!r} is not in topology {topo.name!r}",
                          source=source, hint="import the topology from the same fabric")
    return name
