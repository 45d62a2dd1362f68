"""Ray inventory: a Ray cluster's nodes, the fabriccheck host each stands for, which are idle.

A Ray node is named (first rule that applies):

1. its label ``fabriccheck/host`` (``ray start --labels '{"fabriccheck/host": "node-017"}'``);
2. its custom resource ``fchost_<name>`` (``ray start --resources '{"fchost_node-017": 1}'``);
3. its hostname as Ray reports it (``NodeManagerHostname``), domain stripped.

A node is *idle* when it is alive and every unit of the idle resource (``GPU`` by default; ``CPU``
on CPU-only clusters, or any custom resource) is free. The pure part (:func:`nodes_from_state`)
reads the literal dicts Ray returns; :func:`discover_ray_nodes` asks a live cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: the node label that names the fabriccheck host (rule 1)
HOST_LABEL = "fabriccheck/host"
#: prefix of the per-host custom resource (rule 2)
HOST_RESOURCE_PREFIX = "fchost_"
#: the default resource whose being free makes a node idle
IDLE_RESOURCE = "GPU"
_EPS = 1e-6


@dataclass(frozen=True)
class RayNode:
    """One live Ray node as fabriccheck sees it."""

    name: str
    ip: str
    hostname: str
    node_id: str
    alive: bool = True
    resources: Mapping[str, float] = field(default_factory=dict, compare=False, hash=False)
    available: Mapping[str, float] = field(default_factory=dict, compare=False, hash=False)
    labels: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    idle: bool = False

    def total(self, resource: str) -> float:
        return float(self.resources.get(resource, 0.0))

    def free(self, resource: str) -> float:
        return float(self.available.get(resource, 0.0))


def host_name_of(node: Mapping[str, Any]) -> str:
    """The fabriccheck host a ``ray.nodes()`` entry stands for (rules in the module docstring).

    >>> host_name_of({"Labels": {}, "Resources": {"CPU": 1.0, "fchost_node-003": 1.0},
    ...               "NodeManagerHostname": "vm"})
    'node-003'
    >>> host_name_of({"NodeManagerHostname": "gpu-17.cluster.local", "Resources": {}})
    'gpu-17'
    """
    labels = node.get("Labels") or {}
    if labels.get(HOST_LABEL):
        return str(labels[HOST_LABEL])
    tagged = sorted(k for k in (node.get("Resources") or {}) if k.startswith(HOST_RESOURCE_PREFIX))
    if tagged:
        return tagged[0][len(HOST_RESOURCE_PREFIX):]
    hostname = str(node.get("NodeManagerHostname") or node.get("NodeManagerAddress") or "")
    return hostname if _is_ip(hostname) else hostname.split(".", 1)[0]


def _is_ip(text: str) -> bool:
    parts = text.split(".")
    return len(parts) == 4 and all(p.isdigit() for p in parts)


def is_idle(resources: Mapping[str, float], available: Mapping[str, float], resource: str) -> bool:
    """True when the node has some ``resource`` and all of it is free.

    >>> is_idle({"GPU": 8.0}, {"GPU": 8.0}, "GPU"), is_idle({"GPU": 8.0}, {"GPU": 7.0}, "GPU")
    (True, False)
    >>> is_idle({"CPU": 4.0}, {"CPU": 4.0}, "GPU")  # no GPU at all: not a GPU node to test
    False
    """
    total = float(resources.get(resource, 0.0))
    return total > 0 and float(available.get(resource, 0.0)) >= total - _EPS


def nodes_from_state(
    nodes: Iterable[Mapping[str, Any]],
    available: Mapping[str, Mapping[str, float]],
    *,
    idle_resource: str = IDLE_RESOURCE,
) -> list[RayNode]:
    """Live :class:`RayNode` entries from ``ray.nodes()`` and per-node available resources.

    Parameters
    ----------
    nodes : iterable of mapping
        ``ray.nodes()`` entries (``NodeID``, ``Alive``, ``NodeManagerAddress``, ``Resources``, ...).
    available : mapping
        Node id -> available resources (:func:`available_from_status`).
    idle_resource : str
        The resource that must be entirely free for a node to be idle.

    Returns
    -------
    list of RayNode
        Alive nodes only, sorted by name.
    """
    out = []
    for node in nodes:
        if not node.get("Alive", False):
            continue
        node_id = str(node["NodeID"])
        resources = {str(k): float(v) for k, v in (node.get("Resources") or {}).items()}
        avail = {str(k): float(v) for k, v in (available.get(node_id) or {}).items()}
        out.append(
            RayNode(
                name=host_name_of(node),
                ip=str(node.get("NodeManagerAddress", "")),
                hostname=str(node.get("NodeManagerHostname", "")),
                node_id=node_id,
                resources=resources,
                available=avail,
                labels=dict(node.get("Labels") or {}),
                idle=is_idle(resources, avail, idle_resource),
            )
        )
    return sorted(out, key=lambda n: (n.name, n.node_id))


def available_from_status(status: Any) -> dict[str, dict[str, float]]:
    """Node id -> free resources, from the cluster status Ray's own ``ray status`` reads.

    ``status`` is a ``ray.autoscaler.v2.schema.ClusterStatus``: running nodes are in
    ``active_nodes`` and ``idle_nodes``, each with ``node_id`` (hex, as ``ray.nodes()``'s
    ``NodeID``) and ``resource_usage.usage`` entries of ``resource_name``, ``total``, ``used``.

    >>> from types import SimpleNamespace as NS
    >>> gpu = NS(resource_name="GPU", total=8.0, used=2.0)
    >>> node = NS(node_id="ab12", resource_usage=NS(usage=[gpu]))
    >>> available_from_status(NS(active_nodes=[node], idle_nodes=[]))
    {'ab12': {'GPU': 6.0}}
    """
    out: dict[str, dict[str, float]] = {}
    for node in (*status.active_nodes, *status.idle_nodes):
        usage = node.resource_usage.usage if node.resource_usage is not None else ()
        out[str(node.node_id)] = {
            str(u.resource_name): float(u.total) - float(u.used) for u in usage
        }
    return out


def cluster_state() -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """``ray.nodes()`` and per-node available resources of the connected cluster (mapped errors).

    Public Ray APIs only: ``ray.nodes()``, the runtime context's GCS address and the cluster
    status behind ``ray status`` (``ray.autoscaler.v2.sdk.get_cluster_status``, Ray >= 2.9)
    instead of ``ray._private.state.available_resources_per_node``.
    """
    import ray
    from ray.autoscaler.v2.sdk import get_cluster_status

    from fabriccheck.inventory.ray_session import map_ray_error

    try:
        status = get_cluster_status(ray.get_runtime_context().gcs_address)
        return ray.nodes(), available_from_status(status)
    except Exception as exc:  # Ray boundary
        raise map_ray_error(exc, what="read the Ray cluster's nodes") from exc


def discover_ray_nodes(
    address: str | None = None,
    *,
    idle_resource: str = IDLE_RESOURCE,
    timeout_s: float = 30.0,
    node_ip_address: str | None = None,
) -> list[RayNode]:
    """The live nodes of the Ray cluster at ``address`` (connecting if needed).

    Raises :class:`~fabriccheck.errors.ConnectError` when the cluster cannot be reached.
    """
    from fabriccheck.inventory.ray_session import connect, disconnect

    owned = connect(address, timeout_s=timeout_s, node_ip_address=node_ip_address)
    try:
        nodes, available = cluster_state()
    finally:
        if owned:
            disconnect()
    return nodes_from_state(nodes, available, idle_resource=idle_resource)


def idle_ray_nodes(
    address: str | None = None, *, idle_resource: str = IDLE_RESOURCE, **kwargs: Any
) -> list[str]:
    """Names of the idle nodes of the Ray cluster at ``address`` (sorted)."""
    nodes = discover_ray_nodes(address, idle_resource=idle_resource, **kwargs)
    return [n.name for n in nodes if n.idle]
