"""The NVLink fabric manager's state as a GB200/GB300 compute tray sees it, judged (pure).

On an NVL72 rack the fabric manager is the rack's, not the tray's: the Global Fabric Manager
runs in NMX-Controller on the NVSwitch trays (NVIDIA NMX-C: "in the GB200 NVL, these services
include the Subnet Manager and Global Fabric Manager"), and a compute tray has no NVSwitch of
its own: its ``nvidia-fabricmanager`` unit is inactive, and that is healthy (leptonai/gpud#1106
judges GB200 trays by the GPUs' fabric state instead). What a tray can observe honestly is
what the fabric manager did to its GPUs: per GPU, the registration the driver reports
(``Not Started``, ``In Progress``, ``Completed`` and a status; NVML
``nvmlDeviceGetGpuFabricInfo``). The tray has no fabric manager log to read: the GFM logs on
the switch trays.

The domain check (:data:`~fabriccheck.probes.node.imex.IMEX_COMMAND`) prints two sections for it
(:data:`FM_SECTIONS`):

- ``== fabric_manager``: ``systemctl is-active nvidia-fabricmanager``, the tray's own unit:
  recorded (``facts.fm_service``); running or failed is an info finding
  (``fabric-manager-local``): it never drains the tray;
- ``== fabric_state``: ``nvidia-smi --query-gpu=index,fabric.state,fabric.status
  --format=csv,noheader``, one ``0, Completed, Success`` line per GPU. Every GPU
  ``Completed`` / ``Success`` (or no GPU in a fabric: ``N/A``) is healthy; any other is one
  fault for the tray (``fabric-manager-not-ready``) naming the GPUs and what their state says
  (NVIDIA/NVSentinel's classes: not started, registration stuck, fabric error). The
  ``gpu-health`` check faults the same GPUs one by one from ``nvidia-smi -q``; this one names
  the fabric manager as the part to look at.
"""

from __future__ import annotations

import re

from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.probes.node.findings import Finding

#: the sections of the domain check's command (docs/nvl72.md), each ``2>&1``: a missing tool
#: reads as unread, never as a state
FM_SECTIONS = (
    "echo '== fabric_manager'; systemctl is-active nvidia-fabricmanager 2>&1; "
    "echo '== fabric_state'; nvidia-smi --query-gpu=index,fabric.state,fabric.status "
    "--format=csv,noheader 2>&1; "
)
_ROW = re.compile(r"^\s*(\d+)\s*,\s*([^,]+?)\s*,\s*([^,]+?)\s*$")
#: a GPU outside any NVLink fabric (nvidia-smi prints unavailable CSV values in brackets)
_NO_FABRIC = {"N/A", "[N/A]", "Not Supported", "[Not Supported]"}
#: the unit states that say a fabric manager was started on the tray
_LOCAL = {"active", "activating", "reloading", "deactivating", "failed"}
_WHY = {"Not Started": "not started", "In Progress": "registration in progress"}


def parse_fabric_states(text: str) -> list[tuple[int, str, str]]:
    """``(gpu index, state, status)`` per CSV line of ``--query-gpu=index,fabric.state,
    fabric.status`` (other lines, e.g. an error, are left out).

    >>> parse_fabric_states("0, Completed, Success\\n1, Not Started, [N/A]\\n")
    [(0, 'Completed', 'Success'), (1, 'Not Started', '[N/A]')]
    """
    return [(int(m[1]), m[2], m[3]) for line in text.splitlines() if (m := _ROW.match(line))]


def _not_ready(rows: list[tuple[int, str, str]], cat: Catalogue) -> list[Finding]:
    bad = [r for r in rows if r[1] not in _NO_FABRIC and (r[1], r[2]) != ("Completed", "Success")]
    if not bad:
        return []
    gpus = ", ".join(f"GPU {i} {_WHY.get(state, f'{state}, status {status}')}"
                     for i, state, status in bad)
    if len(bad) == len(rows) and all(r[1] == "Not Started" for r in bad):
        what = (f"the fabric manager configured none of the tray's {len(rows)} GPUs (all Not "
                "Started): the rack's fabric manager is down or does not know this tray")
    else:
        what = f"the fabric manager has not configured the tray's GPUs: {gpus}"
    i, state, status = bad[0]
    return [cat.finding("fabric-manager-not-ready", part="node", what=what,
                        line=f"{i}, {state}, {status}")]


def _local(service: str, cat: Catalogue) -> list[Finding]:
    if service not in _LOCAL:
        return []
    return [cat.finding("fabric-manager-local", part="node",
                        what=f"nvidia-fabricmanager is {service} on this compute tray (the "
                        "NVL72 fabric's manager runs on the NVSwitch trays)",
                        line=service)]


def judge_fabric_manager(sections: dict[str, str], cat: Catalogue
                         ) -> tuple[list[Finding], dict[str, object]]:
    """The findings and facts of the ``fabric_manager`` and ``fabric_state`` sections (none
    when the output has neither: a domain check from before they were added).

    >>> from fabriccheck.probes.node.catalogue import builtin_catalogue
    >>> f, facts = judge_fabric_manager({"fabric_manager": "inactive\\n",
    ...     "fabric_state": "0, Completed, Success\\n1, Completed, Success\\n"},
    ...     builtin_catalogue())
    >>> f, facts
    ([], {'fm_service': 'inactive', 'fm_configured': '2/2'})
    """
    findings: list[Finding] = []
    facts: dict[str, object] = {}
    unit = sections.get("fabric_manager")
    if unit is not None and unit.strip():
        service = unit.strip().splitlines()[0].strip()
        facts["fm_service"] = service[:40]
        findings += _local(service, cat)
    rows = parse_fabric_states(sections.get("fabric_state") or "")
    if rows:
        done = sum(1 for r in rows if (r[1], r[2]) == ("Completed", "Success"))
        facts["fm_configured"] = f"{done}/{len(rows)}"
        findings += _not_ready(rows, cat)
    return findings, facts
