"""The short ``nvidia-smi`` outputs judged: the default table, ``-L`` and ``topo -m`` (pure).

The table names a GPU by its index (``gpu 0``): ``ERR!`` cells, the ``Volatile Uncorr. ECC``
column, ``MIG M.``; ``-L`` counts top-level ``GPU n:`` lines (indented ``MIG`` lines are MIG
devices, not GPUs); ``topo -m`` checks that an NVSwitch node's GPU pairs all show the same
``NV#``. The messages nvidia-smi prints about a lost GPU, a corrupted infoROM or an unreachable
driver are judged in every mode (:func:`~.smi_query.message_findings`).
"""

from __future__ import annotations

import re
from collections import Counter

from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.probes.node.findings import Finding, NodeReport
from fabriccheck.probes.node.smi_query import MESSAGE, message_findings, num

_BUS = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")
_SMI_HEAD = re.compile(r"^\|\s*NVIDIA-SMI \S+.*Driver Version:\s*(\S+)")
_CUDA = re.compile(r"CUDA Version:\s*(\S+)")
_STAMP = re.compile(r"^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3} +\d+ [\d:]+ \d{4}$")
_LIST = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Za-z-]+)\)\s*$")
_MIG = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[0-9A-Za-z/-]+)\)\s*$")
_CELL_NAMES = (("GPU/Name/Persistence-M", "Bus-Id/Disp.A", "Volatile Uncorr. ECC"),
               ("Fan/Temp/Perf/Pwr", "Memory-Usage", "GPU-Util/Compute M."),
               ("", "", "MIG M."))


def _nonblank(text: str, n: int) -> list[str]:
    return [ln.rstrip() for ln in text[:20_000].splitlines()[:200] if ln.strip()][:n]


def _messages_only(lines: list[str]) -> bool:
    return bool(lines) and len(lines) <= 40 and all(MESSAGE.search(ln) for ln in lines)


# ---- the default table -----------------------------------------------------------------------
def looks_like_table(text: str) -> bool:
    """True for the default ``nvidia-smi`` table (the timestamp, then the ``+---`` border and the
    ``| NVIDIA-SMI ... Driver Version:`` banner first), or an output that is only nvidia-smi's
    error messages.

    >>> looks_like_table("+---+\\n| NVIDIA-SMI 535.54.03   Driver Version: 535.54.03 |\\n")
    True
    >>> looks_like_table("No devices were found\\n")
    True
    >>> looks_like_table("# nThread 1 nGpus 8 minBytes 8\\n| NVIDIA-SMI 535 Driver Version: 1 |")
    False
    """
    head = _nonblank(text, 41)
    lines = list(head)
    while lines and MESSAGE.search(lines[0]):
        lines.pop(0)  # "Unable to determine the device handle ..." before the table
    if lines and _STAMP.match(lines[0].strip()):
        lines.pop(0)
    if len(lines) >= 2 and lines[0].strip().startswith("+-") and _SMI_HEAD.match(
            lines[1].strip()):
        return True
    return _messages_only(head)


def _blocks(lines: list[str]) -> tuple[list[list[list[str]]], list[int], bool]:
    """The GPU blocks (rows of cells), MIG device rows' GPU indices, and whether the GPU
    table ended properly."""
    blocks: list[list[list[str]]] = []
    mig: list[int] = []
    state, cur, closed = "", [], False
    for raw in lines:
        line = raw.strip()
        if state == "" and "Bus-Id" in line:
            state = "head"
        elif state == "head" and line.startswith("|="):
            state, cur = "gpus", []
        elif state == "gpus":
            if line.startswith("+-") or line.startswith("|-"):
                if cur:
                    blocks.append(cur)
                cur, closed = [], True
            elif line.startswith("|") and not re.search(r"Processes:|MIG devices:", line):
                cur.append([c.strip() for c in line.strip("|").split("|")])
                closed = False
            else:
                state = "after"
        elif state == "after" and "MIG devices:" in line:
            state = "mig"
        elif state == "mig" and (m := re.match(r"^\|\s*(\d+)\s+\d+\s+\d+\s+\d+\s*\|", line)):
            mig.append(int(m[1]))
    if state == "gpus" and cur:
        blocks.append(cur)
    return blocks, mig, closed or state not in ("head", "gpus")


def judge_table(text: str, catalogue: Catalogue, context) -> NodeReport:
    """Judge the default ``nvidia-smi`` table."""
    lines = text.splitlines()
    findings: list[Finding] = message_findings(text, catalogue)
    blocks, mig, closed = _blocks(lines)
    names, ecc_total, driver, cuda = [], 0, None, None
    for ln in lines[:12]:
        if m := _SMI_HEAD.match(ln.strip()):
            driver = m[1]
            cuda = (_CUDA.search(ln) or [None, None])[1]
    for rows in blocks:
        first = rows[0][0].split() if rows[0] and rows[0][0] else []
        if not first or not first[0].isdigit():
            continue
        part = f"gpu {first[0]}"
        names.append(" ".join(first[1:-1]) or "?")
        bus = next((t for t in (rows[0][1].split() if len(rows[0]) > 1 else [])
                    if _BUS.match(t)), "")
        ecc = num(rows[0][2]) if len(rows[0]) > 2 and rows[0][2].strip().isdigit() else None
        bad = [(_CELL_NAMES[min(i, 2)][min(j, 2)] or "a field", "|".join(row))
               for i, row in enumerate(rows) for j, cell in enumerate(row)
               if "ERR!" in cell or "Unknown Error" in cell]
        if bad:
            findings.append(catalogue.finding(
                "gpu-err-field", part=part, line=bad[0][1], what="nvidia-smi cannot read "
                + ", ".join(dict.fromkeys(k for k, _ in bad)) + (f" ({bus})" if bus else "")))
        if ecc:
            ecc_total += ecc
            findings.append(catalogue.finding(
                "gpu-ecc-volatile-uncorrectable", part=part, line="|".join(rows[0]),
                what=f"{ecc} uncorrectable ECC errors since the driver loaded ({bus})"))
        if len(rows) > 2 and len(rows[2]) > 2 and rows[2][2] == "Enabled":
            findings.append(catalogue.finding("gpu-mig-enabled", part=part))
    expected = getattr(context, "expected_gpus", None)
    if expected and len(names) < expected:
        findings.append(catalogue.finding("gpu-count-missing", part="node",
                                          what=f"{len(names)} of {expected} GPUs are listed"))
    reason = "" if closed else "the GPU table stops before its closing border"
    if not names and not findings and not reason:
        reason = "no GPU rows and no nvidia-smi message"
    inforom = [f.part[4:] for f in findings if f.check == "gpu-inforom-corrupted"]
    facts = {"gpus": len(names), "product": _uniform(names), "driver": driver,
             "cuda": cuda, "volatile_uncorr_ecc_column": ecc_total,
             "mig_devices": len(mig) or None, "inforom_corrupted": bool(inforom),
             "inforom_corrupted_gpu": inforom[0] if inforom else None}
    return NodeReport("nvidia-smi", tuple(findings), {k: v for k, v in facts.items()
                                                      if v is not None},
                      complete=not reason, reason=reason)


def _uniform(values: list[str]):
    return None if not values else values[0] if len(set(values)) == 1 else sorted(set(values))


# ---- nvidia-smi -L -----------------------------------------------------------------------------
def looks_like_list(text: str) -> bool:
    """True for ``nvidia-smi -L``: every line a ``GPU n: ... (UUID: GPU-...)`` line, an
    indented ``MIG`` line or an nvidia-smi message (the last may be cut), the first a GPU
    line.

    >>> looks_like_list("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1a2b)\\n")
    True
    >>> looks_like_list("GPU 0: NVIDIA H100 (UUID: GPU-1a2b)\\n\\t Link 0: 26.562 GB/s\\n")
    False
    """
    lines = _nonblank(text, 200)
    ok = [bool(_LIST.match(ln) or _MIG.match(ln) or MESSAGE.search(ln)) for ln in lines]
    cut = len(lines) > 1 and lines[-1].startswith(("G", " "))  # a cut GPU or MIG line
    return bool(lines) and ok[0] and all(ok[:-1]) and (ok[-1] or cut)


def judge_list(text: str, catalogue: Catalogue, context) -> NodeReport:
    """Judge ``nvidia-smi -L``: GPUs counted (MIG lines are not GPUs), nvidia-smi messages."""
    findings = message_findings(text, catalogue)
    gpus: list[tuple[int, str]] = []
    profiles: list[str] = []
    mig_of: Counter[int] = Counter()
    odd = ""
    for ln in text.splitlines():
        if m := _LIST.match(ln):
            gpus.append((int(m[1]), m[2]))
        elif (m := _MIG.match(ln)) and gpus:
            profiles.append(m[1])
            mig_of[gpus[-1][0]] += 1
        elif ln.strip() and not MESSAGE.search(ln):
            odd = ln.strip()
    for index, n in mig_of.items():
        findings.append(catalogue.finding("gpu-mig-enabled", part=f"gpu {index}",
                                          what=f"MIG enabled ({n} MIG devices)"))
    expected = getattr(context, "expected_gpus", None)
    if expected and len(gpus) < expected:
        findings.append(catalogue.finding("gpu-count-missing", part="node",
                                          what=f"{len(gpus)} of {expected} GPUs are listed"))
    facts = {"gpus": len(gpus), "product": _uniform([n for _, n in gpus]),
             "mig_devices": len(profiles), "mig_profiles": profiles}
    reason = f"a line nvidia-smi -L does not print: {odd[:80]!r}" if odd else ""
    return NodeReport("nvidia-smi-L", tuple(findings), {k: v for k, v in facts.items()
                                                        if v is not None},
                      complete=not reason, reason=reason)


# ---- nvidia-smi topo -m ---------------------------------------------------------------------
_PHRASES = (("CPU Affinity", "CPU_Affinity"), ("NUMA Affinity", "NUMA_Affinity"),
            ("GPU NUMA ID", "GPU_NUMA_ID"))


def _topo_header(line: str) -> list[str] | None:
    for a, b in _PHRASES:
        line = line.replace(a, b)
    tokens = line.split()
    return tokens if tokens and tokens[0] == "GPU0" else None


def looks_like_topo(text: str) -> bool:
    """True for ``nvidia-smi topo -m``: the first line is the ``GPU0 GPU1 ... CPU Affinity``
    header and a ``GPU0`` row follows.

    >>> looks_like_topo("\\tGPU0\\tGPU1\\tCPU Affinity\\nGPU0\\t X \\tNV12\\t0-23\\n")
    True
    """
    lines = _nonblank(text, 3)
    return (len(lines) >= 2 and _topo_header(lines[0]) is not None
            and "CPU_Affinity" in _topo_header(lines[0])
            and lines[1].split()[:1] == ["GPU0"])


def parse_topo(text: str) -> tuple[list[str], dict[str, list[str]], dict[str, list[str]]]:
    """The device columns, each row's cells, and each GPU row's trailing columns (CPU affinity,
    NUMA affinity, GPU NUMA ID) of ``topo -m``."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    cols = _topo_header(lines[0]) if lines else None
    if not cols:
        return [], {}, {}
    devices = [c for c in cols if c not in {b for _, b in _PHRASES}]
    rows, tails = {}, {}
    for ln in lines[1:]:
        tokens = ln.split()
        if not tokens or tokens[0] not in devices:
            break
        rows[tokens[0]] = tokens[1:1 + len(devices)]
        tails[tokens[0]] = tokens[1 + len(devices):]
    return devices, rows, tails


def _suspects(bad: dict[tuple[str, str], str], gpus: list[str]) -> set[str]:
    """The GPUs that explain every odd pair, each odd with most of its peers (empty when the
    odd pairs are scattered: a mesh, not a broken GPU).

    >>> sorted(_suspects({("GPU0", "GPU2"): "SYS", ("GPU1", "GPU2"): "SYS"},
    ...                  ["GPU0", "GPU1", "GPU2"]))
    ['GPU2']
    """
    if len(gpus) < 3:
        return set()
    count = Counter(g for p in bad for g in p)
    found = {g for g, n in count.items() if n * 2 > len(gpus) - 1}
    return found if found and all(set(p) & found for p in bad) else set()


def judge_topo(text: str, catalogue: Catalogue, context) -> NodeReport:
    """Judge ``nvidia-smi topo -m``: on a node whose GPU pairs mostly share one ``NV#`` (an
    NVSwitch node), a GPU that reaches its peers without it is a fault; an irregular mesh
    (DGX-1) or a PCIe-only node is recorded."""
    devices, rows, tails = parse_topo(text)
    gpus = [d for d in devices if d.startswith("GPU") and d in rows]
    nics = [d for d in devices if not d.startswith("GPU")]
    cut = not gpus or len(gpus) < sum(d.startswith("GPU") for d in devices) or any(
        len(rows[g]) != len(devices) for g in gpus)
    idx = {d: i for i, d in enumerate(devices)}
    pairs = {} if cut else {(a, b): rows[a][idx[b]] for i, a in enumerate(gpus)
                            for b in gpus[i + 1:]}
    findings: list[Finding] = []
    nv = Counter(v for v in pairs.values() if v.startswith("NV"))
    link = nv.most_common(1)[0][0] if nv else None  # a cut matrix has no pairs to judge
    bad = {p: v for p, v in pairs.items() if v != link} if link else {}
    suspects = _suspects(bad, gpus) if bad and nv[link] * 2 >= len(pairs) else set()
    for g in sorted(suspects, key=lambda d: int(d[3:])):
        cells = sorted({v for p, v in bad.items() if g in p})
        findings.append(catalogue.finding(
            "gpu-topo-nvlink-degraded", part=f"gpu {g[3:]}", line=f"{g} " + " ".join(rows[g]),
            what=f"{g} reaches its peers over {'/'.join(cells)}, the others over {link}"))
    if bad and not suspects:
        findings.append(catalogue.finding("gpu-topo-irregular", part="node"))
        link = None
    numa = {t[1] for g, t in tails.items() if g in gpus and len(t) > 1 and t[1] != "N/A"}
    facts = {"gpus": len(gpus), "nics": len(nics), "numa_nodes": len(numa),
             "gpu_pair_link": link}
    reason = "the topology matrix is cut short" if cut else ""
    return NodeReport("nvidia-smi-topo", tuple(findings),
                      {k: v for k, v in facts.items() if v is not None},
                      complete=not reason, reason=reason)
