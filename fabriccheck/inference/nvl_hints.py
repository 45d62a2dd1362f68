"""What the preflight's node checks say about each tray's NVLink ports (pure): the inactive
ports per GPU (``gpu-nvlink-inactive``), the ports inactive on every GPU (``gpu-nvlink-switch-
side``: the switch side) and a degraded fabric health (``gpu-fabric-health``,
``gpu-fabric-bandwidth``), read from the judged readings' findings (docs/nvl72.md "The checks").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from fabriccheck.models import Observation

__all__ = ["NvlHints", "nvl_hints"]

_PORTS_RE = re.compile(r"NVLink ((?:\d+(?:, )?)+) inactive")
_GPU_RE = re.compile(r"^gpu (\d+)$")


@dataclass
class NvlHints:
    """Per tray: ``ports`` GPU index -> its inactive ports; ``switch_side`` the ports inactive
    on every GPU; ``health`` the fabric-health findings' lines."""

    ports: dict[str, dict[int, set[int]]] = field(default_factory=dict)
    switch_side: dict[str, frozenset[int]] = field(default_factory=dict)
    health: dict[str, list[str]] = field(default_factory=dict)


def _ports(what: str) -> set[int]:
    m = _PORTS_RE.search(what or "")
    return {int(x) for x in m.group(1).split(", ")} if m else set()


def nvl_hints(readings: Sequence[Observation]) -> NvlHints:
    """The NVLink hints of the run's node-local readings (the last reading of a tray wins)."""
    out = NvlHints()
    for o in readings:
        if not o.findings or not o.test.nodes:
            continue
        tray = o.test.nodes[0]
        for f in o.findings:
            check = f.get("check")
            if check == "gpu-nvlink-inactive":
                m = _GPU_RE.match(str(f.get("part", "")))
                if m:
                    out.ports.setdefault(tray, {})[int(m.group(1))] = _ports(f.get("what", ""))
            elif check == "gpu-nvlink-switch-side":
                out.switch_side[tray] = frozenset(_ports(f.get("what", "")))
            elif check in ("gpu-fabric-health", "gpu-fabric-bandwidth"):
                out.health.setdefault(tray, []).append(str(f.get("line", "")).strip())
    return out
