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
    ['leaf-1', 'leaf-2', 'leaf-3', 'leaf-4']
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


def find_link_flow(view: FabricView, link: LinkKey, nics: Iterable[str], *, seed: int = 0,
                   limit: int = 64, skip: Iterable[str] = ()) -> tuple[str, str] | None:
    """A NIC pair ``(src, dst)`` among ``nics`` (same rail) whose route crosses ``link``, or
    None when none is found. ``skip``: NICs not to use (busy this round).

    >>> from fabriccheck.topology import generate
    >>> t = generate({"kind": "fat-tree", "nodes": 8, "rails": 1, "nodes_per_leaf": 2,
    ...               "spines": 2}, name="t", fabric="infiniband")
    >>> v = FabricView(t)
    >>> src, dst = find_link_flow(v, ("leaf-1", "spine-2"), sorted(t.nics))
    >>> ("leaf-1", "spine-2") in v.directed_hops(src, dst) or (
    ...     "spine-2", "leaf-1") in v.directed_hops(src, dst)
    True
    """
    topo = view.topology
    att, sw = topo.attachment, topo.switches
    skipped = set(skip)
    pool = sorted(n for n in nics if n in att and n not in skipped)
    rng = random.Random(f"link-reach:{seed}:{link[0]}:{link[1]}")
    by_leaf: dict[str, list[str]] = {}
    for n in pool:
        by_leaf.setdefault(att[n], []).append(n)
    a, b = link
    lo, hi = (a, b) if _ORDER.get(sw[a].tier, 3) <= _ORDER.get(sw[b].tier, 3) else (b, a)
    below = set(leaves_below(view, lo))
    rail_of = {n: topo.nics[n].rail for n in pool}
    # down: destinations beyond the link, sent down it by its upper end
    inside = [d for leaf in sorted(below) for d in by_leaf.get(leaf, [])]
    outside_leaves = [x for x in sorted(by_leaf) if x not in below]
    rng.shuffle(inside)
    for d in inside:
        walk = topo.switch_walk(hi, d)
        if walk is None or len(walk) < 2 or walk[1] != lo:
            continue
        got = _source(view, (hi, lo), d, outside_leaves, by_leaf, rail_of, rng, limit)
        if got is not None:
            return got, d
    # up: sources at or below the lower end, sending up the link
    targets = [d for x in outside_leaves for d in by_leaf[x]]
    rng.shuffle(targets)
    for d in targets:
        walk = topo.switch_walk(lo, d)
        if walk is None or len(walk) < 2 or walk[1] != hi:
            continue
        got = _source(view, (lo, hi), d, sorted(below), by_leaf, rail_of, rng, limit)
        if got is not None:
            return got, d
    return None


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
