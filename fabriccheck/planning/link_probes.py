"""Link localization: retest the failing flows and, per candidate link of a set, send a
known-good flow whose route crosses that candidate and no other (InfiniBand: the route is known;
RoCE: fresh flows between the two leaves, :func:`~fabriccheck.planning.roce_link_probes.
roce_leaf_probes`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from itertools import islice

from fabriccheck.models import LinkKey, Test, nic_node
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.roce_link_probes import nics_under, roce_leaf_probes
from fabriccheck.topology.link_reach import LazyShuffle


def plan_link_probes(
    flows: Sequence[tuple[str, str, str]],
    candidates: Sequence[LinkKey],
    b: RoundBuilder,
    good_nics: set[str],
    *,
    seed: int,
    search_limit: int = 4000,
    retest: bool = True,
    per_link: int = 2,
    avoid: Sequence[LinkKey] = (),
    cleared: Collection[LinkKey] = (),
    suspected: Collection[LinkKey] = (),
    later: bool = True,
) -> int:
    """Localization tests for one candidate set of links.

    InfiniBand: per candidate, ``per_link`` flows between known-good NICs (node pairs not seen
    failing yet, one per direction where the routes allow) whose route crosses it and no other
    candidate; with one candidate also a retest of the first failing flow
    ``(test_id, src_nic, dst_nic)`` on the same route (a pass means a glitch). A link is only
    called bad when two such fresh probes fail (see ``inference.localize``): a glitch repeating
    on two independent pairs is ~glitch_rate² per suspect, and one passing probe clears it. The
    probes' endpoints passed other tests, so they are their own controls.
    ``avoid``: other uncleared links on the failing paths (a group's rivals): probes cross
    none of them either, so a probe's path shares only the suspect link with the failures,
    and probes use NICs other than the failing flows' own where the routes allow (else those,
    else crossing rivals: a dead switch leaves no route across one of its links that avoids
    the others). ``cleared``: links passing tests exonerated; a route whose other links are
    all cleared is tried first, since only a probe whose one uncleared link is the suspect
    counts towards convicting it (a probe that also crosses an uncleared link of another
    leaf waits for that link to be cleared, rounds later). ``suspected``: links of other
    candidate sets; a flow across one of them clears nothing (see :func:`_clear_beside`).
    ``later``: a probe the round has no route left for (a confirmation took the one
    direction of the link it can use) runs in one of the round's overflow waves
    (:meth:`RoundBuilder.in_later_wave`), not a round later; off for a builder whose tests
    the caller lays out in waves itself (the recheck's blocks).
    RoCE: fresh flows between the two leaves (see :func:`roce_leaf_probes`).
    """
    if b.view.fabric != "infiniband":
        return roce_leaf_probes(flows, b, good_nics, seed)
    seen = {frozenset((nic_node(s), nic_node(d))) for _, s, d in flows}
    rng = random.Random(f"probe:{seed}:{b.round_no}")
    made = _candidate_probes(flows, candidates, b, good_nics, seen, rng, search_limit=search_limit,
                             per_link=per_link, avoid=avoid, cleared=cleared,
                             suspected=suspected, later=later)
    if retest and (len(candidates) < 2 or len(flows) < 2):  # "glitch or real?": same route
        made += _retest_first(flows, b)
    return made


def _candidate_probes(flows: Sequence[tuple[str, str, str]], candidates: Sequence[LinkKey],
                      b: RoundBuilder, good_nics: set[str], seen: set[frozenset[str]],
                      rng: random.Random, *, search_limit: int, per_link: int,
                      avoid: Sequence[LinkKey], cleared: Collection[LinkKey],
                      suspected: Collection[LinkKey], later: bool) -> int:
    """Up to ``per_link`` probes of each of the first 8 ``candidates`` (see
    :func:`plan_link_probes`), each from a node pair not in ``seen`` (added to it), with the
    flows that clear the other links it crosses (:func:`_clear_beside`). Returns the number of
    tests planned."""
    made = 0
    shun = set(candidates) | set(avoid)
    # NICs of the failing flows: a probe without them cannot fail for them (a NIC the
    # failures share is the competing hypothesis), so they are used only when nothing else fits
    ends = {n for _, s, d in flows for n in (s, d)}
    good_nics = frozenset(good_nics)  # frozen once: the probes' rail index is cached by pool
    fresh = good_nics - ends if ends else good_nics
    for link in candidates[:8]:

        def probe(bb: RoundBuilder, link: LinkKey = link) -> int:
            for pool, shunned in ((fresh, shun), (good_nics, shun), (fresh, set(candidates)),
                                  (good_nics, set(candidates))):
                if shunned is not shun and not avoid:
                    break  # no rivals: the second half would repeat the first
                t = _probe_one(link, shunned, bb, pool, seen, rng, search_limit, cleared)
                if t is not None:
                    seen.add(frozenset(t.nodes))  # the next probe: another node pair
                    return 1 + _clear_beside(t, link, shunned, bb, pool, seen, rng,
                                             search_limit, cleared, suspected)
            return 0

        for _ in range(per_link):
            # the round's routes across the link may be taken (a confirmation of a NIC
            # under it): the probe then runs in the round's overflow wave
            got = (b.now_or_later(probe) if later else probe(b)) or 0
            if not got:
                break
            made += got
    return made


def _retest_first(flows: Sequence[tuple[str, str, str]], b: RoundBuilder) -> int:
    """A retest of the first failing flow on its own route ("glitch or real?": a pass means a
    glitch), only if a direction of its links is still free. Returns the number of tests
    planned (0 or 1)."""
    made = 0
    for test_id, src, dst in flows[:1]:
        t = b.add_flow(nic_node(src), nic_node(dst), b.view.topology.nics[src].rail,
                       "localize", retest_of=test_id)
        made += t is not None
    return made


def _probe_one(link: LinkKey, cand: set[LinkKey], b: RoundBuilder, good_nics: set[str],
               seen: set[frozenset[str]], rng: random.Random, search_limit: int,
               cleared: Collection[LinkKey] = ()) -> Test | None:
    """One known-good flow whose route crosses ``link`` (either way) and no link of ``cand``
    but ``link``; first one whose other links are all ``cleared`` (a failure then pins
    ``link``), else any.

    Chosen by destination, as routes are: first *down* the link, to a receiver under its lower
    end (the NICs of that leaf, or of the leaves of that spine) whose route comes down it,
    from senders elsewhere; else *up* the link, from a sender under the lower end to
    receivers tried over the whole fabric on its rail (a spine-core link is crossed upward
    only by flows to the few destinations routed through that core). ``search_limit`` bounds
    the routes looked at.
    """
    view = b.view
    under = nics_under(link, view)
    near = sorted(n for n in under if n in good_nics)
    rng.shuffle(near)
    pool = good_nics if isinstance(good_nics, frozenset) else frozenset(good_nics)
    by_rail = {rail: LazyShuffle(lst, rng) for rail, lst in view.by_rail(pool).items()}
    if cleared:
        pinning = _probe_search(link, cand, b, near, by_rail, under, seen, search_limit // 4,
                                set(cleared) | {link})
        if pinning is not None:
            return pinning
    return _probe_search(link, cand, b, near, by_rail, under, seen, search_limit)


def _clear_beside(probe: Test, link: LinkKey, shunned: set[LinkKey], b: RoundBuilder,
                  good_nics: set[str], seen: set[frozenset[str]], rng: random.Random,
                  search_limit: int, cleared: Collection[LinkKey],
                  suspected: Collection[LinkKey] = ()) -> int:
    """A probe of ``link`` that also crosses links no pass cleared yet (on a small rail, the
    other leaves' links to the same spine) pins nothing when it fails, until those are
    cleared. Each such link gets a flow in the same round that crosses it but not ``link``
    (nor the set's other candidates and rivals): a pass clears it, so the probe's failure
    pins ``link`` a round sooner; a failure is evidence about that link in its own right.
    Links that are candidates themselves (``suspected``: a dead switch, whose every route
    across one of its links crosses another) get none: a flow across them would fail as
    well and only take the NICs the probes of those links need. Returns the number of flows
    planned."""
    if not cleared:
        return 0
    f = probe.flows[0]
    made = 0
    skip = set(cleared) | set(suspected) | {link}
    for other in sorted(b.view.route_links(f.src, f.dst) - skip):
        t = _probe_one(other, shunned | {link}, b, good_nics, seen, rng, search_limit // 4,
                       cleared)
        if t is not None:
            seen.add(frozenset(t.nodes))
            made += 1
    return made


def _flow_trier(link: LinkKey, cand: set[LinkKey], b: RoundBuilder, seen: set[frozenset[str]],
                only: set[LinkKey] | None, budget: list[int]
                ) -> Callable[[str, str], Test | None | bool]:
    """``try_flow(s, d)`` for :func:`_probe_search`: the test if ``s -> d`` fits; False when its
    route misses ``link``; None when it crosses it but may not run (busy, another candidate,
    a pair seen, a link outside ``only``). Each call spends one of ``budget[0]``."""
    view = b.view
    nics = view.topology.nics
    att, walk, ends = view.topology.attachment, view.walk, set(link)
    tag = f"{link[0]} -- {link[1]}"

    def try_flow(s: str, d: str) -> Test | None | bool:
        budget[0] -= 1
        if not ends.issubset(walk(att[s], d)):  # the switch walk first: no link set built
            return False
        route = view.route_links(s, d)
        if link not in route:
            return False
        if (route & (cand - {link}) or frozenset((nic_node(s), nic_node(d))) in seen
                or (only is not None and not route <= only)
                or not (b.nic_free(s, "tx") and b.nic_free(d, "rx"))):
            return None
        if nics[s].rail != nics[d].rail:
            return b.add_nic_flow(s, d, "localize", probe_of=tag)
        return b.add_flow(nic_node(s), nic_node(d), nics[s].rail, "localize", probe_of=tag)

    return try_flow


def _probe_search(link: LinkKey, cand: set[LinkKey], b: RoundBuilder, near: list[str],
                  by_rail: Mapping[int, Iterable[str]], under: set[str], seen: set[frozenset[str]],
                  search_limit: int, only: set[LinkKey] | None = None) -> Test | None:
    """The search of :func:`_probe_one` (``only``: the links a route may cross)."""
    nics = b.view.topology.nics
    budget = [search_limit]
    try_flow = _flow_trier(link, cand, b, seen, only, budget)
    for d in near:  # down the link: a receiver whose route comes down it, any far sender
        others = (o for o in by_rail.get(nics[d].rail, ()) if o not in under)
        for i, o in enumerate(islice(others, 16 if only is None else 32)):
            if budget[0] <= 0:
                return None
            got = try_flow(o, d)
            if got is False and i == 0:
                break  # destination-based: d's route does not come down this link
            if got:
                return got
    per_rail: dict[int, int] = {}
    for a in near:  # up the link: receivers whose route from a goes up it
        rail = nics[a].rail
        per_rail[rail] = per_rail.get(rail, 0) + 1
        if per_rail[rail] > 2:
            continue
        for o in by_rail.get(rail, ()):
            if budget[0] <= 0:
                return None
            if o not in under and (got := try_flow(a, o)):
                return got
    # another rail's sender: with two leaves on a rail, every same-rail route down one leaf's
    # uplink comes up the other leaf's uplink to that spine, a rival when both are suspects;
    # from another rail's leaf (whose uplink passing tests cleared) it does not. Then another
    # rail's receiver, up the link: the leaf's NICs on the rails routed up it may all be
    # suspects (a two-node leaf); another of its NICs sends to those rails
    for down, per_rail in ((True, 4), (False, 8)):
        for x in near[:4]:
            others = [o for r, lst in sorted(by_rail.items()) if r != nics[x].rail
                      for o in islice(lst, per_rail) if o not in under]
            for o in others:
                if budget[0] <= 0:
                    return None
                if got := try_flow(o, x) if down else try_flow(x, o):
                    return got
    return None

