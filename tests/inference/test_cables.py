"""extra["cables"]: the links of link and switch verdicts with their ports."""

from __future__ import annotations

import doctest

from fabriccheck.inference import cables as cables_mod
from fabriccheck.inference.cables import cables
from fabriccheck.models import Link, Verdict
from fabriccheck.topology.generators import generate


def test_healthy_and_node_verdicts_are_not_listed_unknown_ports_are_empty():
    topo = generate({"kind": "rail-optimized", "nodes": 16, "rails": 2, "nodes_per_leaf": 8,
                     "spines": 2}, name="t", fabric="infiniband")
    bad = Verdict("link", "leaf-0-1 -- spine-1", "bad", "x", link=Link.of("leaf-0-1", "spine-1"))
    out = cables([Verdict("link", "leaf-0-0 -- spine-0", "healthy"), bad,
                  Verdict("node", "node-001", "bad")], {}, topo)
    assert out == [{"verdict": "leaf-0-1 -- spine-1", "kind": "link", "state": "bad",
                    "link": ["leaf-0-1", "spine-1"], "a_port": [], "b_port": [],
                    "cable": "leaf-0-1 -- spine-1", "of": 1}]


def test_doctests():
    assert doctest.testmod(cables_mod).failed == 0
