"""Scenario families for the simulator: fabric + faults file + nodes to test + mode, from a seed.

Each family is a pure function ``family(rng, kind, nodes=None) -> Scenario`` of a
``random.Random`` (nothing else is random), a topology kind from :data:`TOPOLOGY_KINDS` and an
optional node count (else the family picks one). The faults are a faults-file mapping
(docs/design.md "Faults file") that ``FaultSet.from_dict`` loads; the scenario says what a perfect
run answers (``expect``) and which parts the faults file cannot name directly (``flaky_nics``,
``switch``).

Families (:data:`FAMILIES`), all with jitter 3% and glitches 1-2% unless said:

- ``density``: 5-10% of nodes faulty (node_slow 0.5-0.7, nic_degraded 0.25/0.5, nic_down,
  node_hang, node_unreachable), one fault per faulty node;
- ``multi_per_node_leaf``: 2-3 faults on one node, 2+ faulty nodes and a degraded uplink on one
  leaf;
- ``fabric_slow``: every link (NIC attachment links included, so every NIC too) at 80% speed,
  written as ``link_degraded`` 0.8 on each link (the contract has no fabric-wide fault); the
  right answer is a fabric warning, no drains (``nics``: ``nic_degraded`` 0.8 on every NIC);
- ``noise_only``: no fault;
- ``switch_down``: every link of one spine down, or every uplink of one leaf at half speed;
- ``intermittent``: one switch link flapping (probability 0.3-0.6) and one NIC failing about one
  test in three (``link_flapping`` 0.33 on its attachment link: the simulator fails a test whose
  flow crosses a flapping link that fires, drawn per test);
- ``small_jobs``: ``gate`` or ``bisect`` on 2-16 nodes of a 128-256-node fabric, 0-2 faults among
  them (bisect: the faulty node is named as a log suspect half of the time);
- ``odd_leaves``: odd numbers of leaf groups (pods on a 3-tier fat-tree) and odd node counts
  (the last leaf partly filled), 2-4 device faults and one degraded uplink.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from fabriccheck.topology import generate
from fabriccheck.topology.model import Topology

#: topology kinds: (fabric, generator kind, tiers); "rail" = rail-optimized
TOPOLOGY_KINDS: dict[str, tuple[str, str, int]] = {
    "ib-rail": ("infiniband", "rail-optimized", 2),
    "roce-rail": ("roce", "rail-optimized", 2),
    "ib-fat2": ("infiniband", "fat-tree", 2),
    "ib-fat3": ("infiniband", "fat-tree", 3),
}
RAILS = 8
#: 3-tier fat-tree shape: 2 nodes per leaf, 4 leaves and 4 spines per pod, 8 cores
FAT3 = {"nodes_per_leaf": 2, "leaves_per_pod": 4, "spines_per_pod": 4, "cores": 8}
DEVICE_KINDS = ("node_slow", "nic_degraded", "nic_down", "node_hang", "node_unreachable")
FLAKY_NIC_PROBABILITY = 0.33


@dataclass(frozen=True)
class Scenario:
    """One scenario; unpacks as ``topology, faults, nodes, mode``.

    ``expect`` is what a perfect run answers: ``faults`` (find them), ``healthy`` (nothing
    injected in scope: exit 0) or ``fabric_warning`` (no drains, exit 1 with a fabric warning).
    ``flaky_nics`` are NICs made intermittent through their attachment link (count them as NIC
    faults, not link faults); ``switch`` is the switch whose links carry the faults
    (``switch_down``); ``log_suspects`` the hosts a job log would name (bisect).
    """

    family: str
    kind: str
    topology: Topology
    faults: dict[str, Any]
    nodes: tuple[str, ...]
    mode: str = "sweep"
    expect: str = "faults"
    flaky_nics: tuple[str, ...] = ()
    switch: str | None = None
    log_suspects: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[Any]:
        return iter((self.topology, self.faults, self.nodes, self.mode))

    @property
    def label(self) -> str:
        """Row label: the topology kind, plus the mode when it is not a sweep."""
        return self.kind if self.mode == "sweep" else f"{self.kind} {self.mode}"


# ---- topologies ------------------------------------------------------------------------------
def build_topology(kind: str, nodes: int, rng: random.Random, *,
                   nodes_per_leaf: int | None = None) -> Topology:
    """A generated fabric of ``kind`` with ``nodes`` nodes, 8 rails, >= 2 leaf groups.

    Rail-optimized: 4-32 nodes per leaf group, 2/4/8 spines; 2-tier fat-tree: 4 nodes (32 NICs)
    per leaf, 4/8/16 spines; 3-tier fat-tree: :data:`FAT3` (two-node leaves).

    >>> t = build_topology("ib-fat3", 16, random.Random(0))
    >>> len(t.nodes), sorted(t.switches)[:2]
    (16, ['core-0', 'core-1'])
    """
    fabric, gen_kind, tiers = TOPOLOGY_KINDS[kind]
    gen: dict[str, Any] = {"kind": gen_kind, "nodes": nodes, "rails": RAILS,
                           "gpus_per_node": RAILS}
    if gen_kind == "rail-optimized":
        sizes = [p for p in (4, 8, 16, 32) if 2 * p <= nodes] or [max(1, nodes // 2)]
        gen["nodes_per_leaf"] = nodes_per_leaf or rng.choice(sizes)
        gen["spines"] = rng.choice((2, 4, 8))
    elif tiers == 2:
        gen.update(tiers=2, nodes_per_leaf=nodes_per_leaf or 4, spines=rng.choice((4, 8, 16)))
    else:
        gen.update(tiers=3, **FAT3)
    return generate(gen, name=f"{kind}-{nodes}", fabric=fabric)


def leaves(topo: Topology) -> list[str]:
    return sorted(s for s, sw in topo.switches.items() if sw.tier == "leaf")


def switch_links(topo: Topology) -> list[tuple[str, str]]:
    """Links between two switches, sorted."""
    return sorted(k for k in topo.links if k[0] in topo.switches and k[1] in topo.switches)


def uplinks(topo: Topology, leaf: str) -> list[tuple[str, str]]:
    return [k for k in switch_links(topo) if leaf in k]


def leaf_nodes(topo: Topology, leaf: str) -> list[str]:
    """Nodes with a NIC on ``leaf``, sorted."""
    return sorted({n for n in topo.nodes for nic in topo.nodes[n].nics
                   if topo.attachment.get(nic.endpoint) == leaf})


def noise(rng: random.Random) -> dict[str, float]:
    """Jitter 3%, glitch rate 1-2%."""
    return {"jitter": 0.03, "glitch_rate": round(rng.uniform(0.01, 0.02), 4)}


# ---- faults ----------------------------------------------------------------------------------
def device_fault(rng: random.Random, topo: Topology, node: str, kind: str,
                 rail: int | None = None) -> dict[str, Any]:
    """One node or NIC fault of ``kind`` (:data:`DEVICE_KINDS`) on ``node``."""
    if kind == "node_slow":
        return {"kind": kind, "node": node, "factor": rng.choice((0.5, 0.6, 0.7))}
    if kind in ("node_hang", "node_unreachable"):
        return {"kind": kind, "node": node}
    nics = sorted(topo.nodes[node].nics, key=lambda n: n.rail)
    nic = (nics[rail] if rail is not None else rng.choice(nics)).endpoint
    if kind == "nic_down":
        return {"kind": kind, "nic": nic}
    return {"kind": "nic_degraded", "nic": nic, "factor": rng.choice((0.25, 0.5))}


def device_faults(rng: random.Random, topo: Topology, nodes: list[str], count: int,
                  kinds: tuple[str, ...] = DEVICE_KINDS) -> list[dict[str, Any]]:
    """``count`` faults on ``count`` different nodes drawn from ``nodes``."""
    return [device_fault(rng, topo, n, rng.choice(kinds)) for n in rng.sample(nodes, count)]


def uplink_fault(rng: random.Random, topo: Topology, avoid: set[str]) -> dict[str, Any]:
    """``link_degraded`` 0.5 or ``link_down`` on one leaf uplink; the leaf keeps another uplink
    and the link touches no switch in ``avoid`` (updated)."""
    links = [k for k in switch_links(topo) if not set(k) & avoid
             and any(topo.switches[e].tier == "leaf" for e in k)]
    lk = rng.choice(links)
    avoid.update(lk)
    if rng.random() < 0.5:
        return {"kind": "link_down", "link": list(lk)}
    return {"kind": "link_degraded", "link": list(lk), "factor": 0.5}


def _scenario(family: str, kind: str, topo: Topology, faults: list[dict], rng: random.Random,
              **kw: Any) -> Scenario:
    nodes = kw.pop("nodes", None) or tuple(sorted(topo.nodes))
    return Scenario(family, kind, topo, {"noise": noise(rng), "faults": faults}, tuple(nodes),
                    **kw)


# ---- families --------------------------------------------------------------------------------
def density(rng: random.Random, kind: str, nodes: int | None = None) -> Scenario:
    """5-10% of nodes faulty, one device fault each (:data:`DEVICE_KINDS`)."""
    n = nodes or rng.choice((16, 32, 64, 128, 256))
    topo = build_topology(kind, n, rng)
    count = rng.randint(max(1, math.ceil(0.05 * n)), max(1, math.floor(0.10 * n)))
    faults = device_faults(rng, topo, sorted(topo.nodes), count)
    return _scenario("density", kind, topo, faults, rng)


def multi_per_node_leaf(rng: random.Random, kind: str, nodes: int | None = None) -> Scenario:
    """Two or three faults on one node (slow + NICs); on one leaf, faults on up to half of its
    nodes (at least one) and one of its uplinks degraded to half speed."""
    n = nodes or rng.choice((32, 64, 128, 256))
    topo = build_topology(kind, n, rng)
    leaf = rng.choice(leaves(topo))
    under = leaf_nodes(topo, leaf)
    others = [x for x in sorted(topo.nodes) if x not in under]
    multi = rng.choice(others)
    rails = rng.sample(range(RAILS), 2)
    faults = [device_fault(rng, topo, multi, "nic_degraded", rails[0]),
              device_fault(rng, topo, multi, "nic_down", rails[1])]
    if rng.random() < 0.5:
        faults.append(device_fault(rng, topo, multi, "node_slow"))
    on_leaf = rng.sample(under, max(1, min(3, len(under) // 2)))
    for x in on_leaf:
        k = rng.choice(("nic_degraded", "nic_degraded", "nic_down", "node_slow", "node_hang"))
        rail = rng.choice([nic.rail for nic in topo.nodes[x].nics
                           if topo.attachment[nic.endpoint] == leaf])
        faults.append(device_fault(rng, topo, x, k, rail))
    lk = rng.choice(uplinks(topo, leaf))
    faults.append({"kind": "link_degraded", "link": list(lk), "factor": 0.5})
    return _scenario("multi_per_node_leaf", kind, topo, faults, rng)


def fabric_slow(rng: random.Random, kind: str, nodes: int | None = None, *,
                how: str = "links") -> Scenario:
    """Every link and NIC at 80%: ``link_degraded`` 0.8 on every link (attachment links
    included), or with ``how="nics"`` ``nic_degraded`` 0.8 on every NIC plus every switch link."""
    n = nodes or rng.choice((32, 64, 128, 256))
    topo = build_topology(kind, n, rng)
    links = sorted(topo.links) if how == "links" else switch_links(topo)
    faults = [{"kind": "link_degraded", "link": list(k), "factor": 0.8} for k in links]
    if how == "nics":
        faults += [{"kind": "nic_degraded", "nic": e, "factor": 0.8} for e in sorted(topo.nics)]
    return _scenario("fabric_slow", kind, topo, faults, rng, expect="fabric_warning")


def noise_only(rng: random.Random, kind: str, nodes: int | None = None) -> Scenario:
    """No fault: jitter 3% and 1-2% glitches only."""
    topo = build_topology(kind, nodes or rng.choice((16, 32, 64, 128, 256)), rng)
    return _scenario("noise_only", kind, topo, [], rng, expect="healthy")


def switch_down(rng: random.Random, kind: str, nodes: int | None = None) -> Scenario:
    """Every link of one spine down, or every uplink of one leaf at half speed."""
    topo = build_topology(kind, nodes or rng.choice((32, 64, 128, 256)), rng)
    if rng.random() < 0.5:
        spine = rng.choice(sorted(s for s, sw in topo.switches.items() if sw.tier == "spine"))
        faults = [{"kind": "link_down", "link": list(k)} for k in switch_links(topo)
                  if spine in k]
        return _scenario("switch_down", kind, topo, faults, rng, switch=spine)
    leaf = rng.choice(leaves(topo))
    faults = [{"kind": "link_degraded", "link": list(k), "factor": 0.5}
              for k in uplinks(topo, leaf)]
    return _scenario("switch_down", kind, topo, faults, rng, switch=leaf)


def intermittent(rng: random.Random, kind: str, nodes: int | None = None) -> Scenario:
    """One leaf uplink flapping (probability 0.3-0.6) and one NIC failing ~1 test in 3 (a
    flapping attachment link: the faults file has no intermittent-NIC kind)."""
    topo = build_topology(kind, nodes or rng.choice((32, 64, 128, 256)), rng)
    node = rng.choice(sorted(topo.nodes))
    nic = rng.choice(topo.nodes[node].nics).endpoint
    leaf = topo.attachment[nic]
    lk = rng.choice([k for k in switch_links(topo) if leaf not in k
                     and any(topo.switches[e].tier == "leaf" for e in k)])
    faults = [{"kind": "link_flapping", "link": list(lk),
               "probability": round(rng.uniform(0.3, 0.6), 2)},
              {"kind": "link_flapping", "link": [nic, leaf],
               "probability": FLAKY_NIC_PROBABILITY}]
    return _scenario("intermittent", kind, topo, faults, rng, flaky_nics=(nic,))


def small_jobs(rng: random.Random, kind: str, nodes: int | None = None) -> Scenario:
    """``gate`` or ``bisect`` on 2-16 nodes of a 128-256-node fabric (spread over its leaves or
    one contiguous block), 0-2 device faults among them (no hang in a gate: it has a budget)."""
    topo = build_topology(kind, nodes or rng.choice((128, 256)), rng)
    mode = rng.choice(("gate", "bisect"))
    size = rng.choice((2, 3, 4, 6, 8, 12, 16))
    all_nodes = sorted(topo.nodes)
    if rng.random() < 0.5:
        job = sorted(rng.sample(all_nodes, size))
    else:
        start = rng.randrange(len(all_nodes) - size + 1)
        job = all_nodes[start:start + size]
    count = rng.choice((0, 1, 1, 2)) if size > 2 else rng.choice((0, 1))
    kinds = DEVICE_KINDS if mode == "bisect" else tuple(k for k in DEVICE_KINDS
                                                        if k != "node_hang")
    faults = device_faults(rng, topo, job, count, kinds)
    named = tuple(f["node"] if "node" in f else f["nic"].split("/")[0] for f in faults)
    logs = named[:1] if mode == "bisect" and named and rng.random() < 0.5 else ()
    return _scenario("small_jobs", kind, topo, faults, rng, nodes=tuple(job), mode=mode,
                     expect="faults" if faults else "healthy", log_suspects=logs)


def odd_leaves(rng: random.Random, kind: str, nodes: int | None = None) -> Scenario:
    """Odd leaf-group (pod) counts and odd node counts: the last leaf is partly filled."""
    _, gen_kind, tiers = TOPOLOGY_KINDS[kind]
    if gen_kind == "rail-optimized":
        per_leaf, groups = rng.choice((4, 8, 16)), rng.choice((3, 5, 7))
    elif tiers == 2:
        per_leaf, groups = 4, rng.choice((5, 7, 9, 15))
    else:
        per_leaf = FAT3["nodes_per_leaf"] * FAT3["leaves_per_pod"]
        groups = rng.choice((3, 5, 7))
    n = nodes or groups * per_leaf - rng.randrange(per_leaf)
    if nodes is None and n % 2 == 0:
        n -= 1  # still in the last group: it had at most per_leaf - 2 removed
    topo = build_topology(kind, n, rng, nodes_per_leaf=per_leaf if tiers == 2 else None)
    faults = device_faults(rng, topo, sorted(topo.nodes), rng.randint(2, 4))
    faults.append(uplink_fault(rng, topo, set()))
    return _scenario("odd_leaves", kind, topo, faults, rng)


FAMILIES: dict[str, Callable[..., Scenario]] = {
    "density": density,
    "multi_per_node_leaf": multi_per_node_leaf,
    "fabric_slow": fabric_slow,
    "noise_only": noise_only,
    "switch_down": switch_down,
    "intermittent": intermittent,
    "small_jobs": small_jobs,
    "odd_leaves": odd_leaves,
}


def scenario(family: str, kind: str, seed: int, nodes: int | None = None) -> Scenario:
    """The scenario of ``family`` on ``kind`` for ``seed`` (its own ``random.Random``).

    >>> a, b = scenario("density", "ib-rail", 3), scenario("density", "ib-rail", 3)
    >>> a.faults == b.faults and a.nodes == b.nodes
    True
    """
    return FAMILIES[family](random.Random(f"{family}/{kind}/{seed}"), kind, nodes)
