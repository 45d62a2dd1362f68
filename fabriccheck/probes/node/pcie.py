"""PCIe link width and speed of GPUs and NICs judged (``lspci``, ``lspci -vv``/``-vvv``).

A GPU or NIC (catalogue ``pcie-gpu-width`` / ``pcie-nic-width`` ``match``) whose ``LnkSta``
width is below its ``LnkCap`` width lost lanes: a fault. A GPU below its top speed with all
lanes is idle power saving (info); a NIC below its top speed is listed (warn). Bridges, PCIe
switches, NVSwitches, storage and management devices are recorded only: their ``(downgraded)``
compares a port with itself, not with the device behind it. Plain ``lspci`` gives facts only.
Older ``lspci`` prints no ``(ok)``/``(downgraded)``: the numbers are compared instead.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.probes.node.findings import Finding, NodeReport

GPU, NIC, OTHER = "gpu", "nic", "other"

_DEV = re.compile(r"^(?P<addr>(?:[0-9a-fA-F]{4,}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
                  r"(?P<cls>\w[^:]*?):\s+(?P<desc>.*?)\s*$")
_SPEED = r"(?P<{0}>\d+(?:\.\d+)?\s*(?:GT|Gb)/s|unknown)"
_LNKCAP = re.compile(r"\bLnkCap:\s*(?:Port #\d+,\s*)?Speed\s+" + _SPEED.format("speed")
                     + r"[^,]*,\s*Width\s+x(?P<width>\d+)", re.I)
_LNKSTA = re.compile(r"\bLnkSta:\s*Speed\s+" + _SPEED.format("speed")
                     + r"\s*(?:\((?P<snote>[\w ]+)\))?,\s*Width\s+x(?P<width>\d+)"
                     r"\s*(?:\((?P<wnote>[\w ]+)\))?", re.I)


@dataclass(frozen=True)
class Link:
    """A device's link capability and status (None where lspci did not say)."""

    cap_speed_gts: float | None = None
    cap_width: int | None = None
    sta_speed_gts: float | None = None
    sta_width: int | None = None
    speed_note: str = ""
    width_note: str = ""

    @property
    def width_low(self) -> bool:
        """Fewer lanes than the capability (or ``(downgraded)`` when a number is missing)."""
        if self.sta_width is not None and self.cap_width is not None:
            return self.sta_width < self.cap_width
        return self.width_note == "downgraded"

    @property
    def speed_low(self) -> bool:
        """Slower than the capability (an unknown speed on a known capability counts)."""
        if self.sta_speed_gts is not None and self.cap_speed_gts is not None:
            return self.sta_speed_gts < self.cap_speed_gts
        if self.cap_speed_gts is not None and self.sta_speed_gts is None \
                and self.sta_width is not None:
            return True
        return self.speed_note == "downgraded"

    def shown(self) -> str:
        """``x16 32 GT/s (of x16 32 GT/s)``."""
        return (f"x{_q(self.sta_width)} {_q(self.sta_speed_gts)} GT/s "
                f"(capable of x{_q(self.cap_width)} {_q(self.cap_speed_gts)} GT/s)")


@dataclass
class Device:
    """One ``lspci`` device: address, class, description, its link and detail lines."""

    address: str
    cls: str
    desc: str
    link: Link | None = None
    sta_line: str = ""
    detailed: bool = False
    denied: bool = False
    cap_seen: bool = False
    notes: list[str] = field(default_factory=list)

    def part(self) -> str:
        """``pcie 19:00.0 (NVIDIA Corporation Device 2330)``."""
        if not self.address:
            return "pcie (device not named in the excerpt)"
        desc = re.sub(r"\s*\((?:rev|prog-if) [^)]*\)|\s*\[[0-9a-fA-F]{4}:[0-9a-fA-F]{4}\]", "",
                      self.desc).strip()
        return f"pcie {self.address} ({desc[:90]})"


def _q(x: float | int | None) -> str:
    return "?" if x is None else f"{x:g}"


def speed_gts(text: str) -> float | None:
    """``32GT/s``, ``32.0 GT/s PCIe`` -> 32.0; ``unknown`` -> None.

    >>> speed_gts("16.0 GT/s PCIe"), speed_gts("2.5GT/s"), speed_gts("Unknown")
    (16.0, 2.5, None)
    """
    m = re.search(r"(\d+(?:\.\d+)?)\s*(?:GT|Gb)/s", text)
    return float(m[1]) if m else None


def width(text: str) -> int | None:
    """``x16`` or ``16`` -> 16.

    >>> width("x8"), width("16\\n"), width("")
    (8, 16, None)
    """
    m = re.search(r"x?(\d+)", text)
    return int(m[1]) if m else None


def parse_lspci(text: str) -> list[Device]:
    """The devices of ``lspci`` / ``lspci -vv`` output; an excerpt of indented ``LnkCap``/
    ``LnkSta`` lines without a header is one unnamed device.

    >>> d = parse_lspci("19:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\\n"
    ...                 "\\t\\tLnkCap:\\tPort #0, Speed 32GT/s, Width x16, ASPM L1\\n"
    ...                 "\\t\\tLnkSta:\\tSpeed 32GT/s (ok), Width x8 (downgraded)\\n")
    >>> d[0].cls, d[0].link.width_low, d[0].link.speed_low
    ('3D controller', True, False)
    """
    devices: list[Device] = []
    cap: dict[str, Any] = {}
    for line in text.splitlines():
        if m := _DEV.match(line):
            devices.append(Device(m["addr"], re.sub(r"\s*\[[0-9a-fA-F]{4}\]$", "", m["cls"]),
                                  m["desc"]))
            cap = {}
            continue
        if not line.strip():
            continue
        if not devices:
            devices.append(Device("", "", ""))
        d = devices[-1]
        d.detailed = True
        if "<access denied>" in line:
            d.denied = True
        if m := _LNKCAP.search(line):
            cap = {"speed": speed_gts(m["speed"]), "width": int(m["width"])}
            d.cap_seen = True
        elif m := _LNKSTA.search(line):
            d.link = Link(cap.get("speed"), cap.get("width"), speed_gts(m["speed"]),
                          int(m["width"]), (m["snote"] or "").strip().lower(),
                          (m["wnote"] or "").strip().lower())
            d.sta_line = line.strip()
    return devices


def classify(d: Device, catalogue: Catalogue) -> str:
    """``gpu``, ``nic`` or ``other`` by the ``match`` of ``pcie-gpu-width`` and
    ``pcie-nic-width`` (remembered per catalogue by class and description)."""
    memo = catalogue.derived(_classified)
    kind = memo.get((d.cls, d.desc))
    if kind is None:
        kind = _classify(d, catalogue)
        if len(memo) < 10_000:  # a few dozen models in practice
            memo[d.cls, d.desc] = kind
    return kind


def _classified(_: Catalogue) -> dict[tuple[str, str], str]:
    """A catalogue's :func:`classify` answers by (class, description), filled as asked."""
    return {}


def _classify(d: Device, catalogue: Catalogue) -> str:
    g = catalogue.entry("pcie-gpu-width").match
    if d.cls in g.get("classes", []) and any(d.desc.startswith(v) for v in g.get("vendors", [])):
        return GPU
    n = catalogue.entry("pcie-nic-width").match
    if d.cls in n.get("classes", []) and not any(x in d.desc for x in n.get("exclude", [])) \
            and (any(d.desc.startswith(v) for v in n.get("vendors", []))
                 or any(x in d.desc for x in n.get("names", []))):
        return NIC
    return OTHER


def link_findings(kind: str, part: str, link: Link, catalogue: Catalogue, line: str = ""
                  ) -> list[Finding]:
    """The finding of one link, by device kind (the module doc's rules).

    >>> from fabriccheck.probes.node.catalogue import builtin_catalogue
    >>> idle = Link(16.0, 16, 2.5, 16, "downgraded", "ok")
    >>> [f.severity for f in link_findings("gpu", "pcie 01:00.0", idle, builtin_catalogue())]
    ['info']
    """
    if kind in (GPU, NIC) and link.width_low:
        check = f"pcie-{kind}-width"
        what = f"{kind.upper()} link at {link.shown()}: lanes lost"
    elif kind == GPU and link.speed_low:
        check, what = "pcie-gpu-speed-idle", f"GPU link at {link.shown()} with all lanes (idle)"
    elif kind == NIC and link.speed_low:
        check, what = "pcie-nic-speed", f"NIC link at {link.shown()}: below its top speed"
    elif link.width_low or link.speed_low:
        check, what = "pcie-other-downgraded", f"link at {link.shown()}"
    else:
        return []
    return [catalogue.finding(check, part=part, what=what, line=line)]


def looks_like_lspci(text: str) -> bool:
    """True for ``lspci`` output (every unindented line a ``BB:DD.F class: device`` header)
    or an excerpt of indented ``LnkCap``/``LnkSta`` lines.

    >>> looks_like_lspci("0000:03:00.0 Infiniband controller: Mellanox Technologies MT2910\\n")
    True
    >>> looks_like_lspci("[  3.18] pci 0000:18:00.0: 63.008 Gb/s available PCIe bandwidth\\n")
    False
    """
    lines = [x for x in text[:200_000].splitlines() if x.strip()]
    if not lines:
        return False
    heads = [x for x in lines if not x[0].isspace()]
    if heads:
        return bool(_DEV.match(heads[0])) and sum(bool(_DEV.match(x)) for x in heads) \
            >= 0.9 * len(heads)
    return any(_LNKSTA.search(x) for x in lines)


def gpu_model(desc: str) -> str:
    """The device id (``lspci -nn``, or an unnamed ``Device 2941``) or the model name.

    >>> gpu_model("NVIDIA Corporation Device 2941 (rev a1)")
    '2941'
    >>> gpu_model("NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)")
    '2330'
    >>> gpu_model("NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)")
    'H100 SXM5 80GB'
    """
    if m := re.search(r"\[[0-9a-fA-F]{4}:([0-9a-fA-F]{4})\]", desc):
        return m[1]
    if m := re.search(r"\bDevice ([0-9a-fA-F]{4})\b", desc):
        return m[1]
    names = re.findall(r"\[([^\]]+)\]", desc)
    return names[-1] if names else re.sub(r"\s*\(rev [^)]*\)", "", desc)


def _common(values: Sequence[Any]) -> Any:
    return values[0] if values and all(v == values[0] for v in values) else None


def _slug(desc: str) -> str | None:
    if m := re.search(r"BlueField-(\d+)", desc):
        return f"bf{m[1]}"
    if m := re.search(r"ConnectX-(\d+)(?:\s*(Dx|Lx|Ex))?", desc):
        return f"cx{m[1]}{(m[2] or '').lower()}"
    return None


def _link_fact(links: Sequence[Link], status: bool = False) -> dict[str, Any] | None:
    speed = _common([x.sta_speed_gts for x in links])
    lanes = _common([x.sta_width for x in links])
    if not links or (speed is None and lanes is None):
        return None
    out: dict[str, Any] = {"speed_gts": _n(speed), "width": lanes}
    if status:
        out["status"] = "downgraded" if any(x.width_low or x.speed_low for x in links) else "ok"
    return out


def _n(x: float | None) -> float | int | None:
    return int(x) if x is not None and float(x).is_integer() else x


def _facts(devices: Sequence[Device], kinds: Sequence[str]) -> dict[str, Any]:
    facts: dict[str, Any] = {"devices": sum(1 for d in devices if d.address),
                             "devices_by_class": dict(Counter(d.cls for d in devices if d.cls))}
    gpus = [d for d, k in zip(devices, kinds, strict=True) if k == GPU]
    nics = [d for d, k in zip(devices, kinds, strict=True) if k == NIC]
    facts["gpus"], facts["nics"] = len(gpus), len(nics)
    ids = [gpu_model(d.desc) for d in gpus]
    if (gid := _common(ids)) is not None:
        facts["gpu_device_id"] = gid
    if (g := _link_fact([d.link for d in gpus if d.link], status=True)) is not None:
        facts["gpu_link"] = g
    by_model: dict[str, list[Device]] = {}
    for d in nics:
        if slug := _slug(d.desc):
            by_model.setdefault(slug, []).append(d)
    for slug, ds in sorted(by_model.items()):
        facts[f"{slug}_nics"] = len(ds)
        facts[f"{slug}_ib_controllers"] = sum(d.cls == "Infiniband controller" for d in ds)
        facts[f"{slug}_eth_controllers"] = sum(d.cls == "Ethernet controller" for d in ds)
        if (x := _link_fact([d.link for d in ds if d.link])) is not None:
            facts[f"{slug}_link"] = x
    for m in {m[1] for d in devices if (m := re.search(r"BlueField-(\d+)", d.desc))}:
        facts[f"bluefield{m}"] = True
    downgraded = [d for d in devices if "downgraded" in d.sta_line]
    facts["downgraded_lines"] = len(downgraded)
    facts["downgraded_on_gpu_or_nic"] = sum(1 for d in downgraded if d in gpus or d in nics)
    links = [d.link for d in devices if d.link]
    facts["links_read"] = len(links)
    judged = [d.link for d in (*gpus, *nics) if d.link] or links
    for key, cap, sta in (("pcie_width", "cap_width", "sta_width"),
                          ("pcie_speed_gts", "cap_speed_gts", "sta_speed_gts")):
        pair = _common([(getattr(x, cap), getattr(x, sta)) for x in judged])
        if pair is not None and None not in pair:
            facts[key] = [_n(pair[0]), _n(pair[1])]
    if len(links) == 1:
        facts["width_downgraded"] = links[0].width_low
        facts["speed_downgraded"] = links[0].speed_low
    return facts


def judge_lspci(text: str, catalogue: Catalogue, context: Any) -> NodeReport:
    """Judge ``lspci -vv``/``-vvv`` link status; read plain ``lspci`` for facts.

    >>> from fabriccheck.probes.node.catalogue import builtin_catalogue
    >>> t = ("1a:00.0 Ethernet controller: Mellanox Technologies MT2910 Family [ConnectX-7]\\n"
    ...      "\\t\\tLnkCap:\\tPort #0, Speed 32GT/s, Width x16, ASPM not supported\\n"
    ...      "\\t\\tLnkSta:\\tSpeed 32GT/s, Width x8\\n")
    >>> judge_lspci(t, builtin_catalogue(), None).node_verdict
    'fault'
    """
    devices = parse_lspci(text)
    kinds = [classify(d, catalogue) for d in devices]
    detailed = any(d.detailed for d in devices)
    findings: list[Finding] = []
    blind: list[str] = []
    for d, kind in zip(devices, kinds, strict=True):
        if d.link is not None:
            findings += link_findings(kind, d.part(), d.link, catalogue, d.sta_line)
        elif detailed and kind in (GPU, NIC):
            blind.append(d.address)
            why = "capabilities <access denied> (not root)" if d.denied else "no LnkSta line"
            findings.append(catalogue.finding(
                "pcie-no-link-info", part=d.part(), what=f"{kind.upper()} link unknown: {why}"))
    reason = f"no link status for {', '.join(blind[:8])}" if blind else ""
    if not devices:
        reason = "no lspci device lines"
    return NodeReport("lspci", tuple(findings), _facts(devices, kinds), not reason, reason)
