"""A finding (one thing node-local evidence says, with its severity) and a tool output's report.

Severities (docs/design.md "Words"): ``fault`` the node (or the named GPU/NIC) must not run jobs,
``warn`` jobs may run but someone should look (listed, recorded, counted for lemons), ``info``
recorded only. A report's ``node_verdict`` is its worst finding: ``fault``, ``warn`` or
``healthy`` (info findings and none at all); an output that stops early is at least a warn
(``incomplete``), never healthy by silence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

FAULT, WARN, INFO = "fault", "warn", "info"
SEVERITIES = (INFO, WARN, FAULT)  # in rising order
_RANK = {s: i for i, s in enumerate(SEVERITIES)}
HEALTHY = "healthy"


@dataclass(frozen=True)
class Finding:
    """One judged piece of evidence.

    ``check`` is the catalogue entry that judged it (``xid-79``, ``gpu-hw-power-brake``);
    ``part`` what it names (``gpu 0000:18:00.0``, ``nic mlx5_3``, ``node``); ``what`` says it in
    words; ``line`` is the output line (or field) it was read from; ``fix`` what to do.
    """

    severity: str
    check: str
    part: str
    what: str
    line: str = ""
    fix: str = ""
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity, "part": self.part, "what": self.what,
                "line": self.line, "check": self.check, "fix": self.fix}


def worst(findings: Iterable[Finding]) -> str:
    """``fault``, ``warn`` or ``healthy``: the node verdict the findings add up to.

    >>> worst([Finding("info", "x", "node", "boot notice")])
    'healthy'
    >>> worst([Finding("warn", "x", "node", "a"), Finding("fault", "y", "gpu 0", "b")])
    'fault'
    """
    top = max((_RANK[f.severity] for f in findings), default=-1)
    return SEVERITIES[top] if top > _RANK[INFO] else HEALTHY


def at_least(severity: str, floor: str) -> bool:
    """True when ``severity`` is ``floor`` or worse.

    >>> at_least("fault", "warn"), at_least("info", "warn")
    (True, False)
    """
    return _RANK[severity] >= _RANK[floor]


@dataclass(frozen=True)
class NodeReport:
    """What one node-local tool output says: its findings, the facts read, and whether the
    output was complete. ``facts`` are the numbers and states a parser extracted (JSON-able)."""

    tool: str
    findings: tuple[Finding, ...] = ()
    facts: dict[str, Any] = field(default_factory=dict)
    complete: bool = True
    reason: str = ""

    @property
    def node_verdict(self) -> str:
        """The worst finding; an incomplete output is at least ``warn``."""
        v = worst(self.findings)
        return WARN if v == HEALTHY and not self.complete else v

    def of(self, severity: str) -> list[Finding]:
        """The findings of exactly ``severity``."""
        return [f for f in self.findings if f.severity == severity]

    def to_json(self) -> dict[str, Any]:
        """The ``parse --json`` contract for a node-local tool (docs/design.md "Parse")."""
        return {"tool": self.tool, "status": "ok" if self.complete else "incomplete",
                "reason": self.reason, "node_verdict": self.node_verdict,
                "findings": [f.to_json() for f in self.findings], "facts": self.facts,
                "errors": []}
