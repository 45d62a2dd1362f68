"""Port error counters judged as rates (``perfquery`` basic/-x/-E, ``ethtool -S``, sysfs).

Two or more reads of the same port give each counter's growth over the window between the
first and the last read, graded per hour against its catalogue entry (``warn_per_hour``,
``fault_per_hour``, ``fault_min_count``, ``warn_min_count``). The window is the context's (the
preflight knows it), else a ``sleep N`` line or ``date +%s`` stamps found in the text;
counters that grew with no window make the report incomplete. A read is also a lifetime
total: with the uptime known (the context's, or a ``/proc/uptime`` line before the reads) it is
a rate since boot, a warn above ``warn_per_hour`` and info below; without it a non-zero error
counter of a single read is a warn (the entry's ``lifetime_severity``). A lifetime total is
never a fault: it may be old.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from fabriccheck.probes.node.catalogue import Catalogue, Entry
from fabriccheck.probes.node.findings import FAULT, INFO, SEVERITIES, WARN, Finding, NodeReport
from fabriccheck.probes.node.lines import H, newline_breaks_only

#: counter widths in bits (IBTA Vol. 1 sec. 16.1.3.5 PortCounters): a counter at all ones
#: has stopped counting (``perfquery -R`` clears it)
IB_COUNTER_BITS: Mapping[str, int] = {
    "SymbolErrorCounter": 16, "LinkErrorRecoveryCounter": 8, "LinkDownedCounter": 8,
    "PortRcvErrors": 16, "PortRcvRemotePhysicalErrors": 16, "PortRcvSwitchRelayErrors": 16,
    "PortXmitDiscards": 16, "PortXmitConstraintErrors": 8, "PortRcvConstraintErrors": 8,
    "LocalLinkIntegrityErrors": 4, "ExcessiveBufferOverrunErrors": 4, "VL15Dropped": 16,
    "PortXmitWait": 32,
    "symbol_error": 16, "link_error_recovery": 8, "link_downed": 8, "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16, "port_xmit_discards": 16,
    "local_link_integrity_errors": 4, "excessive_buffer_overrun_errors": 4,
}

#: fact key of a perfquery counter (the names expected.json uses)
_FACT_NAMES: Mapping[str, str] = {
    "SymbolErrorCounter": "symbol_errors", "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkDownedCounter": "link_downed", "PortRcvErrors": "rcv_errors",
    "PortRcvRemotePhysicalErrors": "rcv_remote_physical_errors",
    "PortRcvSwitchRelayErrors": "rcv_switch_relay_errors", "PortXmitDiscards": "xmit_discards",
    "PortXmitConstraintErrors": "xmit_constraint_errors",
    "PortRcvConstraintErrors": "rcv_constraint_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors",
    "VL15Dropped": "vl15_dropped", "PortXmitWait": "xmit_wait", "QP1Dropped": "qp1_dropped",
    "PortLocalPhysicalErrors": "local_physical_errors",
    "PortMalformedPktErrors": "malformed_pkt_errors",
    "PortBufferOverrunErrors": "buffer_overrun_errors",
    "PortDLIDMappingErrors": "dlid_mapping_errors", "PortVLMappingErrors": "vl_mapping_errors",
    "PortLoopingErrors": "looping_errors",
}

#: ``^#`` written as ``#`` at a line start (``(?<![^\n]#)``): a pattern that starts with a
#: literal is searched for quickly
_PQ_HEADER = re.compile(
    r"#(?<![^\n]#)\s*(?P<kind>Port[\w ]*?)\s*counters:\s*Lid\s+(?P<lid>\S+)\s+"
    r"(?:port\s+(?P<port>\d+)|(?P<all>all ports))(?P<rest>.*)$", re.M)
_PQ_COUNTER = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9]*):\.*(?P<value>\S+)\s*$")
#: a counter line whose value is a number (decimal or hex): the lines a read keeps, less the
#: select fields (``_PQ_SKIP``); ``_PQ_COUNTER_LINES`` finds them all in one scan of a block
#: split at ``\n`` only (surrounding whitespace allowed, as ``str.strip`` removes it), as
#: (stripped line, name, value)
_PQ_NUMBER = re.compile(r"(?P<name>[A-Za-z][A-Za-z0-9]*):\.*(?P<value>0x[0-9a-fA-F]+|\d+)")
_PQ_SKIP = frozenset({"PortSelect", "CounterSelect", "CounterSelect2"})
_PQ_COUNTER_LINES = re.compile(
    rf"^{H}*((?!(?:{'|'.join(sorted(_PQ_SKIP))}):){_PQ_NUMBER.pattern}){H}*$", re.M)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CAPMASK = re.compile(r"CapMask:\s*(0x[0-9a-fA-F]+)")
_ETH_HEADER = re.compile(r"^NIC statistics:\s*$")
_ETH_STAT = re.compile(r"^\s+(?P<name>[\w.\[\]-]+):\s*(?P<value>\d+)\s*$")
_ETH_NAME = re.compile(r"^(?:[#$+>]\s*)?(?:ethtool\s+-S\s+)?(?P<name>[A-Za-z][\w.@-]*)\s*:?\s*$")
#: the same in one scan of a whole text whose only line break is ``\n`` (``H``: whitespace but
#: ``\n``): the lines that change the reading (a header, a NIC name) and the counter lines
_ETH_EVENT = re.compile(
    rf"^(?:(?P<header>NIC statistics:)|(?:[#$+>]{H}*)?(?:ethtool{H}+-S{H}+)?"
    rf"(?P<name>[A-Za-z][\w.@-]*){H}*:?){H}*$", re.M)
_ETH_STAT_LINES = re.compile(rf"^{H}+((?P<name>[\w.\[\]-]+):{H}*(?P<value>\d+)){H}*$", re.M)
_SLEEP = re.compile(r"(?:^|[\s;&|(])sleep\s+(?P<s>\d+(?:\.\d+)?)s?(?=$|[\s;&|)])", re.M)
_EPOCH = re.compile(r"^\s*(?P<t>1\d{9}(?:\.\d+)?)\s*$", re.M)
_UPTIME = re.compile(r"\A\s*(?P<up>\d+(?:\.\d+)?) \d+(?:\.\d+)?\s*$", re.M)
_ALL_PORT_SELECT = 1 << 8  # PerfMgt ClassPortInfo.CapabilityMask IsAllPortSelectSupported


@dataclass
class Series:
    """The reads of one port (or one NIC) in a text, in order."""

    key: str
    part: str
    reads: list[dict[str, int]] = field(default_factory=list)
    lines: list[dict[str, str]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


# --- parsing ---------------------------------------------------------------------------------


def parse_perfquery_reads(text: str) -> list[Series]:
    """The ``perfquery`` blocks of ``text`` grouped by port (one :class:`Series` per block
    kind, LID and port), each block one read.

    >>> s = parse_perfquery_reads("# Port counters: Lid 3 port 1\\nSymbolErrorCounter:...12\\n")
    >>> s[0].part, s[0].reads
    ('port lid3/1', [{'SymbolErrorCounter': 12}])
    """
    heads = list(_PQ_HEADER.finditer(text))
    counters = _pq_counters_scan if newline_breaks_only(text) else _pq_counters
    series: dict[str, Series] = {}
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        port = h["port"] or "all"
        kind = h["kind"].strip()
        key = f"{kind}|{h['lid']}|{port}"
        s = series.get(key)
        if s is None:
            s = series[key] = Series(key, f"port lid{h['lid']}/{port}",
                                     meta={"lid": _int(h["lid"]), "port": _int(port),
                                           "kind": kind})
        if m := _CAPMASK.search(h["rest"]):
            s.meta["node_type"] = "switch" if int(m[1], 16) & _ALL_PORT_SELECT else "ca"
        found = counters(text[h.end():end])
        s.reads.append({name: int(value, 0) for _, name, value in found})
        s.lines.append({name: line for line, name, _ in found})
    return list(series.values())


def _pq_counters(block: str) -> list[tuple[str, str, str]]:
    """``(line, name, value)`` of each ``Name:....value`` line of a block whose value is a
    number (but the select fields), the line stripped."""
    return [(line, m["name"], m["value"]) for line in map(str.strip, block.splitlines())
            if (m := _PQ_NUMBER.fullmatch(line)) and m["name"] not in _PQ_SKIP]


def _pq_counters_scan(block: str) -> list[tuple[str, str, str]]:
    """:func:`_pq_counters` in one regex scan, for a block whose only line break is
    ``\\n``."""
    return _PQ_COUNTER_LINES.findall(block)


def parse_ethtool_reads(text: str) -> list[Series]:
    """The ``NIC statistics:`` blocks of ``text`` grouped by NIC: a name line before a block
    (``eth2``, ``eth2:``, ``ethtool -S eth2``) names it; unnamed blocks are reads of one NIC.

    >>> s = parse_ethtool_reads("NIC statistics:\\n     rx_crc_errors_phy: 3\\n")
    >>> s[0].part, s[0].reads
    ('nic', [{'rx_crc_errors_phy': 3}])
    """
    series: dict[str, Series] = {}
    current: Series | None = None
    last_name = ""
    events = _eth_events_scan if newline_breaks_only(text) else _eth_events
    for kind, arg in events(text):
        if kind == "header":
            name = last_name or (current.key if current is not None else "")
            last_name = ""
            current = series.get(name)
            if current is None:
                current = series[name] = Series(name, f"nic {name}" if name else "nic")
            current.reads.append({})
            current.lines.append({})
        elif kind == "name":
            last_name = arg
        elif current is not None:
            current.reads[-1].update({name: int(value) for _, name, value in arg})
            current.lines[-1].update({name: line for line, name, _ in arg})
    return list(series.values())


#: what :func:`parse_ethtool_reads` reads: ``("header", "")``, ``("name", nic)`` or
#: ``("stats", [(stripped line, counter, value), ...])``
EthEvent = tuple[str, Any]


def _eth_events(text: str) -> Iterator[EthEvent]:
    """The events of ``text``, line by line."""
    for raw in text.splitlines():
        line = raw.rstrip()
        if _ETH_HEADER.match(line):
            yield "header", ""
        elif m := _ETH_STAT.match(line):
            yield "stats", [(line.strip(), m["name"], m["value"])]
        elif line and not line[0].isspace() and (m := _ETH_NAME.match(line)) \
                and not _SLEEP.search(line):
            yield "name", m["name"]


def _eth_events_scan(text: str) -> Iterator[EthEvent]:
    """:func:`_eth_events` in one scan for headers and names, the counter lines between them
    read at once, for a text whose only line break is ``\\n``."""
    pos = 0
    for m in _ETH_EVENT.finditer(text):
        if stats := _ETH_STAT_LINES.findall(text, pos, m.start()):
            yield "stats", stats
        pos = m.end()
        if m["header"] is not None:
            yield "header", ""
        elif not _SLEEP.search(m[0].rstrip()):
            yield "name", m["name"]
    if stats := _ETH_STAT_LINES.findall(text, pos):
        yield "stats", stats


def find_window_s(text: str, reads: int = 2) -> float | None:
    """Seconds between the first and the last of ``reads`` reads as the text itself says:
    ``date +%s`` stamps (last minus first), else ``sleep N`` (an echoed command line or a
    ``set -x`` trace): N per gap when every sleep is the same, else their sum; None when the
    text says nothing.

    >>> find_window_s("a\\n+ sleep 5\\nb\\n"), find_window_s("1700000000\\nx\\n1700000010\\n")
    (5.0, 10.0)
    >>> find_window_s("$ perfquery; sleep 2; perfquery; sleep 2; perfquery\\n", reads=3)
    4.0
    """
    stamps = [float(m["t"]) for m in _EPOCH.finditer(text)]
    if len(stamps) >= 2 and stamps[-1] > stamps[0]:
        return stamps[-1] - stamps[0]
    sleeps = [float(m["s"]) for m in _SLEEP.finditer(text)]
    if not sleeps or sum(sleeps) <= 0:
        return None
    if len(set(sleeps)) == 1:
        return sleeps[0] * max(1, reads - 1)
    return sum(sleeps)


# --- judging ----------------------------------------------------------------------------------


class CounterTable:
    """The rate-judged counter entries of one catalogue (``ctr-*`` with ``match.counters`` or
    ``match.patterns``), in catalogue order, with their names and name patterns; the entry of
    each counter name is looked up once."""

    #: names remembered at most (a driver prints a few hundred; a cap keeps odd input cheap)
    MAX_NAMES = 100_000

    def __init__(self, rows: Sequence[tuple[Entry, frozenset[str], list[re.Pattern]]]):
        self.rows = tuple(rows)
        self._by_name: dict[str, Entry | None] = {}

    def __iter__(self) -> Iterator[tuple[Entry, frozenset[str], list[re.Pattern]]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def entry_for(self, name: str) -> Entry | None:
        """The first entry naming ``name`` or with a pattern matching all of it."""
        try:
            return self._by_name[name]
        except KeyError:
            pass
        found = None
        for e, names, patterns in self.rows:
            if name in names or any(p.fullmatch(name) for p in patterns):
                found = e
                break
        if len(self._by_name) < self.MAX_NAMES:
            self._by_name[name] = found
        return found


def _counter_table(catalogue: Catalogue) -> CounterTable:
    rows = []
    for e in catalogue.with_prefix("ctr-"):
        names = e.match.get("counters") or []
        patterns = [re.compile(p) for p in e.match.get("patterns") or []]
        if names or patterns:
            rows.append((e, frozenset(names), patterns))
    return CounterTable(rows)


def counter_entries(catalogue: Catalogue) -> CounterTable:
    """The rate-judged counter entries (``ctr-*`` with ``match.counters``), with their
    names and name patterns (built once per catalogue)."""
    return catalogue.derived(_counter_table)


def entry_for(name: str, table: CounterTable) -> Entry | None:
    """The counter entry that judges ``name`` (None: recorded, not judged)."""
    return table.entry_for(name)


def _lower(a: str, b: str) -> str:
    return a if SEVERITIES.index(a) <= SEVERITIES.index(b) else b


def grade_rate(entry: Entry, delta: int, rate_per_h: float) -> str:
    """The severity of a counter that grew by ``delta`` at ``rate_per_h``, capped by the
    entry's own severity.

    >>> from fabriccheck.probes.node.catalogue import builtin_catalogue
    >>> e = builtin_catalogue().entry("ctr-symbol-errors")
    >>> grade_rate(e, 2, 1440.0), grade_rate(e, 30, 21600.0), grade_rate(e, 1, 5.0)
    ('warn', 'fault', 'info')
    >>> grade_rate(e, 1, 720.0)  # one stray error in a 5 s window: noise until it repeats
    'info'
    """
    fault_at = entry.params.get("fault_per_hour")
    warn_at = entry.params.get("warn_per_hour", 0)
    if fault_at is not None and rate_per_h > float(fault_at) \
            and delta >= int(entry.params.get("fault_min_count", 1)):
        grade = FAULT
    elif warn_at is not None and rate_per_h > float(warn_at) \
            and delta >= int(entry.params.get("warn_min_count", 1)):
        grade = WARN
    else:
        grade = INFO
    return _lower(grade, entry.severity)


def _saturated(name: str, value: int, entry: Entry) -> bool:
    """At all ones, for a counter whose growth matters (a saturated congestion counter such
    as a 32-bit ``PortXmitWait`` on a busy port is normal)."""
    judged = entry.severity != INFO and entry.params.get("lifetime_severity", WARN) != INFO
    return judged and _at_max(name, value)


def _at_max(name: str, value: int) -> bool:
    """``value`` is all ones for a counter of known width."""
    bits = IB_COUNTER_BITS.get(name)
    return bits is not None and value == (1 << bits) - 1


def uptime_from_text(text: str) -> float | None:
    """Seconds since boot from a leading ``/proc/uptime`` line (``350735.47 2798376.49``).

    >>> uptime_from_text("350735.47 2798376.49\\n# Port counters: Lid 3 port 1\\n")
    350735.47
    """
    return split_uptime(text)[0]


def split_uptime(text: str) -> tuple[float | None, str]:
    """A leading ``/proc/uptime`` line's seconds since boot, and the text after that line (the
    whole text, and None, when it has none).

    >>> split_uptime("350735.47 2798376.49\\nNIC statistics:\\n")
    (350735.47, 'NIC statistics:\\n')
    """
    m = _UPTIME.match(text)
    if m is None:
        return None, text
    rest = text[m.end():]
    return float(m["up"]), rest[1:] if rest.startswith("\n") else rest


def judge_series(series: Sequence[Series], catalogue: Catalogue, window_s: float | None,
                 uptime_s: float | None = None) -> tuple[list[Finding], bool, str]:
    """Findings of every series (rates over the window with two reads or more; lifetime totals
    of the first read, as rates since boot when ``uptime_s`` is known), whether the judgement
    is complete, and why not."""
    table = counter_entries(catalogue)
    findings: list[Finding] = []
    complete, reasons = True, []
    for s in series:
        if len(s.reads) >= 2:
            f, ok, why = _judge_growth(s, table, catalogue, window_s)
            if uptime_s:
                f = _judge_lifetime(s, table, catalogue, uptime_s, saturation=False) + f
        else:
            f, ok, why = _judge_lifetime(s, table, catalogue, uptime_s), True, ""
        findings += f
        if not ok:
            complete = False
            reasons.append(why)
    return findings, complete, "; ".join(reasons)


def _judge_lifetime(s: Series, table, catalogue: Catalogue, uptime_s: float | None = None,
                    *, saturation: bool = True) -> list[Finding]:
    out = []
    read, lines = s.reads[0], s.lines[0]
    for name, value in read.items():
        if value <= 0 or (e := entry_for(name, table)) is None:
            continue
        sev = _lower(str(e.params.get("lifetime_severity", WARN)), _lower(WARN, e.severity))
        if uptime_s:
            hours = max(uptime_s, 3600.0) / 3600  # the first hour is one hour, not a spike
            rate = value / hours
            warn_at = e.params.get("warn_per_hour")
            if warn_at is None or rate <= float(warn_at):
                sev = INFO
            what = (f"{e.what}: {name} = {value} in {uptime_s / 3600:.1f} h since boot "
                    f"({_per_hour(rate)}/h{_limits(e, fault=False)}; a lifetime count, "
                    "never a fault on its own)")
        else:
            what = (f"{e.what}: {name} = {value} (lifetime count; judged as a rate by the "
                    "preflight)")
        out.append(catalogue.finding(e.id, part=s.part, what=what, line=lines.get(name, ""),
                                     severity=sev))
        if saturation and _saturated(name, value, e):
            out.append(catalogue.finding(
                "ctr-saturated", part=s.part, line=lines.get(name, ""),
                what=f"{name} = {value} is at its maximum and cannot show new errors"))
    return out


def _judge_growth(s: Series, table, catalogue: Catalogue, window_s: float | None
                  ) -> tuple[list[Finding], bool, str]:
    first, last, lines = s.reads[0], s.reads[-1], s.lines[-1]
    out: list[Finding] = []
    unknown: list[str] = []
    for name, value in last.items():
        if name not in first:
            continue
        delta = value - first[name]
        if delta == 0 and not _at_max(name, value):  # the usual case: nothing to say
            continue
        if (e := entry_for(name, table)) is None:
            continue
        if delta < 0:
            out.append(catalogue.finding(
                "ctr-counter-reset", part=s.part, line=lines.get(name, ""),
                what=f"{name} went from {first[name]} to {last[name]} between reads "
                     "(reset); its growth is unknown"))
            continue
        if delta == 0:
            if _saturated(name, last[name], e):
                out.append(catalogue.finding(
                    "ctr-saturated", part=s.part, line=lines.get(name, ""),
                    what=f"{name} = {last[name]} is at its maximum and cannot show growth"))
            continue
        if window_s is None or window_s <= 0:
            if e.params.get("fault_per_hour") is not None:
                unknown.append(f"{name} +{delta}")
            else:  # congestion and the like: a warn at most, and no rate to give
                out.append(catalogue.finding(
                    e.id, part=s.part, line=lines.get(name, ""), severity=INFO,
                    what=f"{e.what}: {name} +{delta} between reads (window unknown)"))
            continue
        rate = delta * 3600.0 / window_s
        sev = grade_rate(e, delta, rate)
        out.append(catalogue.finding(
            e.id, part=s.part, line=lines.get(name, ""), severity=sev,
            what=f"{e.what}: {name} +{delta} in {window_s:g} s ({_per_hour(rate)}/h"
                 f"{_limits(e)})"))
    lost = [n for n in first if n not in last and entry_for(n, table) is not None]
    if lost:
        out.append(catalogue.finding(
            "port-incomplete", part=s.part,
            what=f"the last read stops early ({', '.join(lost[:4])} missing)"))
        return out, False, f"{s.part}: the last counter read is cut short"
    if unknown:
        out.append(catalogue.finding(
            "ctr-window-unknown", part=s.part,
            what=f"counters grew between reads ({', '.join(unknown)}) but the time between "
                 "the reads is unknown"))
        return out, False, f"{s.part}: counter growth without a known window"
    return out, True, ""


def _per_hour(rate: float) -> str:
    return f"{rate:.0f}" if rate >= 10 else f"{rate:.2g}"


def _limits(e: Entry, *, fault: bool = True) -> str:
    out = ""
    keys = (("warn_per_hour", "warn"), ("fault_per_hour", "fault"))
    for key, word in keys if fault else keys[:1]:
        v = e.params.get(key)
        if v is not None and not (isinstance(v, float) and math.isinf(v)):
            out += f"; {word} above {float(v):g}/h"
    return out


@lru_cache(maxsize=4096)
def fact_name(counter: str) -> str:
    """The fact key of a perfquery counter (``symbol_errors``, ``xmit_data``).

    >>> fact_name("SymbolErrorCounter"), fact_name("PortUnicastXmitPkts")
    ('symbol_errors', 'unicast_xmit_pkts')
    """
    if counter in _FACT_NAMES:
        return _FACT_NAMES[counter]
    base = counter.removeprefix("Port") or counter
    return _CAMEL.sub("_", base).lower()


def _int(text: str) -> int | str:
    try:
        return int(text, 0)
    except ValueError:
        return text


def _uptime(text: str, context: Any) -> float | None:
    return getattr(context, "uptime_s", None) or uptime_from_text(text)


def _window(text: str, context: Any, series: Sequence[Series]) -> tuple[float | None, str]:
    w = getattr(context, "window_s", None)
    if w:
        return float(w), "context"
    found = find_window_s(text, max((len(s.reads) for s in series), default=2))
    return (found, "text") if found else (None, "")


# --- perfquery ---------------------------------------------------------------------------------


def looks_like_perfquery(text: str) -> bool:
    """True for ``perfquery`` output: a ``# Port ... counters: Lid N port P`` header followed
    by ``Name:....value`` lines.

    >>> looks_like_perfquery("# Port counters: Lid 3 port 1\\nSymbolErrorCounter:.....0\\n")
    True
    >>> looks_like_perfquery("# nThread 1 nGpus 1 minBytes 8\\n")
    False
    """
    m = _PQ_HEADER.search(text[:200_000])
    if m is None:
        return False
    after = text[m.end():m.end() + 2000].splitlines()[1:4]
    return any(_PQ_COUNTER.match(line.strip()) for line in after)


def _pq_facts(series: Sequence[Series], window_s: float | None, source: str) -> dict[str, Any]:
    facts: dict[str, Any] = {"reads": max((len(s.reads) for s in series), default=0),
                             "ports_read": len(series)}
    per_port: dict[str, Any] = {}
    for s in series:
        last = s.reads[-1] if s.reads else {}
        one: dict[str, Any] = {k: v for k, v in s.meta.items() if k != "kind"}
        one["counters_read"] = len(last)
        one.update({fact_name(n): v for n, v in last.items()})
        if len(s.reads) >= 2:
            first = s.reads[0]
            one["growth"] = {n: last[n] - first[n] for n in last if n in first
                             and last[n] != first[n]}
        per_port[s.part.removeprefix("port ")] = one
    return _fold_facts(facts, per_port, "ports", window_s, source)


def _fold_facts(facts: dict[str, Any], per: dict[str, Any], key: str, window_s: float | None,
                source: str) -> dict[str, Any]:
    """``facts`` with the per-port (or per-NIC) facts: inline for one, under ``key`` for
    several; the window and where it came from when there were two reads or more."""
    if len(per) == 1:
        facts.update(next(iter(per.values())))
    else:
        facts[key] = per
    if facts["reads"] >= 2:
        facts["window_s"] = window_s
        facts["window_source"] = source or "unknown"
    return facts


def judge_perfquery(text: str, catalogue: Catalogue, context: Any) -> NodeReport:
    """Judge ``perfquery`` output (basic, ``-x``, ``-E``; one read or several).

    >>> from fabriccheck.probes.node.catalogue import builtin_catalogue
    >>> from fabriccheck.probes.node.judge import NodeContext
    >>> t = "# Port counters: Lid 3 port 1\\nSymbolErrorCounter:.....0\\n"
    >>> judge_perfquery(t, builtin_catalogue(), NodeContext()).node_verdict
    'healthy'
    """
    series = parse_perfquery_reads(text)
    if not series:
        return NodeReport("perfquery", complete=False, reason="no '# Port counters' block")
    return _report("perfquery", series, text, catalogue, context, _pq_facts)


def _report(tool: str, series: Sequence[Series], text: str, catalogue: Catalogue,
            context: Any, facts_of: Any) -> NodeReport:
    """The report of parsed counter reads: findings over the window and since boot, parts with
    no counters make it incomplete, ``facts_of(series, window_s, source)`` its facts."""
    window_s, source = _window(text, context, series)
    uptime_s = _uptime(text, context)
    findings, complete, reason = judge_series(series, catalogue, window_s, uptime_s)
    empty = [s.part for s in series if not any(any(r) for r in s.reads)]
    if empty:
        complete = False
        reason = "; ".join(filter(None, [reason, f"no counters under {', '.join(empty)}"]))
    facts = facts_of(series, window_s, source)
    if uptime_s:
        facts["uptime_s"] = uptime_s
    return NodeReport(tool, tuple(findings), facts, complete, reason)


# --- ethtool -S ----------------------------------------------------------------------------------


def looks_like_ethtool_stats(text: str) -> bool:
    """True for ``ethtool -S`` output: a ``NIC statistics:`` line then indented
    ``name: number`` lines.

    >>> looks_like_ethtool_stats("NIC statistics:\\n     rx_packets: 12\\n")
    True
    >>> looks_like_ethtool_stats("Settings for eth0:\\n\\tSpeed: 100000Mb/s\\n")
    False
    """
    lines = text[:200_000].splitlines()
    for i, line in enumerate(lines):
        if _ETH_HEADER.match(line.rstrip()):
            return any(_ETH_STAT.match(x) for x in lines[i + 1:i + 4])
    return False


def _eth_facts(series: Sequence[Series], table, window_s: float | None, source: str
               ) -> dict[str, Any]:
    facts: dict[str, Any] = {"reads": max((len(s.reads) for s in series), default=0),
                             "nics_read": len(series)}
    per_nic: dict[str, Any] = {}
    for s in series:
        last = s.reads[-1] if s.reads else {}
        one: dict[str, Any] = {"counters_read": len(last)}
        if any(n.endswith("_phy") for n in last) or any(n.startswith("ch0_") for n in last):
            one["driver"] = "mlx5"
        one.update({n: v for n, v in last.items() if entry_for(n, table) is not None})
        if len(s.reads) >= 2:
            first = s.reads[0]
            one["growth"] = {n: last[n] - first[n] for n in last if n in first
                             and last[n] != first[n] and entry_for(n, table) is not None}
        per_nic[s.key or "nic"] = one
    return _fold_facts(facts, per_nic, "nics", window_s, source)


def judge_ethtool_stats(text: str, catalogue: Catalogue, context: Any) -> NodeReport:
    """Judge ``ethtool -S`` output (mlx5 names; one or several ``NIC statistics:`` blocks).

    >>> from fabriccheck.probes.node.catalogue import builtin_catalogue
    >>> from fabriccheck.probes.node.judge import NodeContext
    >>> t = "NIC statistics:\\n     rx_crc_errors_phy: 0\\n"
    >>> judge_ethtool_stats(t, builtin_catalogue(), NodeContext()).node_verdict
    'healthy'
    """
    series = parse_ethtool_reads(text)
    if not series:
        return NodeReport("ethtool-S", complete=False, reason="no 'NIC statistics:' block")
    table = counter_entries(catalogue)
    report = _report("ethtool-S", series, text, catalogue, context,
                     lambda ss, w, src: _eth_facts(ss, table, w, src))
    if not any(any(r) for s in series for r in s.reads):
        report = replace(report, reason="no counters under 'NIC statistics:'")
    return report


def judge_sysfs_counters(values: Mapping[str, int], part: str, catalogue: Catalogue,
                         lines: Mapping[str, str] | None = None,
                         uptime_s: float | None = None) -> list[Finding]:
    """Lifetime findings of one read of a port's sysfs ``counters/`` files
    (``{"symbol_error": 0, ...}``), as rates since boot when ``uptime_s`` is known."""
    s = Series(part, part, [dict(values)], [dict(lines or {})])
    findings, _, _ = judge_series([s], catalogue, None, uptime_s)
    return findings

