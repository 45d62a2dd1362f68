"""Kubernetes actions: cordon, taint and label a bad node; the reverse when it recovers.

Marks (all reversible, all under the ``fabriccheck.io/`` prefix): ``kubectl cordon``, taint
``fabriccheck.io/health=bad:NoSchedule``, label ``fabriccheck.io/health=bad`` and annotation
``fabriccheck.io/reason=<what was found>``. A node is given back only while our label says
``bad`` (so an operator's own cordon is left alone once they relabel it).
"""

from __future__ import annotations

import json

from fabriccheck.errors import ExecutorError
from fabriccheck.inventory.command import Runner, run_command

HEALTH_LABEL = "fabriccheck.io/health"
REASON_ANNOTATION = "fabriccheck.io/reason"
TAINT = f"{HEALTH_LABEL}=bad:NoSchedule"


class KubernetesActions:
    """Cordon/taint/label through ``kubectl`` (run by ``runner``)."""

    backend = "kubernetes"

    def __init__(
        self,
        runner: Runner | None = None,
        *,
        kubectl: str = "kubectl",
        cordon: bool = True,
        taint: bool = True,
        timeout_s: float = 30.0,
    ) -> None:
        self.runner = runner or run_command
        self.kubectl = kubectl
        self.cordon = cordon
        self.taint = taint
        self.timeout_s = timeout_s

    def _k(self, *args: str) -> str:
        return self.runner([self.kubectl, *args], self.timeout_s)

    def take_out(self, node: str, reason: str) -> str:
        """Mark ``node`` bad (label + annotation) and keep new pods off it (cordon, taint)."""
        done = []
        if self.cordon:
            self._k("cordon", node)
            done.append("cordoned")
        if self.taint:
            self._k("taint", "nodes", node, TAINT, "--overwrite")
            done.append("tainted")
        self._k("label", "nodes", node, f"{HEALTH_LABEL}=bad", "--overwrite")
        self._k("annotate", "nodes", node, f"{REASON_ANNOTATION}={reason}", "--overwrite")
        return "+".join([*done, "labelled"])

    def give_back(self, node: str) -> str:
        """Undo :meth:`take_out` while our label still says ``bad``; returns what was done."""
        meta = json.loads(self._k("get", "node", node, "-o", "json")).get("metadata", {})
        if meta.get("labels", {}).get(HEALTH_LABEL) != "bad":
            return "not marked by fabriccheck"
        if self.cordon:
            self._k("uncordon", node)
        if self.taint:
            try:
                self._k("taint", "nodes", node, f"{HEALTH_LABEL}=bad:NoSchedule-")
            except ExecutorError as exc:  # someone removed it already: the goal is met
                if "not found" not in str(exc).lower():
                    raise
        self._k("label", "nodes", node, f"{HEALTH_LABEL}=healthy", "--overwrite")
        self._k("annotate", "nodes", node, f"{REASON_ANNOTATION}-")
        return "returned"
