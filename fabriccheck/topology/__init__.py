"""Topologies: the fabric model, loading/validation, generators and discovery import."""

from __future__ import annotations

from fabriccheck.topology.generators import generate
from fabriccheck.topology.load import bundled_topologies, load_topology, topology_from_dict
from fabriccheck.topology.model import FABRICS, TIERS, Link, Nic, Node, Path, Switch, Topology

__all__ = [
    "FABRICS",
    "TIERS",
    "Link",
    "Nic",
    "Node",
    "Path",
    "Switch",
    "Topology",
    "bundled_topologies",
    "generate",
    "load_topology",
    "topology_from_dict",
]
