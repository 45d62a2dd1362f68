"""Confirmations: a suspect NIC tested against known-good partners on the *same leaf* (no
uplinks on the path, so only the suspect can fail the test), once as client, once as server
(links are full duplex, so both run at once); a suspect node does the same on every rail; a hang
suspect runs one test against a known-good node. :class:`GoodPool` hands out the partners.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Sequence

from fabriccheck.inference.state import Inference
from fabriccheck.models import LinkKey, nic_node
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.topology.view import FabricView


class GoodPool:
    """Known-good nodes to borrow as partners or padding, nearest (same leaf) first."""

    def __init__(self, good: Iterable[str], view: FabricView, seed: int, round_no: int) -> None:
        self.view = view
        free = sorted(good)
        random.Random(f"pool:{seed}:{round_no}").shuffle(free)
        self.free = free

    @property
    def free(self) -> list[str]:
        """The known-good nodes not handed out, in the pool's (seeded) order."""
        return self._free

    @free.setter
    def free(self, nodes: list[str]) -> None:
        self._free, self._by_leaf = nodes, None

    def _on_leaf(self, rail: int, leaf: str | None) -> list[str]:
        """The free nodes whose ``rail`` NIC hangs off ``leaf``, in the pool's order (indexed
        once per change of :attr:`free`: a confirmation asks for a partner thousands of times
        a round)."""
        if self._by_leaf is None:
            att, idx = self.view.topology.attachment, {}
            for node in self._free:
                for r, x in self.view.rails_of[node].items():
                    idx.setdefault((r, att.get(x)), []).append(node)
            self._by_leaf = idx
        return self._by_leaf.get((rail, leaf), [])

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

        rails_of = self.view.rails_of
        for node in self._on_leaf(rail, leaf):
            other = rails_of[node][rail]
            if node in exclude or other not in good_nics or not b.nic_free(other, way):
                continue
            if node not in met:
                return node
            offer(2, node)
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
        if not same_leaf and (best is None or best[0] > 5):  # ranks 5 to 5.54 can win
            across = [(node, other) for node in self._free  # known-good, on other leaves
                      if (other := rails_of[node].get(rail)) is not None
                      and node not in exclude and other in good_nics
                      and att.get(other) != leaf and b.nic_free(other, way)]
            got = self._best_across(nic, across, way, b) if across else None
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
        if avoid and route_crosses(b.view, client, server, rail, avoid):
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


def route_crosses(view: FabricView, src: str, dst: str, rail: int,
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


def retest_solo(b: RoundBuilder, inf: Inference, probe: str | None,
                tries: dict[str, int]) -> None:
    """Nodes whose 1x test failed run it again alone (:meth:`Inference.solo_retests` times at
    most, counted in ``tries`` as ``solo:<node>``: enough for the failures that convict, see
    :mod:`fabriccheck.inference.intra`)."""
    for node in sorted(inf.intra_suspects):
        key = "solo:" + node
        if probe and tries.get(key, 0) < inf.solo_retests() and b.add_solo(node, probe,
                                                                           "confirm"):
            tries[key] = tries.get(key, 0) + 1
