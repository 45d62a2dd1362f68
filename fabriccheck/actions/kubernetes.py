"""Kubernetes actions: cordon, taint and label bad nodes; the reverse when they recover.

Marks (all reversible, all under the ``fabriccheck.io/`` prefix): ``kubectl cordon``, taint
``fabriccheck.io/health=bad:NoSchedule``, label ``fabriccheck.io/health=bad`` and annotation
``fabriccheck.io/reason=<what was found>``. A node is given back only while our label says
``bad`` (so an operator's own cordon is left alone once they relabel it).

Calls are batched: one ``cordon``, one ``taint`` and one ``label`` call per batch of nodes
(``batch_size`` names per call) and one ``annotate`` call per distinct reason, so taking out N
nodes costs about 3 + reasons ``kubectl`` processes instead of 4 N. When a batched call fails,
its nodes are retried one by one so the failure is pinned on the node(s) it belongs to.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence

from fabriccheck.errors import ExecutorError
from fabriccheck.inventory.command import Runner, run_command

HEALTH_LABEL = "fabriccheck.io/health"
REASON_ANNOTATION = "fabriccheck.io/reason"
TAINT = f"{HEALTH_LABEL}=bad:NoSchedule"
TAKEN_OUT = "cordoned+tainted+labelled"
#: per node: what was done, or the error that stopped it
Outcome = dict[str, "str | ExecutorError"]


def _chunks(items: Sequence[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield list(items[i : i + size])


class KubernetesActions:
    """Cordon/taint/label through ``kubectl`` (run by ``runner``), batched over nodes."""

    backend = "kubernetes"

    def __init__(
        self,
        runner: Runner | None = None,
        *,
        kubectl: str = "kubectl",
        cordon: bool = True,
        taint: bool = True,
        timeout_s: float = 30.0,
        batch_size: int = 100,
    ) -> None:
        self.runner = runner or run_command
        self.kubectl = kubectl
        self.cordon = cordon
        self.taint = taint
        self.timeout_s = timeout_s
        self.batch_size = max(1, batch_size)

    def _k(self, *args: str) -> str:
        return self.runner([self.kubectl, *args], self.timeout_s)

    def _step(
        self,
        nodes: Sequence[str],
        argv: Callable[[list[str]], list[str]],
        failed: dict[str, ExecutorError],
        *,
        tolerate: str | None = None,
    ) -> None:
        """Run ``argv(batch)`` per batch of the nodes not yet failed; pin failures on nodes."""
        todo = [n for n in nodes if n not in failed]
        for batch in _chunks(todo, self.batch_size):
            try:
                self._k(*argv(batch))
                continue
            except ExecutorError as exc:
                if tolerate and tolerate in str(exc).lower() and len(batch) == 1:
                    continue
                if len(batch) == 1:
                    failed[batch[0]] = exc
                    continue
            for node in batch:  # which node failed? one by one
                self._step([node], argv, failed, tolerate=tolerate)

    # ---- taking out -----------------------------------------------------------------------
    def take_out_many(self, reasons: Mapping[str, str]) -> Outcome:
        """Mark every node bad (label + its annotation), cordon and taint, in batched calls.

        Parameters
        ----------
        reasons
            Node -> what was found (the annotation).

        Returns
        -------
        dict
            Node -> ``"cordoned+tainted+labelled"`` (what was done), or the ExecutorError that
            stopped it (later steps are skipped for that node).
        """
        nodes = list(reasons)
        failed: dict[str, ExecutorError] = {}
        done = []
        if self.cordon:
            self._step(nodes, lambda b: ["cordon", *b], failed)
            done.append("cordoned")
        if self.taint:
            self._step(nodes, lambda b: ["taint", "nodes", *b, TAINT, "--overwrite"], failed)
            done.append("tainted")
        self._step(nodes, lambda b: ["label", "nodes", *b, f"{HEALTH_LABEL}=bad", "--overwrite"],
                   failed)  # fmt: skip
        by_reason: dict[str, list[str]] = {}
        for node, reason in reasons.items():
            by_reason.setdefault(reason, []).append(node)
        for reason, group in by_reason.items():
            note = f"{REASON_ANNOTATION}={reason}"
            self._step(group, lambda b, note=note: ["annotate", "nodes", *b, note, "--overwrite"],
                       failed)  # fmt: skip
        summary = "+".join([*done, "labelled"])
        return {n: failed.get(n, summary) for n in nodes}

    def take_out(self, node: str, reason: str) -> str:
        """Mark ``node`` bad (label + annotation) and keep new pods off it (cordon, taint)."""
        return _one(self.take_out_many({node: reason}), node)

    # ---- giving back ----------------------------------------------------------------------
    def marked_bad(self, nodes: Sequence[str]) -> tuple[list[str], dict[str, ExecutorError]]:
        """The nodes whose label still says ``bad`` (one ``get`` per batch), and read errors."""
        failed: dict[str, ExecutorError] = {}
        labels: dict[str, dict] = {}

        def get(batch: list[str]) -> list[str]:
            return ["get", "node", *batch, "-o", "json"]

        for batch in _chunks(list(nodes), self.batch_size):
            try:
                labels.update(_labels(self._k(*get(batch))))
            except ExecutorError as exc:
                if len(batch) == 1:
                    failed[batch[0]] = exc
                    continue
                for node in batch:
                    try:
                        labels.update(_labels(self._k(*get([node]))))
                    except ExecutorError as one:
                        failed[node] = one
        marked = [n for n in nodes if labels.get(n, {}).get(HEALTH_LABEL) == "bad"]
        return marked, failed

    def give_back_many(self, nodes: Sequence[str]) -> Outcome:
        """Undo :meth:`take_out_many` for the nodes our label still marks ``bad``.

        Returns
        -------
        dict
            Node -> ``"returned"``, ``"not marked by fabriccheck"``, or the ExecutorError.
        """
        marked, failed = self.marked_bad(nodes)
        if self.cordon:
            self._step(marked, lambda b: ["uncordon", *b], failed)
        if self.taint:  # someone removed the taint already: the goal is met
            self._step(marked, lambda b: ["taint", "nodes", *b, f"{TAINT}-"], failed,
                       tolerate="not found")  # fmt: skip
        self._step(marked, lambda b: ["label", "nodes", *b, f"{HEALTH_LABEL}=healthy",
                                      "--overwrite"], failed)  # fmt: skip
        self._step(marked, lambda b: ["annotate", "nodes", *b, f"{REASON_ANNOTATION}-"], failed)
        return {
            n: failed.get(n, "returned" if n in marked else "not marked by fabriccheck")
            for n in nodes
        }

    def give_back(self, node: str) -> str:
        """Undo :meth:`take_out` while our label still says ``bad``; returns what was done."""
        return _one(self.give_back_many([node]), node)


def _one(outcome: Outcome, node: str) -> str:
    result = outcome[node]
    if isinstance(result, ExecutorError):
        raise result
    return result


def _labels(text: str) -> dict[str, dict]:
    """Node name -> labels from ``kubectl get node ... -o json`` (one object or a List)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ExecutorError(f"kubectl get node printed no JSON: {text[:80]!r}") from exc
    items = doc.get("items", []) if doc.get("kind") == "List" or "items" in doc else [doc]
    return {
        i.get("metadata", {}).get("name", ""): i.get("metadata", {}).get("labels", {}) or {}
        for i in items
    }
