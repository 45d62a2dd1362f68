"""``nvidia-smi -L`` / ``-q``: how many GPUs a node sees, and which are unhealthy (pure).

``-L`` prints one line per GPU (``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)``); ``-q`` prints
``Attached GPUs : 8`` and a section per GPU (``GPU 00000000:18:00.0``) whose ``ECC Errors`` /
``Volatile`` block and ``Remapped Rows`` block say whether the GPU's memory is failing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabriccheck.errors import ParseError

_LIST_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9a-fA-F-]+)\)\s*$", re.M)
_ATTACHED = re.compile(r"^Attached GPUs\s*:\s*(\d+)\s*$", re.M)
_SECTION = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", re.M)
_FIELD = re.compile(r"^(\s*)([^:\n]+?)\s*:\s*(.*?)\s*$")


@dataclass(frozen=True)
class GpuHealth:
    """One GPU of ``nvidia-smi -q``: its bus id and the problems found (empty: healthy)."""

    bus_id: str
    product: str
    problems: tuple[str, ...]


def parse_gpu_list(text: str) -> list[tuple[int, str, str]]:
    """``(index, name, uuid)`` per line of ``nvidia-smi -L``.

    >>> parse_gpu_list("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-12ab-34cd)")
    [(0, 'NVIDIA H100 80GB HBM3', 'GPU-12ab-34cd')]
    """
    return [(int(m[1]), m[2], m[3]) for m in _LIST_LINE.finditer(text)]


def gpu_count(text: str) -> float:
    """GPUs a node sees, from ``nvidia-smi -L`` or ``nvidia-smi -q`` output.

    Raises
    ------
    ParseError
        Neither format (``nvidia-smi`` missing, driver not loaded: "No devices were found" is
        zero GPUs, not an error).
    """
    listed = parse_gpu_list(text)
    if listed:
        return float(len(listed))
    attached = _ATTACHED.search(text)
    if attached:
        return float(attached[1])
    if "No devices were found" in text:
        return 0.0
    raise ParseError("no GPU lines (nvidia-smi -L) and no 'Attached GPUs' (nvidia-smi -q)",
                     tool="nvidia-smi", excerpt=text)


def parse_gpu_health(text: str) -> list[GpuHealth]:
    """Each GPU section of ``nvidia-smi -q`` with the problems it shows.

    A problem is: volatile uncorrectable ECC errors (SRAM or DRAM) above 0, a row remapping
    pending or failed, pending retired pages (older GPUs), or ``Fan Speed``/``Power`` ``ERR!``.
    """
    starts = list(_SECTION.finditer(text))
    if not starts and not _ATTACHED.search(text):
        raise ParseError("no 'GPU <bus id>' sections", tool="nvidia-smi -q", excerpt=text)
    out = []
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        out.append(_one_gpu(m[1], text[m.end():end]))
    return out


def _one_gpu(bus_id: str, body: str) -> GpuHealth:
    product, problems, path = "", [], []
    for line in body.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        m = _FIELD.match(line)
        key = (m[2] if m else line).strip()
        value = m[3] if m else ""
        while path and path[-1][0] >= indent:
            path.pop()
        where = " / ".join(k for _, k in path)
        if not m or value == "":
            path.append((indent, key))
            continue
        if key == "Product Name":
            product = value
        elif ("Volatile" in where and "Uncorrectable" in key and value.isdigit()
              and int(value) > 0):
            problems.append(f"{key} ECC errors (volatile): {value}")
        elif "Remapped Rows" in where and key in ("Pending", "Remapping Failure Occurred") \
                and value == "Yes":
            problems.append(f"row remapping {key.lower()}")
        elif key == "Pending Page Blacklist" and value == "Yes":
            problems.append("retired pages pending")
        elif value == "ERR!":
            problems.append(f"{key}: ERR!")
    return GpuHealth(bus_id, product, tuple(problems))


def unhealthy_gpus(text: str) -> float:
    """How many GPUs of ``nvidia-smi -q`` show a problem (see :func:`parse_gpu_health`)."""
    return float(sum(1 for g in parse_gpu_health(text) if g.problems))
