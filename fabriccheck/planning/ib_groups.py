"""Collective groups on InfiniBand: rings across leaves (and pods) that share no link.

InfiniBand routes are known (D-mod-K or the forwarding tables), so the ladder's 4x/8x groups
span as many leaves as they can and are carved *link-disjoint by construction*: each group's
ring (ordered by leaf, fewest crossings) is checked against the rings carved before it in the
round, a member at a time, with the round's own link budget
(:class:`~fabriccheck.planning.pairing.CrossBudget`, a dry run). Two rings on one link halve
each other and look like a fault, so a ring is never forced; a node that fits nowhere is left
over and the run result's ``ladder.coverage`` says so (:mod:`.ladder_cover`).

Why a member at a time: dealing groups first and checking their rings after (as before)
refused whole groups on the 3-tier fat-tree, whose leaves hold two nodes each and whose
D-mod-K up-links collide when two nodes of a leaf send to destinations of one residue: a
default sweep of ``ib-fattree3-512`` left 12 nodes out of each 4x round and 56 and 120 out of
the two 8x rounds (44 and 148 nodes met one 4x/8x group only; docs/sweep.md has the table).

Carving 2 deals every leaf from another node (a rotation that also moves two-node leaves) and
puts first the nodes carving 1 left out, then avoids members a node met in carving 1.

A greedy deal can strand a node: on ``gb200-nvl72-8`` (18 nodes a rail leaf, D-mod-K) carving 2
at 8x left 1-3 nodes alone in some seeds, as did ``ib-fattree-128`` and ``ib-fattree3-512`` now
and then. A deal that leaves nodes alone is dealt again with them at its head; the best deal's
lone nodes and short groups are then dealt again together (their links given back first), with
one more full group of the lone nodes' switches each few orders (:func:`_absorb`). Before that,
a lone node takes a member's place in a nearby group and the member joins a short group, or
pairs with it (:func:`_swap_in`, two steps deep): ``ib-fattree-128`` seed 829935 left one node
beside a group of 7 that no redeal fixed, and random idle subsets left 103 nodes out of 160
carvings (0 after; ``bench/bench_carving.py``, docs/sweep.md). Measured on fresh
seeds (``bench/bench_coverage.py``, docs/sweep.md): every node of every bundled topology in two
different 4x and 8x groups.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from fabriccheck.planning.build import RoundBuilder, ring_flows
from fabriccheck.planning.pairing import CrossBudget
from fabriccheck.topology.view import FabricView

#: candidates looked at per member, first among nodes new to the group's leaves and members
WINDOW_PER_MEMBER = 32
#: deals tried per carving when one leaves nodes out of full groups
ATTEMPTS = 6
#: orders tried when the short groups of a deal are dealt again with the nodes it left alone
REDEALS = 8
#: full groups at most dealt again with them, one more every REDEALS orders
WIDEN = 6
#: groups a lone node may swap into, nearest first (:func:`_swap_in`)
SWAP_GROUPS = 64
#: groups a lone node may take a member's place in, that member then placed in turn
SWAP_DEEP = 16
#: short groups and lone nodes dealt again only when they are at most this many groups' worth
POOL_GROUPS = 2
Fits = Callable[[tuple[str, ...]], bool]


def ring_key(view: FabricView, nodes: Sequence[str]) -> dict[str, int]:
    """Node -> its place in the leaf order of ``nodes`` (a ring sorted by it crosses least)."""
    return {n: i for i, n in enumerate(sorted(nodes, key=lambda n: (view.pod(n), n)))}


def blocks(view: FabricView, nodes: Sequence[str]) -> dict[str, tuple]:
    """Node -> (the switches above its leaves, its rank on its leaf, the nodes on its leaf):
    what a ring prefers its
    members to share. Leaves under the same switches form a block (a 3-tier pod; a 2-tier or
    rail fabric is one block): a ring inside a block turns at its spines, while D-mod-K sends
    every flow from one pod to one destination port through one core link, so few rings of a
    round fit across blocks. D-mod-K also takes a flow up by its destination's port (LIDs in
    port order): rings of nodes of one rank on their leaves leave each leaf on other up-links
    than rings of the other ranks."""
    every = _every_block(view)
    return {n: every[n] for n in nodes}


def _every_block(view: FabricView) -> dict[str, tuple]:
    """:func:`blocks` of every node of the topology (they depend on it alone: kept by the
    view, built once)."""
    return view.memo("ib_groups.blocks", lambda: _build_blocks(view))


def _build_blocks(view: FabricView) -> dict[str, tuple]:
    """:func:`blocks` of every node, computed."""
    sw = view.topology.switches
    up: dict[str, set[str]] = defaultdict(set)
    for a, c in view.topology.links:
        if a in sw and c in sw and (sw[a].tier == "leaf") != (sw[c].tier == "leaf"):
            leaf, top = (a, c) if sw[a].tier == "leaf" else (c, a)
            up[leaf].add(top)
    by_leaf: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for n in sorted(view.topology.nodes):
        by_leaf[view.pod(n)].append(n)
    rank = {n: (i, len(members)) for members in by_leaf.values() for i, n in enumerate(members)}
    return {n: (frozenset(s for lf in view.pod(n) for s in up[lf]), *rank[n]) for n in rank}


def budget_fits(view: FabricView, budget: CrossBudget) -> Fits:
    """Whether a ring's cross-leaf flows fit ``budget`` (a dry run: nothing reserved). On
    InfiniBand the ring's hops are checked as they are walked (the carving asks this millions
    of times at 512 nodes): the same answer as ``budget.fits_flows(..., dry_run=True)``."""
    att = view.topology.attachment
    rails_of, hops_of = view.rails_of, view.directed_hops

    def fits_ib(ring: tuple[str, ...]) -> bool:
        rails = set(rails_of[ring[0]]).intersection(*(rails_of[n] for n in ring[1:]))
        used, seen, k = budget.used, set(), len(ring)
        for r in rails:
            for i in range(k):
                src, dst = rails_of[ring[i]][r], rails_of[ring[(i + 1) % k]][r]
                if att.get(src) == att.get(dst):
                    continue
                hops = hops_of(src, dst)
                if not hops.isdisjoint(used) or not hops.isdisjoint(seen):
                    return False
                seen |= hops
        return bool(rails)

    if view.fabric == "infiniband":
        return fits_ib

    def fits(ring: tuple[str, ...]) -> bool:
        rails = set.intersection(*(set(view.rails_of[n]) for n in ring))
        return bool(rails) and budget.fits_flows(cross_flows(ring, view), exclusive=True,
                                                 dry_run=True)
    return fits


def carve_ib_groups(nodes: Sequence[str], k: int, view: FabricView, carving: int,
                    met: Mapping[str, set[str]], seed: int = 0,
                    scope: Sequence[str] = ()) -> list[tuple[str, ...]]:
    """Groups of ``k`` nodes (rings ordered by :func:`ring_key` over ``scope``), spanning as many
    leaves as possible, members new to each other where possible (``met``), no two rings
    sharing a link; a remainder of fewer than ``k`` nodes forms one smaller group (2 at least).
    A deal that leaves nodes out (or in short groups) is dealt again, :data:`ATTEMPTS` times
    at most (every third time without the preference for the head's block and rank: a plain
    greedy fills some fabrics better), and the carving that places most nodes (then most in
    full groups) is kept; its lone nodes are placed by :func:`_absorb` where they fit.

    >>> from fabriccheck.topology import generate
    >>> t = generate({"kind": "fat-tree", "tiers": 2, "nodes": 16, "rails": 2,
    ...               "nodes_per_leaf": 2, "spines": 4}, name="t", fabric="infiniband")
    >>> g = carve_ib_groups(sorted(t.nodes), 4, FabricView(t), 1, {})
    >>> sorted(len(x) for x in g)
    [4, 4, 4, 4]
    """
    order = ring_key(view, scope or nodes)
    block = blocks(view, nodes)
    best: tuple[list[tuple[str, ...]], list[str], CrossBudget] | None = None
    best_score = (-1, -1)
    out: set[str] = set()  # left out by the deal before: at the head of the next
    for attempt in range(ATTEMPTS):  # every third: without the block and rank preference
        tag = f"{seed}/carve/{k}/{carving}" + (f"/{attempt}" if attempt else "")
        groups, alone, budget = _carve_once(nodes, k, view, carving, met, random.Random(tag),
                                            order, {} if attempt % 3 == 2 else block, out)
        full = sum(len(g) for g in groups if len(g) == k)
        score = (sum(map(len, groups)), full)
        if score > best_score:
            best, best_score = (groups, alone, budget), score
        if not alone and (len(nodes) - full < k or not full):  # nothing to gain: all placed,
            break  # in full groups or in none (no ring of k fits this fabric's links)
        out = set(alone)
    groups, alone, budget = best  # type: ignore[misc]
    if not alone:
        return groups
    rng = random.Random(f"{seed}/carve/{k}/{carving}/absorb")
    return _absorb(groups, alone, k, budget, view, order, met, rng)


def _carve_once(nodes: Sequence[str], k: int, view: FabricView, carving: int,
                met: Mapping[str, set[str]], rng: random.Random, order: Mapping[str, int],
                block: Mapping[str, tuple], first: set[str]
                ) -> tuple[list[tuple[str, ...]], list[str], CrossBudget]:
    """One greedy deal: its groups, the nodes it left alone, and the link budget they use."""
    budget = CrossBudget(view, 0.0)
    fits = budget_fits(view, budget)
    deal = _deal(nodes, view, carving, met, rng)
    left = dict.fromkeys(sorted(deal, key=lambda n: n not in first))  # an insertion-ordered set
    groups: list[tuple[str, ...]] = []
    alone: list[str] = [*left][-1:] if len(left) == 1 else []
    while len(left) >= 2:
        ring = fill_group(left, k, view, met, fits, order, block, carving)
        if len(ring) >= 2:
            budget.fits_flows(cross_flows(ring, view), exclusive=True)
            groups.append(ring)
        else:
            alone.append(ring[0])
        if len(left) == 1:
            alone.append(next(iter(left)))
    return groups, alone, budget


def cross_flows(ring: Sequence[str], view: FabricView) -> list[tuple[str, str]]:
    """The NIC flows of ``ring`` that leave their leaf."""
    att = view.topology.attachment
    rails = sorted(set.intersection(*(set(view.rails_of[n]) for n in ring)))
    return [(f.src, f.dst) for f in ring_flows(ring, rails, view)
            if att.get(f.src) != att.get(f.dst)]


def _absorb(groups: list[tuple[str, ...]], alone: list[str], k: int, budget: CrossBudget,
            view: FabricView, order: Mapping[str, int],
            met: Mapping[str, set[str]], rng: random.Random) -> list[tuple[str, ...]]:
    """Nodes the greedy deal left alone: the short groups (fewer than ``k``) give their links
    back and are dealt again with them, in shuffled orders, until one deal places every node
    (InfiniBand: exact links); every :data:`REDEALS` orders one more full group joins them
    (:data:`WIDEN` at most; those with most members under the lone nodes' switches first).
    Else, or when more than :data:`POOL_GROUPS` groups' worth of
    nodes are short (a fabric with many nodes out: the redeals would cost more than they
    place), the groups stay as they were."""
    if view.fabric != "infiniband":
        return groups
    groups, alone = _swap_in(groups, alone, k, budget, view, order, met)
    short = [g for g in groups if len(g) < k]
    if not alone or len(alone) + sum(map(len, short)) > POOL_GROUPS * k:
        return groups
    full = [g for g in groups if len(g) >= k]
    rng.shuffle(full)
    home = _every_block(view)
    near = {home[n][0] for n in alone}  # the full groups most in the lone nodes' blocks first
    full.sort(key=lambda g: -sum(home[n][0] in near for n in g))
    base = set(budget.used)
    for widen in range(min(WIDEN, len(full)) + 1):
        given = short + full[:widen]
        pool = [*(n for g in given for n in g), *alone]
        freed = set().union(*(_hops(g, view) for g in given))
        for attempt in range(REDEALS):  # odd orders: partners met before allowed
            trial = CrossBudget(view, 0.0)
            trial.used = base - freed
            regrouped = _fill_all(dict.fromkeys(pool), k, view, {} if attempt % 2 else met,
                                  trial, order)
            if sum(map(len, regrouped)) == len(pool) and _new_groups(regrouped, met):
                budget.used = trial.used
                return full[widen:] + regrouped
            rng.shuffle(pool)
    return groups


def _swap_in(groups: list[tuple[str, ...]], alone: list[str], k: int, budget: CrossBudget,
             view: FabricView, order: Mapping[str, int], met: Mapping[str, set[str]]
             ) -> tuple[list[tuple[str, ...]], list[str]]:
    """Lone nodes placed by moving one member of another group: a lone node ``x`` takes the
    place of a member ``m`` of group ``g`` and ``m`` joins a group short of ``k``; with no short
    group, ``m`` leaves ``g`` (of more than two) and pairs with ``x``. Every changed ring must
    fit with the old rings' links given back. A packing the greedy deal misses by one member
    (``ib-fattree-128``, seed 829935: one node alone beside a group of 7, and no deal of the
    pool around them fitted), and the lone node of a node count one past a multiple of ``k``.
    Groups nearest ``x`` (members under its leaves' switches) are tried first,
    :data:`SWAP_GROUPS` of them at most. Returns the groups and the nodes still alone."""
    groups, still, placed = list(groups), list(alone), True
    while still and placed:  # a pair made for one lone node is a short group for the next
        placed = False
        for x in list(still):
            if _swap_one(groups, x, k, budget, view, order, met):
                still.remove(x)
                placed = True
    return groups, still


def _swap_one(groups: list[tuple[str, ...]], x: str, k: int, budget: CrossBudget,
              view: FabricView, order: Mapping[str, int], met: Mapping[str, set[str]],
              depth: int = 1, keep: frozenset[int] = frozenset()) -> bool:
    """One lone node placed (:func:`_swap_in`); ``groups`` and ``budget`` updated in place.
    Else (``depth`` left) ``x`` takes a member's place in one of the :data:`SWAP_DEEP`
    nearest groups and that member is placed so in turn (groups in ``keep`` not touched).
    Trials change ``budget.used`` in place and undo what fails (a copy of the round's links
    per trial cost seconds at 4,096 nodes)."""
    short = [i for i, g in enumerate(groups) if len(g) < k and i not in keep]
    home = _every_block(view)
    donors = sorted((i for i, g in enumerate(groups)
                     if i not in short and i not in keep and len(g) > 2),
                    key=lambda i: -sum(home[n][0] == home[x][0] for n in groups[i]))
    used, fits = budget.used, budget_fits(view, budget)
    for t in short or [None]:
        for i in donors[:SWAP_GROUPS]:
            g, s = groups[i], () if t is None else groups[t]
            freed = _hops(g, view) | (_hops(s, view) if s else set())
            used.difference_update(freed)
            for m in g:
                moved = _move(g, s, m, x, used, fits, view, order, met)
                if moved is None:
                    continue
                groups[i] = moved[0]
                if t is None:
                    groups.append(moved[1])
                else:
                    groups[t] = moved[1]
                return True
            used.update(freed)
    return depth > 0 and _swap_deeper(groups, x, donors[:SWAP_DEEP], k, budget, view, order,
                                      met, depth, keep)


def _move(g: tuple[str, ...], s: tuple[str, ...], m: str, x: str, used: set[tuple[str, str]],
          fits: Fits, view: FabricView, order: Mapping[str, int],
          met: Mapping[str, set[str]]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """``g`` and ``s`` after ``x`` takes ``m``'s place in ``g`` and ``m`` joins ``s``; with no
    ``s``, ``g`` without ``m`` (either way round) and the pair of ``m`` and ``x``. Their links
    are reserved in ``used`` (from which ``g``'s and ``s``'s were given back); None, with
    nothing reserved, when a ring does not fit or a group is one its members all met."""
    added: set[tuple[str, str]] = set()

    def reserve(ring: tuple[str, ...]) -> tuple[str, ...]:
        hops = _hops(ring, view)
        used.update(hops)
        added.update(hops)
        return ring

    def join(ring: Sequence[str], n: str) -> tuple[str, ...] | None:
        out = _joined(ring, n, fits, order)
        return None if out is None else reserve(out)

    rest = tuple(n for n in g if n != m)
    if not s:  # g keeps its ring without m; m pairs with x
        kept = next((r for r in (rest, rest[::-1]) if fits(r)), None)
        g2 = None if kept is None else reserve(kept)
        s2 = join((m,), x) if g2 else None
    else:
        g2 = join(rest, x)
        s2 = join(s, m) if g2 else None
    if g2 is None or s2 is None or not _new_groups([g2, s2], met):
        used.difference_update(added)
        return None
    return g2, s2


def _swap_deeper(groups: list[tuple[str, ...]], x: str, donors: Sequence[int], k: int,
                 budget: CrossBudget, view: FabricView, order: Mapping[str, int],
                 met: Mapping[str, set[str]], depth: int, keep: frozenset[int]) -> bool:
    """``x`` takes the place of a member ``m`` of a ``donors`` group (its ring fitting), and
    :func:`_swap_one` places ``m`` with one step less; undone when ``m`` finds no place."""
    used, fits = budget.used, budget_fits(view, budget)
    for i in donors:
        g = groups[i]
        freed = _hops(g, view)
        used.difference_update(freed)
        for m in g:
            g2 = _joined([n for n in g if n != m], x, fits, order)
            if g2 is None or not _new_groups([g2], met):
                continue
            hops = _hops(g2, view)
            used.update(hops)
            groups[i] = g2
            if _swap_one(groups, m, k, budget, view, order, met, depth - 1, keep | {i}):
                return True
            groups[i] = g
            used.difference_update(hops)
        used.update(freed)
    return False


def _joined(ring: Sequence[str], n: str, fits: Fits, order: Mapping[str, int]
            ) -> tuple[str, ...] | None:
    """``ring`` with ``n`` at the first place where it fits (:func:`_place`), or None."""
    at = _place(list(ring), n, fits, order)
    return None if at is None else (*ring[:at], n, *ring[at:])


def _new_groups(groups: list[tuple[str, ...]], met: Mapping[str, set[str]]) -> bool:
    """No group is one its members all met before (its nodes would meet one group only)."""
    return not any(met and all(set(g) - {n} <= met.get(n, set()) for n in g) for g in groups)


def _hops(ring: Sequence[str], view: FabricView) -> set[tuple[str, str]]:
    return set().union(*(view.directed_hops(s, d) for s, d in cross_flows(ring, view)))


def _fill_all(left: dict[str, None], k: int, view: FabricView, met: Mapping[str, set[str]],
              budget: CrossBudget, order: Mapping[str, int]) -> list[tuple[str, ...]]:
    """Rings of ``left`` (no block preference) until fewer than two are left."""
    fits = budget_fits(view, budget)
    out: list[tuple[str, ...]] = []
    while len(left) >= 2:
        ring = fill_group(left, k, view, met, fits, order)
        if len(ring) >= 2:
            budget.fits_flows(cross_flows(ring, view), exclusive=True)
            out.append(ring)
    return out


def _deal(nodes: Sequence[str], view: FabricView, carving: int,
          met: Mapping[str, set[str]], rng: random.Random) -> list[str]:
    """Nodes round-robin over their leaves (a seeded leaf order per carving), each leaf from
    another node per carving; nodes that met nobody at this level yet come first."""
    by_leaf: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for n in sorted(nodes):
        by_leaf[view.pod(n)].append(n)
    leaves = sorted(by_leaf)
    rng.shuffle(leaves)
    for lf in leaves:
        lst = by_leaf[lf]
        r = (carving - 1) * (len(lst) // 2 + 1) % len(lst) or (carving - 1)  # another slice
        by_leaf[lf] = lst[r % len(lst):] + lst[:r % len(lst)]
    deal: list[str] = []
    for i in range(max((len(v) for v in by_leaf.values()), default=0)):
        deal += [by_leaf[lf][i] for lf in leaves if i < len(by_leaf[lf])]
    if any(met.get(n) for n in deal):  # a later carving: who missed the earlier ones first
        deal.sort(key=lambda n: bool(met.get(n)))
    return deal


def fill_group(left: dict[str, None], k: int, view: FabricView, met: Mapping[str, set[str]],
               fits: Fits, order: Mapping[str, int],
               block: Mapping[str, tuple] | None = None, carving: int = 1) -> tuple[str, ...]:
    """Take the head of ``left`` and up to ``k - 1`` more, each keeping the ring fitting:
    first nodes new to the members on a leaf the group lacks, then any (a bounded search),
    each among the nodes of the head's ``block`` whose rank on their leaf follows the ring's
    last member's by ``carving - 1`` (appended to the ring: every leaf then sends each of its
    ranks to another rank, :func:`blocks`; the same rank when ``k`` is no multiple of the
    ranks, as the ring would not close so), then the rest of its block, then elsewhere
    (placed at their leaf-order place in the ring, or another place where that fits). The
    members leave ``left``. Returns the ring."""
    head = next(iter(left))
    del left[head]
    ring, leaves_in = [head], {view.pod(head)}
    window = WINDOW_PER_MEMBER * k

    def near(n: str) -> int:  # 0: the head's block, the rank due next; 1: its block; 2: else
        if not block:
            return 0
        if block[n][0] != block[head][0]:
            return 2
        last = block[ring[-1]]
        shift = carving - 1 if k % last[2] == 0 else 0  # else its ring would not close so
        return 0 if block[n][1] == (last[1] + shift) % last[2] else 1

    for tier, strict in ((0, True), (0, False), (1, True), (1, False), (2, True), (2, False)):
        if (tier, strict) == (0, False) and len(ring) == 1 and block:
            continue  # nobody of the rank due is new to it: their group would be the old one
        grew = True
        while grew and len(ring) < k:
            grew = False
            for cand in list(left)[:window * (1 if strict else 4)]:
                if len(ring) == k:
                    break
                if near(cand) != tier or strict and (met.get(cand, set()) & set(ring)
                                                     or view.pod(cand) in leaves_in):
                    continue
                at = _place(ring, cand, fits, order, tail=tier == 0 and bool(block))
                if at is None:
                    continue
                ring.insert(at, cand)
                leaves_in.add(view.pod(cand))
                del left[cand]
                grew = tier == 0  # the rank due next changed: look again
    return tuple(ring)


def _place(ring: list[str], cand: str, fits: Fits, order: Mapping[str, int],
           tail: bool = False) -> int | None:
    """Where ``cand`` joins ``ring`` so that it fits: at its end (``tail``), else its
    leaf-order place first."""
    if tail:
        return len(ring) if fits((*ring, cand)) else None
    home = sum(order[n] < order[cand] for n in ring)
    for at in (home, *(i for i in range(len(ring) + 1) if i != home)):
        if fits((*ring[:at], cand, *ring[at:])):
            return at
        if len(ring) < 2:
            return None  # a pair is one ring whichever way round
    return None


def place_groups(b: RoundBuilder, groups: list[tuple[str, ...]], view: FabricView,
                 scope: Sequence[str], probe: str, carving: int = 1) -> None:
    """Add each group's ring (as carved) to the round; the members of rings refused because a test
    already in the round (a follow-up) holds one of their links or nodes are carved again
    among themselves, a ring at a time with the round's budget (never forced)."""
    order = ring_key(view, scope)
    spill: list[str] = []
    for ring in groups:
        if b.add_group(ring, "scale", probe=probe) is None:
            spill += [n for n in ring if b.node_free(n) and n not in b.busy_gpus]
    k = max((len(g) for g in groups), default=2)
    spill.sort(key=order.__getitem__)
    shift = (carving - 1) * (k // 2)  # carving 2: group boundaries half a group further on
    left = dict.fromkeys(spill[shift:] + spill[:shift])
    block = blocks(view, list(left)) if left else {}
    while len(left) >= 2:
        ring = fill_group(left, k, view, {}, b.group_fits, order, block, carving)
        if len(ring) >= 2:
            b.add_group(ring, "scale", probe=probe)
