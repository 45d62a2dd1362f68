"""The link top-up: short flows over the InfiniBand switch links the link screen left open.

A default sweep crosses most switch links a handful of times (a 128-node fat-tree: median 10
of its 1,024 leaf uplinks), too few for the sequential link screen
(:mod:`fabriccheck.inference.link_screen`) to clear a link of failing one test in five, or to
see one that does. Each open link gets the crossings that clear a healthy link
(:meth:`~fabriccheck.inference.link_screen.LinkTally.crossings_to_clear`: the average in the
first round, more in later ones), in a round's waves after its other tests
(``policy.link_topup_rounds`` rounds at most: a link still open asks again in the next).
The flows are ``ib_write_bw`` between NICs of healthy-looking nodes whose route takes the
link (:class:`~fabriccheck.topology.link_reach.LinkReach`), ``policy.recheck_duration_s``
long; each wave lets a NIC send one flow and receive one (links are full duplex) and gives a
link direction one flow (two flows on one link would share it and fail for that alone), and
a flow counts for every open link its route crosses. They are ordinary tests (no
``recheck_of``): every screen counts them like the sweep's own.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence

from fabriccheck.models import LinkKey, nic_node
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.topology.link_reach import LinkReach

#: waves of top-up flows a round carries at most (a link gains up to two crossings a wave)
TOPUP_WAVES = 16
#: flows a link is given per wave by the aimed search (one each way, where it finds them)
PER_WAVE = 2
#: the broad pass (random pairs, the most wanted links crossed) runs while more than this
#: share of the switch links want crossings; then only the aimed search
BROAD = 0.01
#: links the aimed search looks for a pair for in one wave at most (its cost: a route search
#: each); the neediest first, the rest in later waves
AIMED = 256
#: destinations an aimed search looks at once the wave has flows (its NICs get busy: a
#: search that would fail looks at every destination below the link)
AIM_TRIES = 32
#: random partners a NIC weighs in the broad pass
SAMPLE = 8


def plan_link_topup(b: RoundBuilder, nics: Sequence[str], need: Mapping[LinkKey, int], *,
                    seed: int = 0, waves: int = TOPUP_WAVES,
                    avoid: Collection[LinkKey] = ()) -> int:
    """Flows in waves after ``b``'s own until each link of ``need`` has had that many more
    crossings between ``nics`` (``waves`` at most; a link no pair of ``nics`` routes over is
    left), none crossing a link of ``avoid`` (found bad or under localization: its failures
    would only add noise). Returns the flows planned."""
    view = b.view
    shun = frozenset(avoid)
    left = {lk: k for lk, k in need.items()
            if k > 0 and lk in view.switch_links and lk not in shun}
    if not left or not nics:
        return 0
    reach = LinkReach(view, nics, seed=seed + b.round_no)
    rng = random.Random(f"link-topup:{seed}:{b.round_no}")
    by_rail: dict[int, list[str]] = {}
    for x in sorted(nics):
        by_rail.setdefault(view.topology.nics[x].rail, []).append(x)
    first, made = b.next_wave(), 0
    for wave in range(first, first + waves):
        sub = RoundBuilder(b.round_no, view, b.spec, b.policy)
        if len(left) > BROAD * len(view.switch_links):
            _broad(sub, by_rail, left, rng, shun)
        _aimed(sub, reach, left, shun)
        for t in sub.tests:
            b.add_in_wave(t, wave, duration_s=b.policy.recheck_duration_s)
        made += len(sub.tests)
        for lk in [lk for lk, k in left.items() if k <= 0]:
            left.pop(lk)
        if not sub.tests or not left:
            break
    return made


def _take(sub: RoundBuilder, src: str, dst: str, left: dict[LinkKey, int],
          shun: frozenset[LinkKey]) -> bool:
    """Plan ``src -> dst`` on ``sub`` when its links are free and none is shunned; count its
    crossings down."""
    view = sub.view
    if shun and view.route_links(src, dst) & shun:
        return False
    t = sub.add_flow(nic_node(src), nic_node(dst), view.topology.nics[src].rail, "sweep")
    if t is None:
        return False
    for lk in view.flow_links(t.flows[0])[0]:
        if lk in left:
            left[lk] -= 1
    return True


def _broad(sub: RoundBuilder, by_rail: Mapping[int, Sequence[str]], left: dict[LinkKey, int],
           rng: random.Random, shun: frozenset[LinkKey], tries: int = SAMPLE) -> None:
    """While most links want crossings: every NIC sends to the one of ``tries`` random
    same-rail NICs whose route crosses the most links still wanting them (a NIC sends one
    flow and receives one a wave: links are full duplex)."""
    view = sub.view
    for _, ring in sorted(by_rail.items()):
        order = list(ring)
        rng.shuffle(order)
        for src in order:
            if not sub.nic_free(src, "tx"):
                continue
            best, score = None, 0
            for dst in rng.sample(ring, min(tries, len(ring))):
                if nic_node(dst) == nic_node(src) or not sub.nic_free(dst, "rx"):
                    continue
                k = sum(1 for lk in view.route_links(src, dst) if left.get(lk, 0) > 0)
                if k > score:
                    best, score = dst, k
            if best is not None:
                _take(sub, src, best, left, shun)


def _aimed(sub: RoundBuilder, reach: LinkReach, left: dict[LinkKey, int],
           shun: frozenset[LinkKey]) -> None:
    """Links still wanting crossings, the :data:`AIMED` neediest: a pair whose route takes the
    link (:meth:`LinkReach.find`), up to :data:`PER_WAVE` a wave; a link no pair reaches is
    dropped from ``left``."""
    wanting = sorted((x for x, k in left.items() if k > 0), key=lambda x: (-left[x], x))
    for lk in wanting[:AIMED]:
        skip = sub.busy_tx & sub.busy_rx
        for _ in range(PER_WAVE):
            if left.get(lk, 0) <= 0:
                break
            # exact while the wave is empty (None then means no pair in scope crosses it)
            got = reach.find(lk, skip=skip, tries=AIM_TRIES if sub.tests else None)
            if got is None:
                if not sub.tests:
                    left.pop(lk)  # no pair in scope routes over it
                break
            skip = skip | set(got)
            _take(sub, got[0], got[1], left, shun)
