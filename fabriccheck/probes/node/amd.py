"""AMD GPU state from ``rocm-smi`` (concise table, ``GPU[n] : key: value`` text, ``--json``)
and ``amd-smi metric`` / ``static`` (text or ``--json``), judged per GPU (pure).

Judged: a PCIe link narrower than its maximum at full speed (fault; below full speed a low DPM
level, narrower on some boards, is power saving), slower than its maximum (info when idle or
unknown, warn when busy), replay / recovery counts (warn above the catalogue's total), ECC (RAS)
counts and the GPU count.
``rocm-smi``'s JSON mixes PCIe and clock levels under bare number keys: every ``<n>GT/s x<w>``
value is a PCIe level, the one marked ``*`` (or ``pcie clock level``) the current one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.probes.node.findings import Finding, NodeReport

_BANNER = "ROCm System Management Interface"
_GPU_LINE = re.compile(r"^GPU\[(\d+)\]\s*:\s*(.*)$")
_LEVEL = re.compile(r"(\d+(?:\.\d+)?)\s*GT/s,?\s*x(\d+)(.*)$")
_RAS = re.compile(r"^\s*(\w+)\s+(ENABLED|DISABLED)\s+(\d+)\s+(\d+)\s*$")
_AMD_KEY = re.compile(r"^(\s*)([A-Z0-9_]+):\s*(.*?)\s*$")


@dataclass
class AmdGpu:
    """One AMD GPU as the output shows it (None where it does not say)."""

    index: int
    product: str = ""
    levels: list[tuple[float, int]] = field(default_factory=list)  # PCIe (GT/s, width)
    current: tuple[float, int] | None = None
    max_speed: float | None = None  # amd-smi static --bus
    max_width: int | None = None
    util_pct: int | None = None
    counters: dict[str, int] = field(default_factory=dict)  # replay, recovery, nak
    ecc_unc: int | None = None
    ecc_corr: int | None = None
    temp_c: float | None = None
    power_cap_w: float | None = None
    partitions: str | None = None
    keys: int = 0

    @property
    def part(self) -> str:
        """The finding's part: ``gpu <index>``."""
        return f"gpu {self.index}"


def _num(value: object) -> float | None:
    m = re.search(r"-?\d+(?:\.\d+)?", str(value)) if value is not None else None
    return float(m[0]) if m else None


def _whole_lines(text: str) -> list[str]:
    """The lines of ``text`` but a last one without its newline, which may be cut mid-value
    (``WIDTH: 1`` of ``WIDTH: 16``).

    >>> _whole_lines("a: 1\\nb: 1"), _whole_lines("a: 1\\n")
    (['a: 1'], ['a: 1'])
    """
    lines = text.splitlines()
    return lines if text.endswith("\n") else lines[:-1]


# ---- rocm-smi --------------------------------------------------------------------------------
def looks_like_rocm_smi(text: str) -> bool:
    """True for ``rocm-smi`` output: its banner near the top, or ``--json`` keyed ``card<n>``.

    >>> looks_like_rocm_smi('{"card0": {"GPU use (%)": "0"}}')
    True
    >>> looks_like_rocm_smi("==== ROCm System Management Interface ====\\n")
    True
    """
    head = text[:4096].lstrip()
    if re.match(r'\{\s*"card\d+"\s*:', head):
        return True
    return any(_BANNER in ln for ln in head.splitlines()[:3])


def _feed(g: AmdGpu, key: str, value: str) -> None:
    """One rocm-smi ``key: value`` (text or JSON) into ``g``."""
    k = key.strip().rstrip(":").lower()
    g.keys += 1
    lv = _LEVEL.search(value)
    if lv:
        level = (float(lv[1]), int(lv[2]))
        if level not in g.levels:
            g.levels.append(level)
        if "*" in lv[3] or k == "pcie clock level":
            g.current = level
    elif k == "pcie replay count" and (n := _num(value)) is not None:
        g.counters["replay_count"] = int(n)
    elif k == "gpu use (%)":
        g.util_pct = int(n) if (n := _num(value)) is not None else None
    elif k in ("card series", "device name", "card model") and not g.product:
        g.product = value.strip()
    elif (m := _RAS.match(value)) is not None:
        g.ecc_corr = (g.ecc_corr or 0) + int(m[3])
        g.ecc_unc = (g.ecc_unc or 0) + int(m[4])


def _rocm_text(text: str) -> tuple[list[AmdGpu], str]:
    gpus: dict[int, AmdGpu] = {}
    for ln in _whole_lines(text):
        if m := _GPU_LINE.match(ln.strip()):
            g = gpus.setdefault(int(m[1]), AmdGpu(int(m[1])))
            key, sep, value = m[2].partition(": ")
            if _RAS.match(m[2]):
                _feed(g, "ras", m[2])
            elif sep:
                _feed(g, key, value)
            else:
                _feed(g, "", m[2])
    return list(gpus.values()), ""


def _rocm_json(text: str) -> tuple[list[AmdGpu], str]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        return [], f"the JSON is cut or malformed ({exc.args[0][:60]})"
    if not isinstance(data, dict):
        return [], "the JSON is not an object of cards"
    gpus = []
    for name, fields in data.items():
        m = re.fullmatch(r"card(\d+)", name)
        if m and isinstance(fields, dict):
            g = AmdGpu(int(m[1]))
            for k, v in fields.items():
                _feed(g, k, str(v))
            gpus.append(g)
    return gpus, ""


def _concise(text: str) -> tuple[list[AmdGpu], str]:
    """The concise table: one row per device (``0  [0x74a1 : 0x00]  45.0°C  173.0W ...``,
    ROCm 5: ``0  38.0c  92.0W ...``); an indented line under a row may hold the name."""
    gpus: list[AmdGpu] = []
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if "Concise Info" in ln), len(lines))
    for ln in lines[start + 1:]:
        s = ln.strip()
        if "End of ROCm SMI Log" in s:
            break
        if not s or set(s) == {"="}:
            continue
        if m := re.match(r"^(\d+)\s+(.*)$", s):
            g, rest = AmdGpu(int(m[1])), m[2]
            t = re.search(r"(-?\d+(?:\.\d+)?)\s*(?:°C|c\b|C\b)", rest)
            g.temp_c = float(t[1]) if t else None
            watts = re.findall(r"(\d+(?:\.\d+)?)W\b", rest)
            g.power_cap_w = float(watts[-1]) if watts and float(watts[-1]) > 0 else None
            pct = re.findall(r"(\d+)%", rest)
            g.util_pct = int(pct[-1]) if pct else None
            p = re.search(r"((?:NPS\d+|N/A),\s*(?:[A-Z]PX|N/A))", rest)
            g.partitions = p[1] if p else None
            g.keys = len(rest.split())
            gpus.append(g)
        elif gpus and ln[:1].isspace() and not gpus[-1].product:
            gpus[-1].product = s
    reason = "" if "End of ROCm SMI Log" in text else "the table stops before its end line"
    return gpus, reason


def judge_rocm_smi(text: str, catalogue: Catalogue, context) -> NodeReport:
    """Judge ``rocm-smi`` output (concise table, ``GPU[n]`` text or ``--json``)."""
    if text.lstrip().startswith("{"):
        gpus, reason = _rocm_json(text)
    elif "Concise Info" in text[:4096]:
        gpus, reason = _concise(text)
    else:
        gpus, reason = _rocm_text(text)
        if _BANNER in text[:4096] and "End of ROCm SMI Log" not in text:
            reason = "the output stops before its end line"
    return _report("rocm-smi", gpus, catalogue, context, reason)


# ---- amd-smi -----------------------------------------------------------------------------------
def looks_like_amd_smi(text: str) -> bool:
    """True for ``amd-smi metric`` / ``static`` text (``GPU: 0`` then ``SECTION:`` lines) or
    its ``--json`` (a list of objects keyed ``gpu``).

    >>> looks_like_amd_smi("GPU: 0\\n    PCIE:\\n        WIDTH: 16\\n")
    True
    >>> looks_like_amd_smi("GPU: 0\\nsomething else\\n")
    False
    """
    head = text[:4096].lstrip()
    if re.match(r'\[\s*\{\s*"gpu"\s*:\s*\d+', head):
        return True
    lines = [ln for ln in head.splitlines()[:6] if ln.strip()]
    return (len(lines) >= 2 and re.fullmatch(r"GPU: \d+", lines[0].strip()) is not None
            and re.fullmatch(r"\s+[A-Z][A-Z0-9_]*:\s*", lines[1]) is not None)


def _amd_feed(g: AmdGpu, section: str, key: str, value: str) -> None:
    g.keys += 1
    k, n = key.upper(), _num(value)
    if section == "PCIE" and k == "WIDTH" and n is not None:
        g.current = (g.current[0] if g.current else 0.0, int(n))
    elif section == "PCIE" and k == "SPEED" and n is not None:
        g.current = (n, g.current[1] if g.current else 0)
    elif k in ("MAX_PCIE_WIDTH",) and n is not None:
        g.max_width = int(n)
    elif k in ("MAX_PCIE_SPEED",) and n is not None:
        g.max_speed = n
    elif section == "PCIE" and n is not None and k in (
            "REPLAY_COUNT", "L0_TO_RECOVERY_COUNT", "REPLAY_ROLL_OVER_COUNT", "NAK_SENT_COUNT",
            "NAK_RECEIVED_COUNT"):
        g.counters[k.lower()] = int(n)
    elif section == "USAGE" and k == "GFX_ACTIVITY" and n is not None:
        g.util_pct = int(n)
    elif section == "ECC" and n is not None and "UNCORRECTABLE" in k and (
            k.startswith("TOTAL") or k == "UNCORRECTABLE_COUNT"):
        g.ecc_unc = int(n)
    elif section == "ECC" and n is not None and "CORRECTABLE" in k and "UNCORR" not in k and (
            k.startswith("TOTAL") or k == "CORRECTABLE_COUNT"):
        g.ecc_corr = int(n)
    elif k in ("MARKET_NAME", "PRODUCT_NAME") and value not in ("", "N/A"):
        g.product = g.product or value


def _flat(obj: dict, section: str = "") -> list[tuple[str, str, str]]:
    """(SECTION, KEY, value) of amd-smi JSON (``{"value": 32, "unit": "GT/s"}`` -> ``32 GT/s``).

    >>> _flat({"pcie": {"width": 16, "speed": {"value": 32, "unit": "GT/s"}}})
    [('PCIE', 'width', '16'), ('PCIE', 'speed', '32 GT/s')]
    """
    out: list[tuple[str, str, str]] = []
    for k, v in obj.items():
        if isinstance(v, dict) and v and set(v) <= {"value", "unit"}:
            out.append((section, k, f"{v.get('value')} {v.get('unit') or ''}".strip()))
        elif isinstance(v, dict):
            out += _flat(v, k.upper())
        elif not isinstance(v, list):
            out.append((section, k, str(v)))
    return out


def _amd_text(text: str) -> tuple[list[AmdGpu], str]:
    by_index: dict[int, AmdGpu] = {}
    cur: AmdGpu | None = None
    section, section_indent, dangling = "", -1, False
    for ln in _whole_lines(text):
        if m := re.fullmatch(r"GPU: (\d+)\s*", ln.strip()):  # static then metric: merge
            cur = by_index.setdefault(int(m[1]), AmdGpu(int(m[1])))
            section, dangling = "", False
            continue
        m = _AMD_KEY.match(ln)
        if not m or cur is None:
            continue
        indent = len(m[1])
        if m[3] == "":
            section, section_indent, dangling = m[2].upper(), indent, True
            continue
        if indent <= section_indent:
            section = ""
        dangling = False
        _amd_feed(cur, section, m[2], m[3])
    gpus = list(by_index.values())
    reason = "the output stops at a section header" if dangling else ""
    if len(gpus) > 1 and gpus[-1].keys < gpus[0].keys:
        reason = f"GPU {gpus[-1].index} shows fewer values than GPU {gpus[0].index}"
    return gpus, reason


def _amd_json(text: str) -> tuple[list[AmdGpu], str]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        return [], f"the JSON is cut or malformed ({exc.args[0][:60]})"
    gpus = []
    for item in data if isinstance(data, list) else []:
        if isinstance(item, dict) and isinstance(item.get("gpu"), int):
            g = AmdGpu(item["gpu"])
            for section, key, value in _flat({k: v for k, v in item.items() if k != "gpu"}):
                _amd_feed(g, section, key, value)
            gpus.append(g)
    return gpus, ""


def judge_amd_smi(text: str, catalogue: Catalogue, context) -> NodeReport:
    """Judge ``amd-smi metric`` / ``static`` output (text or ``--json``)."""
    gpus, reason = _amd_json(text) if text.lstrip().startswith("[") else _amd_text(text)
    return _report("amd-smi", gpus, catalogue, context, reason)


# ---- the judgement -----------------------------------------------------------------------------
def _pcie(g: AmdGpu, peers: list[AmdGpu], cat: Catalogue) -> list[Finding]:
    """A narrow link at full speed is a fault; below full speed the link may sit at a low DPM
    level (narrower on some boards), which is power saving when idle."""
    out: list[Finding] = []
    if not g.current:
        return out
    speed, width = g.current
    top_speed = max([s for s, _ in g.levels] + [g.max_speed or 0.0])
    top_width = max([w for _, w in g.levels] + [g.max_width or 0])
    if not g.levels and not g.max_width:  # amd-smi metric alone: compare with the peers
        top_width = max([p.current[1] for p in peers if p.current] + [width])
        top_speed = max([p.current[0] for p in peers if p.current] + [speed])
    line = f"{speed:g} GT/s x{width}"
    if width and width < top_width and speed >= top_speed:
        out.append(cat.finding("amd-pcie-width-degraded", part=g.part, line=line,
                               what=f"PCIe link x{width} of x{top_width} at full speed"))
    elif speed and speed < top_speed:
        busy = (g.util_pct or 0) > 0
        out.append(cat.finding("amd-pcie-speed-degraded" if busy else "amd-pcie-speed-idle",
                               part=g.part, line=line, what=f"PCIe link at {line} of "
                               f"{top_speed:g} GT/s x{top_width}" + ("" if busy else
                                                                      " while idle")))
    return out


def _gpu_findings(g: AmdGpu, peers: list[AmdGpu], cat: Catalogue) -> list[Finding]:
    out = _pcie(g, peers, cat)
    errors = sum(v for k, v in g.counters.items() if "replay" in k or "recovery" in k)
    if errors:
        warn = cat.param("amd-pcie-replays", "warn_replays", 1000)
        out.append(cat.finding("amd-pcie-replays" if errors >= warn else "amd-pcie-replays-seen",
                               part=g.part, what=f"{errors} PCIe replays / recoveries"))
    if g.ecc_unc:
        out.append(cat.finding("amd-ecc-uncorrectable", part=g.part,
                               what=f"{g.ecc_unc} uncorrectable ECC errors"))
    if g.ecc_corr:
        out.append(cat.finding("amd-ecc-correctable", part=g.part,
                               what=f"{g.ecc_corr} corrected ECC errors"))
    return out


def _one(values: list):
    vals = [v for v in values if v is not None]
    return None if not vals else vals[0] if len(set(vals)) == 1 else sorted(set(vals))


def _report(tool: str, gpus: list[AmdGpu], cat: Catalogue, context, reason: str) -> NodeReport:
    findings: list[Finding] = []
    for g in gpus:
        findings += _gpu_findings(g, [p for p in gpus if p is not g], cat)
    expected = getattr(context, "expected_gpus", None)
    if expected and len(gpus) < expected:
        findings.append(cat.finding("amd-count-missing", part="node",
                                    what=f"{len(gpus)} of {expected} GPUs are listed"))
    if not gpus and not reason:
        reason = "no GPU in the output"
    temps = [g.temp_c for g in gpus if g.temp_c is not None]
    cur = [g.current for g in gpus if g.current]
    counters = {k: _one([g.counters.get(k) for g in gpus]) for k in  # sorted: the same
                sorted({k for g in gpus for k in g.counters})}  # order whatever the hash seed
    facts = {"gpus": len(gpus), "gpus_shown": len(gpus), "product": _one(
        [g.product or None for g in gpus]), "partitions": _one([g.partitions for g in gpus]),
        "temp_c_range": [round(min(temps)), round(max(temps))] if temps else None,
        "power_cap_w": _one([round(g.power_cap_w) for g in gpus if g.power_cap_w]),
        "gpu_util_pct": max((g.util_pct for g in gpus if g.util_pct is not None), default=None),
        "pcie_width": _one([c[1] for c in cur]), "pcie_speed_gts": _one(
            [round(c[0]) if c[0] == round(c[0]) else c[0] for c in cur]),
        "pcie_link": _one([f"{c[0]:.1f}GT/s x{c[1]}" for c in cur]) if tool == "rocm-smi"
        else None, "ecc_uncorrectable": _one([g.ecc_unc for g in gpus]),
        "pcie_replay_count": counters.pop("replay_count", None) if tool == "rocm-smi" else None,
        "nak_sent": counters.pop("nak_sent_count", None),
        "nak_received": counters.pop("nak_received_count", None), **counters}
    return NodeReport(tool, tuple(findings), {k: v for k, v in facts.items() if v is not None},
                      complete=not reason, reason=reason)
