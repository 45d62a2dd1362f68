"""Topology-aware pairing rounds: cross-leaf pairs that exercise uplinks without sharing links.

Round k pairs every node once. Pods (the leaves a node hangs off) are matched by the circle
method, so each round sends a node's cross-leaf traffic to a different pod; within a matched pod
pair only as many cross pairs are made as the uplinks carry without sharing (InfiniBand: routes
are known, so cross pairs are chosen link-disjoint; RoCE: a cap per leaf keeps expected ECMP
collisions low). The rest pair inside their pod (leaf-local: only their own access links).
Nodes that crossed last round stay local this round and vice versa, so round 2 gives every node
a different partner over a different path. Randomness only through ``seed``.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from fabriccheck.topology.view import FabricView

Pair = tuple[str, str]
Pods = dict[tuple[str, ...], list[str]]  # pod (its leaves) -> its nodes, in pairing order


def pair_key(a: str, b: str) -> frozenset[str]:
    return frozenset((a, b))


@dataclass(frozen=True)
class PairPlan:
    """One round's pairs (client, server), the nodes left over, and which nodes cross leaves."""

    pairs: tuple[Pair, ...]
    leftovers: tuple[str, ...] = ()
    cross: frozenset[str] = field(default_factory=frozenset)
    #: servers (receivers) of cross-leaf pairs: their leaf's downlink on their route was crossed
    served: frozenset[str] = field(default_factory=frozenset)


def circle_matching(items: Sequence[str], index: int) -> list[tuple[str, str]]:
    """Round ``index`` of the round-robin (circle method) schedule over ``items``.

    Rounds ``0 .. n-2`` (n even; a bye is added when odd) match every item with every other once.

    >>> circle_matching(["a", "b", "c", "d"], 0)
    [('a', 'd'), ('b', 'c')]
    """
    items = list(items)
    if len(items) % 2:
        items.append("")
    n = len(items)
    if n < 2:
        return []
    index %= n - 1
    rest = items[1:]
    rest = rest[index:] + rest[:index]
    ring = [items[0], *rest]
    out = []
    for i in range(n // 2):
        a, b = ring[i], ring[n - 1 - i]
        if a and b:
            out.append((a, b))
    return out


#: what an exclusive reservation puts on a leaf end: no other flow fits beside it
FULL = 1 << 20


class CrossBudget:
    """Tracks what cross-leaf flows use in one round: exact links (IB) or flows per leaf (RoCE)."""

    def __init__(self, view: FabricView, roce_cross_share: float) -> None:
        self.view = view
        self.used: set[tuple[str, str]] = set()  # directed switch hops (IB)
        self.per_leaf: dict[tuple[str, str], int] = defaultdict(int)
        self.share = roce_cross_share

    def _flows(self, a: str, b: str, rail: int | None) -> list[tuple[str, str]]:
        ra, rb = self.view.rails_of[a], self.view.rails_of[b]
        if rail is not None:
            return [(ra[rail], rb[rail])]
        return [(ra[r], rb[r]) for r in sorted(set(ra) & set(rb))]

    def fits(self, a: str, b: str, rail: int | None = None, *, force: bool = False) -> bool:
        """Reserve the links of a cross pair a -> b if they fit (``force``: reserve anyway)."""
        return self.fits_flows(self._flows(a, b, rail), force=force)

    def fits_flows(self, flows: list[tuple[str, str]], *, force: bool = False,
                   exclusive: bool = False, dry_run: bool = False) -> bool:
        """Reserve the links of NIC flows ``(src, dst)`` if none is taken (all or nothing).

        ``exclusive`` (RoCE): the flows are not pinned, so ECMP may put any two of them that
        leave (or enter) one leaf on the same uplink, and one collision slows the whole
        collective. Such a test needs every leaf end it crosses to itself, one flow each way,
        and keeps other tests off those ends (with a share of the uplinks, a collective of 8
        rails x 2 directions collides somewhere in most rounds: a healthy fabric looked slow).
        ``dry_run``: only say whether they would fit; reserve nothing."""
        if self.view.fabric == "infiniband":
            links: set[tuple[str, str]] = set()
            for s, d in flows:
                route = self.view.directed_hops(s, d)
                if (route & self.used or route & links) and not force:
                    return False
                links |= route
            if not dry_run:
                self.used |= links
            return True
        att = self.view.topology.attachment
        ends: dict[tuple[str, str], int] = defaultdict(int)  # (leaf, "out"|"in") -> flows
        for s, d in flows:
            if att[s] != att[d]:
                ends[(att[s], "out")] += 1
                ends[(att[d], "in")] += 1
        if not force:
            for (leaf, way), n in ends.items():
                cap = 1 if exclusive else max(1, round(self.share * self.view.uplinks.get(leaf, 0)))
                if self.per_leaf.get((leaf, way), 0) + n > cap:
                    return False
        if dry_run:
            return True
        for end, n in ends.items():
            self.per_leaf[end] += FULL if exclusive else n
        return True

    def close(self, src: str, dst: str) -> None:
        """RoCE: no other flow of the round may leave ``src``'s leaf or enter ``dst``'s (NIC
        endpoints): a flow whose learned path must be alone (aimed at a link) keeps the
        unpinned ones (collective rings, whose paths nobody knows) off its leaf ends."""
        att = self.view.topology.attachment
        if att.get(src) != att.get(dst):
            self.per_leaf[(att[src], "out")] = self.per_leaf[(att[dst], "in")] = FULL


def plan_pairs(
    nodes: Iterable[str],
    view: FabricView,
    *,
    round_no: int,
    seed: int = 0,
    rail: int | None = None,
    avoid: Iterable[frozenset[str]] = (),
    prev_cross: Iterable[str] = (),
    roce_cross_share: float = 0.0,
    budget: CrossBudget | None = None,
    search_limit: int = 24,
    prev_served: Iterable[str] = (),
) -> PairPlan:
    """Pair ``nodes`` for one sweep round (see the module docstring).

    Parameters
    ----------
    nodes
        Nodes to pair (order does not matter; the result depends only on the set and ``seed``).
    view
        The fabric view of the topology.
    round_no
        1-based round number; picks the pod matching and the shuffle.
    seed
        The only source of randomness.
    rail
        Pair the NICs of one rail (pods are that rail's leaves, one flow per pair); None pairs
        whole nodes (pods are a node's set of leaves, a flow per common rail).
    avoid
        Pairs (as frozensets) that must not meet again (earlier partners).
    prev_cross
        Nodes that crossed leaves last round; they are paired leaf-locally first this round.
    roce_cross_share
        RoCE only: cross-leaf flows per leaf and round as a share of its uplinks.
    budget
        Share link reservations with other calls of the same round (one per rail).
    prev_served
        InfiniBand: nodes that already received a cross-leaf flow. D-mod-K brings every flow
        to a node down one fixed spine link, so IB rounds pair every node across leaves and
        make the node not yet served the receiver: rounds 1+2 cover every leaf uplink.

    Returns
    -------
    PairPlan
    """
    # IB rail-optimized: every node crosses (cross pairs of two whole leaves never share a
    # directed link). Fat-trees route all of a node's NICs down one spine link: few cross
    # pairs fit per round, so there the RoCE-style alternation (cross, then local) stays.
    ib = view.fabric == "infiniband" and view.rail_optimized
    # nodes a round left over come first, so no NIC stays untested for two rounds; IB: everyone
    # crosses, receivers-to-be first; otherwise last round's local nodes cross first
    first = set(prev_served if ib else prev_cross)
    avoid_set = set(avoid)
    pods, order = _round_pods(nodes, view, rail, seed, round_no, avoid_set, first)
    budget = budget or CrossBudget(view, roce_cross_share)
    pairs, cross, used = _cross_matched_pods(pods, order, round_no, rail, budget, avoid_set,
                                             search_limit, first if ib else None)
    return _with_pairs_in_pods(pods, order, view, rail, budget, avoid_set, pairs, cross, used)


def _round_pods(nodes: Iterable[str], view: FabricView, rail: int | None, seed: int,
                round_no: int, avoid: set[frozenset[str]], first: set[str]
                ) -> tuple[Pods, list[tuple[str, ...]]]:
    """The round's pods (:func:`_pods`) and the order the circle method numbers them in
    (shuffled by ``seed`` alone: the same every round). In a pod, nodes not yet paired on this
    rail (in no pair of ``avoid``) come first, then those not in ``first``."""
    tag = "all" if rail is None else rail
    rng = random.Random(f"pairs:{seed}:{round_no}:{tag}")
    met = {n for p in avoid for n in p}  # paired on this rail in an earlier round
    pods = _pods(nodes, view, rail, rng, lambda n: (n in met, n in first))
    order = sorted(pods)
    random.Random(f"pods:{seed}:{tag}").shuffle(order)
    return pods, order


def _cross_matched_pods(pods: Pods, order: list[tuple[str, ...]], round_no: int,
                        rail: int | None, budget: CrossBudget, avoid: set[frozenset[str]],
                        search_limit: int, served: set[str] | None
                        ) -> tuple[list[Pair], set[str], set[str]]:
    """Cross pairs between the pods the circle method matches in round ``round_no`` (a rail
    starts as many rounds further on, so each rail meets other pods); ``served``: see
    :func:`_cross_pairs`. Returns the pairs (client, server), the nodes that cross and the
    nodes paired."""
    pairs: list[Pair] = []
    cross: set[str] = set()
    used: set[str] = set()
    offset = 0 if rail is None else rail
    for x, y in circle_matching([str(i) for i in range(len(order))], round_no - 1 + offset):
        px, py = pods[order[int(x)]], pods[order[int(y)]]
        _cross_pairs(px, py, budget, rail, avoid, used, pairs, cross, search_limit, served)
    return pairs, cross, used


def _with_pairs_in_pods(pods: Pods, order: list[tuple[str, ...]], view: FabricView,
                        rail: int | None, budget: CrossBudget, avoid: set[frozenset[str]],
                        pairs: list[Pair], cross: set[str], used: set[str]) -> PairPlan:
    """The plan: the cross ``pairs`` (their nodes ``used``), then the nodes left paired inside
    their pod, then the last ones of different pods across where their links fit ``budget``
    (``served``: the receivers of the pairs that cross between pods)."""
    spill: list[str] = []
    for key in order:
        rest = [n for n in pods[key] if n not in used]
        spill += _local_pairs(rest, avoid, used, pairs)
    # leftovers of different pods pair across (a few flows; forced through the budget)
    spill.sort(key=lambda n: (pods_key(view, n, rail), n))
    leftovers = _local_pairs(spill, avoid, used, pairs, budget=budget, cross=cross, rail=rail)
    now_served = frozenset(s for c, s in pairs if s in cross and c in cross
                           and pods_key(view, c, rail) != pods_key(view, s, rail))
    return PairPlan(tuple(pairs), tuple(sorted(leftovers)), frozenset(cross), now_served)


def plan_rail_pairs(
    nodes: Iterable[str],
    view: FabricView,
    *,
    round_no: int,
    seed: int = 0,
    avoid: dict[int, set[frozenset[str]]] | None = None,
    prev_cross: dict[int, frozenset[str]] | None = None,
    roce_cross_share: float = 0.0,
    prev_served: dict[int, frozenset[str]] | None = None,
) -> dict[int, PairPlan]:
    """Pair every rail's NICs independently (rail-aligned ``ib_write_bw`` pairs), one shared
    link budget for the round, so a node meets a different partner on each rail.

    The sweep calls :func:`fabriccheck.planning.cover.plan_sweep_rail_pairs`, which chooses
    pairs by destination on InfiniBand fat-trees and calls this function elsewhere.
    """
    nodes = sorted(set(nodes))
    rails = sorted({r for n in nodes for r in view.rails_of[n]})
    budget = CrossBudget(view, roce_cross_share)
    avoid = avoid or {}
    prev_cross = prev_cross or {}
    prev_served = prev_served or {}
    return {
        r: plan_pairs(
            nodes, view, round_no=round_no, seed=seed, rail=r, avoid=avoid.get(r, ()),
            prev_cross=prev_cross.get(r, ()), budget=budget, prev_served=prev_served.get(r, ()),
        )
        for r in rails
    }


def _pods(nodes: Iterable[str], view: FabricView, rail: int | None, rng: random.Random,
          order_key) -> Pods:
    """Nodes grouped by pod (their leaves; one rail's leaf with ``rail``), shuffled, then
    stably ordered by ``order_key``."""
    pods: Pods = defaultdict(list)
    att = view.topology.attachment
    for n in sorted(set(nodes)):
        if rail is None:
            pods[view.pod(n)].append(n)
        elif rail in view.rails_of[n]:
            pods[(att.get(view.rails_of[n][rail], ""),)].append(n)
    for members in pods.values():
        rng.shuffle(members)
        members.sort(key=order_key)
    return pods


def pods_key(view: FabricView, node: str, rail: int | None) -> tuple[str, ...]:
    if rail is None:
        return view.pod(node)
    return (view.topology.attachment.get(view.rails_of[node].get(rail, ""), ""),)


def _cross_pairs(px, py, budget, rail, avoid, used, pairs, cross, search_limit,
                 served: set[str] | None = None) -> None:
    """Cross pairs between two pods; with ``served`` (IB) the node that has not yet received a
    cross flow is the server, and partners are chosen so one of the two still needs it."""
    flip = False
    misses = 0
    for a in px:
        if misses > search_limit:
            break
        found = None
        free = [n for n in py if n not in used]
        if served is not None:
            free.sort(key=lambda n, a_in=a in served: (n in served) == a_in)
        for tries, b in enumerate(free):
            if tries > search_limit:
                break
            if pair_key(a, b) in avoid:
                continue
            if served is not None and (a in served) != (b in served):
                client, server = (a, b) if a in served else (b, a)
            else:
                client, server = (b, a) if flip else (a, b)
            if budget.fits(client, server, rail):
                found = (client, server)
                break
        if found is None:
            misses += 1
            continue
        flip = not flip
        pairs.append(found)
        used.update(found)
        cross.update(found)


def _local_pairs(members, avoid, used, pairs, *, budget=None, cross=None, rail=None) -> list[str]:
    """Pair ``members`` in order, skipping earlier partners; return who is left.

    With a ``budget`` (leftovers of different pods) a pair is only made when its links fit, so
    a leftover never forces two flows onto one link; it waits for the next round instead.
    """
    rest = [n for n in members if n not in used]
    left: list[str] = []
    while len(rest) >= 2:
        a = rest.pop(0)
        window = rest if budget is None else rest[:32]  # bounded search: O(n) not O(n^2)
        j, flip = None, False
        for i, b in enumerate(window):
            if pair_key(a, b) in avoid:
                continue
            if budget is None or budget.fits(a, b, rail):
                j = i
                break
            if budget.fits(b, a, rail):  # the other direction uses the other half of the links
                j, flip = i, True
                break
        if j is None:
            left.append(a)
            continue
        b = rest.pop(j)
        pairs.append((b, a) if flip else (a, b))
        used.update((a, b))
        if budget is not None and cross is not None:
            view = budget.view
            if pods_key(view, a, rail) != pods_key(view, b, rail):
                cross.update((a, b))
    return left + rest
