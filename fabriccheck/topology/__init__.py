"""Topologies: the fabric model, loading/validation, generators and discovery import."""

from __future__ import annotations

from fabriccheck.topology.model import FABRICS, TIERS, Link, Nic, Node, Path, Switch, Topology

__all__ = ["FABRICS", "TIERS", "Link", "Nic", "Node", "Path", "Switch", "Topology"]
