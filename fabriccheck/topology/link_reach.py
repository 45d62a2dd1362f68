"""Which flow crosses a given switch link: InfiniBand routes searched for a (source, destination)
NIC pair whose route uses the link, so a link no test crossed can be aimed at.

Routes are destination-based: a switch ``u`` sends destination ``d`` down the link ``u -> v``
exactly when ``v`` is the next hop of ``u``'s walk to ``d``. The search tries both directions
of the link: *down* (``d`` among the NICs beyond ``v``; a source whose walk to ``d`` reaches
``u``) and *up* (sources at or below the lower end; any destination whose walk from there
takes the link). Every destination of the candidates is tried, each against the switches whose
walk to it takes the link's hop.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import TypeVar

from fabriccheck.models import LinkKey
from fabriccheck.topology.view import FabricView

_ORDER = {"leaf": 0, "spine": 1, "core": 2}
T = TypeVar("T")


def leaves_below(view: FabricView, switch: str) -> list[str]:
    """The leaves at or below ``switch`` (by tier: a spine's leaves, a core's pods' leaves).

    >>> from fabriccheck.topology import generate
    >>> t = generate({"kind": "fat-tree", "nodes": 8, "rails": 1, "nodes_per_leaf": 2,
    ...               "spines": 2}, name="t", fabric="infiniband")
    >>> leaves_below(FabricView(t), "spine-1")
    ['leaf-0', 'leaf-1', 'leaf-2', 'leaf-3']
    """
    sw = view.topology.switches
    adj = view.topology._switch_adj
    seen, todo, out = {switch}, [switch], []
    while todo:
        cur = todo.pop()
        if sw[cur].tier == "leaf":
            out.append(cur)
            continue
        for n in adj[cur]:
            if n not in seen and _ORDER.get(sw[n].tier, 3) < _ORDER.get(sw[cur].tier, 3):
                seen.add(n)
                todo.append(n)
    return sorted(out)


class LinkReach:
    """The NICs ``nics`` indexed by leaf and rail once, to search many links
    (:meth:`find`); see :func:`find_link_flow`.

    Routes are destination-based, so whether a NIC's flow to ``d`` takes a hop depends only on
    the switch it hangs off (:meth:`FabricView.hop_users`: the walks to ``d`` from every
    switch, asked once a run). The search is exact (a pair is found whenever one of ``nics``
    exists) and its order random but seeded (``seed`` and the searches made before it), so a
    link searched again (the next wave) is usually given another pair.
    """

    def __init__(self, view: FabricView, nics: Iterable[str], *, seed: int = 0) -> None:
        self.view = view
        topo = view.topology
        att = topo.attachment
        self.by_leaf: dict[str, list[str]] = {}
        for n in sorted(set(nics)):
            if n in att:
                self.by_leaf.setdefault(att[n], []).append(n)
        self.rail_of = {n: topo.nics[n].rail for ns in self.by_leaf.values() for n in ns}
        self.by_leaf_rail: dict[tuple[str, int], list[str]] = {}
        for leaf, ns in self.by_leaf.items():
            for n in ns:
                self.by_leaf_rail.setdefault((leaf, self.rail_of[n]), []).append(n)
        self.leaves = sorted(self.by_leaf)
        self._below: dict[str, frozenset[str]] = {}
        self._rng = random.Random(f"link-reach:{seed}")

    def find(self, link: LinkKey, skip: Iterable[str] = (), *,
             tries: int | None = None) -> tuple[str, str] | None:
        """A NIC pair ``(src, dst)`` (same rail, none in ``skip``) whose route crosses
        ``link``, or None when none is found (quickly when no NIC is below the link).
        ``tries``: destinations looked at, at most (None: all, so None means no such pair;
        a wave whose NICs are mostly busy gives up sooner)."""
        sw = self.view.topology.switches
        skipped = skip if isinstance(skip, (set, frozenset)) else set(skip)
        a, b = link
        lo, hi = (a, b) if _ORDER.get(sw[a].tier, 3) <= _ORDER.get(sw[b].tier, 3) else (b, a)
        below = self._below_of(lo)
        inside = [d for leaf in sorted(below) for d in self.by_leaf.get(leaf, ())
                  if d not in skipped]
        if not inside:  # no NIC below the link: nothing in scope crosses it
            return None
        rng = self._rng
        left = len(self.rail_of) if tries is None else tries
        for d in _spread(inside, rng):  # down: destinations below, sent down by the upper end
            left -= 1
            got = self._source((hi, lo), d, rng, skipped)
            if got is not None:
                return got, d
            if tries is not None and left <= 0:
                return None
        rails_below = {self.rail_of[n] for n in inside}
        targets = [d for x in self.leaves if x not in below for d in self.by_leaf[x]
                   if self.rail_of[d] in rails_below and d not in skipped]
        for d in _spread(targets, rng):  # up: sources below, sending up the link
            left -= 1
            got = self._source((lo, hi), d, rng, skipped)
            if got is not None:
                return got, d
            if tries is not None and left <= 0:
                return None
        return None

    def _below_of(self, switch: str) -> frozenset[str]:
        got = self._below.get(switch)
        if got is None:
            got = self._below[switch] = frozenset(leaves_below(self.view, switch))
        return got

    def _source(self, hop: tuple[str, str], d: str, rng: random.Random,
                skipped: Collection[str]) -> str | None:
        """A NIC on ``d``'s rail, none of ``skipped``, on a switch whose route to ``d`` takes
        the directed ``hop`` (:meth:`FabricView.hop_users`), the switch picked at random."""
        users = self.view.hop_users(d).get(hop)
        if not users:
            return None
        rail = self.rail_of[d]
        for leaf in _spread(users, rng):
            src = next((n for n in self.by_leaf_rail.get((leaf, rail), ())
                        if n != d and n not in skipped), None)
            if src is not None:
                return src
        return None


def _spread(items: Sequence[T], rng: random.Random) -> Iterator[T]:
    """``items`` in a seeded scattered order without shuffling them (a search usually stops
    after a few): a random start and a random stride prime to the length, so each comes once.

    >>> sorted(_spread(list("abcdef"), random.Random(1)))
    ['a', 'b', 'c', 'd', 'e', 'f']
    """
    n = len(items)
    if not n:
        return
    start, step = rng.randrange(n), rng.randrange(1, n + 1)
    while math.gcd(step, n) != 1:
        step -= 1
    for i in range(n):
        yield items[(start + i * step) % n]


class LazyShuffle(Iterable[T]):
    """A uniformly random order of ``items`` drawn as it is read (a Fisher-Yates shuffle that
    stops where the reader stops), kept so it reads the same each time: a search that looks
    at a few of 32,768 NICs pays for those few, not for shuffling all of them.

    >>> s = LazyShuffle(range(10), random.Random(3))
    >>> it = iter(s)
    >>> first = [next(it) for _ in range(3)]
    >>> sorted(s) == list(range(10)) and list(s)[:3] == first
    True
    """

    def __init__(self, items: Sequence[T], rng: random.Random) -> None:
        self.items, self.rng = items, rng
        self.drawn: list[T] = []
        self._moved: dict[int, int] = {}  # position -> index of the item now there

    def __iter__(self) -> Iterator[T]:
        items, drawn, moved, n = self.items, self.drawn, self._moved, len(self.items)
        rand = self.rng.random
        k = 0
        while k < n:
            if k == len(drawn):  # the next draw: j uniform in [k, n)
                j = k + int(rand() * (n - k))
                drawn.append(items[moved.get(j, j)])
                moved[j] = moved.pop(k, k)
            yield drawn[k]
            k += 1


def find_link_flow(view: FabricView, link: LinkKey, nics: Iterable[str], *, seed: int = 0,
                   skip: Iterable[str] = ()) -> tuple[str, str] | None:
    """A NIC pair ``(src, dst)`` among ``nics`` (same rail) whose route crosses ``link``, or
    None when none is found. ``skip``: NICs not to use (busy this round). Searching many
    links: build one :class:`LinkReach`.

    >>> from fabriccheck.topology import generate
    >>> t = generate({"kind": "fat-tree", "nodes": 8, "rails": 1, "nodes_per_leaf": 2,
    ...               "spines": 2}, name="t", fabric="infiniband")
    >>> v = FabricView(t)
    >>> src, dst = find_link_flow(v, ("leaf-1", "spine-1"), sorted(t.nics))
    >>> ("spine-1", "leaf-1") in v.directed_hops(src, dst)
    True
    """
    return LinkReach(view, nics, seed=seed).find(link, skip)
