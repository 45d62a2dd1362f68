"""InfiniBand routes from the fabric's own forwarding tables (LFT dumps) attached to a topology.

Read formats (text as the tools print it):

- ``ibroute`` / ``dump_lfts.sh`` (and OpenSM's ``opensm-lfts.dump``): a block per switch,
  ``Unicast lids [0x0-0x..] of switch Lid N guid 0x... (description):``, optional column
  headings, then ``0x0001 017 : (Channel Adapter portguid 0x...: 'host mlx5_0')`` lines
  (``#`` instead of ``:`` and no parentheses in OpenSM's dump), closed by ``N valid lids
  dumped``.
- ibdiagnet's ``.fdbs``: ``osm_ucast_mgr_dump_ucast_routes: Switch 0x<guid>``, a ``LID : Port
  : Hops : Optimal`` heading and ``0x0001 : 017 : 00 : yes`` lines. It names neither
  destinations nor switches, so its LIDs and GUIDs are resolved from ``ibroute``-style blocks
  given with it (several ``--routes`` files are read as one).
- ``ibtracert`` output (one trace or many): each trace to a destination says where every
  switch on it sends that destination (:mod:`fabriccheck.topology.tracert`); traces and tables
  may be given together, and must agree.

:func:`parse_lft` turns text into :class:`LftTable` rows (pure); :func:`resolve_routes` maps
them onto a topology with port numbers (imported from ibnetdiscover): destination LID -> NIC
endpoint ``host/nic`` by the CA description, out port -> the neighbour cabled to that port.
A bad file is a :class:`~fabriccheck.errors.ConfigError` naming file, line and problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from fabriccheck.errors import ConfigError
from fabriccheck.topology.discovery.ibnet_parse import clean_switch_name
from fabriccheck.topology.model import Topology
from fabriccheck.topology.tracert import (
    Trace,
    ca_endpoint,
    looks_like_ibtracert,
    parse_ibtracert,
    trace_entries,
)

_NUM = r"(?:0x[0-9a-fA-F]+|\d+)"
_HEAD = re.compile(
    rf"^Unicast lids \[{_NUM}-{_NUM}\] of switch (?:Lid (\d+) )?guid (0x[0-9a-fA-F]+)"
    r"\s*\((.*)\):?\s*$")
_ROW = re.compile(r"^(0x[0-9a-fA-F]+)\s+(\d+)\s*[:#]\s*(.*?)\s*$")
_DEST = re.compile(r"^\(?\s*(Channel Adapter|Switch|Router)\s+portguid\s+(0x[0-9a-fA-F]+)\s*:"
                   r"\s*'(.*)'\s*\)?$")
_FDB_HEAD = re.compile(r"^osm_ucast_mgr_dump_ucast_routes:\s*Switch\s+(0x[0-9a-fA-F]+)\s*$")
_FDB_ROW = re.compile(r"^(0x[0-9a-fA-F]+)\s*:\s*(\d+)\s*:\s*\d+\s*:\s*\w+\s*$")
_SKIP = re.compile(r"^(?:Lid\s+Out\s+Destination|Port\s+Info|LID\s*:\s*Port\b.*|\d+ (?:valid )?"
                   r"lids dumped.*|;.*|#.*|Multicast mlids.*)$", re.IGNORECASE)


@dataclass
class LftTable:
    """One switch's unicast table as printed: ``rows`` destination LID -> (out port, line)."""

    guid: str
    desc: str = ""
    lid: int | None = None
    line: int = 0
    rows: dict[int, tuple[int, int]] = field(default_factory=dict)


@dataclass
class LftDump:
    """Every table read, what the text says each LID is (``lid_desc`` LID -> (kind, desc)) and
    each port GUID (``guid_desc``), and the ``ibtracert`` traces read with them."""

    tables: list[LftTable] = field(default_factory=list)
    lid_desc: dict[int, tuple[str, str]] = field(default_factory=dict)
    guid_desc: dict[str, tuple[str, str]] = field(default_factory=dict)
    traces: list[Trace] = field(default_factory=list)


def parse_lft(text: str, *, source: str = "<routes>", into: LftDump | None = None) -> LftDump:
    """Read ``ibroute``/``dump_lfts.sh`` or ibdiagnet ``.fdbs`` text (see the module docstring).

    Raises
    ------
    ConfigError
        A line that is none of the formats' lines, a row before any switch heading, or no
        table at all; the message names ``source:line``.

    Examples
    --------
    >>> d = parse_lft('''Unicast lids [0x0-0x2] of switch Lid 1 guid 0x0a (MF0;leaf-0:X/U1):
    ... 0x0002 003 : (Channel Adapter portguid 0x0b: 'h1 mlx5_0')
    ... 1 valid lids dumped''')
    >>> d.tables[0].desc, d.tables[0].rows, d.lid_desc[2]
    ('MF0;leaf-0:X/U1', {2: (3, 2)}, ('Channel Adapter', 'h1 mlx5_0'))
    """
    dump = into if into is not None else LftDump()
    cur: LftTable | None = None
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or _SKIP.match(line):
            continue
        m = _HEAD.match(line)
        if m:
            cur = LftTable(m.group(2).lower(), m.group(3).strip().strip("'"),
                           int(m.group(1)) if m.group(1) else None, no)
            dump.tables.append(cur)
            continue
        m = _FDB_HEAD.match(line)
        if m:
            cur = LftTable(m.group(1).lower(), line=no)
            dump.tables.append(cur)
            continue
        m = _ROW.match(line) or _FDB_ROW.match(line)
        if m is None:
            raise ConfigError(f"line {no}: not a forwarding-table line: {line[:60]!r}",
                              source=source,
                              hint="give ibroute, dump_lfts.sh, ibdiagnet .fdbs or ibtracert "
                              "output")
        if cur is None:
            raise ConfigError(f"line {no}: a table row before any switch heading",
                              source=source, hint="the file looks cut at its start")
        lid, port = int(m.group(1), 16), int(m.group(2))
        cur.rows[lid] = (port, no)
        rest = m.group(3) if m.re is _ROW else ""
        d = _DEST.match(rest) if rest else None
        if d:
            dump.lid_desc.setdefault(lid, (d.group(1), d.group(3)))
            dump.guid_desc.setdefault(d.group(2).lower(), (d.group(1), d.group(3)))
    if not dump.tables:
        raise ConfigError("no forwarding table in the file", source=source,
                          hint="save the output of 'dump_lfts.sh' (or ibroute per switch)")
    return dump


def read_routes(paths: list[str | Path] | tuple[str | Path, ...]) -> tuple[LftDump, str]:
    """Parse one or more route files as one dump (``.fdbs`` LIDs resolve across files);
    a file with an ibtracert ``From`` line is read as traces."""
    dump = LftDump()
    for p in paths:
        try:
            text = Path(p).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ConfigError(f"cannot read routes file: {exc.strerror or exc}",
                              source=str(p)) from exc
        if looks_like_ibtracert(text):
            dump.traces.extend(parse_ibtracert(text, source=str(p)))
        else:
            parse_lft(text, source=str(p), into=dump)
    return dump, ", ".join(str(p) for p in paths)


def _clean(desc: str) -> str:
    """The switch name the ibnetdiscover import gives a description (``MF0;name:...``)."""
    return clean_switch_name(desc)


def resolve_routes(dump: LftDump, topo: Topology, *, source: str = "<routes>"
                   ) -> dict[str, dict[str, str]]:
    """Map a dump onto ``topo``: switch -> {destination NIC endpoint -> next hop}.

    Destinations are the NICs of ``topo`` (CA descriptions ``"host nic"``); LIDs of switches
    or of hosts outside the topology are skipped. Each out port must be a cabled port of that
    switch in ``topo`` (port numbers come from an ibnetdiscover import). Traces
    (``dump.traces``) add the entries they show (they name every hop, so they need no port
    numbers; where the topology has them, they are checked).

    Raises
    ------
    ConfigError
        The topology has no port numbers, a switch of the dump is not in the topology, or a
        row leaves by a port no link of the topology has; the message names ``source:line``.
    """
    if dump.tables and not any(lk.a_port or lk.b_port for lk in topo.links.values()):
        raise ConfigError(
            f"topology {topo.name!r} has no port numbers, so out ports cannot be followed",
            source=source, hint="import the topology from ibnetdiscover "
            "(fabriccheck topology import --ibnetdiscover FILE --routes ROUTES)")
    dest: dict[int, str] = {}
    for lid, (kind, desc) in dump.lid_desc.items():
        ep = ca_endpoint(desc)
        if kind == "Channel Adapter" and ep in topo.nics:
            dest[lid] = ep
    out = _follow_tables(dump, topo, dest, source=source)
    if dump.traces:
        guid_desc = dict(dump.guid_desc)
        guid_desc.update((t.guid, ("Switch", t.desc)) for t in dump.tables if t.desc)
        trace_entries(dump.traces, topo, out, guid_desc=guid_desc)
    if not any(out.values()):
        raise ConfigError("no route to any NIC of the topology", source=source,
                          hint="the CA descriptions ('host mlx5_0') must name its NICs")
    return out


def _follow_tables(dump: LftDump, topo: Topology, dest: dict[int, str], *, source: str
                   ) -> dict[str, dict[str, str]]:
    """Each table's switch (by description, else its GUID's) -> {NIC endpoint of a ``dest``
    LID -> the switch or NIC cabled to the out port}; port 0 (the switch itself) is skipped."""
    by_port: dict[str, dict[int, str]] = {}
    for link in topo.links.values():
        for end, other in ((link.a, link.b), (link.b, link.a)):
            for p in link.port_at(end):
                by_port.setdefault(end, {})[p] = other
    guid_name = {t.guid: _clean(t.desc) for t in dump.tables if t.desc}
    out: dict[str, dict[str, str]] = {}
    for t in dump.tables:
        name = _clean(t.desc) if t.desc else guid_name.get(t.guid)
        if name is None:
            raise ConfigError(f"line {t.line}: switch {t.guid} has no name in the routes",
                              source=source, hint="give dump_lfts.sh output with the .fdbs")
        if name not in topo.switches:
            raise ConfigError(f"line {t.line}: switch {name!r} is not in topology {topo.name!r}",
                              source=source, hint="import the topology from the same fabric")
        table = out.setdefault(name, {})
        ports = by_port.get(name, {})
        for lid, (port, no) in t.rows.items():
            ep = dest.get(lid)
            if ep is None or port == 0:
                continue
            nxt = ports.get(port)
            if nxt is None:
                raise ConfigError(
                    f"line {no}: switch {name!r} sends LID {lid:#06x} out of port {port}, "
                    "which no link of the topology has", source=source,
                    hint="import the topology from the same fabric (ibnetdiscover), then "
                    "the routes")
            table[ep] = nxt
    return out


def attach_routes(topo: Topology, paths: list[str | Path] | tuple[str | Path, ...]) -> None:
    """Read route files and make ``topo`` route by them (``topo.routing`` becomes ``"lft"``)."""
    dump, source = read_routes(paths)
    topo.set_lft(resolve_routes(dump, topo, source=source), source)
