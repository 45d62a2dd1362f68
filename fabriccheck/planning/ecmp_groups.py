"""Collective groups on an ECMP fabric (RoCE): carved so that no two flows can collide.

A collective's flows are not pinned: ECMP hashes each onto one of a leaf's uplinks, and two
flows that leave (or enter) one leaf share an uplink with a probability of one over the
uplinks. A ring of 8 rails in both directions has 16 such chances, so with a *share* of the
uplinks per leaf most collectives of a round collided somewhere and ran at half speed: a
healthy fabric looked uniformly slow (a fabric warning, exit 1, measured on a 64-node RoCE rail
fabric with no fault at all). A collision is avoidable only by construction:

- groups stay inside one pod (the leaves a node hangs off) wherever the pod has nodes enough;
  such a ring crosses no spine;
- what a pod cannot fill (fewer than ``k`` nodes left) joins whole, never split, with other
  pods' remainders; the ring visits each pod once, so each leaf sends and receives one flow
  per rail and nothing else of the round crosses that leaf (the builder's budget reserves the
  leaf end exclusively: :meth:`fabriccheck.planning.pairing.CrossBudget.fits_flows`).

Carving 1 cuts each pod into consecutive chunks; carving 2 takes every ``m``-th node
(``m`` = chunks in the pod), so members meet new partners; a per-carving rotation leaves a
different node over. The spine links themselves are exercised by the pinned, traced
``ib_write_bw`` pairs (:mod:`fabriccheck.planning.pinning`), not by collectives.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

from fabriccheck.topology.view import FabricView


def is_ecmp(view: FabricView) -> bool:
    """Collective flows take hashed paths nobody knows: every fabric but InfiniBand."""
    return view.fabric != "infiniband"


def carve_ecmp_groups(nodes: Sequence[str], k: int, view: FabricView, carving: int,
                      seed: int = 0) -> list[tuple[str, ...]]:
    """Groups of ``k`` nodes (a pod-crossing remainder group may be smaller, 2 at least),
    each a ring ordered by pod (see the module docstring).

    >>> from fabriccheck.topology import generate
    >>> t = generate({"kind": "rail-optimized", "nodes": 12, "rails": 2, "nodes_per_leaf": 5,
    ...               "spines": 2}, name="t", fabric="roce")
    >>> g = carve_ecmp_groups(sorted(t.nodes), 4, FabricView(t), 1)
    >>> sorted(len(x) for x in g), sum(len(x) for x in g)
    ([4, 4, 4], 12)
    """
    by_pod: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for n in sorted(nodes):
        by_pod[view.pod(n)].append(n)
    groups: list[tuple[str, ...]] = []
    remainders: list[list[str]] = []
    for pod in sorted(by_pod):
        members = by_pod[pod]
        r = (carving - 1) % len(members)
        members = members[r:] + members[:r]
        full = len(members) // k * k
        groups += _chunks(members[:full], k, carving)
        if len(members) > full:
            remainders.append(members[full:])
    random.Random(f"{seed}/ecmp/{k}/{carving}").shuffle(remainders)
    bins: list[list[str]] = []
    for rest in sorted(remainders, key=len, reverse=True):  # first fit, decreasing
        home = next((b for b in bins if len(b) + len(rest) <= k), None)
        if home is None:
            bins.append(list(rest))
        else:
            home += rest
    groups += [tuple(b) for b in bins if len(b) >= 2]  # a lone node: the other carving
    return groups


def _chunks(members: list[str], k: int, carving: int) -> list[tuple[str, ...]]:
    """Carving 1: consecutive chunks of ``k``; carving 2: every ``m``-th member."""
    m = len(members) // k
    if carving % 2 == 1 or m < 2:
        return [tuple(members[i:i + k]) for i in range(0, len(members), k)]
    return [tuple(members[j::m]) for j in range(m)]
