"""Which flow crosses a given switch link: InfiniBand routes searched for a (source, destination)
NIC pair whose route uses the link, so a link no test crossed can be aimed at.

Routes are destination-based: a switch ``u`` sends destination ``d`` down the link ``u -> v``
exactly when ``v`` is the next hop of ``u``'s walk to ``d``. The search tries both directions
of the link: *down* (``d`` among the NICs beyond ``v``; a source whose walk to ``d`` reaches
``u``) and *up* (sources at or below the lower end; any destination whose walk from there
takes the link). Every destination of the candidates is tried for the link's own hop (cheap:
one walk from the link's end), sources up to ``limit`` per destination.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from fabriccheck.models import LinkKey
from fabriccheck.topology.view import FabricView

_ORDER = {"leaf": 0, "spine": 1, "core": 2}


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
    (:meth:`find`); see :func:`find_link_flow`."""

    def __init__(self, view: FabricView, nics: Iterable[str], *, seed: int = 0,
                 limit: int = 64) -> None:
        self.view, self.seed, self.limit = view, seed, limit
        att = view.topology.attachment
        self.by_leaf: dict[str, list[str]] = {}
        for n in sorted(set(nics)):
            if n in att:
                self.by_leaf.setdefault(att[n], []).append(n)
        self.rail_of = {n: view.topology.nics[n].rail for ns in self.by_leaf.values()
                        for n in ns}

    def find(self, link: LinkKey, skip: Iterable[str] = ()) -> tuple[str, str] | None:
        """A NIC pair ``(src, dst)`` (same rail, none in ``skip``) whose route crosses
        ``link``, or None when none is found (quickly when no NIC is below the link)."""
        view, topo = self.view, self.view.topology
        sw = topo.switches
        skipped = set(skip)
        a, b = link
        lo, hi = (a, b) if _ORDER.get(sw[a].tier, 3) <= _ORDER.get(sw[b].tier, 3) else (b, a)
        below = set(leaves_below(view, lo))
        by_leaf = {leaf: [n for n in ns if n not in skipped] if skipped else ns
                   for leaf, ns in self.by_leaf.items()}
        inside = [d for leaf in sorted(below) for d in by_leaf.get(leaf, [])]
        if not inside:  # no NIC below the link: nothing in scope crosses it
            return None
        rng = random.Random(f"link-reach:{self.seed}:{lo}:{hi}")
        outside_leaves = [x for x in sorted(by_leaf) if x not in below and by_leaf[x]]
        rng.shuffle(inside)
        for d in inside:  # down: destinations below, sent down the link by its upper end
            walk = topo.switch_walk(hi, d)
            if walk is None or len(walk) < 2 or walk[1] != lo:
                continue
            got = _source(view, (hi, lo), d, outside_leaves, by_leaf, self.rail_of, rng,
                          self.limit)
            if got is not None:
                return got, d
        rails_below = {self.rail_of[n] for n in inside}
        targets = [d for x in outside_leaves for d in by_leaf[x]
                   if self.rail_of[d] in rails_below]
        rng.shuffle(targets)
        for d in targets:  # up: sources below, sending up the link
            walk = topo.switch_walk(lo, d)
            if walk is None or len(walk) < 2 or walk[1] != hi:
                continue
            got = _source(view, (lo, hi), d, sorted(below), by_leaf, self.rail_of, rng,
                          self.limit)
            if got is not None:
                return got, d
        return None


def find_link_flow(view: FabricView, link: LinkKey, nics: Iterable[str], *, seed: int = 0,
                   limit: int = 64, skip: Iterable[str] = ()) -> tuple[str, str] | None:
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
    return LinkReach(view, nics, seed=seed, limit=limit).find(link, skip)


def _source(view: FabricView, hop: tuple[str, str], d: str, leaves: list[str],
            by_leaf: dict[str, list[str]], rail_of: dict[str, int], rng: random.Random,
            limit: int) -> str | None:
    """A NIC on ``d``'s rail, on one of ``leaves`` (up to ``limit`` tried), whose route to
    ``d`` takes the directed ``hop``."""
    rail = rail_of[d]
    picks = list(leaves)
    rng.shuffle(picks)
    tried = 0
    for leaf in picks:
        src = next((n for n in by_leaf.get(leaf, ()) if rail_of[n] == rail and n != d), None)
        if src is None:
            continue
        tried += 1
        if hop in view.directed_hops(src, d):
            return src
        if tried >= limit:
            break
    return None
