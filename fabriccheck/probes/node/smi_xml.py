"""``nvidia-smi -q -x`` (XML, DTDs nvsmi_device_v10 to v12) judged per GPU (pure).

Each ``<gpu>`` element is read into the same :class:`~.smi_query.GpuState` the text judge uses,
so both give the same judgement. The XML is parsed incrementally: a cut or malformed document
keeps what was read before the break and is reported incomplete (at least a warn), never healthy
by silence. Documents declaring entities are refused (nvidia-smi never writes any).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.probes.node.findings import NodeReport
from fabriccheck.probes.node.smi_query import (
    MESSAGE,
    GpuState,
    judge_states,
    message_findings,
    num,
    yes,
)

#: ``clocks_event_reason_<x>`` / ``clocks_throttle_reason_<x>`` -> canonical reason name
_EVENTS = {
    "gpu_idle": "Idle", "applications_clocks_setting": "Applications Clocks Setting",
    "sw_power_cap": "SW Power Cap", "hw_slowdown": "HW Slowdown",
    "hw_thermal_slowdown": "HW Thermal Slowdown",
    "hw_power_brake_slowdown": "HW Power Brake Slowdown", "sync_boost": "Sync Boost",
    "sw_thermal_slowdown": "SW Thermal Slowdown",
    "display_clocks_setting": "Display Clock Setting",
}


def looks_like_xml(text: str) -> bool:
    """True for ``nvidia-smi -q -x`` output (an ``<nvidia_smi_log>`` document).

    >>> looks_like_xml('<?xml version="1.0" ?>\\n<!DOCTYPE nvidia_smi_log SYSTEM "x.dtd">')
    True
    >>> looks_like_xml("<html><body>nvidia_smi_log</body></html>")
    False
    """
    lines = text[:4096].lstrip().splitlines()
    while lines and MESSAGE.search(lines[0]) and not lines[0].lstrip().startswith("<"):
        lines.pop(0)  # nvidia-smi's own warnings before the document
    head = "\n".join(lines)[:2048].lstrip()
    return head.startswith(("<?xml", "<!DOCTYPE nvidia_smi_log", "<nvidia_smi_log")) and (
        "<nvidia_smi_log" in head or "DOCTYPE nvidia_smi_log" in head)


def _parse(text: str) -> tuple[ET.Element | None, str]:
    """The root element (as far as it parsed) and why the document is incomplete ("")."""
    if "<!ENTITY" in text:
        return None, "the XML declares entities (nvidia-smi never does); not read"
    parser = ET.XMLPullParser(events=("start",))
    root: ET.Element | None = None
    reason = ""
    try:
        parser.feed(text)
        for _, elem in parser.read_events():
            root = elem if root is None else root
        parser.close()
    except ET.ParseError as exc:
        for _, elem in parser.read_events():
            root = elem if root is None else root
        reason = f"the XML is cut or malformed ({exc})"
    return root, reason


def _text(el: ET.Element | None, path: str) -> str | None:
    found = el.find(path) if el is not None else None
    if found is None:
        return None
    return (found.text or "").strip()


def _sum(el: ET.Element | None, tags: tuple[str, ...], word: str) -> int | None:
    """Sum of the children of ``el`` whose tag contains ``word`` (or the ``tags`` totals)."""
    if el is None:
        return None
    for tag in tags:
        if el.find(tag) is not None:
            return num(_text(el, tag))
    vals = [num(c.text) for c in el if word in c.tag and
            (word != "correctable" or "uncorrectable" not in c.tag)]
    known = [v for v in vals if v is not None]
    return sum(known) if known else None


def _ecc(g: GpuState, el: ET.Element) -> None:
    ecc = el.find("ecc_errors")
    vol = ecc.find("volatile") if ecc is not None else None
    agg = ecc.find("aggregate") if ecc is not None else None
    g.volatile_unc = _sum(vol, ("double_bit/total",), "uncorrectable")
    g.volatile_corr = _sum(vol, ("single_bit/total",), "correctable")
    g.aggregate_unc = _sum(agg, ("double_bit/total",), "uncorrectable")
    g.aggregate_corr = _sum(agg, ("single_bit/total",), "correctable")
    g.sram_threshold = yes(_text(agg, "sram_threshold_exceeded")) is True
    for tag in ("channel_repair_pending", "tpc_repair_pending", "unrepairable_memory"):
        if yes(_text(ecc, tag)):
            g.repair_pending.append(tag.replace("_", " "))
    if (g.volatile_unc or 0) > 0:
        g.lines["volatile_unc"] = f"<volatile> uncorrectable: {g.volatile_unc}"
    g.mig_volatile_unc = sum(num(c.text) or 0 for c in el.iterfind(
        "mig_devices/mig_device/ecc_error_count/volatile_count/*") if "uncorrectable" in c.tag)


def _rows(g: GpuState, el: ET.Element) -> None:
    rows = el.find("remapped_rows")
    if rows is not None:
        g.remap_present = True
        g.remap_corr = num(_text(rows, "remapped_row_corr"))
        g.remap_unc = num(_text(rows, "remapped_row_unc"))
        g.remap_pending = yes(_text(rows, "remapped_row_pending"))
        g.remap_failure = yes(_text(rows, "remapped_row_failure"))
        for c in rows.iterfind("row_remapper_histogram/*"):
            if (n := num(c.text)) is not None:
                g.bank_hist[c.tag.rsplit("_", 1)[-1]] = n
        g.lines["remap_pending"] = f"<remapped_row_pending>{_text(rows, 'remapped_row_pending')}"
        g.lines["remap_failure"] = f"<remapped_row_failure>{_text(rows, 'remapped_row_failure')}"
    pages = el.find("retired_pages")
    if pages is not None:
        g.retired_present = True
        g.retired_sbe = num(_text(pages, "multiple_single_bit_retirement/retired_count"))
        g.retired_dbe = num(_text(pages, "double_bit_retirement/retired_count"))
        pend = [yes(_text(pages, t)) for t in ("pending_blacklist", "pending_retirement")]
        g.retired_pending = True if any(pend) else False if False in pend else None
        g.lines["retired_pending"] = "<retired_pages> pending: " + str(g.retired_pending)


def _state(el: ET.Element) -> GpuState:
    bus = el.get("id") or _text(el, "pci/pci_bus_id") or "?"
    g = GpuState(part=f"gpu {bus}", bus_id=bus)
    g.product = _text(el, "product_name") or ""
    g.virtualization = _text(el, "gpu_virtualization_mode/virtualization_mode") or ""
    g.mig_mode = _text(el, "mig_mode/current_mig")
    g.mig_devices = len(el.findall("mig_devices/mig_device"))
    g.ecc_mode = _text(el, "ecc_mode/current_ecc")
    _ecc(g, el)
    _rows(g, el)
    for block in ("clocks_event_reasons", "clocks_throttle_reasons"):
        for c in el.iterfind(f"{block}/*"):
            name = _EVENTS.get(c.tag.split("_reason_", 1)[-1])
            if name:
                g.events[name] = (c.text or "").strip().lower() == "active"
                g.lines[f"event:{name}"] = f"<{c.tag}>{(c.text or '').strip()}"
    link = "pci/pci_gpu_link_info"
    gen = [num(_text(el, f"{link}/pcie_gen/{t}")) for t in
           ("current_link_gen", "max_link_gen", "max_host_link_gen")]
    if gen[0] is not None and gen[1] is not None:
        g.pcie_gen = (gen[0], min(gen[1], gen[2]) if gen[2] is not None else gen[1])
        g.lines["pcie_gen"] = f"<current_link_gen>{gen[0]} <max_link_gen>{gen[1]}"
    width = [num(_text(el, f"{link}/link_widths/{t}")) for t in
             ("current_link_width", "max_link_width")]
    if width[0] is not None and width[1] is not None:
        g.pcie_width = (width[0], width[1])
        g.lines["pcie_width"] = f"<current_link_width>{width[0]}x <max_link_width>{width[1]}x"
    g.replays = num(_text(el, "pci/replay_counter"))
    g.util_pct = num(_text(el, "utilization/gpu_util"))
    g.pstate = _text(el, "performance_state")
    g.graphics_mhz = num(_text(el, "clocks/graphics_clock"))
    g.fabric_state = _text(el, "fabric/state")
    g.fabric_status = _text(el, "fabric/status")
    g.fabric_health = _text(el, "fabric/health/summary")
    g.reset_required = yes(_text(el, "gpu_reset_status/reset_required")) is True
    g.drain_reset = yes(_text(el, "gpu_reset_status/drain_and_reset_recommended")) is True
    g.recovery_action = _text(el, "gpu_recovery_action")
    users = {id(x) for p in el.iterfind("processes") for x in p.iter()}  # never judged
    g.errors = [(c.tag, f"<{c.tag}>{c.text.strip()}") for c in el.iter()
                if c.text and (c.text.strip() == "ERR!" or "Unknown Error" in c.text)
                and id(c) not in users]
    return g


def _facts(root: ET.Element | None) -> dict:
    """The XML-only facts of the first GPU, keyed as the corpus' ``expected.json`` names them:
    ``retired_pages``/``remapped_rows`` when ``N/A``, old-style aggregate single/double-bit
    totals, ``pending_retirement``/``pending_blacklist``."""
    gpu = root.find("gpu") if root is not None else None
    out: dict = {}
    if gpu is None:
        return out
    if _text(gpu, "remapped_rows") == "N/A":
        out["remapped_rows"] = "N/A"
    if _text(gpu, "retired_pages/pending_retirement") == "N/A":
        out["retired_pages"] = "N/A"
    for kind in ("single_bit", "double_bit"):
        if (v := num(_text(gpu, f"ecc_errors/aggregate/{kind}/total"))) is not None:
            out[f"aggregate_{kind}_ecc"] = v
    for tag in ("pending_retirement", "pending_blacklist"):
        if (v := yes(_text(gpu, f"retired_pages/{tag}"))) is not None:
            out[tag] = v
    return out


def judge_xml(text: str, catalogue: Catalogue, context) -> NodeReport:
    """Judge ``nvidia-smi -q -x`` XML; a cut or malformed document is incomplete. Message
    lines nvidia-smi printed before the document (a lost GPU, infoROM) are judged too."""
    start = text.find("<")
    root, reason = _parse(text[start:] if start >= 0 else "")
    gpus = [_state(el) for el in root.iter("gpu")] if root is not None else []
    if root is None and not reason:
        reason = "no <nvidia_smi_log> element"
    return judge_states("nvidia-smi-qx", gpus, catalogue, context,
                        driver=_text(root, "driver_version"),
                        attached=num(_text(root, "attached_gpus")),
                        extra=message_findings(text[:start] if start > 0 else "", catalogue),
                        reason=reason, facts=_facts(root))
