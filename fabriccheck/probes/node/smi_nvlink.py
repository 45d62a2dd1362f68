"""``nvidia-smi nvlink -s`` / ``--status`` judged: inactive, missing and slow NVLinks (pure).

An inactive link is a fault when the GPU's other links, or other GPUs' links, are up (or the
node's SXM modules, whose links are always wired, are all down); a GPU with every link inactive
and no NVLink peer (a PCIe card without a bridge, a lone GPU of a VM) is recorded. A GPU
listing fewer links than its model has (or than the node's other GPUs) is a fault; a link slower
than the node's usual speed warns. Only the GPUs listed are judged: a GPU missing from the list
is not inferred, and the last GPU listing fewer links than its peers reads as a cut output
(incomplete), not a fault.
"""

from __future__ import annotations

import re
from collections import Counter

from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.probes.node.findings import Finding, NodeReport
from fabriccheck.probes.node.lines import H, newline_breaks_only
from fabriccheck.probes.node.smi_query import MESSAGE, message_findings

_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Za-z-]+)\)\s*$")
_LINK = re.compile(r"^\s*Link (\d+): (?:(\d+(?:\.\d+)?) GB/s|<inactive>)\s*$")
_ALL_OFF = re.compile(r"all links are inactive", re.I)
#: the GPU and link lines of a whole text in one scan (when its only line break is ``\n``):
#: (index, product, uuid, link, GB/s)
_GPU_OR_LINK = re.compile(
    rf"^(?:GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Za-z-]+)\)"
    rf"|{H}*Link (\d+): (?:(\d+(?:\.\d+)?) GB/s|<inactive>)){H}*$", re.M)


def looks_like_nvlink(text: str) -> bool:
    """True for ``nvidia-smi nvlink -s``: a ``GPU n: ... (UUID: ...)`` line first, then only
    ``Link n: <speed> GB/s`` / ``<inactive>`` lines, GPU lines and nvidia-smi messages (the last
    may be cut).

    >>> looks_like_nvlink("GPU 0: NVIDIA H200 (UUID: GPU-0)\\n\\t Link 0: 26.562 GB/s\\n")
    True
    >>> looks_like_nvlink("GPU 0: NVIDIA H200 (UUID: GPU-0)\\n")
    False
    """
    lines = [ln for ln in text[:20_000].splitlines()[:200] if ln.strip()]
    if not lines or not _GPU.match(lines[0]):
        return False
    links = [ln for ln in lines if _LINK.match(ln) or _ALL_OFF.search(ln)]
    ok = [bool(_GPU.match(ln) or ln in links or MESSAGE.search(ln)) for ln in lines]
    cut = lines[-1].startswith(("G", " ", "\t"))  # a cut GPU or (indented) link line
    return bool(links) and all(ok[:-1]) and (ok[-1] or cut)


def parse_nvlink(text: str) -> list[dict]:
    """One record per GPU: ``index``, ``product``, ``links`` ({n: GB/s or None for inactive}),
    ``all_off`` (NVML said all links are inactive).

    >>> parse_nvlink("GPU 3: V100 (UUID: GPU-3)\\n  Link 0: 25.781 GB/s\\n  Link 1: <inactive>\\n")
    [{'index': 3, 'product': 'V100', 'links': {0: 25.781, 1: None}, 'all_off': False}]
    """
    if newline_breaks_only(text) and text.isascii() and "all links are inactive" not in \
            text.lower():  # (beyond ASCII, re's case folding: read line by line)
        return _parse_scan(text)
    gpus: list[dict] = []
    for ln in text.splitlines():
        if m := _GPU.match(ln):
            gpus.append({"index": int(m[1]), "product": m[2], "links": {}, "all_off": False})
        elif gpus and (m := _LINK.match(ln)):
            gpus[-1]["links"][int(m[1])] = float(m[2]) if m[2] else None
        elif gpus and _ALL_OFF.search(ln):
            gpus[-1]["all_off"] = True
    return gpus


def _parse_scan(text: str) -> list[dict]:
    """:func:`parse_nvlink` in one scan, for a text split at ``\\n`` only and without
    ``all links are inactive``."""
    gpus: list[dict] = []
    for index, product, _uuid, link, speed in _GPU_OR_LINK.findall(text):
        if index:
            gpus.append({"index": int(index), "product": product, "links": {},
                         "all_off": False})
        elif gpus:
            gpus[-1]["links"][int(link)] = float(speed) if speed else None
    return gpus


def _model_links(cat: Catalogue, product: str) -> int | None:
    """The links ``product`` has by the catalogue's ``links_by_product`` (remembered per
    catalogue and product)."""
    memo = cat.derived(_links_by_product)
    if product not in memo:
        table = cat.param("gpu-nvlink-missing-links", "links_by_product", {}) or {}
        found = next((int(n) for pat, n in table.items() if re.search(pat, product)), None)
        if len(memo) >= 1024:  # a handful of models in practice
            return found
        memo[product] = found
    return memo[product]


def _links_by_product(_: Catalogue) -> dict[str, int | None]:
    return {}


def _speed(value: float) -> str:
    return f"{value:g} GB/s"


def _judge_gpu(g: dict, node_up: bool, usual: float | None, usual_count: int,
               cat: Catalogue, last: bool, alone: bool) -> list[Finding]:
    part, links = f"gpu {g['index']}", g["links"]
    off = sorted(n for n, v in links.items() if v is None)
    up = [n for n, v in links.items() if v is not None]
    model = _model_links(cat, g["product"])
    out: list[Finding] = []
    if off or g["all_off"]:
        what = (f"NVLink {', '.join(map(str, off))} inactive" if off
                else "all NVLinks inactive")
        if up or node_up or (model and not alone):  # a lone GPU may have no NVLink peer
            out.append(cat.finding("gpu-nvlink-inactive", part=part, what=what + (
                f" ({len(up)} of {len(links)} up)" if links else ""),
                line=f"Link {off[0]}: <inactive>" if off else "all links are inActive"))
        else:
            out.append(cat.finding("gpu-nvlink-absent", part=part))
    want = max(model or 0, usual_count)
    if links and len(links) < want and not last:  # the last GPU's list may just be cut
        out.append(cat.finding("gpu-nvlink-missing-links", part=part,
                               what=f"{len(links)} NVLinks listed, {g['product']} has {want}"))
    slow = sorted(n for n, v in links.items() if v is not None and usual and v < usual * 0.95)
    if slow:
        names = ", ".join(map(str, slow))
        out.append(cat.finding("gpu-nvlink-slow", part=part, what=f"NVLink {names} at "
                               f"{_speed(links[slow[0]])}, the others at {_speed(usual)}"))
    return out


def _switch_side(gpus: list[dict], findings: list[Finding], cat: Catalogue) -> list[Finding]:
    """On a multi-node NVLink tray (GB200/GB300: the NVSwitches sit in the rack's switch
    trays, not in the tray) the same links inactive on every GPU point at the switch chips
    they are cabled to, not at this tray: one ``gpu-nvlink-switch-side`` warning instead of a
    fault per GPU (the rack's other trays show the same; docs/nvl72.md)."""
    products = cat.param("gpu-nvlink-switch-side", "products", []) or []
    off = [frozenset(n for n, v in g["links"].items() if v is None) for g in gpus]
    if (len(gpus) < 2 or not off[0] or len(set(off)) != 1
            or any(len(off[0]) >= len(g["links"]) for g in gpus)  # every link down: the tray
            or not all(any(p in g["product"] for p in products) for g in gpus)):
        return findings
    rest = [f for f in findings if f.check != "gpu-nvlink-inactive"]
    links = ", ".join(map(str, sorted(off[0])))
    return [*rest, cat.finding("gpu-nvlink-switch-side", part="node", what=(
        f"NVLink {links} inactive on all {len(gpus)} GPUs: the NVSwitch side (the chips "
        "these ports are cabled to), not this tray"), line=f"Link {min(off[0])}: <inactive>")]


def judge_nvlink(text: str, catalogue: Catalogue, context) -> NodeReport:
    """Judge ``nvidia-smi nvlink -s`` / ``--status``."""
    gpus = parse_nvlink(text)
    speeds = Counter(v for g in gpus for v in g["links"].values() if v is not None)
    usual = speeds.most_common(1)[0][0] if speeds else None
    counts = Counter(len(g["links"]) for g in gpus if g["links"])
    usual_count = max(counts) if counts else 0
    findings = message_findings(text, catalogue)
    for g in gpus:
        peers_up = any(v is not None for p in gpus if p is not g for v in p["links"].values())
        findings += _judge_gpu(g, peers_up, usual, usual_count, catalogue, g is gpus[-1],
                               len(gpus) == 1)
    findings = _switch_side(gpus, findings, catalogue)
    inactive = {f"GPU {g['index']}": sorted(n for n, v in g["links"].items() if v is None)
                for g in gpus if any(v is None for v in g["links"].values())}
    facts = {"gpus": len(gpus), "gpus_listed": len(gpus), "links_per_gpu": usual_count,
             "link_speed": _speed(usual) if usual else None,
             "inactive_links": sum(len(v) for v in inactive.values()), "inactive": inactive,
             "links_inactive": sum(len(v) for v in inactive.values())}
    last = gpus[-1] if gpus else None
    tail = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "")
    model = _model_links(catalogue, last["product"]) if last else None
    want = max(model or 0, usual_count)
    reason = ("no GPU in the output" if not last else
              f"GPU {last['index']} lists no link" if not last["links"] and not last["all_off"]
              else f"the last line is cut: {tail.strip()[:60]!r}" if not (
                  _GPU.match(tail) or _LINK.match(tail) or _ALL_OFF.search(tail)
                  or MESSAGE.search(tail))
              else f"GPU {last['index']} lists {len(last['links'])} of {want} links: the "
              "output may stop early" if last["links"] and len(last["links"]) < want else "")
    return NodeReport("nvidia-smi-nvlink", tuple(findings),
                      {k: v for k, v in facts.items() if v is not None},
                      complete=not reason, reason=reason)
