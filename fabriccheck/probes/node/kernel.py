"""The kernel log judged since the last check: GPU Xids, NIC, PCIe and host lines by meaning.

Formats: ``dmesg`` (raw, ``-T``, ``--time-format iso``, ``-x``), ``journalctl -k`` (short,
short-iso, short-precise, short-monotonic, short-full), kern.log / syslog (RFC 3164 and 5424).
Only lines with a hot word (``NVRM``, ``mlx5``, ``PCIe Bus Error``, ...) are read further, so a
100,000-line log costs a few literal scans, and a message repeated in a flood is judged once.
Each event line gets the catalogue entry that judges it (``xid-<N>``, ``kern-*``; the phrases of
a ``kern-*`` entry are its ``match.text``); context lines of a multi-line report (a GSP RPC dump,
a call trace, an mlx5 health buffer) are not events. Events stamped before ``NodeContext.since``
(or ``since_uptime_s`` for ``[ seconds]`` stamps), or before the last boot the log shows, do not
count; repeated identical events are one finding with a count. Journal and syslog stamps without
a year take it from ``since`` (else today), counted back from the last line.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any

from fabriccheck.probes._text import strip_source_line
from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.probes.node.findings import FAULT, INFO, SEVERITIES, Finding, NodeReport

#: hot words: a line holding none is not read further (upper-case ones in one regex, the rest
#: each alone: a literal search skips through text far faster than an alternation)
_HOT_UPPER = re.compile(
    r"NVRM|Xid|PCIe Bus Error|DPC: |NETDEV WATCHDOG|Out of memory|LOCKUP|EDAC|Oops:|BUG: "
    r"|Linux version|Hardware name|Machine check|_BOOT_ID=")
_HOT_WORDS = tuple(re.compile(re.escape(w)) for w in (
    "nvidia", "mlx5", "ink down", "ink Down", "ink is Down", "ink up", "ink Up", "ink is Up",
    "Link DOWN", "Link ACTIVE",
    "becomes ready", "oom-kill", "segfault at", "traps: ", "lockup", "detected stalls",
    "blocked for more than", "general protection", "ainted", "\n-- "))
#: a line's stamp and tag: dmesg -x level, <pri>, one stamp form, a syslog host + ``kernel:``,
#: kern.log's inner ``[ seconds]``
_PREFIX = re.compile(
    r"(?P<dec>[a-z]+ *:[a-z]+ *: )?(?:<\d{1,3}>(?:1 )?)?(?:"
    r"\[ *(?P<up>\d+\.\d+)\]"
    r"|\[(?P<ctime>[A-Z][a-z]{2} (?P<cmon>[A-Z][a-z]{2}) +(?P<cday>\d+) (?P<ctod>[\d:]{8}) "
    r"(?P<cyear>\d{4}))\]"
    r"|(?P<iso>(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[T ](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)"
    r"(?P<frac>[.,]\d+)?(?P<tz>Z|[+-]\d\d:?\d\d)?)"
    r"|[A-Z][a-z]{2} (?P<full>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) [A-Z]{2,5}"
    r"|(?P<bsd>(?P<bmon>[A-Z][a-z]{2}) +(?P<bday>\d+) (?P<btod>[\d:]{8})(?P<bfrac>\.\d+)?)"
    r"|\[(?P<rel>[A-Z][a-z]{2}\d{1,2} [\d:]{5}|\s*\+\d+\.\d+)\]"
    r")? ?(?P<tag>(?:[^\s:\[]+ )?kernel(?:\[\d+\])?(?:: | - - - ))?(?:\[ *(?P<up2>\d+\.\d+)\] ?)?")
_OTHER_PROGRAM = re.compile(r"\S+ [\w.@/-]+(?:\[\d+\])?: ")  # ``host sshd[12]: `` in a syslog
_JOB_LOG = re.compile(r"NCCL (?:INFO|WARN|ERROR)|ProcessGroupNCCL|torch\.distributed"
                      r"|Traceback \(most recent call last\)|ChildFailedError")
_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}

_BUS = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}"
_XID = re.compile(rf"\b(?P<s>S?)Xid \((?:PCI:)?(?P<pci>{_BUS}(?:\.[0-7])?)\): (?P<n>\d+)"
                  r"(?P<comma>,?)(?P<rest>.*)")
_CAUSE = re.compile(r"caused by previous Xid (\d+)")
_NONFATAL = re.compile(r"\bNon-?fatal\b", re.I)
_ACTION = re.compile(r"recovery action changed from .*? to (?:0x[0-9a-fA-F]+ )?\(([^)]*)\)")
_ANY_BUS = re.compile(rf"(?<![0-9A-Fa-f])(?P<pci>{_BUS}(?:\.[0-7])?)")
_MINOR = re.compile(r"minor number (\d+)")
_MLX5_DEV = re.compile(rf"mlx5_core (?P<bdf>{_BUS}\.[0-7])(?: (?P<net>[\w.-]+))?:"
                       r"|\b(?P<ca>mlx5_\d+)\b")
_HEALTH_SEV = re.compile(r"severity\((\d)\)")
_DUMP = re.compile(r": (?:\w+:\d+:\(pid \d+\): )?(?:assert_var\[\d+\]|assert_exit_ptr|"
                   r"assert_callra|fw_ver|raw fw_ver|time \d|hw_id|rfr \d|severity \d|"
                   r"irisc_index|synd 0x|ext_synd|health buffer)")
_LINK = re.compile(r"(?P<dev>[\w.-]+)(?:: | NIC )[Ll]ink (?:is )?(?P<st>[Dd]own|[Uu]p)\b"
                   r"|ADDRCONF\(NETDEV_CHANGE\): (?P<ready>[\w.-]+): link becomes ready"
                   r"|(?P<ca>mlx5_\d+): Port: (?P<port>\d+) Link (?P<ib>DOWN|ACTIVE)\b")
_WATCHDOG = re.compile(r"NETDEV WATCHDOG: (?P<dev>[\w.-]+)")
_AER = re.compile(rf"(?P<drv>[\w-]+) (?P<bdf>{_BUS}\.[0-7]): (?:AER: )?(?:PCIe Bus Error: "
                  r"severity=(?P<sev>[^,]+)|DPC: containment event)")
_FIRMWARE = re.compile(rf"mlx5_core {_BUS}\.[0-7]: firmware version: (\S+)")
_DRIVER = re.compile(r"NVRM: loading NVIDIA UNIX .*?Kernel Module(?: for \S+)? +(\d[\d.]+)")
_KERNEL = re.compile(r"Linux version (\S+)|(?:Not tainted|Tainted: [A-Z ]+?) +(\d+\.\d+\S*) #")
_HARDWARE = re.compile(r"Hardware name: (.+?)(?:, BIOS .*)?$")
_BOOT = re.compile(r"^-- (?:Boot (?P<id>[0-9a-f]{32})|Reboot) --|_BOOT_ID=(?P<id2>[0-9a-f]{32})")
_UTC = timezone.utc


@dataclass(frozen=True)
class _Stamp:
    """A line's time: absolute (UTC), seconds since boot, or a journal stamp without a year."""

    abs: datetime | None = None
    up: float | None = None
    bsd: tuple[int, int, int, int, int, int] | None = None  # month, day, h, m, s, us


_NO_STAMP = _Stamp()


@dataclass
class _Event:
    check: str
    part: str
    what: str
    line: str
    order: int
    stamp: _Stamp
    severity: str | None = None
    xid: int | None = None
    cause: int | None = None
    pci: str = ""


@lru_cache(maxsize=512)
def _phrases(words: tuple[str, ...], regex: str = "") -> re.Pattern[str]:
    """One pattern for an entry's ``match.text`` phrases (literal) and ``match.regex``."""
    return re.compile("|".join([re.escape(w) for w in words] + ([regex] if regex else []))
                      or r"(?!)")


class _Rules:
    """The ``match.text`` phrases of the catalogue's ``kern-*`` entries, compiled once per
    catalogue (:func:`_rules`)."""

    #: messages remembered at most by :meth:`first` (a fleet's logs repeat a few hundred)
    MEMO = 8_000

    def __init__(self, cat: Catalogue) -> None:
        self.cat = cat
        self._first: dict[tuple[str, ...], dict[str, str | None]] = {}
        self.rx: dict[str, re.Pattern[str]] = {}
        for e in cat.with_prefix("kern-"):
            text = e.match.get("text", ())
            self.rx[e.id] = _phrases(tuple([text] if isinstance(text, str) else text),
                                     str(e.match.get("regex", "")))
        self.xids: dict[int, str] = {}
        for e in cat.with_prefix("xid-"):
            n = e.match.get("xid", e.id[4:])
            if str(n).isdigit():
                self.xids[int(n)] = e.id

    def has(self, check: str, msg: str) -> bool:
        rx = self.rx.get(check)
        return bool(rx and rx.search(msg))

    def first(self, checks: tuple[str, ...], msg: str) -> str | None:
        """The first of ``checks`` whose phrases ``msg`` holds (None: none); remembered per
        message, as the same driver lines recur on every node."""
        seen = self._first.setdefault(checks, {})
        if msg in seen:
            return seen[msg]
        found = next((c for c in checks if self.has(c, msg)), None)
        if len(seen) < self.MEMO:
            seen[msg] = found
        return found


def _rules(cat: Catalogue) -> _Rules:
    """The rules of ``cat`` (built once per catalogue)."""
    return cat.derived(_Rules)


@dataclass(frozen=True)
class _Line:
    """One hot line: the whole line, its message after the stamp and tag, its stamp, its order
    among the hot lines, and whether it is the text's last line without a newline."""

    text: str
    msg: str
    stamp: _Stamp
    order: int
    last: bool = False


@dataclass
class _Scan:
    """What one pass over the hot lines found, and what it reads them with."""

    rules: _Rules
    used: frozenset[str] | None = None  # the ports the topology uses (None: unknown)
    events: list[_Event] = field(default_factory=list)
    boots: list[int] = field(default_factory=list)  # order of each boot boundary
    boot_id: str | None = None
    up_lines: set[str] = field(default_factory=set)  # netdevs seen up
    link_ups: set[str] = field(default_factory=set)  # netdevs with a "Link up" line
    health_at: dict[str, int] = field(default_factory=dict)  # NIC -> order of its health header
    devices: set[str] = field(default_factory=set)  # GPU / NIC PCI addresses the log names
    lost_gpu: tuple[str, int] | None = None  # "The NVIDIA GPU <bus>" awaiting its 3rd line
    facts: dict[str, Any] = field(default_factory=dict)
    fw: set[str] = field(default_factory=set)
    plugs: Counter[str] = field(default_factory=Counter)
    cut: str = ""
    memo: dict[str, list[_Event]] = field(default_factory=dict)  # message -> its pure events

    def event(self, check: str, part: str, what: str, ln: _Line, **more: Any) -> list[_Event]:
        """``[the event]`` of ``ln``, judged by entry ``check``."""
        return [_Event(check, part, what, ln.text, ln.order, ln.stamp, **more)]


def _gpu(pci: str) -> str:
    """``gpu 0000:19:00.0`` from a driver's ``0000:19:00`` (GPUs are function 0).

    >>> _gpu("0000:9B:00")
    'gpu 0000:9b:00.0'
    """
    pci = pci.lower()
    return f"gpu {pci if '.' in pci else pci + '.0'}"


@lru_cache(maxsize=64)
def _zone(tz: str) -> timezone:
    """The zone of a stamp's ``Z`` / ``+01:00`` / ``-0500``."""
    off = timedelta(0) if tz == "Z" else (
        (1 if tz[0] == "+" else -1) * timedelta(hours=int(tz[1:3]), minutes=int(tz[-2:])))
    return timezone(off)


def _parse_prefix(line: str) -> tuple[_Stamp, str, bool, bool]:
    """The line's stamp (``_NO_STAMP`` itself when it has none), its message, whether it is
    stamped as a kernel line, and whether it is another program's line of a syslog (not
    judged)."""
    m = _PREFIX.match(line)
    msg = line[m.end():]
    if m.end() == 0:
        return _NO_STAMP, msg, False, False
    up1, up2, iso, ctime, full, bsd, tag, dec, rel = m.group(
        "up", "up2", "iso", "ctime", "full", "bsd", "tag", "dec", "rel")
    up = float(up1 or up2) if (up1 or up2) else None
    tagged = bool(tag)
    kernelish = tagged or bool(dec or up1 or ctime or rel)
    other = False
    when: datetime | None = None
    year_less: tuple[int, int, int, int, int, int] | None = None
    if iso:
        y, mo, d, h, mi, s, frac, tz = m.group("y", "mo", "d", "h", "mi", "s", "frac", "tz")
        us = int((frac[1:] + "000000")[:6]) if frac else 0
        when = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), us,
                        tzinfo=_zone(tz or "Z")).astimezone(_UTC)
        comma = bool(frac and frac[0] == ",")
        kernelish = kernelish or comma
        other = not tagged and not comma and bool(_OTHER_PROGRAM.match(msg))
    elif ctime:
        mon, day, tod, year = m.group("cmon", "cday", "ctod", "cyear")
        h, mi, s = map(int, tod.split(":"))
        when = datetime(int(year), _MONTHS.get(mon, 1), int(day), h, mi, s, tzinfo=_UTC)
    elif full:
        when = datetime.fromisoformat(full).replace(tzinfo=_UTC)
        other = not tagged
    elif bsd:
        mon, day, tod, frac = m.group("bmon", "bday", "btod", "bfrac")
        h, mi, s = map(int, tod.split(":"))
        us = int((frac[1:] + "000000")[:6]) if frac else 0
        year_less = (_MONTHS.get(mon, 1), int(day), h, mi, s, us)
        other = not tagged
    stamp = _NO_STAMP if when is None and up is None and year_less is None else _Stamp(
        when, up, year_less)
    return stamp, msg, kernelish, other


def _kernel_stamped(line: str) -> bool:
    """True when the line carries a kernel log's stamp or tag.

    >>> _kernel_stamped("[ 8123.402117] NVRM: Xid"), _kernel_stamped("Nov 26 23:00:01 h sshd: x")
    (True, False)
    """
    if line.startswith("-- "):
        return True
    return _parse_prefix(line)[2]


def looks_like_kernel_log(text: str) -> bool:
    """True when most lines are stamped as a kernel log (``dmesg``, ``journalctl -k``, kern.log)
    and none is an NCCL / PyTorch job's (those stay ``nccl-log``).

    >>> looks_like_kernel_log("[    0.000000] Linux version 6.5.0\\n[    5.1] NVRM: loading")
    True
    >>> looks_like_kernel_log("[ 5.1] NVRM: Xid\\nn1:2:3 [0] NCCL WARN Call to ibv failed")
    False
    """
    head = text[:200_000]
    if _JOB_LOG.search(head):
        return False
    lines = head.splitlines()
    if len(lines) > 1 and not head.endswith("\n"):
        lines.pop()  # a last line without its newline may be cut
    seen = stamped = 0
    for line in lines:
        if not line.strip() or line[0] in " \t":
            continue
        seen += 1
        stamped += _kernel_stamped(line)
        if seen >= 400:
            break
    return seen > 0 and 2 * stamped > seen


def _xid_events(m: re.Match[str], ln: _Line, scan: _Scan) -> list[_Event]:
    """A Xid line judged by its entry (or the one of the Xid that caused it, a non-fatal grade,
    a harmless recovery action); an NVSwitch SXid by its Fatal / Non-fatal word."""
    rules = scan.rules
    n, pci, rest = int(m["n"]), m["pci"], m["rest"]
    part = _gpu(pci)
    scan.devices.add(part[4:])
    if m["s"]:  # NVSwitch SXid: graded by the driver's Fatal / Non-fatal word
        if " Fatal" in rest[:12] or " Non-fatal" in rest[:12]:
            check = "kern-sxid-nonfatal" if "Non-fatal" in rest[:12] else "kern-sxid-fatal"
            part = f"pcie {pci.lower()} (nvswitch)"
            return scan.event(check, part, f"SXid {n} on {part}: {rules.cat.entry(check).what}",
                              ln)
        return []
    check = rules.xids.get(n, "xid-default")
    entry = rules.cat.entry(check)
    [ev] = scan.event(check, part, f"Xid {n} on {part}: {entry.what}", ln, xid=n, pci=pci)
    if check == "xid-default":
        ev.what = f"Xid {n} on {part} is not in the catalogue: look it up"
    elif (c := _CAUSE.search(rest)) and entry.params.get("follow_cause"):
        ev.cause = int(c[1])
        ev.check = rules.xids.get(ev.cause, "xid-default")
        ev.what = (f"Xid {n} on {part} caused by Xid {ev.cause}: "
                   f"{rules.cat.entry(ev.check).what}")
        if ev.check == "xid-default":
            ev.what = f"Xid {n} on {part} caused by Xid {ev.cause}, not in the catalogue"
    elif "nonfatal_severity" in entry.params and _NONFATAL.search(rest[:120]):
        ev.severity = entry.params["nonfatal_severity"]
        ev.what = f"Xid {n} (non-fatal) on {part}: {entry.what}"
    elif (a := _ACTION.search(rest)) and "ok_actions" in entry.params:
        if a[1].strip() in entry.params["ok_actions"]:
            ev.severity = entry.params.get("ok_severity", INFO)
        ev.what = f"Xid {n} on {part}: GPU recovery action is now {a[1].strip()}"
    return [ev]


def _nvrm_events(ln: _Line, scan: _Scan) -> list[_Event]:
    """NVIDIA driver lines without a Xid: a lost GPU (its multi-line report names the GPU on
    its first line), a failed initialisation, rate-limited GSP errors, peermem errors."""
    msg, order = ln.msg, ln.order

    def gpu_part() -> str:
        if g := _ANY_BUS.search(msg):
            return _gpu(g["pci"])
        return f"gpu minor {mi[1]}" if (mi := _MINOR.search(msg)) else "node"

    if "The NVIDIA GPU " in msg and (g := _ANY_BUS.search(msg)):
        scan.lost_gpu = (_gpu(g["pci"]), order)
    if scan.rules.has("kern-nvrm-fallen-off-bus", msg):
        part = gpu_part()
        if part == "node" and scan.lost_gpu and order - scan.lost_gpu[1] <= 3:
            part = scan.lost_gpu[0]
        return scan.event("kern-nvrm-fallen-off-bus", part,
                          f"{part} has fallen off the bus (the driver's report)", ln)
    if check := scan.rules.first(_NVRM_ORDER, msg):
        part = "node" if check == "kern-peermem-invalid-context" else gpu_part()
        what = scan.rules.cat.entry(check).what
        return scan.event(check, part, what if part == "node" else f"{part}: {what}", ln)
    return []


_NVRM_ORDER = ("kern-nvrm-init-failed", "kern-nvrm-gsp-rate-limited",
               "kern-peermem-invalid-context")


_MLX5_ORDER = ("kern-mlx5-cmd-failed", "kern-mlx5-cmd-recovered", "kern-mlx5-cmd-timeout",
               "kern-mlx5-health-issue", "kern-mlx5-health", "kern-mlx5-module-error",
               "kern-mlx5-module-plug", "kern-mlx5-pcie-power", "kern-mlx5-temperature")


def _mlx5_events(ln: _Line, scan: _Scan) -> list[_Event]:
    """An mlx5 line by the first of ``_MLX5_ORDER`` whose phrases it holds; the lines of a
    health buffer dump after its header are not events."""
    msg, order, rules = ln.msg, ln.order, scan.rules
    d = _MLX5_DEV.search(msg)
    nic = (d["bdf"] or d["ca"]) if d else "mlx5"
    scan.devices.add(nic)
    if "firmware version: " in msg and (fw := _FIRMWARE.search(msg)):
        scan.fw.add(fw[1])
        return []
    if _DUMP.search(msg) and order - scan.health_at.get(nic, -99) <= 40:
        return []  # a line of the health buffer dump its header already judged
    if check := rules.first(_MLX5_ORDER, msg):
        entry = rules.cat.entry(check)
        [ev] = scan.event(check, f"nic {nic}", f"nic {nic}: {entry.what}", ln)
        if check in ("kern-mlx5-health-issue", "kern-mlx5-health"):
            scan.health_at[nic] = order
        if check == "kern-mlx5-health-issue" and (s := _HEALTH_SEV.search(msg)):
            level = int(s[1])
            ev.severity = (FAULT if level <= entry.params.get("fault_at_or_below", 3) else
                           "warn" if level <= entry.params.get("warn_at_or_below", 4) else INFO)
            ev.what = f"nic {nic}: {msg[msg.find('Health issue'):].rstrip(': ')}"
        elif check == "kern-mlx5-module-error":
            ev.what = f"nic {nic}: module error: {msg.rsplit('Cable error', 1)[-1].strip(', ')}"
        elif check == "kern-mlx5-module-plug":
            scan.plugs["unplugged" if "unplugged" in msg else "plugged"] += 1
        return [ev]
    return []


def _link_events(ln: _Line, scan: _Scan) -> list[_Event]:
    """A port's down line (a flap when it was up before), or its second "Link up" (it went down
    in between); an up line is remembered."""
    msg, rules = ln.msg, scan.rules
    m = _LINK.search(msg)
    if not m or (m["dev"] or "").startswith("ata"):
        return []
    dev = m["ready"] or m["dev"] or f"{m['ca']}/{m['port']}"
    part = f"port {dev}" if m["ca"] else f"nic {dev}"
    entry = rules.cat.entry("kern-link-down")
    if m["ready"] or (m["st"] or m["ib"]).lower() in ("up", "active"):
        again = bool(m["st"]) and dev in scan.link_ups
        scan.up_lines.add(dev)
        scan.link_ups.update([dev] if m["st"] else [])
        if not again:
            return []
        what = f"{part}: link came up again (it went down in between: a flap)"
    elif not rules.has("kern-link-down", msg.replace("DOWN", "down")):
        return []
    else:
        scan.link_ups.discard(dev)  # the next "Link up" follows this down: no second flap
        what = f"{part}: {entry.what}"
    d = _MLX5_DEV.search(msg)
    names = {dev, m["ca"]} | ({d["bdf"], d["ca"]} if d else set())
    [ev] = scan.event("kern-link-down", part, what, ln)
    if scan.used is not None and not names & scan.used:
        ev.severity = entry.params.get("unused_severity", INFO)
        ev.what = f"{part}: link down on a port the topology does not use"
    elif dev not in scan.up_lines:
        ev.severity = entry.params.get("first_down_severity", INFO)
        ev.what = f"{part}: link down at probe (it was not up before)"
    return [ev]


def _pcie_events(ln: _Line, scan: _Scan) -> list[_Event]:
    """A ``PCIe Bus Error: severity=...`` line (one per AER error, printed by the device that
    had it) or a DPC containment event; fatal on a device that is no GPU or NIC is graded lower."""
    msg, rules = ln.msg, scan.rules
    m = _AER.search(msg)
    if not m:
        return []
    sev, bdf = m["sev"] or "Uncorrected (Fatal)", m["bdf"].lower()
    for check in ("kern-pcie-aer-fatal", "kern-pcie-aer-nonfatal", "kern-pcie-aer-corrected"):
        if rules.has(check, msg) or rules.has(check, "severity=" + sev):
            part = f"pcie {bdf} ({m['drv']})"
            [ev] = scan.event(check, part, f"{part}: {rules.cat.entry(check).what}", ln)
            gpu_or_nic = m["drv"].startswith(("nvidia", "mlx5")) or bdf in scan.devices
            if check == "kern-pcie-aer-fatal" and not gpu_or_nic:
                ev.severity = rules.cat.param(check, "other_severity", "warn")
                ev.what = f"{part}: uncorrectable fatal PCIe error (not a GPU or NIC)"
            return [ev]
    return []


#: a user process's "traps: ... general protection fault" is a segfault, not a kernel oops
_HOST_ORDER = ("kern-edac-uncorrected", "kern-edac-corrected", "kern-mce", "kern-cpu-lockup",
               "kern-hung-task", "kern-oom", "kern-segfault", "kern-oops")
_HOST_NO_EDAC = tuple(c for c in _HOST_ORDER if not c.startswith("kern-edac"))


def _host_events(ln: _Line, scan: _Scan) -> list[_Event]:
    """Host memory, CPU and process lines (the node's, not a GPU's or NIC's); the EDAC entries
    judge only lines that say ``EDAC``."""
    if check := scan.rules.first(_HOST_ORDER if "EDAC" in ln.msg else _HOST_NO_EDAC, ln.msg):
        return scan.event(check, "node", scan.rules.cat.entry(check).what, ln)
    return []


def _facts_line(msg: str, scan: _Scan, order: int) -> None:
    """Boot boundaries and ids, the kernel, hardware and driver versions."""
    if (msg.startswith("-- ") or "_BOOT_ID=" in msg) and (b := _BOOT.search(msg)):
        boot_id = b["id"] or b["id2"]
        if not b["id2"] or (scan.boot_id and boot_id != scan.boot_id):
            scan.boots.append(order)
        scan.boot_id = boot_id or scan.boot_id
    elif "Linux version" in msg and (k := _KERNEL.search(msg)):
        scan.facts.setdefault("kernel", k[1])
        scan.boots.append(order)
    elif ("Not tainted" in msg or "Tainted: " in msg) and (k := _KERNEL.search(msg)) and k[2]:
        scan.facts.setdefault("kernel", k[2])
    elif "Hardware name: " in msg and (h := _HARDWARE.search(msg)):
        scan.facts.setdefault("hardware", h[1].strip())
    elif "NVRM: loading" in msg and (d := _DRIVER.search(msg)):
        scan.facts.setdefault("nvidia_driver", d[1])


#: checks whose event depends on the message alone (a repeated message is judged once)
_PURE = re.compile(r"xid-|kern-(?:sxid|mlx5-cmd|mlx5-pcie-power|mlx5-temperature|"
                   r"mlx5-module-error|peermem|nvrm-gsp|nvrm-init|nic-tx|edac|mce|cpu|hung|oops|"
                   r"oom|segfault)")


def _classify(ln: _Line, scan: _Scan) -> list[_Event]:
    """The events of one hot line; a message seen before with a pure result is not re-read."""
    if (seen := scan.memo.get(ln.msg)) is not None and not ln.last:
        return [_Event(e.check, e.part, e.what, ln.text, ln.order, ln.stamp, e.severity, e.xid,
                       e.cause, e.pci) for e in seen]
    events = _judge_line(ln, scan)
    if events and all(_PURE.match(e.check) for e in events):
        scan.memo[ln.msg] = events
    return events


def _judge_line(ln: _Line, scan: _Scan) -> list[_Event]:
    """The events of one hot line (none for a context or facts line)."""
    msg = ln.msg
    if "Xid" in msg and (m := _XID.search(msg)):
        if not (ln.last and not m["comma"]):
            return _xid_events(m, ln, scan)
    if ln.last and "Xid" in msg:
        scan.cut = f"the last line is cut inside a Xid line: {ln.text.strip()[:120]!r}"
        return []
    if ("NVRM" in msg or "nvidia" in msg) and (ev := _nvrm_events(ln, scan)):
        return ev
    if "mlx5" in msg and (ev := _mlx5_events(ln, scan)):
        return ev
    if ("ink" in msg or "becomes ready" in msg) and (ev := _link_events(ln, scan)):
        return ev
    if "PCIe Bus Error" in msg or "DPC: " in msg:
        return _pcie_events(ln, scan)
    if "NETDEV WATCHDOG: " in msg and (w := _WATCHDOG.search(msg)) \
            and scan.rules.has("kern-nic-tx-timeout", msg):
        what = f"nic {w['dev']}: {scan.rules.cat.entry('kern-nic-tx-timeout').what}"
        return scan.event("kern-nic-tx-timeout", f"nic {w['dev']}", what, ln)
    if ev := _host_events(ln, scan):
        return ev
    _facts_line(msg, scan, ln.order)
    return []


def _lines(text: str):
    """(start, line, is the last line without a newline) for every line holding a hot word."""
    hits = [m.start() for m in _HOT_UPPER.finditer(text)]
    for rx in _HOT_WORDS:
        hits += [m.start() + 1 if m[0][0] == "\n" else m.start() for m in rx.finditer(text)]
    starts = {text.rfind("\n", 0, p) + 1 for p in hits}
    if text.startswith("-- "):
        starts.add(0)
    size = len(text)
    for start in sorted(starts):
        end = text.find("\n", start)
        yield start, text[start:size if end < 0 else end], end < 0


def _stamp_before(text: str, start: int) -> _Stamp:
    """The stamp of the nearest stamped line before ``start`` (a continuation line's)."""
    for _ in range(20):
        if start <= 0:
            break
        begin = text.rfind("\n", 0, start - 1) + 1
        line = text[begin:start - 1]
        st = _parse_prefix(line)[0] if line[:1] not in (" ", "\t", "") else _Stamp()
        if st != _Stamp():
            return st
        start = begin
    return _Stamp()


def _scan(text: str, rules: _Rules, used: frozenset[str] | None) -> _Scan:
    """One pass over the hot lines (another program's syslog lines skipped)."""
    scan = _Scan(rules, used)
    for order, (start, line, last) in enumerate(_lines(text)):
        stamp, msg, kernelish, other = _parse_prefix(line.lstrip(" \t"))
        if stamp is _NO_STAMP and not kernelish:  # a continuation line: its record's stamp
            stamp = _stamp_before(text, start)
        if not other:
            scan.events += _classify(_Line(line, msg, stamp, order, last), scan)
    return scan


def _last_stamp(text: str) -> tuple[_Stamp | None, str]:
    """The stamp of the last stamped line, and a reason when the last line is cut."""
    tail = text.rstrip("\n").rsplit("\n", 40)
    tail[0] = tail[0][tail[0].rfind("\n") + 1:]
    cut = ""
    last = tail[-1]
    if not text.endswith("\n") and last.strip() and last[:1] not in (" ", "\t"):
        st, msg, kernelish, _ = _parse_prefix(last)
        unstamped = not kernelish and st == _Stamp() and _has_kernel_lines(text)
        if (unstamped or not msg.strip()) and not last.startswith("-- "):
            cut = f"the last line is cut: {last.strip()[:120]!r}"
    for line in reversed(tail):
        if line[:1] in (" ", "\t", "") or line.startswith("-- "):
            continue
        st = _parse_prefix(line)[0]
        if st != _Stamp():
            return st, cut
    return None, cut


def _with_year(b: tuple[int, int, int, int, int, int], year: int) -> datetime:
    mo, d, h, mi, s, us = b
    try:
        return datetime(year, mo, d, h, mi, s, us, tzinfo=_UTC)
    except ValueError:  # 29 Feb of a year without it
        return datetime(year, mo, 28, h, mi, s, us, tzinfo=_UTC)


def _resolve_years(stamps: list[_Stamp], since: datetime | None) -> list[_Stamp]:
    """Give year-less journal/syslog stamps a year, counted back from the last one: the last is
    at or after ``since`` (the previous check), else not in the future."""
    bsd = [i for i, s in enumerate(stamps) if s.bsd]
    if not bsd:
        return stamps
    out = list(stamps)
    last = stamps[bsd[-1]].bsd
    if since is not None:
        year = since.year
        if _with_year(last, year) < since - timedelta(days=183):
            year += 1  # the previous check was in December, the log ends in January
    else:
        now = datetime.now(_UTC)
        year = now.year - (_with_year(last, now.year) > now + timedelta(days=2))
    prev = last
    for i in reversed(bsd):
        b = stamps[i].bsd
        if b[:2] > prev[:2]:  # going back in time past New Year
            year -= 1
        prev = b
        out[i] = _Stamp(abs=_with_year(b, year), up=stamps[i].up)
    return out


def _since(ctx: Any) -> datetime | None:
    since = getattr(ctx, "since", None)
    if since is None:
        return None
    return since.replace(tzinfo=_UTC) if since.tzinfo is None else since.astimezone(_UTC)


def _fmt(stamp: _Stamp | None) -> str | float | None:
    if stamp is None:
        return None
    if stamp.abs is not None:
        return stamp.abs.isoformat()
    return stamp.up


def _window(scan: _Scan, last: _Stamp | None, ctx: Any) -> tuple[list[_Event], dict[str, Any]]:
    """The events after the last boot the log shows and after ``since``, and the scope facts."""
    since = _since(ctx)
    stamps = _resolve_years([e.stamp for e in scan.events] + [last or _Stamp()], since)
    for ev, st in zip(scan.events, stamps, strict=False):
        ev.stamp = st
    last = stamps[-1] if last else None
    up_since = getattr(ctx, "since_uptime_s", None)
    ctx_boot = getattr(ctx, "boot_id", None)
    if up_since is not None and (
            (ctx_boot and scan.boot_id and ctx_boot != scan.boot_id)
            or (last and last.up is not None and last.abs is None and last.up < up_since)):
        up_since = None  # the uptime belongs to another boot
    boot = scan.boots[-1] if scan.boots else -1
    kept, before_boot, before_since = [], 0, 0
    used_abs = used_up = False
    for ev in scan.events:
        if ev.order < boot:
            before_boot += 1
        elif since is not None and ev.stamp.abs is not None:
            used_abs = True
            before_since += ev.stamp.abs < since
            kept += [ev] if ev.stamp.abs >= since else []
        elif up_since is not None and ev.stamp.up is not None:
            used_up = True
            before_since += ev.stamp.up < up_since
            kept += [ev] if ev.stamp.up >= up_since else []
        else:
            kept.append(ev)
    usable_abs = since is not None and (used_abs or (last is not None and last.abs is not None))
    usable_up = up_since is not None and (used_up or (last is not None and last.up is not None))
    scope = ("since " + since.isoformat() if usable_abs else
             f"since {up_since:g} s after boot" if usable_up else "since boot")
    facts: dict[str, Any] = {"scope": scope, "last_stamp": _fmt(last)}
    if before_since:
        facts["events_before_since"] = before_since
    if before_boot:
        facts["events_before_last_boot"] = before_boot
    return kept, facts


def _findings(kept: list[_Event], cat: Catalogue) -> list[Finding]:
    """One finding per (check, part, what, severity), counted; a fallen-off report on a GPU that
    also has a Xid 79 is that Xid's; corrected-error floods graded by ``flood_count``."""
    lost = {e.part for e in kept if e.xid == 79}
    groups: dict[tuple[str, str, str, str | None], list[_Event]] = {}
    for ev in kept:
        if ev.check == "kern-nvrm-fallen-off-bus" and ev.part in lost:
            continue
        groups.setdefault((ev.check, ev.part, ev.what, ev.severity), []).append(ev)
    out = []
    for (check, part, what, sev), evs in groups.items():
        flood = cat.param(check, "flood_count")
        if flood and len(evs) >= flood:
            sev = cat.param(check, "flood_severity", "warn")
        text = what if len(evs) == 1 else f"{what} (seen {len(evs)} times)"
        out.append(cat.finding(check, part=part, what=text, line=evs[0].line, severity=sev))
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(out, key=lambda f: -rank[f.severity])


def _event_facts(kept: list[_Event], scan: _Scan, text: str) -> dict[str, Any]:
    xids = Counter(e.xid for e in kept if e.xid is not None)
    gpus: dict[str, None] = {}
    for e in kept:
        if e.xid is not None:
            gpus.setdefault(e.pci.lower(), None)
    facts: dict[str, Any] = {
        "lines": len(text.splitlines()), "events": len(kept), "xids": sorted(xids),
        "xid_counts": {str(n): c for n, c in sorted(xids.items())},
        "xid_count": sum(xids.values()), "gpus_pci": list(gpus),
        "checks": dict(Counter(e.check for e in kept)),
    }
    if len(gpus) == 1:
        facts["gpu_pci"] = next(iter(gpus))
    if causes := sorted({e.cause for e in kept if e.cause is not None}):
        facts["caused_by_xids"] = causes
    if 63 in xids:
        facts["row_remap_pending"] = True
    named = {"kern-peermem-invalid-context": "peermem_invalid_context_lines",
             "kern-mlx5-pcie-power": "mlx5_insufficient_power_warnings"}
    for check, key in named.items():
        if n := facts["checks"].get(check):
            facts[key] = n
    for what, n in scan.plugs.items():
        facts[f"mlx5_cable_{what}"] = n
    if scan.fw:
        facts["mlx5_fw"] = sorted(scan.fw)
    return {**facts, **scan.facts}


def judge_kernel_log(text: str, catalogue: Catalogue, context: Any) -> NodeReport:
    """Judge a kernel log: the events since the last check, each by its catalogue entry.

    Parameters
    ----------
    text
        ``dmesg`` (raw, ``-T``, ``--time-format iso``, ``-x``), ``journalctl -k`` (short,
        short-iso, short-precise, short-monotonic, short-full) or syslog / kern.log text.
    catalogue
        The node catalogue (``xid-*`` and ``kern-*`` entries).
    context
        A :class:`~fabriccheck.probes.node.judge.NodeContext`: ``since`` / ``since_uptime_s``
        drop older events, ``boot_id`` says which boot ``since_uptime_s`` is for,
        ``used_ports`` grades a down port outside the topology as info.

    Returns
    -------
    NodeReport
        ``tool`` ``kernel-log``; incomplete when the text has no kernel line or its last line is
        cut. Facts: ``scope``, ``lines``, ``events``, ``xids``, ``xid_counts``, ``last_stamp``
        (the next check's ``since``), ``boot_id`` when the journal shows it, and more.

    Examples
    --------
    >>> from fabriccheck.probes.node.catalogue import builtin_catalogue
    >>> r = judge_kernel_log("[ 9.5] NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen "
    ...                      "off the bus.\\n", builtin_catalogue(), None)
    >>> r.node_verdict, r.findings[0].part, r.facts["xids"]
    ('fault', 'gpu 0000:18:00.0', [79])
    """
    text = strip_source_line(text)
    rules = _rules(catalogue)
    used = getattr(context, "used_ports", None)
    scan = _scan(text, rules, used)
    last, cut = _last_stamp(text)
    kept, scope = _window(scan, last, context)
    facts = {**_event_facts(kept, scan, text), **scope}
    if scan.boot_id:
        facts["boot_id"] = scan.boot_id
    findings = tuple(_findings(kept, catalogue))
    reason = scan.cut or cut
    if not findings and not _has_kernel_lines(text):
        reason = "no kernel log lines" + (f": {text.strip()[:120]!r}" if text.strip() else "")
    return NodeReport("kernel-log", findings, facts, complete=not reason, reason=reason)


def _has_kernel_lines(text: str) -> bool:
    """True when any of the first lines is a kernel line or the journal's ``-- No entries --``."""
    for line in text[:50_000].splitlines()[:200]:
        if line.strip() and (line.startswith("-- ") or _kernel_stamped(line)):
            return True
    return False
