"""Kubernetes inventory: GPU nodes nobody requests GPUs on, marked while under test, via kubectl.

Reads ``kubectl get nodes -o json`` and ``kubectl get pods -A -o json`` (pure parsers:
:func:`parse_nodes`, :func:`gpu_requests_by_node`). A node is idle when it is Ready, schedulable
(or cordoned by fabriccheck itself and being re-tested), has GPUs and no live pod requests any.
Nodes under test carry the label ``fabriccheck.io/under-test=<run id>``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fabriccheck.errors import ExecutorError, ParseError
from fabriccheck.inventory.command import Runner, run_command

UNDER_TEST_LABEL = "fabriccheck.io/under-test"
GPU_RESOURCE = "nvidia.com/gpu"
#: pods in these phases hold nothing
DONE_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class K8sNode:
    """What the inventory needs to know about one node."""

    name: str
    ready: bool
    unschedulable: bool
    gpus: int
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[str, ...] = ()


def _load(text: str, kind: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"not JSON: {exc}", tool="kubectl", excerpt=text) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        raise ParseError(f"expected a {kind} with items", tool="kubectl", excerpt=text)
    return doc


def _quantity(value: Any) -> int:
    """Integer count of an extended resource (``"8"``; GPUs are never fractional)."""
    try:
        return int(str(value))
    except ValueError:
        return 0


def parse_nodes(text: str, *, gpu_resource: str = GPU_RESOURCE) -> list[K8sNode]:
    """Nodes from ``kubectl get nodes -o json`` (a ``NodeList``)."""
    out = []
    for item in _load(text, "NodeList")["items"]:
        meta, spec, status = item.get("metadata", {}), item.get("spec", {}), item.get("status", {})
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions", [])
        )
        taints = tuple(
            f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}" for t in spec.get("taints", [])
        )
        out.append(
            K8sNode(
                name=meta["name"], ready=ready, unschedulable=bool(spec.get("unschedulable")),
                gpus=_quantity(status.get("allocatable", {}).get(gpu_resource, 0)),
                labels=dict(meta.get("labels", {})), taints=taints,
            )
        )  # fmt: skip
    return out


def _pod_gpus(spec: Mapping[str, Any], gpu_resource: str) -> int:
    """A pod's effective GPU request: max(sum over containers, largest init container)."""

    def one(c: Mapping[str, Any]) -> int:
        res = c.get("resources", {})
        return _quantity(res.get("requests", {}).get(gpu_resource, res.get("limits", {}).get(
            gpu_resource, 0)))  # fmt: skip

    main = sum(one(c) for c in spec.get("containers", []))
    init = max((one(c) for c in spec.get("initContainers", [])), default=0)
    return max(main, init)


def gpu_requests_by_node(text: str, *, gpu_resource: str = GPU_RESOURCE) -> dict[str, int]:
    """GPUs requested by live pods per node, from ``kubectl get pods -A -o json``."""
    out: dict[str, int] = {}
    for pod in _load(text, "PodList")["items"]:
        node = pod.get("spec", {}).get("nodeName")
        if not node or pod.get("status", {}).get("phase") in DONE_PHASES:
            continue
        out[node] = out.get(node, 0) + _pod_gpus(pod.get("spec", {}), gpu_resource)
    return out


def idle_gpu_nodes(
    nodes: Iterable[K8sNode],
    requests: Mapping[str, int],
    *,
    recovering: Iterable[str] = (),
) -> list[str]:
    """Ready GPU nodes with no GPU requested; cordoned ones only if in ``recovering``."""
    back = set(recovering)
    return [
        n.name
        for n in nodes
        if n.ready and n.gpus > 0 and requests.get(n.name, 0) == 0
        and (not n.unschedulable or n.name in back)
    ]  # fmt: skip


class KubernetesInventory:
    """Idle GPU nodes of a Kubernetes cluster (through ``kubectl``).

    Parameters
    ----------
    selector : str, optional
        A label selector (``-l``), e.g. ``nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3``.
    kubectl : str
        The kubectl binary (``--context``/``--kubeconfig`` go in ``extra_args``).
    """

    name = "kubernetes"

    def __init__(
        self,
        *,
        selector: str | None = None,
        runner: Runner | None = None,
        kubectl: str = "kubectl",
        extra_args: Sequence[str] = (),
        gpu_resource: str = GPU_RESOURCE,
        timeout_s: float = 60.0,
    ) -> None:
        self.selector = selector
        self.runner = runner or run_command
        self.kubectl = kubectl
        self.extra_args = list(extra_args)
        self.gpu_resource = gpu_resource
        self.timeout_s = timeout_s
        self._recovering: set[str] = set()

    def _k(self, *args: str) -> str:
        return self.runner([self.kubectl, *self.extra_args, *args], self.timeout_s)

    def _snapshot(self) -> tuple[list[K8sNode], dict[str, int]]:
        args = ["get", "nodes", "-o", "json"] + (["-l", self.selector] if self.selector else [])
        nodes = parse_nodes(self._k(*args), gpu_resource=self.gpu_resource)
        pods = self._k(
            "get", "pods", "-A", "-o", "json",
            "--field-selector=status.phase!=Succeeded,status.phase!=Failed",
        )  # fmt: skip
        return nodes, gpu_requests_by_node(pods, gpu_resource=self.gpu_resource)

    def idle_nodes(
        self, *, exclude: Iterable[str] = (), recovering: Iterable[str] = ()
    ) -> list[str]:
        """GPU nodes with no GPU requested now, minus ``exclude``; ``recovering`` nodes
        (cordoned by fabriccheck earlier) are included so they can be found healthy again."""
        self._recovering = set(recovering)
        skip = set(exclude)
        nodes, requests = self._snapshot()
        return [n for n in idle_gpu_nodes(nodes, requests, recovering=self._recovering)
                if n not in skip]  # fmt: skip

    def recheck_idle(self, nodes: Sequence[str]) -> list[str]:
        """The subset of ``nodes`` still idle right now (call just before each round)."""
        ok = set(self.idle_nodes(recovering=self._recovering))
        return [n for n in nodes if n in ok]

    @contextmanager
    def reserve(self, nodes: Sequence[str], *, name: str = "run") -> Iterator[str]:
        """Label ``nodes`` ``fabriccheck.io/under-test=<name>`` for the ``with`` block; the label
        is removed on exit, also on error (schedulers and dashboards can key off it)."""
        labelled: list[str] = []
        try:
            for n in nodes:
                self._k("label", "nodes", n, f"{UNDER_TEST_LABEL}={name}", "--overwrite")
                labelled.append(n)
            yield name
        finally:
            errors = []
            for n in labelled:
                try:
                    self._k("label", "nodes", n, f"{UNDER_TEST_LABEL}-")
                except ExecutorError as exc:
                    errors.append(str(exc))
            if errors:
                raise ExecutorError(f"could not remove {UNDER_TEST_LABEL}: {errors[0]}")

    def close(self) -> None:
        """Nothing to release beyond :meth:`reserve`'s own cleanup."""
