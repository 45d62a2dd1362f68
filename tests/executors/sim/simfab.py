"""Small fabrics and helpers for the simulator tests (built with the real generators)."""

from __future__ import annotations

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.models import Flow, Test
from fabriccheck.specs import load_spec
from fabriccheck.topology.generators import generate


def rail_fabric(fabric: str = "infiniband", *, nodes: int = 8, rails: int = 8,
                nodes_per_leaf: int = 2, spines: int = 4, uplink_gbps: float = 400):
    """Rail-optimized fabric: leaf-<group>-<rail>, every leaf cabled once to every spine."""
    return generate({"kind": "rail-optimized", "nodes": nodes, "gpus_per_node": 8,
                     "rails": rails, "nodes_per_leaf": nodes_per_leaf, "spines": spines,
                     "nic_gbps": 400, "uplink_gbps": uplink_gbps},
                    name=f"{fabric}-{nodes}", fabric=fabric)


def h100_spec():
    return load_spec("h100-ndr400-ib")


def sim(topo, faults: dict | None = None, seed: int = 0, spec=None) -> SimExecutor:
    return SimExecutor(topo, spec, FaultSet.from_dict(faults or {}), seed)


def ring_flows(topo, nodes, rails) -> tuple[Flow, ...]:
    k = len(nodes)
    if k == 2:
        return tuple(f for r in rails for f in (
            Flow(topo.nic(nodes[0], r), topo.nic(nodes[1], r)),
            Flow(topo.nic(nodes[1], r), topo.nic(nodes[0], r))))
    return tuple(Flow(topo.nic(nodes[i], r), topo.nic(nodes[(i + 1) % k], r))
                 for r in rails for i in range(k))


def nccl(topo, test_id, nodes, *, rails=None, **params) -> Test:
    rails = tuple(range(topo.rails)) if rails is None else tuple(rails)
    params.setdefault("size_bytes", 8 << 30)
    return Test(test_id, "nccl", tuple(nodes), ring_flows(topo, nodes, rails) if len(nodes) > 1
                else (), params=params)


def pair(topo, test_id, client, server, rail=0, probe="ib_write_bw", **params) -> Test:
    params.setdefault("size_bytes", 65536)
    params.setdefault("duration_s", 5)
    return Test(test_id, probe, (client, server),
                (Flow(topo.nic(client, rail), topo.nic(server, rail)),), params=params)
