"""Follow-up tests after the sweep rounds: confirmations, link localization probes, bisection.

- **Confirm** a suspect NIC against known-good partners on the *same leaf* (no uplinks on the
  path, so only the suspect can fail the test): once as client, once as server (links are full
  duplex, so both run at once). A suspect node does the same on every rail; a hang suspect runs
  one test against a known-good node.
- **Localize** a link candidate set: retest the failing flows (same route on InfiniBand) and, per
  candidate, send a known-good flow whose route crosses that candidate and no other.
- **Bisect** a failing group: halves padded with known-good nodes back to the group size, both
  halves in the same round, until single culprits remain: at most ``ceil(log2(k))`` rounds.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from fabriccheck.models import Flow, LinkKey, Test, nic_node
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.topology.view import FabricView


@dataclass(frozen=True)
class BisectTask:
    """A culprit set still to narrow, inside groups of ``size`` nodes (``origin``: a test id)."""

    suspects: tuple[str, ...]
    size: int
    origin: str
    depth: int = 0
    split: bool = True  # False: test the suspects as one part (a part that found no room)


def bisect_round_bound(n: int) -> int:
    """The quality bar for a post-timeout bisection at scale: ``2 + ceil(log2(n / 8))``.

    >>> bisect_round_bound(8), bisect_round_bound(1024)
    (2, 9)
    """
    return 2 + max(0, math.ceil(math.log2(max(n, 1) / 8)))


def split_halves(suspects: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split a culprit set in two halves (first half the larger).

    >>> split_halves(["a", "b", "c"])
    (('a', 'b'), ('c',))
    """
    mid = (len(suspects) + 1) // 2
    return tuple(suspects[:mid]), tuple(suspects[mid:])


class GoodPool:
    """Known-good nodes to borrow as partners or padding, nearest (same leaf) first."""

    def __init__(self, good: Iterable[str], view: FabricView, seed: int, round_no: int) -> None:
        self.view = view
        self.free = sorted(good)
        random.Random(f"pool:{seed}:{round_no}").shuffle(self.free)

    def take_nic_partner(self, nic: str, rail: int, b: RoundBuilder, good_nics: set[str],
                         exclude: set[str], way: str | None = None,
                         local: Sequence[str] = (), met: set[str] | frozenset[str] = frozenset(),
                         same_leaf: bool = False, proven: bool = False) -> str | None:
        """A partner for a confirmation on ``nic``'s rail, whose NIC is free this round.

        Ranked: a known-good node on ``nic``'s leaf the suspect has not met yet (the test then
        crosses no switch link, so a failure can only be the suspect, and a new partner is
        independent evidence); then another node of ``local`` on that leaf it has not met whose
        NIC passed a test (a failure still pins the suspect); then a known-good same-leaf node
        it met before; then an un-cleared local node (a pass clears both); only then a
        known-good node elsewhere (its test crosses links, which may be what fails). A partner
        it has not met on another leaf comes before one it met
        (the same pair again is no new evidence: choice never loops on a small leaf).
        ``same_leaf`` keeps to the suspect's leaf (the round's links across leaves are taken).
        ``proven`` takes only partners whose NIC is in ``good_nics``.
        """
        att = self.view.topology.attachment
        leaf = att.get(nic)
        best: tuple[int, str] | None = None

        def offer(rank: int, node: str) -> None:
            nonlocal best
            if best is None or rank < best[0]:
                best = (rank, node)

        across: list[tuple[str, str]] = []  # known-good (node, NIC) on other leaves
        for node in self.free:
            other = self.view.rails_of[node].get(rail)
            if (node in exclude or other is None or other not in good_nics
                    or not b.nic_free(other, way) or (same_leaf and att.get(other) != leaf)):
                continue
            if att.get(other) == leaf:
                if node not in met:
                    return node
                offer(2, node)
            else:
                across.append((node, other))
        for node in sorted(local):
            other = self.view.rails_of[node].get(rail)
            if (node in exclude or other is None or not b.nic_free(other, way)
                    or (proven and other not in good_nics)):
                continue
            if att.get(other) == leaf:
                offer((1 if other in good_nics else 3) if node not in met else 4, node)
            elif node not in met and not same_leaf:  # a new partner across leaves beats
                offer(3.6, node)  # meeting an old one again
            elif other in good_nics and not same_leaf:  # met on another rail: this NIC pair
                offer(5.5, node)  # is new and its NIC proven good (a small job's last resort)
        if across and (best is None or best[0] > 5):  # ranks 5 to 5.54: only they can win
            got = self._best_across(nic, across, way, b)
            if got is not None:
                offer(*got)
        return best[1] if best else None

    def _best_across(self, nic: str, across: Sequence[tuple[str, str]], way: str | None,
                     b: RoundBuilder) -> tuple[float, str] | None:
        """The known-good partner on another leaf to offer, ranked ``5 + cost`` (the first of
        the cheapest). InfiniBand: a shorter route costs less (fewer links to take, fewer to
        blame), one crossing a link the round has already given to another flow 0.5 more
        (``add_flow`` would refuse it); a partner with no route is none; a free two-hop route
        (leaf, spine, leaf) is the cheapest there is, so the search stops at the first.
        RoCE (ECMP): all cost 0, the first is taken."""
        if self.view.fabric != "infiniband":
            return 5.0, across[0][0]
        best: tuple[float, str] | None = None
        for node, other in across:
            hops = (self.view.directed_hops(other, nic) if way == "tx"
                    else self.view.directed_hops(nic, other))
            if not hops:
                continue  # no route between the two leaves: no test to plan
            cost = 5 + (0.5 if hops & b.budget.used else 0.0) + 0.01 * len(hops)
            if best is None or cost < best[0]:
                best = (cost, node)
                if cost <= 5.02:
                    break
        return best

    def give_back(self, nodes: Sequence[str]) -> None:
        self.free = [*nodes, *self.free]

    def available(self, b: RoundBuilder) -> int:
        return sum(1 for n in self.free if b.node_free(n))

    def take_nodes(self, k: int, b: RoundBuilder, near: Sequence[str] = ()) -> list[str]:
        """``k`` free known-good nodes (same pod as ``near`` first); fewer if not enough."""
        pods = {self.view.pod(n) for n in near}
        free = [n for n in self.free if b.node_free(n)]
        # same pod first, then whole pods (few leaves on the ring: few uplinks to reserve)
        count: dict[tuple[str, ...], int] = {}
        for n in free:
            count[self.view.pod(n)] = count.get(self.view.pod(n), 0) + 1
        free.sort(key=lambda n: (self.view.pod(n) not in pods, count[self.view.pod(n)] < k,
                                 self.view.pod(n)))
        got = free[:k]
        taken = set(got)
        self.free = [n for n in self.free if n not in taken]
        return got


def plan_nic_confirm(nic: str, b: RoundBuilder, pool: GoodPool, good_nics: set[str],
                     local: Sequence[str] = (), met: frozenset[str] = frozenset(),
                     directions: Sequence[str] = ("client", "server"),
                     used: set[str] | None = None, proven: bool = False,
                     avoid: Collection[LinkKey] = (), later: bool = False) -> int:
    """Client and server tests of a suspect NIC against known-good same-leaf partners.

    ``directions`` lets the caller give every suspect its client test before any gets its
    server test, so a leaf's few known-good partners are shared out (links are full duplex).
    ``used`` (shared by the caller across such calls) holds the partners the suspect already
    has this round: its two confirmations are never with the same partner (independent
    evidence). ``proven``: partners' NICs must be in ``good_nics`` (never an un-cleared
    node of ``local``: the intermittence recheck, where two candidates of a two-node leaf
    would otherwise sample each other). ``avoid``: switch links on every failing path of the
    suspect so far, which explain its failures as well as the NIC does (an InfiniBand route
    is fixed per destination: every partner so far may have come over one cable); a partner
    whose route crosses none of them is preferred, so the test separates the two.
    ``later``: a test the round has no partner for runs in an overflow wave of the round.
    """
    node = nic_node(nic)
    rail = b.view.topology.nics[nic].rail
    made = 0
    used = used if used is not None else set()
    used.add(node)
    for direction in directions:
        made += _confirm_against_one(nic, rail, direction, b, pool, good_nics, used, local, met,
                                     proven, avoid, later)
    return made


#: partners tried per confirmation test before giving up for the round
_PARTNER_TRIES = 6


def _confirm_against_one(nic: str, rail: int, direction: str, b: RoundBuilder, pool: GoodPool,
                         good_nics: set[str], taken: set[str], local: Sequence[str],
                         met: frozenset[str], proven: bool = False,
                         avoid: Collection[LinkKey] = (), later: bool = False) -> int:
    """One confirmation test of ``nic`` (``direction``: it is the client or the server)
    against a known-good partner not in ``taken``; a partner across leaves may find its links
    taken this round, so up to :data:`_PARTNER_TRIES` are tried (the suspect's own leaf after
    three). With ``avoid``, partners whose route crosses one of those links are passed over
    first (as many again are tried), then taken if nothing else fits. ``later``: when the
    round has no partner left (a two-node leaf's suspects share its one route in), the test
    runs in one of the round's overflow waves (:meth:`RoundBuilder.in_later_wave`) against a
    proven-good partner. Adds the
    partner to ``taken``; returns 1 when a test was planned, else 0."""
    got = _confirm_on(nic, rail, direction, b, pool, good_nics, taken, local, met, proven,
                      avoid)
    if got or not later:
        return got
    # only a proven-good partner is worth the extra wave (two suspects meeting again in it,
    # a slow node and its healthy leaf-mate, only pile up failures that say nothing)
    return b.in_later_wave(lambda sb: _confirm_on(nic, rail, direction, sb, pool, good_nics,
                                                  taken, local, met, True, avoid,
                                                  cross_rail=False)) or 0


def _confirm_on(nic: str, rail: int, direction: str, b: RoundBuilder, pool: GoodPool,
                good_nics: set[str], taken: set[str], local: Sequence[str],
                met: frozenset[str], proven: bool = False, avoid: Collection[LinkKey] = (),
                cross_rail: bool = True) -> int:
    """The search of :func:`_confirm_against_one` on ``b`` (``cross_rail``: a test to
    another rail's NIC, two waves, may stand in for a same-rail one)."""
    node = nic_node(nic)
    way = "rx" if direction == "client" else "tx"  # what the partner's NIC does
    tried: set[str] = set()
    shunned: list[str] = []
    avoid = set(avoid)
    for _ in range(_PARTNER_TRIES * (2 if avoid else 1)):
        partner = pool.take_nic_partner(nic, rail, b, good_nics, taken | tried, way,
                                        local, met, same_leaf=len(tried) >= 3, proven=proven)
        if partner is None:
            break
        client, server = (node, partner) if direction == "client" else (partner, node)
        if avoid and _route_crosses(b.view, client, server, rail, avoid):
            shunned.append(partner)
            tried.add(partner)
            continue
        if b.add_flow(client, server, rail, "confirm") is not None:
            taken.add(partner)
            return 1
        tried.add(partner)
    if (shunned and direction == "client" and cross_rail
            and _cross_rail_client(nic, b, good_nics, avoid)):
        return 1
    for partner in shunned:  # nothing separates the two this round: a plain confirmation
        client, server = (node, partner) if direction == "client" else (partner, node)
        if b.add_flow(client, server, rail, "confirm") is not None:
            taken.add(partner)
            return 1
    return 0


def _cross_rail_client(nic: str, b: RoundBuilder, good_nics: set[str],
                       avoid: set[LinkKey], tries: int = 64) -> bool:
    """``nic`` sends to a proven-good NIC of another rail whose route crosses none of
    ``avoid``: every same-rail route may share one cable (an InfiniBand up-route is chosen by
    the destination, and same-rail destinations can all hash to one spine), so only another
    rail's destination leaves it. Into ``nic`` nothing helps: its own route down is fixed.
    A second such test, to another partner, runs in a wave after the round's tests (one
    failure off the link could be a glitch; attribution wants two)."""
    view = b.view
    rail, node = view.topology.nics[nic].rail, nic_node(nic)
    others = sorted(x for x in good_nics if nic_node(x) != node
                    and view.topology.nics[x].rail != rail)
    random.Random(f"cross-rail:{nic}:{b.round_no}").shuffle(others)
    fits = [x for x in others[:tries] if not view.route_links(nic, x) & avoid]
    for i, x in enumerate(fits):
        if b.add_nic_flow(nic, x, "confirm") is not None:
            sub = RoundBuilder(b.round_no, view, b.spec, b.policy)
            for y in fits[i + 1:]:
                if nic_node(y) != nic_node(x) and (t := sub.add_nic_flow(nic, y, "confirm")):
                    b.add_in_wave(t, b.next_wave())
                    break
            return True
    return False


def _route_crosses(view: FabricView, src: str, dst: str, rail: int,
                   links: Collection[LinkKey]) -> bool:
    """Whether the flow from ``src`` to ``dst`` on ``rail`` may cross one of ``links``."""
    a, z = view.rails_of[src].get(rail), view.rails_of[dst].get(rail)
    return a is not None and z is not None and bool(view.route_links(a, z) & set(links))


def plan_node_confirm(node: str, b: RoundBuilder, pool: GoodPool, good_nics: set[str],
                      *, hang: bool = False, local: Sequence[str] = (),
                      met: frozenset[str] = frozenset(),
                      directions: Sequence[str] = ("client", "server"),
                      used: dict[int, set[str]] | None = None) -> int:
    """Confirmation of a suspect node: every rail both ways (one test for a hang suspect).

    Per rail with ``ib_write_bw`` even when the sweep used a collective, so a suspect node's
    failure is narrowed to its NIC when only one rail fails.
    """
    rails = sorted(b.view.rails_of[node])
    if hang:
        rails = rails[:1]
    made = 0
    per_rail_ok = any(p.probe == "ib_write_bw" for p in b.spec.probes)
    if not b.policy.per_rail and not per_rail_ok:  # no per-NIC probe: a 2-node collective
        partner = pool.take_nodes(1, b, near=[node])
        if partner and b.add_group((node, partner[0]), "confirm", probe=b.policy.pair_probe):
            made += 1
        return made
    for direction in ("client",) if hang else directions:
        for r in rails:
            taken = used.setdefault(r, {node}) if used is not None else {node}
            made += _confirm_against_one(b.view.rails_of[node][r], r, direction, b, pool,
                                         good_nics, taken, local, met)
    return made


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
    RoCE: fresh flows between the two leaves (see :func:`_roce_leaf_probes`).
    """
    made = 0
    view = b.view
    if view.fabric != "infiniband":
        return _roce_leaf_probes(flows, b, good_nics, seed)
    seen = {frozenset((nic_node(s), nic_node(d))) for _, s, d in flows}
    rng = random.Random(f"probe:{seed}:{b.round_no}")
    shun = set(candidates) | set(avoid)
    # NICs of the failing flows: a probe without them cannot fail for them (a NIC the
    # failures share is the competing hypothesis), so they are used only when nothing else fits
    ends = {n for _, s, d in flows for n in (s, d)}
    fresh = good_nics - ends
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
    if retest and (len(candidates) < 2 or len(flows) < 2):  # "glitch or real?": same route
        for test_id, src, dst in flows[:1]:  # only if a direction of its links is still free
            t = b.add_flow(nic_node(src), nic_node(dst), view.topology.nics[src].rail,
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
    nics = view.topology.nics
    under = _under(link, view)
    near = sorted(n for n in under if n in good_nics)
    rng.shuffle(near)
    by_rail: dict[int, list[str]] = {}
    for n in sorted(good_nics):
        by_rail.setdefault(nics[n].rail, []).append(n)
    for lst in by_rail.values():
        rng.shuffle(lst)
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


def _probe_search(link: LinkKey, cand: set[LinkKey], b: RoundBuilder, near: list[str],
                  by_rail: dict[int, list[str]], under: set[str], seen: set[frozenset[str]],
                  search_limit: int, only: set[LinkKey] | None = None) -> Test | None:
    """The search of :func:`_probe_one` (``only``: the links a route may cross)."""
    view = b.view
    nics = view.topology.nics
    budget = [search_limit]

    def try_flow(s: str, d: str) -> Test | None | bool:
        """The test if ``s -> d`` fits; False when its route misses ``link`` (None: busy)."""
        budget[0] -= 1
        route = view.route_links(s, d)
        if link not in route:
            return False
        if (route & (cand - {link}) or frozenset((nic_node(s), nic_node(d))) in seen
                or (only is not None and not route <= only)
                or not (b.nic_free(s, "tx") and b.nic_free(d, "rx"))):
            return None
        tag = f"{link[0]} -- {link[1]}"
        if nics[s].rail != nics[d].rail:
            return b.add_nic_flow(s, d, "localize", probe_of=tag)
        return b.add_flow(nic_node(s), nic_node(d), nics[s].rail, "localize", probe_of=tag)

    for d in near:  # down the link: a receiver whose route comes down it, any far sender
        others = [o for o in by_rail.get(nics[d].rail, ()) if o not in under]
        for i, o in enumerate(others[:16 if only is None else 32]):
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
                      for o in lst[:per_rail] if o not in under]
            for o in others:
                if budget[0] <= 0:
                    return None
                if got := try_flow(o, x) if down else try_flow(x, o):
                    return got
    return None


def _under(link: LinkKey, view: FabricView) -> set[str]:
    """NICs under the lower-tier end of ``link``: attached to it, or (a spine or core) to a
    leaf it is cabled to."""
    rank = {"leaf": 0, "spine": 1, "core": 2}
    sw = view.topology.switches
    lower = min(link, key=lambda x: rank.get(sw[x].tier, 3) if x in sw else -1)
    att = view.topology.attachment
    if sw[lower].tier == "leaf":
        leaves = {lower}
    else:
        leaves = {x for k in view.switch_links if lower in k for x in k
                  if x != lower and sw[x].tier == "leaf"}
    return {n for n, leaf in att.items() if leaf in leaves}


def _roce_leaf_probes(flows, b: RoundBuilder, good_nics: set[str], seed: int,
                      per_way: int = 4) -> int:
    """RoCE: a batch of fresh known-good flows between the leaves of the failing flows.

    The path of a flow is a hash nobody knows, so one probe samples one of the equal-cost
    paths; a batch of ``per_way`` flows each way (different node pairs: different hashes)
    samples many at once. Flows of a batch may collide on an uplink and halve each other; the
    attribution tells fair-share contention from a fault (``inference.attribute``).
    """
    made = 0
    att = b.view.topology.attachment
    done: set[tuple[str, str]] = set()
    for _, src, dst in flows[:2]:
        pair = tuple(sorted((att[src], att[dst])))
        if pair[0] == pair[1] or pair in done:
            continue
        done.add(pair)  # type: ignore[arg-type]
        made += plan_roce_batch(pair[0], pair[1], b.view.topology.nics[src].rail, b, good_nics,
                                seed=seed, per_way=per_way)
    return made


def plan_roce_batch(leaf_a: str, leaf_b: str, rail: int, b: RoundBuilder, good_nics: set[str],
                    *, seed: int, per_way: int = 4) -> int:
    """``per_way`` flows ``leaf_a -> leaf_b`` and as many back, between known-good NICs that are
    free this round (each NIC sends or receives once). Returns the number of tests planned."""
    att = b.view.topology.attachment
    rng = random.Random(f"roce-batch:{seed}:{b.round_no}:{leaf_a}:{leaf_b}")
    made = 0
    # leaf ends where other cross-leaf tests of this round run (confirmations): a batch there
    # could collide with them, so it stays away
    taken: set[tuple[str, str]] = set()
    for t in b.tests:
        if t.params.batch is not None:
            continue
        for f in t.flows:
            if att.get(f.src) != att.get(f.dst):
                taken.update({(att.get(f.src), "out"), (att.get(f.dst), "in")})
    for s_leaf, d_leaf in ((leaf_a, leaf_b), (leaf_b, leaf_a)):
        if (s_leaf, "out") in taken or (d_leaf, "in") in taken:
            continue
        srcs = sorted(n for n in good_nics if att.get(n) == s_leaf and b.nic_free(n, "tx"))
        dsts = sorted(n for n in good_nics if att.get(n) == d_leaf and b.nic_free(n, "rx"))
        rng.shuffle(srcs)
        rng.shuffle(dsts)
        # never more flows one way than there are uplinks to spread over: with one path
        # between the leaves, two flows surely halve each other (contention, not a sample)
        width = _uplinks_between(b.view, srcs[0], dsts[0], s_leaf) if srcs and dsts else 0
        for s_nic, d_nic in list(zip(srcs, dsts, strict=False))[:min(per_way, width)]:
            if b.view.topology.nics[s_nic].rail != rail or nic_node(s_nic) == nic_node(d_nic):
                continue
            t = b.add_flow(nic_node(s_nic), nic_node(d_nic), rail, "localize", check_links=False,
                           batch=f"{s_leaf}>{d_leaf}")
            if t is not None:
                b.budget.fits_flows([(s_nic, d_nic)], force=True)  # keep other tests off
                made += 1
    return made


def _uplinks_between(view: FabricView, src: str, dst: str, leaf: str) -> int:
    """How many of ``leaf``'s links the equal-cost paths ``src -> dst`` may leave it by.

    >>> from fabriccheck.topology import generate
    >>> v = FabricView(generate({"kind": "rail-optimized", "nodes": 8, "rails": 1,
    ...     "gpus_per_node": 0, "nodes_per_leaf": 4, "spines": 2}, name="t", fabric="roce"))
    >>> src, dst = "node-001/mlx5_0", "node-005/mlx5_0"
    >>> _uplinks_between(v, src, dst, v.topology.attachment[src])
    2
    """
    return sum(1 for lk in view.flow_links(Flow(src, dst))[1] if leaf in lk)


def plan_roce_link_probes(candidates: Sequence[LinkKey], b: RoundBuilder, good_nics: set[str],
                          *, seed: int, per_link: int = 3, search: int = 64) -> int:
    """RoCE with learned paths: ``per_link`` flows per candidate link that may cross it.

    Each flow runs between known-good NICs, one end under the link (on its leaf, or on a leaf
    of its spine for a spine-core link; down the link, up, down again) and the other on a leaf
    whose equal-cost paths include the link but none of the set's other candidates, tagged
    ``probe_of`` with the link: the path learner (:mod:`fabriccheck.learn_paths`) then pins a
    source port whose path crosses exactly that link (the switches' hash decides; the learner
    draws ports until one does). A partner on
    the same rail comes first; where every same-rail path also crosses another candidate (two
    leaves per rail: ``leaf-0 - spine - leaf-1`` crosses both of a failing flow's links), a
    NIC of another rail, whose leaf reaches the spine too. The probe's leaf ends are closed to
    the round's other cross-leaf flows (:meth:`CrossBudget.close`): a collective ring, whose
    path nobody knows, must not share its link. Returns the number of tests planned.

    Why down twice: a down link drops the traces of the flows crossing it, so only a flow
    *down* it learns that much (its trace dies just after the link's upper end: the partial
    path is the link); one up it dies at its own leaf, among all the uplinks. The second flow
    down shares the first one's hop, so on a healthy or degraded link the learner moves it off
    (a free path), and only where the traces die at the link do both count.
    """
    view = b.view
    att = view.topology.attachment
    nics = view.topology.nics
    rng = random.Random(f"roce-link:{seed}:{b.round_no}")
    good = sorted(n for n in good_nics if n in att)
    made = 0
    for link in candidates[:8]:
        rivals = set(candidates) - {link}
        under = _under(link, view)  # NICs of its leaf, or of the leaves under its spine
        near = [n for n in good if n in under]
        rng.shuffle(near)
        got = 0
        for a in near:
            if got >= per_link:
                break
            same = [o for o in good if nics[o].rail == nics[a].rail]
            other = [o for o in good if nics[o].rail != nics[a].rail]
            rng.shuffle(same)
            rng.shuffle(other)
            t = _aimed_flow(a, link, rivals, same[:search] + other[:search], b, got % 2 == 1)
            if t is not None:
                got += 1
                made += 1
    return made


def _aimed_flow(a: str, link: LinkKey, rivals: set[LinkKey], partners: Sequence[str],
                b: RoundBuilder, send: bool) -> Test | None:
    """One flow between ``a`` and the first partner (``send``: ``a`` sends) whose equal-cost
    paths include ``link`` and, if any partner allows, no link of ``rivals``."""
    view = b.view
    att = view.topology.attachment
    fits = []
    for o in partners:
        s, d = (a, o) if send else (o, a)
        if att[o] == att[a] or nic_node(o) == nic_node(a):
            continue
        if not (b.nic_free(s, "tx") and b.nic_free(d, "rx")):
            continue
        possible = view.route_links(s, d)
        if link in possible:
            fits.append((bool(possible & rivals), s, d))
    for _, s, d in sorted(fits, key=lambda x: x[0])[:1]:
        tag = f"{link[0]} -- {link[1]}"
        rail_s, rail_d = view.topology.nics[s].rail, view.topology.nics[d].rail
        t = (b.add_flow(nic_node(s), nic_node(d), rail_s, "localize", check_links=False,
                        probe_of=tag) if rail_s == rail_d
             else b.add_nic_flow(s, d, "localize", check_links=False, probe_of=tag))
        if t is not None:
            b.budget.close(s, d)  # rings of the round stay off its leaf ends
        return t
    return None


def plan_roce_sampling(b: RoundBuilder, good_nics: set[str], *, seed: int,
                       per_way: int = 2) -> int:
    """RoCE: one sampling batch per leaf pair of a leaf matching, on every rail.

    The sweep sends few cross-leaf flows per leaf (each may hash onto any of the equal-cost
    paths), so a degraded spine link can go unsampled; this batch adds ``per_way`` fresh flows
    each way between matched leaves of each rail (every leaf in one pair), in the first
    follow-up round, beside the confirmations.
    """
    from fabriccheck.planning.pairing import circle_matching

    att = b.view.topology.attachment
    leaves: dict[int, set[str]] = {}
    for nic in good_nics:
        if nic in att:
            leaves.setdefault(b.view.topology.nics[nic].rail, set()).add(att[nic])
    made = 0
    for rail, group in sorted(leaves.items()):
        order = sorted(group)
        random.Random(f"roce-sample:{seed}:{rail}").shuffle(order)
        for la, lb in circle_matching(order, b.round_no + rail):
            made += plan_roce_batch(la, lb, rail, b, good_nics, seed=seed, per_way=per_way)
    return made


def plan_bisect(task: BisectTask, b: RoundBuilder, pool: GoodPool
                ) -> tuple[list[tuple[str, tuple]], list[tuple[str, ...]]]:
    """One bisection step: ``task``'s suspects split into as many parts as the free known-good
    nodes can pad back to ``task.size`` nodes (at least halves), all parts in this round.

    With enough padding every suspect gets its own group (the culprit in one step); with less,
    quarters or halves (``log_p(k)`` steps). A small job has few spare nodes: 8 suspects of a
    16-node job can only be halved (8 -> 4 -> 2 -> 1), so there the bisection takes
    ``2 + log2(8)`` rounds, above the ``2 + ceil(log2(N / 8))`` bar (groups in one round are
    disjoint, so no round can test a suspect twice).
    Returns ``(test_id, part)`` for every test planned, and the parts that found no room this
    round (no free padding, or their ring would share a link): plan them again next round.
    """
    out = []
    left: list[tuple[str, ...]] = []
    parts: Sequence[tuple[str, ...]] = (split_halves(task.suspects) if task.split
                                        else [tuple(task.suspects)])
    if task.split and len(task.suspects) > 2:
        k, free = len(task.suspects), pool.available(b)
        for p in range(k, 2, -1):  # the most parts whose padding fits
            chunks = [tuple(task.suspects[i::p]) for i in range(p)]
            if sum(max(0, task.size - len(c)) for c in chunks) <= free:
                parts = chunks
                break
    for half in parts:
        if not half:
            continue
        pad = pool.take_nodes(max(0, task.size - len(half)), b, near=half)
        group = tuple(half) + tuple(pad)
        t = b.add_group(group, "bisect", bisect_of=task.origin) if len(group) >= 2 else None
        if t is None:
            pool.give_back(pad)
            left.append(tuple(half))
        else:
            out.append((t.test_id, half))
    return out, left
