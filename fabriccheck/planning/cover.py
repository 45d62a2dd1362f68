"""Coverage by design on InfiniBand: pair NICs by destination so every switch link carries a flow.

On InfiniBand a flow's route is set by its destination (each switch forwards by destination
LID), so the links a pair ``c -> d`` crosses are known before it runs: the uplinks from ``c``'s
leaf toward ``d``'s top switch and the downlinks to ``d``. A fat-tree routes every flow *to* one
NIC down one fixed path, so pairing by "different leaf" alone crosses the same few links again
and again (34% of a fat-tree's links in two rounds). Here each rail's pairs are chosen
destination by destination: for a receiver ``d`` the sender is the free NIC, among a sample of
other leaves, whose route to ``d`` crosses the most links no flow has crossed yet (this round,
on any rail, or in an earlier round), and never a directed hop another flow of the round
already uses (two flows on one link halve each other and look like a fault). The first sender
whose every link is new is taken, else the one with the most new links; the rest pair inside
their leaf. Randomness only through ``seed``.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable

from fabriccheck.models import LinkKey
from fabriccheck.planning.pairing import (
    CrossBudget,
    PairPlan,
    _local_pairs,
    pair_key,
    plan_rail_pairs,
)
from fabriccheck.topology.view import FabricView


def plan_sweep_rail_pairs(
    nodes: Iterable[str],
    view: FabricView,
    *,
    round_no: int,
    seed: int = 0,
    avoid: dict[int, set[frozenset[str]]] | None = None,
    prev_cross: dict[int, frozenset[str]] | None = None,
    roce_cross_share: float = 0.0,
    prev_served: dict[int, frozenset[str]] | None = None,
    covered: set[LinkKey] | None = None,
) -> dict[int, PairPlan]:
    """One sweep round's per-rail pairs: by destination (:func:`plan_cover_pairs`, every rail
    sharing one link budget and ``covered``, updated in place) on an InfiniBand fat-tree;
    :func:`~fabriccheck.planning.pairing.plan_rail_pairs` elsewhere (rail-optimized fabrics:
    its pod matching already crosses every leaf uplink; RoCE: paths are a hash)."""
    if view.fabric != "infiniband" or view.rail_optimized:
        return plan_rail_pairs(nodes, view, round_no=round_no, seed=seed, avoid=avoid,
                               prev_cross=prev_cross, roce_cross_share=roce_cross_share,
                               prev_served=prev_served)
    nodes = sorted(set(nodes))
    rails = sorted({r for n in nodes for r in view.rails_of[n]})
    budget = CrossBudget(view, roce_cross_share)
    got = covered if covered is not None else set()
    avoid = avoid or {}
    return {r: plan_cover_pairs(nodes, view, rail=r, round_no=round_no, seed=seed, covered=got,
                                avoid=avoid.get(r, ()), budget=budget)
            for r in rails}


def plan_cover_pairs(
    nodes: Iterable[str],
    view: FabricView,
    *,
    rail: int,
    round_no: int,
    seed: int,
    covered: set[LinkKey],
    avoid: Iterable[frozenset[str]] = (),
    budget: CrossBudget | None = None,
    sample: int = 8,
) -> PairPlan:
    """Pair the NICs of ``rail`` so the round's flows cross switch links not yet ``covered``.

    Parameters
    ----------
    nodes
        Nodes to pair (those without a NIC on ``rail`` are left out).
    view
        The fabric view (routes known: InfiniBand).
    rail
        The rail whose NICs are paired (one ``ib_write_bw`` flow per pair, client to server).
    round_no, seed
        Pick the shuffle; the only randomness.
    covered
        Switch links some flow already crosses (earlier rounds, other rails of this round);
        updated in place with the links this plan's flows cross.
    avoid
        Node pairs that met on this rail before (never twice).
    budget
        The round's link reservations, shared across rails (directed hops: full duplex).
    sample
        Candidate sender leaves tried per receiver (bounds the work: O(nodes x sample)).

    Returns
    -------
    PairPlan
        ``pairs`` as (client, server); ``cross`` the nodes of cross-leaf pairs.

    Examples
    --------
    >>> from fabriccheck.topology import generate
    >>> t = generate({"kind": "fat-tree", "nodes": 8, "rails": 1, "nodes_per_leaf": 2,
    ...               "spines": 2}, name="t", fabric="infiniband")
    >>> v, got = FabricView(t), set()
    >>> plan = plan_cover_pairs(t.nodes, v, rail=0, round_no=1, seed=0, covered=got)
    >>> len(plan.pairs), len(got), len(v.switch_links)
    (4, 5, 8)
    >>> met = {frozenset(p) for p in plan.pairs}  # carving 2: new partners, the links left
    >>> plan = plan_cover_pairs(t.nodes, v, rail=0, round_no=2, seed=0, covered=got, avoid=met)
    >>> len(plan.pairs), len(got)
    (4, 8)
    """
    rng = random.Random(f"cover:{seed}:{round_no}:{rail}")
    budget = budget or CrossBudget(view, 0.0)
    avoid_set = set(avoid)
    by_leaf = _rail_leaves(nodes, view, rail, rng)
    leaves = sorted(by_leaf)
    pairs, used = _cross_pairs(view, rail, by_leaf, leaves, avoid_set, covered, budget, rng, sample)
    return _with_local_pairs(by_leaf, leaves, pairs, used, avoid_set, budget, rail)


def _rail_leaves(nodes: Iterable[str], view: FabricView, rail: int, rng: random.Random
                 ) -> dict[str, list[str]]:
    """Per leaf switch the nodes whose NIC on ``rail`` hangs off it, shuffled by ``rng`` (the
    leaves in the order of their first node by name); nodes without that NIC are left out."""
    rails_of, att = view.rails_of, view.topology.attachment
    by_leaf: dict[str, list[str]] = defaultdict(list)
    for n in sorted(set(nodes)):
        nic = rails_of[n].get(rail)
        if nic is not None and nic in att:
            by_leaf[att[nic]].append(n)
    # routes are destination-based: every NIC of a leaf reaches ``d`` over the same switch
    # hops, so a route is asked per (leaf, receiver), from the leaf's switch
    for members in by_leaf.values():
        rng.shuffle(members)
    return by_leaf


def _cross_pairs(view: FabricView, rail: int, by_leaf: dict[str, list[str]], leaves: list[str],
                 avoid: set[frozenset[str]], covered: set[LinkKey], budget: CrossBudget,
                 rng: random.Random, sample: int) -> tuple[list[tuple[str, str]], set[str]]:
    """The cross-leaf pairs, receiver by receiver in a shuffled order (see
    :func:`_best_sender`), until every switch link is covered; each pair's hops are reserved
    in ``budget`` and its links added to ``covered``. Returns the pairs as (client, server)
    and the nodes they use."""
    used: set[str] = set()
    pairs: list[tuple[str, str]] = []
    receivers = [n for leaf in leaves for n in by_leaf[leaf]]
    rng.shuffle(receivers)
    every = len(view.switch_links)
    for d in receivers:
        if d in used:
            continue
        if len(covered) >= every:  # every switch link crossed: no sender can add one
            break
        best = _best_sender(d, rail, view, by_leaf, leaves, used, avoid, covered,
                            budget, rng, sample)
        if best is None:
            continue
        c, hops = best
        budget.used.update(hops)
        covered.update(view.hop_link[h] for h in hops)
        pairs.append((c, d))
        used.update((c, d))
    return pairs, used


def _with_local_pairs(by_leaf: dict[str, list[str]], leaves: list[str],
                      pairs: list[tuple[str, str]], used: set[str], avoid: set[frozenset[str]],
                      budget: CrossBudget, rail: int) -> PairPlan:
    """The plan: the cross-leaf ``pairs`` (their nodes ``used``), then the nodes left paired
    inside their leaf, then the last ones across leaves where their links fit ``budget``.
    Returns the :class:`PairPlan` (``cross``: the nodes of cross-leaf pairs; ``served``: the
    receivers of the by-destination pairs)."""
    cross = frozenset(used)
    for leaf in leaves:
        _local_pairs([n for n in by_leaf[leaf] if n not in used], avoid, used, pairs)
    rest = sorted(n for leaf in leaves for n in by_leaf[leaf] if n not in used)
    extra: set[str] = set()
    left = _local_pairs(rest, avoid, used, pairs, budget=budget, cross=extra, rail=rail)
    return PairPlan(tuple(pairs), tuple(sorted(left)), cross | extra,
                    frozenset(d for c, d in pairs if d in cross))


def _best_sender(d: str, rail: int, view: FabricView, by_leaf: dict[str, list[str]],
                 leaves: list[str], used: set[str], avoid: set[frozenset[str]],
                 covered: set[LinkKey], budget: CrossBudget, rng: random.Random, sample: int,
                 ) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """The free sender on another leaf whose route to ``d`` crosses the most uncovered links
    and no directed hop in use (the first whose links are all uncovered)."""
    d_nic = view.rails_of[d][rail]
    d_leaf = view.topology.attachment[d_nic]
    if len(leaves) <= sample + 1:
        picks = [x for x in leaves if x != d_leaf]
    else:
        picks = [x for x in rng.sample(leaves, sample + 1) if x != d_leaf][:sample]
    best: tuple[int, str, tuple[tuple[str, str], ...]] | None = None
    in_use = budget.used
    for leaf in picks:
        c = next((n for n in by_leaf[leaf] if n not in used and n != d
                  and pair_key(n, d) not in avoid), None)
        if c is None:
            continue
        hops, links = _route(leaf, d_nic, view)
        if not hops or not in_use.isdisjoint(hops):
            continue
        gain = sum(1 for lk in links if lk not in covered)
        if gain and (best is None or gain > best[0]):
            best = (gain, c, hops)
            if gain == len(links):
                break
    return None if best is None else (best[1], best[2])


def _route(leaf: str, d_nic: str, view: FabricView
           ) -> tuple[tuple[tuple[str, str], ...], tuple[LinkKey, ...]]:
    """Directed switch hops and link keys from ``leaf`` to ``d_nic``: the route's switch walk
    (every NIC of a leaf has the same one to ``d_nic``), no link keys built. Planning asks
    this hundreds of thousands of times at 4,096 nodes, each pair about once: nothing is
    cached (long-lived containers made the garbage collector half the planning time)."""
    walk = view.topology.switch_walk(leaf, d_nic) or ()
    hops = tuple(zip(walk, walk[1:], strict=False))
    keys = view.hop_link
    return hops, tuple(keys[h] for h in hops)
