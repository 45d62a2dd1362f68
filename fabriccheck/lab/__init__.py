"""The namespace lab: an emulated cluster on one machine (hosts in netns, bridges, veths, sshd)."""

from __future__ import annotations

from fabriccheck.lab.lab import (
    LabInfo,
    apply_faults,
    down,
    enter_argv,
    load_state,
    status,
    up,
)
from fabriccheck.lab.plan import LabPlan, plan_lab

__all__ = [
    "LabInfo",
    "LabPlan",
    "apply_faults",
    "down",
    "enter_argv",
    "load_state",
    "plan_lab",
    "status",
    "up",
]
