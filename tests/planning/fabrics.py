"""Small fabrics for planning and inference tests, built by the real generators."""

from __future__ import annotations

from fabriccheck.topology import generate
from fabriccheck.topology.view import FabricView


def make_view(kind: str = "rail-optimized", fabric: str = "infiniband", **gen) -> FabricView:
    spec = {"kind": kind, "nodes": 64, "rails": 4, "gpus_per_node": 4, "nodes_per_leaf": 16,
            "spines": 4, **gen}
    return FabricView(generate(spec, name="t", fabric=fabric))
