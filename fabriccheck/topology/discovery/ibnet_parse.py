"""Reading ``ibnetdiscover`` text (plain topology or ``-p`` ports format) into devices and cables.

Tolerant of what real captures do to the text: CRLF line ends, lost tabs (``Switch41
"S-..."#``), ibdiagnet2 port labels (``[1](1/1/1)``, ``[1](1)(guid)``), terminal banners and
prompts around the dump, stderr lines inside it. Strict where a wrong fabric would follow:
a dump cut mid-record, a switch referenced but never described (truncated output) and one GUID
with two different descriptions are refused, each naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabriccheck.errors import ParseError

#: Gb/s per lane by InfiniBand speed name (signalling rate, as vendors quote port speeds)
LANE_GBPS = {
    "SDR": 2.5, "DDR": 5.0, "QDR": 10.0, "FDR10": 10.0, "FDR": 14.0, "EDR": 25.0, "HDR": 50.0,
    "NDR": 100.0, "XDR": 200.0,
}
_NODE = re.compile(r'^\s*(Switch|Ca|Rt)\s*(\d+)\s*"([^"]+)"\s*(?:#\s*"([^"]*)")?')
_LABELS = r"((?:\([^)]*\))*)"
_PORT = re.compile(
    r'^\s*\[(\d+)\]' + _LABELS + r'\s*"([^"]+)"\[(\d+)\]' + _LABELS + r"\s*(?:#\s*(.*))?$"
)
_SPEED = re.compile(r"\b(\d+)x\s*([A-Z0-9]+)\s*$")
_QUOTED = re.compile(r'"([^"]*)"')
#: ``SW 2 17 0x... 4x EDR - CA 5 1 0x... ( 'sw desc' - 'ca desc' )``: quoted descriptions
#: hold no quote, so matching stays linear in the line
_PPORT = re.compile(
    r"^(CA|SW)\s+\d+\s+(\d+)\s+(0x[0-9a-fA-F]+)\s+(\d+)x\s*(\S+)\s+-\s+(CA|SW)\s+\d+\s+(\d+)\s+"
    r"(0x[0-9a-fA-F]+)\s+\(\s*'([^']*)'\s+-\s+'([^']*)'\s*\)\s*$"
)
_PPORT_UNLINKED = re.compile(  # the description is stripped in code (no backtracking)
    r"^(CA|SW)\s+\d+\s+\d+\s+(0x[0-9a-fA-F]+)\s+\d+x\s*\S+\s+(?:'([^']*)'\s*$|(\S.*)$)")


class IbParseError(ParseError):
    """ibnetdiscover text that cannot be imported; ``line`` is where (0: the whole file)."""

    def __init__(self, detail: str, *, line: int = 0, excerpt: str = "",
                 hint: str | None = None) -> None:
        super().__init__(f"line {line}: {detail}" if line else detail, tool="ibnetdiscover",
                         excerpt=excerpt, hint=hint)
        self.detail = detail
        self.line = line


@dataclass
class IbDevice:
    """A switch or CA as ibnetdiscover names it (``id`` is its quoted id or GUID)."""

    id: str
    kind: str  # switch | ca
    desc: str
    sysimgguid: str = ""
    line: int = 0  # where its block starts (0: only known from a peer's port line)


@dataclass
class IbCable:
    """One cable: device ids and port numbers of both ends, its speed and where it was read."""

    a: str
    a_port: int
    b: str
    b_port: int
    gbps: float | None
    line: int = 0


@dataclass
class IbFabric:
    """What an ibnetdiscover file says: devices by id and cables (each listed once)."""

    devices: dict[str, IbDevice] = field(default_factory=dict)
    cables: list[IbCable] = field(default_factory=list)
    format: str = "topology"
    notes: list[str] = field(default_factory=list)  # what the reader tolerated, for warnings
    _index: dict[tuple, int] = field(default_factory=dict, repr=False)

    def add_cable(self, cable: IbCable, seen: set | None = None) -> None:
        """Add a cable once (a dump lists it from both ends); when the ends disagree on the
        speed keep the lower (the link runs at what the slower side reports)."""
        key = tuple(sorted(((cable.a, cable.a_port), (cable.b, cable.b_port))))
        i = self._index.get(key)
        if i is None:
            self._index[key] = len(self.cables)
            self.cables.append(cable)
            return
        prev = self.cables[i]
        if cable.gbps is not None and prev.gbps != cable.gbps:
            if prev.gbps is not None:
                self.notes.append(f"line {cable.line}: the two ends of a cable report "
                                  f"{prev.gbps:g} and {cable.gbps:g} Gb/s; kept the lower")
            if prev.gbps is None or cable.gbps < prev.gbps:
                prev.gbps = cable.gbps


def link_gbps(width: str, speed: str) -> float | None:
    """Cable speed from ``4x`` + ``NDR`` (None when unknown, e.g. ``???``).

    >>> link_gbps("4", "NDR"), link_gbps("4", "QDR"), link_gbps("1", "SDR"), link_gbps("4", "?")
    (400.0, 40.0, 2.5, None)
    """
    lane = LANE_GBPS.get(speed.upper())
    return None if lane is None else int(width) * lane


def parse_ibnetdiscover(text: str) -> IbFabric:
    """Parse ``ibnetdiscover`` output, plain or ``-p`` (ports) format.

    Raises
    ------
    ParseError
        The text holds no device, is cut mid-record, names a switch it never describes, or
        gives one GUID two descriptions (the message names the line).
    """
    lines = [ln.rstrip("\r") for ln in text.splitlines()]
    if any(_PPORT.match(ln) or _PPORT_UNLINKED.match(ln) for ln in lines[:50]):
        fabric = _parse_ports(lines)
    else:
        _check_cut(text, lines)
        fabric = _parse_topology(lines)
    if not fabric.devices:
        raise IbParseError(
            "no Switch or Ca records found: not ibnetdiscover output", excerpt=text[:200],
            hint="give the output of 'ibnetdiscover' or 'ibnetdiscover -p'",
        )
    return fabric


def _check_cut(text: str, lines: list[str]) -> None:
    """A dump whose last record line has no line end (and no speed) was cut while written."""
    if not lines or text.endswith(("\n", "\r")):
        return
    last = lines[-1]
    record = _NODE.match(last) or last.lstrip().startswith("[")
    if record and not (_PORT.match(last) and _SPEED.search(last)):
        raise IbParseError(
            f"output cut mid-record ({last.strip()[:60]!r})", line=len(lines), excerpt=last,
            hint="the file is truncated: capture the whole ibnetdiscover output again",
        )


@dataclass
class _Ref:
    """A device as a peer's port line names it (first mention; ``other``: a second mention
    with a different description)."""

    kind: str
    desc: str
    line: int
    other: _Ref | None = None


def _parse_topology(lines: list[str]) -> IbFabric:
    fabric = IbFabric(format="topology")
    refs: dict[str, _Ref] = {}
    current: IbDevice | None = None
    sysimg = ""
    for lineno, line in enumerate(lines, 1):
        if line.startswith("sysimgguid="):
            sysimg = line.split("=", 1)[1].strip().removeprefix("0x")
            continue
        m = _NODE.match(line)
        if m:
            kind = "switch" if m.group(1) in ("Switch", "Rt") else "ca"
            desc = (m.group(4) or m.group(3)).strip()
            current = IbDevice(m.group(3), kind, desc, sysimg, lineno)
            _add_device(fabric, current)
            sysimg = ""
            continue
        m = _PORT.match(line)
        if m and current is not None:
            comment = m.group(6) or ""
            speed = _SPEED.search(comment)
            gbps = link_gbps(speed.group(1), speed.group(2)) if speed else None
            peer = m.group(3)
            quoted = _QUOTED.findall(comment)
            ref = _Ref(_kind_of(peer), quoted[-1].strip() if quoted else "", lineno)
            first = refs.setdefault(peer, ref)
            if first.desc and ref.desc and first.desc != ref.desc and first.other is None:
                first.other = ref
            fabric.add_cable(IbCable(current.id, int(m.group(1)), peer, int(m.group(4)), gbps,
                                     lineno))
    _resolve_refs(fabric, refs)
    return fabric


def _kind_of(device_id: str) -> str:
    return "switch" if device_id.startswith("S-") else "ca" if device_id.startswith("H-") else "?"


def _add_device(fabric: IbFabric, dev: IbDevice) -> None:
    prev = fabric.devices.get(dev.id)
    if prev is not None and prev.desc != dev.desc:
        raise IbParseError(
            f"GUID {dev.id} is used twice: {prev.desc!r} (line {prev.line}) "
            f"and {dev.desc!r} (line {dev.line})", line=dev.line, excerpt=dev.desc,
            hint="two devices cannot share a GUID: the dump is edited or redacted; "
                 "use the unedited ibnetdiscover output",
        )
    fabric.devices.setdefault(dev.id, dev)


def _resolve_refs(fabric: IbFabric, refs: dict[str, _Ref]) -> None:
    """Devices only named by a peer's port line: a switch-blocks-only dump names its CAs
    there (taken, with a note); a missing switch, or a CA missing while others are
    described, means the dump is cut."""
    has_cas = any(d.kind == "ca" for d in fabric.devices.values())
    taken = 0
    for dev_id, ref in refs.items():
        if dev_id in fabric.devices:
            continue
        if ref.kind == "ca" and not has_cas:
            if ref.other is not None:
                raise IbParseError(
                    f"GUID {dev_id} is used twice: {ref.desc!r} (line {ref.line}) and "
                    f"{ref.other.desc!r} (line {ref.other.line})", line=ref.other.line,
                    excerpt=dev_id, hint="two devices cannot share a GUID: the dump is edited "
                    "or redacted; use the unedited ibnetdiscover output")
            fabric.devices[dev_id] = IbDevice(dev_id, "ca", ref.desc or dev_id)
            taken += 1
            continue
        what = {"switch": "switch", "ca": "CA"}.get(ref.kind, "device")
        raise IbParseError(
            f"{what} {dev_id} is cabled here but has no record of its own "
            "(output truncated?)", line=ref.line, excerpt=dev_id,
            hint="capture the whole ibnetdiscover output (or use --largest-component "
                 "on a complete one)",
        )
    if taken:
        fabric.notes.append(f"no Ca records: {taken} CA(s) taken from the switches' port lines")


def _parse_ports(lines: list[str]) -> IbFabric:
    fabric = IbFabric(format="ports")
    for lineno, line in enumerate(lines, 1):
        m = _PPORT.match(line)
        if m:
            ends = ((m.group(1), m.group(3), m.group(9)), (m.group(6), m.group(8), m.group(10)))
            for kind, guid, desc in ends:
                fabric.devices.setdefault(
                    guid, IbDevice(guid, "switch" if kind == "SW" else "ca", desc.strip(),
                                   line=lineno)
                )
            gbps = link_gbps(m.group(4), m.group(5))
            fabric.add_cable(IbCable(m.group(3), int(m.group(2)), m.group(8), int(m.group(7)),
                                     gbps, lineno))
            continue
        m = _PPORT_UNLINKED.match(line)
        if m:
            kind = "switch" if m.group(1) == "SW" else "ca"
            desc = (m.group(3) if m.group(3) is not None else m.group(4)).strip()
            fabric.devices.setdefault(m.group(2), IbDevice(m.group(2), kind, desc, line=lineno))
    if fabric.devices and not fabric.cables:
        raise IbParseError(
            f"ports format with {len(fabric.devices)} device(s) and no cabled port",
            hint="run ibnetdiscover on a host cabled to the fabric (are the ports up?)")
    return fabric


def clean_switch_name(name: str) -> str:
    """A usable name: ``MF0;A09-P1-IBLEAF-04-04:MQM9701/U1`` -> ``A09-P1-IBLEAF-04-04``."""
    name = name.strip()
    if name.startswith("MF0;"):
        name = name[4:].split(":", 1)[0]
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "switch"
