"""``nvidia-smi -q`` judged per GPU: memory errors, clock events, PCIe, fabric (pure).

The text (full or filtered with ``-d``) is read into one :class:`GpuState` per ``GPU <bus id>``
section; :func:`judge_states` applies the catalogue's ``gpu-*`` entries to them (the ``-q -x``
judge in :mod:`.smi_xml` reads the same states from XML). Nested ``MIG Device`` blocks belong to
their GPU; ``Processes`` (what users run) is never judged. Older and newer field names are both
read: ``Clocks Throttle Reasons`` / ``Clocks Event Reasons``, ``Retired Pages`` (before A100) /
``Remapped Rows`` (A100 and later), ``Single Bit``/``Double Bit`` / ``SRAM``/``DRAM`` counters.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise

from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.probes.node.findings import Finding, NodeReport
from fabriccheck.probes.node.lines import last_line_open, stripped_lines

_NUM = re.compile(r"-?\d+")
#: ``Clocks Event Reasons`` lines (lower-cased, as text -q prints them) -> canonical name
EVENT_NAMES = {
    "idle": "Idle", "applications clocks setting": "Applications Clocks Setting",
    "sw power cap": "SW Power Cap", "hw slowdown": "HW Slowdown",
    "hw thermal slowdown": "HW Thermal Slowdown",
    "hw power brake slowdown": "HW Power Brake Slowdown", "sync boost": "Sync Boost",
    "sw thermal slowdown": "SW Thermal Slowdown", "display clock setting": "Display Clock Setting",
}
_NOT_SET = (None, "", "N/A", "None", "Not Supported")


@lru_cache(maxsize=4096)  # field values repeat ("0", "N/A", "16x") on every GPU of every node
def num(value: str | None) -> int | None:
    """The first integer in a field value (``86 MHz``, ``16x``, ``-8 C``); None for ``N/A``.

    >>> num("16x"), num("-8 C"), num("N/A"), num(None)
    (16, -8, None, None)
    """
    m = _NUM.search(value) if value else None
    return int(m[0]) if m else None


@lru_cache(maxsize=1024)
def yes(value: str | None) -> bool | None:
    """``Yes``/``No`` (and ``True``/``False``) as a bool; None for ``N/A`` or nothing.

    >>> yes("Yes"), yes("No"), yes("N/A")
    (True, False, None)
    """
    v = (value or "").strip().lower()
    return True if v in ("yes", "true") else False if v in ("no", "false") else None


@dataclass
class GpuState:
    """What one GPU's ``-q`` section (text or XML) says; None where the output does not say."""

    part: str
    bus_id: str
    product: str = ""
    virtualization: str = ""
    mig_mode: str | None = None
    mig_devices: int = 0
    mig_volatile_unc: int = 0
    ecc_mode: str | None = None
    volatile_unc: int | None = None
    volatile_corr: int | None = None
    aggregate_unc: int | None = None
    aggregate_corr: int | None = None
    sram_threshold: bool = False
    repair_pending: list[str] = field(default_factory=list)
    remap_present: bool = False
    remap_corr: int | None = None
    remap_unc: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    bank_hist: dict[str, int] = field(default_factory=dict)
    retired_present: bool = False
    retired_sbe: int | None = None
    retired_dbe: int | None = None
    retired_pending: bool | None = None
    events: dict[str, bool] = field(default_factory=dict)
    pcie_gen: tuple[int, int] | None = None  # (current, max)
    pcie_width: tuple[int, int] | None = None
    replays: int | None = None
    util_pct: int | None = None
    pstate: str | None = None
    graphics_mhz: int | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None
    fabric_health: str | None = None
    reset_required: bool = False
    drain_reset: bool = False
    recovery_action: str | None = None
    shutdown_tlimit_c: int | None = None
    errors: list[tuple[str, str]] = field(default_factory=list)  # (field, line): ERR!
    lines: dict[str, str] = field(default_factory=dict)  # what -> the line it was read from

    @property
    def busy(self) -> bool:
        """Something runs on it: utilization above 0 % and no ``Idle`` clock reason (unknown
        utilization is not busy: a power-saving link is the likelier reading)."""
        deep = (num(self.pstate) or 0) >= 8
        return bool(self.util_pct) and not self.events.get("Idle") and not deep


# ---- messages nvidia-smi prints instead of (or beside) its output ------------------------------
_BUS = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
_INFOROM = re.compile(r"WARNING: infoROM is corrupted at gpu\s*(\S*)")
_HANDLE = re.compile(r"Unable to determine the device handle for (?:GPU\s*)?(\S*)\s*(.*)")
_LOST = re.compile(rf"^(?:GPU\s+)?({_BUS}):?\s+.*(?:GPU is lost|fallen off the bus)", re.I)
_DRIVER = re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                     r"driver|Failed to initialize NVML: (?:Driver/library version mismatch|"
                     r"Unknown Error|GPU access blocked)|Driver/library version mismatch")
#: a line that is one of those messages (the whole of some outputs)
MESSAGE = re.compile(rf"{_INFOROM.pattern}|{_HANDLE.pattern}|{_DRIVER.pattern}|"
                     r"No devices were found|NVML library version: \S+|Reboot the system|"
                     r"GPU is lost|fallen off the bus", re.I)


def _gpu_part(token: str) -> str:
    """``gpu <bus id>`` for a whole bus id, ``node`` for a cut one (the GPU is unknown).

    >>> _gpu_part("0000:3B:00.0:"), _gpu_part("0000:3B")
    ('gpu 0000:3B:00.0', 'node')
    """
    token = token.rstrip(":.,")
    return f"gpu {token}" if re.fullmatch(_BUS, token) else "node"


#: words every message line holds (lower-cased): a text with none of them has no message
_MESSAGE_WORDS = ("inforom is corrupted", "unable to determine the device handle",
                  "nvidia-smi has failed", "failed to initialize nvml",
                  "driver/library version mismatch", "no devices were found", "gpu is lost",
                  "fallen off the bus")


def _may_hold_message(text: str) -> bool:
    """False when no line of ``text`` can be one of the messages (read in one pass, not line
    by line); beyond ASCII the patterns' case folding is re's own: True, read every line."""
    if not text.isascii():
        return True
    low = text.lower()
    return any(w in low for w in _MESSAGE_WORDS)


def message_findings(text: str, cat: Catalogue) -> list[Finding]:
    """Findings for the messages nvidia-smi prints about a broken GPU or driver (any mode).

    >>> from fabriccheck.probes.node.catalogue import builtin_catalogue
    >>> [f.part for f in message_findings(
    ...     "WARNING: infoROM is corrupted at gpu 0008:00:00.0", builtin_catalogue())]
    ['gpu 0008:00:00.0']
    """
    out: list[Finding] = []
    if not _may_hold_message(text):
        return out
    for raw in text.splitlines():
        line = raw.strip()
        if not line or len(line) > 400:
            continue
        if m := _INFOROM.search(line):
            out.append(cat.finding("gpu-inforom-corrupted", part=_gpu_part(m[1]), line=line))
        elif m := _HANDLE.search(line):
            why = m[2].strip() or "no reason given"
            out.append(cat.finding("gpu-lost", part=_gpu_part(m[1]), line=line,
                                   what=f"nvidia-smi cannot reach the GPU: {why}"))
        elif m := _LOST.search(line):
            out.append(cat.finding("gpu-lost", part=f"gpu {m[1]}", line=line))
        elif _DRIVER.search(line):
            out.append(cat.finding("gpu-driver-unreachable", part="node", line=line))
        elif line == "No devices were found":
            out.append(cat.finding("gpu-none-found", part="node", line=line))
    return out


# ---- the judgement ---------------------------------------------------------------------------
def _sxm(cat: Catalogue, product: str) -> bool:
    pats = cat.param("gpu-pcie-width-degraded", "sxm_products", []) or []
    return any(re.search(p, product) for p in pats)


def _pcie(g: GpuState, peers: list[GpuState], cat: Catalogue) -> list[Finding]:
    out: list[Finding] = []
    if g.pcie_width and g.pcie_width[0] < g.pcie_width[1]:
        cur, mx = g.pcie_width
        wider = any(p.pcie_width and p.pcie_width[0] > cur and p.product == g.product
                    for p in peers)
        virtual = g.virtualization.lower() not in ("", "none", "n/a")
        what = f"PCIe link x{cur} of x{mx}"
        if _sxm(cat, g.product) or wider or not virtual:
            why = (" (its peers run wider)" if wider else " (an SXM module is wired x16)"
                   if _sxm(cat, g.product) else "")
            out.append(cat.finding("gpu-pcie-width-degraded", part=g.part, what=what + why,
                                   line=g.lines.get("pcie_width", "")))
        else:
            out.append(cat.finding("gpu-pcie-width-below-max", part=g.part, line=g.lines.get(
                "pcie_width", ""), what=f"{what} under {g.virtualization} virtualization"))
    if g.pcie_gen and g.pcie_gen[0] < g.pcie_gen[1]:
        what = f"PCIe Gen{g.pcie_gen[0]} of Gen{g.pcie_gen[1]}"
        check = "gpu-pcie-gen-degraded" if g.busy else "gpu-pcie-gen-idle"
        what += f" at {g.util_pct} % utilization" if g.busy else " while idle (or load unknown)"
        out.append(cat.finding(check, part=g.part, what=what, line=g.lines.get("pcie_gen", "")))
    if g.replays:
        warn = cat.param("gpu-pcie-replays", "warn_replays", 1000)
        check = "gpu-pcie-replays" if g.replays >= warn else "gpu-pcie-replays-seen"
        out.append(cat.finding(check, part=g.part, line=g.lines.get("replays", ""),
                               what=f"{g.replays} PCIe replays since the GPU was reset"))
    return out


def _memory(g: GpuState, cat: Catalogue) -> list[Finding]:
    out: list[Finding] = []

    def f(check: str, what: str = "", line: str = "") -> None:
        out.append(cat.finding(check, part=g.part, what=what or None, line=line))

    vol = (g.volatile_unc or 0) + g.mig_volatile_unc
    if vol > 0:
        f("gpu-ecc-volatile-uncorrectable", f"{vol} uncorrectable ECC errors since the driver "
          "loaded (volatile)", g.lines.get("volatile_unc", ""))
    elif (g.aggregate_unc or 0) > 0:
        f("gpu-ecc-aggregate-uncorrectable", f"{g.aggregate_unc} uncorrectable ECC errors in "
          "the GPU's lifetime (aggregate), none since the driver loaded",
          g.lines.get("aggregate_unc", ""))
    corr = max(g.volatile_corr or 0, g.aggregate_corr or 0)
    if corr > 0:
        f("gpu-ecc-correctable", f"{corr} corrected (single-bit) ECC errors")
    if g.sram_threshold:
        f("gpu-ecc-sram-threshold")
    if g.repair_pending:
        f("gpu-memory-repair-pending", "memory repair: " + ", ".join(g.repair_pending))
    if g.remap_pending:
        f("gpu-row-remap-pending", line=g.lines.get("remap_pending", ""))
    if g.remap_failure:
        f("gpu-row-remap-failure", line=g.lines.get("remap_failure", ""))
    if (g.remap_corr or 0) >= cat.param("gpu-row-remap-correctable-high", "warn_rows", 32):
        f("gpu-row-remap-correctable-high", f"{g.remap_corr} rows remapped for correctable errors")
    if (g.remap_unc or 0) > 0 and not g.remap_pending and not g.remap_failure:
        f("gpu-row-remap-done", f"{g.remap_unc} rows remapped for uncorrectable errors")
    if g.bank_hist.get("none", 0) > 0:
        f("gpu-row-remap-bank-exhausted", f"{g.bank_hist['none']} memory banks have no spare "
          "row left")
    if g.retired_pending:
        f("gpu-retired-pages-pending", line=g.lines.get("retired_pending", ""))
    pages = (g.retired_sbe or 0) + (g.retired_dbe or 0)
    if pages >= cat.param("gpu-retired-pages-limit", "fault_pages", 60):
        f("gpu-retired-pages-limit", f"{pages} pages retired")
    elif pages >= cat.param("gpu-retired-pages-many", "warn_pages", 15):
        f("gpu-retired-pages-many", f"{pages} pages retired")
    return out


_EVENT_CHECKS = (("HW Power Brake Slowdown", "gpu-hw-power-brake"),
                 ("HW Thermal Slowdown", "gpu-hw-thermal-slowdown"),
                 ("HW Slowdown", "gpu-hw-slowdown"),
                 ("SW Thermal Slowdown", "gpu-sw-thermal-slowdown"),
                 ("SW Power Cap", "gpu-sw-power-cap"), ("Idle", "gpu-clocks-idle"))


def _state_findings(g: GpuState, cat: Catalogue) -> list[Finding]:
    out: list[Finding] = []
    hw = False
    for name, check in _EVENT_CHECKS:
        if not g.events.get(name) or (name == "HW Slowdown" and hw):
            continue
        hw = hw or name.startswith("HW")
        out.append(cat.finding(check, part=g.part, line=g.lines.get(f"event:{name}", "")))
    if g.fabric_state not in _NOT_SET and (g.fabric_state != "Completed" or
                                           g.fabric_status not in (*_NOT_SET, "Success")):
        out.append(cat.finding("gpu-fabric-not-ready", part=g.part, line=g.lines.get(
            "fabric_status" if g.fabric_state == "Completed" else "fabric_state", ""),
            what=f"NVLink fabric state {g.fabric_state}, status {g.fabric_status}"))
    if g.fabric_health not in (*_NOT_SET, "Healthy"):
        out.append(cat.finding("gpu-fabric-health", part=g.part,
                               line=g.lines.get("fabric_health", "")))
    action = g.recovery_action if g.recovery_action not in _NOT_SET else ""
    if g.reset_required or g.drain_reset or action:
        out.append(cat.finding("gpu-reset-required", part=g.part, line=g.lines.get(
            "recovery" if action else "drain" if g.drain_reset else "reset", ""),
            what=f"the driver asks for {action or 'a GPU reset'}"))
    if g.errors:
        out.append(cat.finding("gpu-err-field", part=g.part, line=g.errors[0][1],
                               what="nvidia-smi cannot read " + ", ".join(
                                   k for k, _ in g.errors[:4])))
    if (g.mig_mode or "").lower() == "enabled":
        out.append(cat.finding("gpu-mig-enabled", part=g.part,
                               what=f"MIG enabled ({g.mig_devices} MIG devices)"))
    if (g.ecc_mode or "").lower() == "disabled":
        out.append(cat.finding("gpu-ecc-disabled", part=g.part))
    return out


def judge_states(tool: str, gpus: list[GpuState], cat: Catalogue, context, *,
                 driver: str | None = None, attached: int | None = None,
                 extra: list[Finding] | None = None, reason: str = "",
                 facts: dict | None = None) -> NodeReport:
    """The report on ``gpus`` read from ``tool``'s output (``reason``: why it looks cut;
    ``extra``: findings read beside the GPU sections; ``facts``: more facts to report)."""
    findings = list(extra or [])
    for g in gpus:
        peers = [p for p in gpus if p is not g]
        findings += _memory(g, cat) + _state_findings(g, cat) + _pcie(g, peers, cat)
    seen = attached if attached is not None else len(gpus)
    expected = getattr(context, "expected_gpus", None)
    if expected and seen < expected:
        findings.append(cat.finding("gpu-count-missing", part="node",
                                    what=f"{seen} of {expected} GPUs are visible"))
    if attached == 0 and not any(f.check == "gpu-none-found" for f in findings):
        findings.append(cat.finding("gpu-none-found", part="node", line="Attached GPUs : 0"))
    facts = {**state_facts(gpus), **(facts or {})}
    if driver:
        facts["driver"] = driver
    if attached is not None:
        facts["attached_gpus"] = attached
    return NodeReport(tool, tuple(findings), facts, complete=not reason, reason=reason)


def _one(values: list):
    vals = [v for v in values if v is not None]
    return None if not vals else vals[0] if len(set(vals)) == 1 else sorted(set(vals))


def _pair(pairs: list[tuple[int, int] | None]) -> list[int] | None:
    known = [p for p in pairs if p]
    return list(min(known, key=lambda p: (p[0] / max(p[1], 1), p[0]))) if known else None


def state_facts(gpus: list[GpuState]) -> dict:
    """The node's facts over ``gpus`` (sums, the worst link, unions), keyed as the corpus'
    ``expected.json`` names them; a key is left out when no GPU's output says it."""
    def total(attr):
        vals = [getattr(g, attr) for g in gpus if getattr(g, attr) is not None]
        return sum(vals) if vals else None

    ev = [g for g in gpus if g.events]
    replays = [g.replays for g in gpus if g.replays is not None]
    active = [n for g in gpus for n, on in g.events.items() if on]
    facts = {
        "gpus": len(gpus), "product": _one([g.product or None for g in gpus]),
        "ecc_mode": _one([g.ecc_mode for g in gpus]),
        "mig_mode": _one([g.mig_mode for g in gpus]),
        "mig_devices": (sum(g.mig_devices for g in gpus)
                        if any(g.mig_mode is not None or g.mig_devices for g in gpus)
                        else None),
        "volatile_uncorrectable_ecc": total("volatile_unc"),
        "aggregate_uncorrectable_ecc": total("aggregate_unc"),
        "volatile_correctable_ecc": total("volatile_corr"),
        "aggregate_correctable_ecc": total("aggregate_corr"),
        "pcie_gen": _pair([g.pcie_gen for g in gpus]),
        "pcie_width": _pair([g.pcie_width for g in gpus]),
        "pcie_replays": max(replays) if replays else None,
        "pcie_replays_range": [min(replays), max(replays)] if replays else None,
        "clocks_event_active": list(dict.fromkeys(active)) if ev else None,
        "graphics_clock_mhz": max((g.graphics_mhz for g in gpus if g.graphics_mhz is not None),
                                  default=None),
        "gpu_util_pct": max((g.util_pct for g in gpus if g.util_pct is not None), default=None),
        "fabric_state": _one([g.fabric_state for g in gpus]),
        "fabric_status": _one([g.fabric_status for g in gpus]),
        "gpu_shutdown_tlimit_c": min((g.shutdown_tlimit_c for g in gpus
                                      if g.shutdown_tlimit_c is not None), default=None),
    }
    if ev:
        for key, name in (("hw_slowdown_active_gpus", "HW Slowdown"),
                          ("hw_power_brake_active_gpus", "HW Power Brake Slowdown"),
                          ("hw_thermal_slowdown_active_gpus", "HW Thermal Slowdown")):
            facts[key] = sum(1 for g in ev if g.events.get(name))
    remap = [g for g in gpus if g.remap_present]
    if remap:
        facts["remapped_rows_pending"] = any(g.remap_pending for g in remap)
        facts["remapping_failure"] = any(g.remap_failure for g in remap)
        facts["remapped_rows_correctable"] = total("remap_corr")
        facts["remapped_rows_uncorrectable"] = total("remap_unc")
        facts["bank_remap_max"] = _one([g.bank_hist.get("max") for g in remap])
    retired = [g for g in gpus if g.retired_present]
    if retired:
        facts["retired_pages_sbe"] = total("retired_sbe")
        facts["retired_pages_dbe"] = total("retired_dbe")
        facts["pending_page_blacklist"] = any(g.retired_pending for g in retired)
    return {k: v for k, v in facts.items() if v is not None}


# ---- the -q text -----------------------------------------------------------------------------

_SECTION = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_FIELD = re.compile(r"^([^:]+?)\s*:\s?(.*?)\s*$")
_BANNER = "==============NVSMI LOG=============="
_HEAD_KEYS = ("timestamp", "driver version", "cuda version", "attached gpus")


def looks_like_query(text: str) -> bool:
    """True when ``text`` opens as ``nvidia-smi -q`` does (the NVSMI LOG banner, or the
    ``Driver Version`` / ``Attached GPUs`` header, within its first lines).

    >>> looks_like_query("\\n==============NVSMI LOG==============\\n\\nTimestamp : x\\n")
    True
    >>> looks_like_query("GPU 0: NVIDIA H100 (UUID: GPU-1)\\n")
    False
    """
    head = [ln.strip() for ln in text[:20_000].splitlines()[:40] if ln.strip()][:12]
    if any(ln == _BANNER for ln in head[:3]):
        return True
    keys = {ln.split(":", 1)[0].strip().lower() for ln in head if ":" in ln}
    return {"driver version", "attached gpus"} <= keys and any(_SECTION.match(ln) for ln in head)


@dataclass
class _Section:
    """One ``GPU <bus id>`` block: values by lower-cased key path, and the order of blocks."""

    bus_id: str
    values: dict[tuple[str, ...], tuple[str, str]] = field(default_factory=dict)
    top: list[str] = field(default_factory=list)  # top-level keys in order
    order: list[tuple[str, ...]] = field(default_factory=list)  # every key path in order
    mig: list[dict[tuple[str, ...], str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (key, line) ERR!/Unknown
    dangling: bool = False  # the last line is a block header with nothing under it
    #: :attr:`values` by the path of their block (``()`` the top level), by their last key
    kids: dict[tuple[str, ...], dict[str, tuple[str, str]]] = field(
        default_factory=lambda: {(): {}}, repr=False, compare=False)

    def block(self, keys: tuple[str, ...]) -> dict[str, tuple[str, str]]:
        """The values of block ``keys`` (made empty on first use)."""
        return self.kids.setdefault(keys, {})

    def children(self, prefix: tuple[str, ...]) -> dict[str, tuple[str, str]]:
        """The values one level under ``prefix``, by their last key, in output order."""
        return dict(self.kids.get(prefix, {}))

    def has_values_under(self, key: str) -> bool:
        """Some value's path starts with the top-level key ``key``."""
        if key in self.kids[()]:
            return True
        return any(p and p[0] == key and kids for p, kids in self.kids.items())


def _field(line: str) -> tuple[str, str] | None:
    """``(key, value)`` of a stripped ``Key : value`` line: the key up to the first colon
    (trailing blanks dropped, never empty), the value after it less one leading blank; None
    without a colon.

    >>> _field("Bus Id  : 00000000:18:00.0"), _field("Pending :"), _field("PCI")
    (('Bus Id', '00000000:18:00.0'), ('Pending', ''), None)
    """
    key, colon, rest = line.partition(":")
    if not (colon and key):
        return None
    return key.rstrip(), rest[1:] if rest[:1].isspace() else rest


def _sections(text: str) -> tuple[dict[str, str], list[_Section]]:
    """The header fields (lower-cased keys) and the GPU sections of ``-q`` text."""
    lines = stripped_lines(text, tabsize=4)
    starts = [n for n, (blanks, line) in enumerate(lines)
              if not blanks and line.startswith("GPU ") and _SECTION.match(line)]
    header: dict[str, str] = {}
    for _, line in lines[:starts[0] if starts else len(lines)]:
        if (f := _field(line)) and f[0].lower() in _HEAD_KEYS:
            header[f[0].lower()] = f[1]
    # a last line without its newline may be cut mid-value ("Status : Succ"): never judged
    cut_at = len(lines) - 1 if last_line_open(text) else -1
    # values to look at for errors ("Unknown", not "Unknown Error": tabs become blanks)
    may_err = "ERR!" in text or "Unknown" in text
    sections: list[_Section] = []
    dangling = False
    for start, end in pairwise([*starts, len(lines)]):
        sec = _Section(_SECTION.match(lines[start][1])[1])
        dangling = _read_section(sec, lines[start + 1:end], cut_at - start - 1, may_err)
        sections.append(sec)
    if sections:
        sections[-1].dangling = dangling
    return header, sections


def _read_section(sec: _Section, lines: list[tuple[str, str]], cut: int, may_err: bool
                  ) -> bool:
    """Read the lines of one GPU section into ``sec`` (``cut``: the index of a line whose
    value is not kept; ``may_err``: look for ``ERR!`` values); whether its last line opens a
    block."""
    path: list[tuple[int, tuple[str, ...], dict, bool]] = []  # the open blocks, innermost last
    # the innermost block: its indent, key path, values by key, and whether it is under
    # ``Processes`` or ``MIG Device`` (at the top level: -1, (), the top-level values, False)
    depth, prefix, block, hidden = -1, (), sec.kids[()], False
    top_seen: set[str] = set()
    order, values = sec.order, sec.values
    last_header = False
    for n, (blanks, line) in enumerate(lines):
        indent = len(blanks)
        if indent == 0:  # not a field: a message (judged apart) or a prompt
            continue
        if depth >= indent:
            while path and path[-1][0] >= indent:
                path.pop()
            depth, prefix, block, hidden = path[-1] if path else (-1, (), sec.kids[()], False)
        name, colon, rest = line.partition(":")  # _field, inline: this runs for every line
        if colon and name:
            name = name.rstrip()
            key, value = name.lower(), rest[1:] if rest[:1].isspace() else rest
        else:
            key, value = line.lower(), ""
        keys = prefix + (key,)
        if indent <= 4 and key not in top_seen:
            top_seen.add(key)
            sec.top.append(key)
        if not hidden:
            order.append(keys)
        if not value:  # a block header (or a line that is not a field)
            if key == "mig device" and indent <= 4:
                sec.mig.append({})
            if not prefix:
                hidden = key in ("processes", "mig device")
            depth, prefix, block = indent, keys, sec.block(keys)
            path.append((depth, prefix, block, hidden))
            last_header = True
            continue
        last_header = False
        if hidden or not prefix:  # (a top-level value is its own block)
            if keys[0] == "processes":
                continue
            if keys[0] == "mig device" and sec.mig:
                sec.mig[-1][keys[1:]] = value
                continue
        if n == cut:
            continue
        if key not in block:
            block[key] = values[keys] = (value, line)
        if may_err and (value == "ERR!" or "Unknown Error" in value):
            sec.errors.append((name, line))
    return last_header


def _ecc(g: GpuState, sec: _Section, kind: str) -> None:
    """Volatile or aggregate ECC counts: ``Double Bit``/``Single Bit`` totals (older drivers)
    or the sum of the ``... Uncorrectable`` / ``... Correctable`` lines."""
    base = ("ecc errors", kind)
    kids = sec.children(base)
    dbe = sec.values.get(base + ("double bit", "total"))
    sbe = sec.values.get(base + ("single bit", "total"))
    if dbe or sbe:
        unc, corr = num(dbe[0]) if dbe else None, num(sbe[0]) if sbe else None
        line = (dbe or sbe)[1]
    else:
        uncs = [num(v) for k, (v, _) in kids.items() if "uncorrectable" in k]
        corrs = [num(v) for k, (v, _) in kids.items()
                 if "correctable" in k and "uncorrectable" not in k]
        unc = sum(x for x in uncs if x is not None) if any(x is not None for x in uncs) else None
        corr = (sum(x for x in corrs if x is not None)
                if any(x is not None for x in corrs) else None)
        line = next((ln for k, (v, ln) in kids.items() if "uncorrectable" in k
                     and (num(v) or 0) > 0), "")
    if kind == "volatile":
        g.volatile_unc, g.volatile_corr = unc, corr
    else:
        g.aggregate_unc, g.aggregate_corr = unc, corr
        g.sram_threshold = yes(kids.get("sram threshold exceeded", ("", ""))[0]) is True
    if line:
        g.lines[f"{kind}_unc"] = line


def _getters(g: GpuState, sec: _Section
             ) -> tuple[Callable[..., str | None], Callable[..., str | None]]:
    """``get(*path)``: the value at a key path of ``sec`` (None when absent); ``keep(name,
    *path)``: the same, noting the line it was read from in ``g.lines[name]``."""
    v = sec.values

    def get(*path: str) -> str | None:
        hit = v.get(path)
        return hit[0] if hit else None

    def keep(name: str, *path: str) -> str | None:
        hit = v.get(path)
        if hit:
            g.lines[name] = hit[1]
        return hit[0] if hit else None

    return get, keep


def _state(sec: _Section) -> GpuState:
    """One GPU's state from its section: product and modes, memory health, clock event
    reasons, PCIe link, activity, fabric and reset status, and ERR! fields."""
    g = GpuState(part=f"gpu {sec.bus_id}", bus_id=sec.bus_id)
    get, _ = _getters(g, sec)
    g.product = get("product name") or ""
    g.virtualization = get("gpu virtualization mode", "virtualization mode") or ""
    g.mig_mode = get("mig mode", "current")
    g.mig_devices = len(sec.mig)
    g.mig_volatile_unc = sum(num(val) or 0 for d in sec.mig for k, val in d.items()
                             if k[:2] == ("ecc errors", "volatile") and "uncorrectable" in k[-1])
    g.ecc_mode = get("ecc mode", "current")
    _read_memory(g, sec)
    for block in ("clocks event reasons", "clocks throttle reasons"):
        for k, (val, line) in sec.children((block,)).items():
            name = EVENT_NAMES.get(k)
            if name:
                g.events[name] = val.strip().lower() == "active"
                g.lines[f"event:{name}"] = line
    _read_pcie(g, sec)
    _read_status(g, sec)
    g.errors = list(sec.errors)
    return g


def _read_memory(g: GpuState, sec: _Section) -> None:
    """Memory health: ECC counts, pending repairs, remapped rows, retired pages."""
    get, keep = _getters(g, sec)
    _ecc(g, sec, "volatile")
    _ecc(g, sec, "aggregate")
    for key in ("channel repair pending", "tpc repair pending", "unrepairable memory"):
        if yes(keep(key, "ecc errors", key)):
            g.repair_pending.append(key)
    if sec.has_values_under("remapped rows"):
        g.remap_present = True
        g.remap_corr = num(get("remapped rows", "correctable error"))
        g.remap_unc = num(get("remapped rows", "uncorrectable error"))
        g.remap_pending = yes(keep("remap_pending", "remapped rows", "pending"))
        g.remap_failure = yes(keep("remap_failure", "remapped rows", "remapping failure occurred"))
        hist = sec.children(("remapped rows", "bank remap availability histogram"))
        g.bank_hist = {k: n for k, (val, _) in hist.items() if (n := num(val)) is not None}
    if sec.has_values_under("retired pages"):
        g.retired_present = True
        g.retired_sbe = num(get("retired pages", "single bit ecc"))
        g.retired_dbe = num(get("retired pages", "double bit ecc"))
        g.retired_pending = yes(keep("retired_pending", "retired pages", "pending page blacklist")
                                or keep("retired_pending", "retired pages", "pending"))


def _read_pcie(g: GpuState, sec: _Section) -> None:
    """The PCIe link: generation (current, max capped by the host's) and width, replays."""
    get, keep = _getters(g, sec)
    link = ("pci", "gpu link info")
    gen_max = num(get(*link, "pcie generation", "max"))
    host_max = num(get(*link, "pcie generation", "host max"))
    if gen_max is not None and host_max is not None:
        gen_max = min(gen_max, host_max)
    gen_cur = num(keep("pcie_gen", *link, "pcie generation", "current"))
    if gen_cur is not None and gen_max is not None:
        g.pcie_gen = (gen_cur, gen_max)
    w_cur = num(keep("pcie_width", *link, "link width", "current"))
    w_max = num(get(*link, "link width", "max"))
    if w_cur is not None and w_max is not None:
        g.pcie_width = (w_cur, w_max)
    g.replays = num(keep("replays", "pci", "replays since reset"))


def _read_status(g: GpuState, sec: _Section) -> None:
    """Activity (utilization, P-state, clock), NVLink fabric state, reset and recovery
    requests, the shutdown temperature."""
    get, keep = _getters(g, sec)
    g.util_pct = num(get("utilization", "gpu"))
    g.pstate = get("performance state")
    g.graphics_mhz = num(get("clocks", "graphics"))
    g.fabric_state = keep("fabric_state", "fabric", "state")
    g.fabric_status = keep("fabric_status", "fabric", "status")
    g.fabric_health = keep("fabric_health", "fabric", "health", "summary")
    g.reset_required = yes(keep("reset", "gpu reset status", "reset required")) is True
    g.drain_reset = yes(keep("drain", "gpu reset status", "drain and reset recommended")) is True
    g.recovery_action = keep("recovery", "gpu recovery action")
    g.shutdown_tlimit_c = num(get("temperature", "gpu shutdown t.limit temp"))


def _incomplete(header: dict[str, str], sections: list[_Section]) -> str:
    """Why the output looks cut short ("" when it does not)."""
    attached = num(header.get("attached gpus"))
    if not sections:
        return f"'Attached GPUs' is {attached} but no GPU section follows" if attached else ""
    last = sections[-1]
    if last.dangling:
        return f"the output stops at a block header in GPU {last.bus_id}"
    if not last.order:
        return f"GPU {last.bus_id} has no fields"
    first = sections[0]
    if len(sections) < 2:
        return ""
    end = last.order[-1]
    rest = first.order[first.order.index(end) + 1:] if end in first.order else [
        (k,) for k in first.top if k not in last.top]
    if rest:
        return f"GPU {last.bus_id} stops early, at {' / '.join(end)} (no {' / '.join(rest[0])})"
    return ""


def parse_query(text: str) -> tuple[dict[str, str], list[GpuState], str]:
    """The header fields, one :class:`GpuState` per GPU section, and why the output looks cut
    short ("" when it is whole).

    >>> _, gpus, cut = parse_query("Attached GPUs : 1\\nGPU 00000000:07:00.0\\n    Remapped Rows"
    ...     "\\n        Pending : Yes\\n        Remapping Failure Occurred : No\\n")
    >>> gpus[0].part, gpus[0].remap_pending, cut
    ('gpu 00000000:07:00.0', True, '')
    """
    header, sections = _sections(text)
    return header, [_state(s) for s in sections], _incomplete(header, sections)


def judge_query(text: str, catalogue: Catalogue, context) -> NodeReport:
    """Judge ``nvidia-smi -q`` (full or ``-d`` filtered) text."""
    header, gpus, cut = parse_query(text)
    extra: list[Finding] = message_findings(text, catalogue)
    attached = num(header.get("attached gpus"))
    report = judge_states("nvidia-smi-q", gpus, catalogue, context, driver=header.get(
        "driver version"), attached=attached, extra=extra, reason=cut)
    from fabriccheck.probes.node.smi_fabric import with_fabric  # GB200: NVLink fabric state

    return with_fabric(report, text, catalogue)
