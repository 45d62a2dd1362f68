"""Ladder coverage: every node in two different groups at every level >= 2 of a default sweep.

The promise (docs/design.md "How faults are found", step 2; issue 31): each level >= 2 runs two
carvings, every node with different partners. Measured as in
:mod:`fabriccheck.planning.ladder_cover`: a level's groups are the distinct member sets of its
rounds' ``sweep``/``scale`` tests; at 2x a node's groups are its partners in the rail-pair
rounds and in the 2-node collective rounds. A node that is not free (a follow-up held it, or
it is a suspect left out) may meet one group only, but never silently: the run result's
``ladder.coverage`` lists it with the reason. The seed is drawn fresh on every run and printed
on failure.

The lab topologies (4 and 8 hosts, one uplink per leaf) are checked for the reasons only: at
4x (lab-4, lab-ecmp-4) and 8x (lab-8) there is one group of all nodes, and lab-8's 4x has room
for one ring across its two leaves per round (the second carving can only repeat the first).
"""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.orchestrator import run
from fabriccheck.policy import SweepPolicy, spec_probes
from fabriccheck.specs import resolve_spec
from fabriccheck.topology import generate, load_topology

NOISE = {"jitter": 0.03, "glitch_rate": 0.01}
#: reasons a node may meet fewer than two groups: it was not free, or the fabric lacks room
NOT_FREE = ("busy (", "suspect")
SEED = random.SystemRandom().randrange(10_000, 1_000_000)


def sweep(topo, seed: int):
    spec = resolve_spec(topo.spec, topo)
    fs = FaultSet.from_dict({"noise": NOISE})
    return run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed=seed),
               SweepPolicy(seed=seed, **spec_probes(spec)))


def level_groups(res) -> dict[int, dict[str, set[frozenset[str]]]]:
    """Recomputed from the observations (not the run's own report): level -> node -> groups."""
    steps = res.extra["ladder"]["steps"]
    level = {i + 1: int(s.split("x")[0]) for i, s in enumerate(steps) if s[:1].isdigit()}
    out: dict[int, dict[str, set[frozenset[str]]]] = defaultdict(lambda: defaultdict(set))
    for o in res.observations:
        k = level.get(o.test.round, 0)
        if k >= 2 and o.test.purpose in ("sweep", "scale") and len(o.test.nodes) >= 2:
            for n in o.test.nodes:
                out[k][n].add(frozenset(o.test.nodes))
    return out


def check(res, *, room: bool) -> None:
    """Every node in play meets two different groups per level, or the result says why; with
    ``room`` (the fabric has the nodes and links for it) only a node that was not free may
    meet fewer."""
    cov = res.extra["ladder"]["coverage"]
    out = set(res.bad_nodes) | set(res.hung) | set(res.unreachable)
    groups = level_groups(res)
    for k in [lv for lv in res.extra["ladder"]["levels"] if lv >= 2]:
        row = cov[f"{k}x"]
        for n in sorted(set(res.nodes) - out):
            met = len(groups[k].get(n, ()))
            if met >= 2:
                continue
            listed = row["once" if met == 1 else "never"]
            assert n in listed, f"seed {SEED}: {n} met {met} {k}x group(s), not reported"
            if room:
                assert listed[n].split(": ", 1)[-1].startswith(NOT_FREE), (
                    f"seed {SEED}: {n} was free but met {met} {k}x group(s): {listed[n]}")
        assert row["twice"] == sum(len(groups[k].get(n, ())) >= 2 for n in res.nodes
                                   if n not in out)


def test_fast_small_fat_tree():
    """64 nodes on a 3-tier fat-tree (4 pods of 8 leaves of 2 nodes): D-mod-K leaves one core
    path per pod and destination port, so groups must stay in their pods and ranks."""
    topo = generate({"kind": "fat-tree", "tiers": 3, "nodes": 64, "gpus_per_node": 8, "rails": 8,
                     "pods": 4, "leaves_per_pod": 8, "nodes_per_leaf": 2, "spines_per_pod": 16,
                     "cores": 64}, name="ft3-64", fabric="infiniband")
    check(sweep(topo, SEED), room=True)


@pytest.mark.parametrize("name", ["roce-rail-64", "ib-fattree-128", "gb200-nvl72-8"])
def test_bundled_topologies(name):
    check(sweep(load_topology(name), SEED), room=True)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a 4,096-node sweep: about 12 minutes on one core
@pytest.mark.parametrize("name", ["ib-fattree3-512", "ib-rail-1024", "ib-rail-4096"])
def test_bundled_topologies_large(name):
    check(sweep(load_topology(name), SEED), room=True)


@pytest.mark.parametrize("name", ["lab-4", "lab-ecmp-4", "lab-8"])
def test_lab_topologies_say_why(name):
    res = sweep(load_topology(name), SEED)
    check(res, room=False)
    cov = res.extra["ladder"]["coverage"]
    top = max(res.extra["ladder"]["levels"])
    assert all("only one" in why for why in cov[f"{top}x"]["once"].values())
    assert cov["2x"]["twice"] == len(res.nodes)  # partners: the rail pairs are two carvings
