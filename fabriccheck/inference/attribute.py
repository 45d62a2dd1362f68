"""Attribution: which node, NIC or link explains the failing observations, with evidence.

Passing observations are trusted (noise only ever makes a healthy test look *bad*), so anything a
passing test touched is exonerated: its nodes, its NICs and the links it surely crossed (the
route on InfiniBand; on RoCE only links every equal-cost path shares). Each failing observation
is then explained by the components it touched that are *not* exonerated, and a greedy minimum
hitting set picks the fewest explanations (nodes first, then NICs, then links). A failure with
nothing left to blame is noise (a glitch). A component is only **bad** with enough independent
evidence (see :func:`infer`); otherwise it is a **suspect** and the planner confirms it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from fabriccheck.inference.alone import alone_passers, alone_reason, hung_alone
from fabriccheck.inference.beside_links import link_levels, split
from fabriccheck.inference.flaky import binomial_tail, find_flaky
from fabriccheck.inference.intra import is_solo, judge_intra
from fabriccheck.inference.localize import LinkGroup, localize_links
from fabriccheck.inference.nic_rivals import (
    Comp,
    most_on_one_link,
    partners_of,
    rival_links,
    star_reason,
)
from fabriccheck.inference.peers import passed_like_peers
from fabriccheck.inference.state import Inference
from fabriccheck.models import (
    BAD,
    FAIL,
    HANG,
    PASS,
    SUSPECT,
    UNREACHABLE,
    LinkKey,
    Observation,
    Verdict,
    nic_node,
)
from fabriccheck.topology.view import FabricView

_PRIORITY = {"node": 0, "nic": 1, "link": 2}


def link_name(key: LinkKey) -> str:
    return f"{key[0]} -- {key[1]}"


def _fmt(o: Observation) -> str:
    if o.value is None:
        return f"{o.test.test_id} ({o.reason[:60]})"
    return f"{o.test.test_id} {o.value:.1f} {o.unit}"


def listing(items: Sequence[str], most: int = 4) -> str:
    """``a, b, c, d (+2 more)``: a list cut short says so.

    >>> listing(["a", "b", "c"], 2)
    'a, b (+1 more)'
    """
    more = f" (+{len(items) - most} more)" if len(items) > most else ""
    return ", ".join(items[:most]) + more


def _values(obs: Sequence[Observation], most: int = 4) -> str:
    return listing([_fmt(o) for o in obs], most)


@dataclass
class _Failures:
    """The failing observations left to explain, each with its un-cleared candidates."""

    live: list[Observation]
    cands: list[list[Comp]]
    ambiguous: set[str]  # RoCE: possible ECMP contention (says nothing about links)
    shared: set[str]  # RoCE: shares a leaf end with another failure of its round


def infer(
    observations: Sequence[Observation],
    view: FabricView,
    *,
    node_min_fails: int = 4,
    confirmed_min_fails: int = 3,
) -> Inference:
    """Attribute every failing observation so far (pure; call again after every round).

    Rules (docs/how-it-finds-faults.md "Confirm before blaming"):

    - **hung**: a node that never finished a test and hung with at least two different partners;
      one hang is a suspect.
    - **unreachable**: the executor named it; not drained.
    - **bad node**: no passing test at all, failing with at least two partners on at least two
      rails and ``node_min_fails`` tests, or a failed confirmation against a known-good node.
    - **bad NIC**: never passed, failing with at least two partners and a failed confirmation
      against a known-good node (``confirmed_min_fails`` failing tests in all).
    - **links**: see :func:`fabriccheck.inference.localize.localize_links`.

    Returns
    -------
    Inference
    """
    inf = Inference()
    solo = [o for o in observations if is_solo(o)]
    observations = [o for o in observations if not is_solo(o)]  # 1x: judged apart
    good_links, retested_ok = _exonerate(observations, view, inf)
    inf.cleared_links = frozenset(good_links)
    _collect_unreachable(observations, inf)
    _attribute_hangs([o for o in observations if o.status == HANG], inf)
    fx = _failures([o for o in observations if o.status == FAIL], view, inf, good_links,
                   retested_ok, _all_failed_ends(observations, view))
    chosen = _hitting_set(fx.cands, [set(o.test.nodes) for o in fx.live])
    by_comp: dict[Comp, list[Observation]] = defaultdict(list)
    for o, c in zip(fx.live, fx.cands, strict=True):
        if not c and o.test.test_id not in fx.ambiguous:
            inf.glitches.append(o.test.test_id)
        for comp in c:
            by_comp[comp].append(o)
    # a possibly-contended failure pins nobody (dropping its links must not convict a device)
    pinned = {t: n for t, n in _pinned(fx.live, fx.cands).items()
              if t not in fx.ambiguous and t not in fx.shared}
    switch_of = _uncleared_switches(fx, view, good_links)
    lit = {sw for lk in good_links for sw in lk}
    dark: dict[str, set[frozenset[str]]] = defaultdict(set)  # no passing test crossed it
    for o in fx.live:
        for sw in switch_of.get(o.test.test_id, frozenset()) - lit:
            dark[sw].add(frozenset(o.test.nodes))
    passes_of: dict[str, list[Observation]] = defaultdict(list)
    for o in observations:
        if o.status == PASS:
            for n in o.test.nodes:
                passes_of[n].append(o)
    cands_of = {o.test.test_id: c for o, c in zip(fx.live, fx.cands, strict=True)}
    unsure = set(fx.ambiguous) | set(fx.shared)  # possible ECMP contention
    n_nics = len({x for o in observations for x in o.test.nics})
    rivalled: list[Observation] = []  # a suspect node's failures a switch explains as well

    def judge_nic(nic: str, obs: list[Observation]) -> None:
        _judge_nic(nic, obs, inf, confirmed_min_fails, pinned, passes_of.get(nic_node(nic), ()),
                   cands_of=cands_of,
                   star=star_reason(nic, obs, cands_of, inf, view, n_nics, unsure=unsure,
                                    switch_of=switch_of, dark=dark))

    devices = {nic_node(c[1]) for c in chosen.values() if c[0] != "link"}
    for comp in sorted(set(chosen.values())):
        if comp[0] == "node":
            own = [o for o in by_comp[comp] if not (set(o.test.nodes) - {comp[1]}) & devices]
            rival = _rival_switch(comp[1], own or by_comp[comp], fx.live, switch_of)
            _judge_node(comp[1], by_comp[comp], inf, node_min_fails, confirmed_min_fails,
                        pinned, fx.shared, rival, alone_passers(observations))
            if rival and comp[1] in inf.node_suspects:
                rivalled += own
        elif comp[0] == "nic":
            judge_nic(comp[1], by_comp[comp])
    for nic in sorted(inf.nic_suspects):  # a NIC held a suspect by a cable on its paths
        own = by_comp.get(("nic", nic), [])
        if rivals := rival_links(own, cands_of):
            rivalled += [o for o in own if any(kind == "link" and name in rivals
                                               for kind, name in cands_of[o.test.test_id])]
    rival_ids = {o.test.test_id for o in rivalled}  # both hypotheses stay open: say both
    link_obs = [(o, [x[1] for x in c if x[0] == "link"])
                for i, (o, c) in enumerate(zip(fx.live, fx.cands, strict=True))
                if chosen.get(i, ("",))[0] == "link"
                or (o.test.test_id in rival_ids and any(x[0] == "link" for x in c))]
    inf.links = localize_links(link_obs, ib=view.fabric == "infiniband",
                               cleared=inf.cleared_links)
    inf.links = _beyond_noise(inf.links, observations, view, fx.ambiguous | fx.shared,
                              len(inf.glitches))
    levels = link_levels(inf.links, {o.test.test_id: o for o in fx.live})
    for nic in sorted(inf.bad_nics) if levels else ():
        # a failure across a cable found bad says nothing about the NIC: judged on the rest
        own, aside = split(by_comp.get(("nic", nic), []), levels, view)
        if not aside:
            continue
        _rejudge(nic, own, inf, judge_nic,
                 f"{len(aside)} of those failures crossed "
                 f"{link_name(next(iter(aside.values())))}, found bad, which explains them "
                 f"(their values are not below its own)")
        by_comp[("nic", nic)] = own
    _explained_by_bad_partners(by_comp, inf, confirmed_min_fails, pinned, passes_of)
    _co_suspects(fx.live, fx.cands, chosen, inf)
    for nic in inf.nic_suspects:
        rivals = rival_links(by_comp.get(("nic", nic), []), cands_of)
        if rivals:
            inf.nic_rival_links[nic] = rivals
    bad_links = {lk for g in inf.links if g.bad for lk in g.candidates}
    suspected = {g.candidates[0] for g in inf.links
                 if not g.bad and g.significant and len(g.candidates) == 1}
    inf.flakiness = find_flaky(observations, view, inf.good_nodes, inf.good_nics, good_links,
                               fx.ambiguous | fx.shared, bad_links=bad_links,
                               suspected=suspected)
    bad, inf.intra_suspects = judge_intra(solo, set(inf.bad_nodes) | set(inf.hung)
                                          | set(inf.unreachable))
    inf.bad_nodes.update(bad)
    inf.completed |= {o.test.nodes[0] for o in solo if o.status in (PASS, FAIL)}
    return inf


def _exonerate(observations: Sequence[Observation], view: FabricView, inf: Inference
               ) -> tuple[set[LinkKey], set[str]]:
    """Passing tests clear their nodes, NICs and the links they surely crossed (a group test
    that passed only in line with equally slow peers clears no link). Returns the
    cleared links and the failing tests a same-route retest passed (glitches)."""
    good_links: set[LinkKey] = set()
    retested_ok: set[str] = set()
    fails: set[str] = set()
    for o in observations:
        if o.status == FAIL:
            fails.update(o.test.nodes)
        if o.status != PASS:
            continue
        inf.good_nodes.update(o.test.nodes)
        inf.good_nics.update(o.test.nics)
        # a group test (> 2 nodes) below its floor that passed only because every group of
        # its level was as slow clears no link: a slow leaf whose nodes sit in every group
        # makes the whole level slow (a slow fabric shows in the pair tests, which do clear)
        if o.test.group_size > 2 and passed_like_peers(o):
            continue
        for f in o.test.flows:
            good_links |= view.flow_links(f)[0]
        if o.test.params.retest_of:
            retested_ok.add(o.test.params.retest_of)
    inf.completed = inf.good_nodes | fails
    return good_links, retested_ok


def _beyond_noise(groups: list[LinkGroup], observations: Sequence[Observation],
                  view: FabricView, contended: set[str], glitches: int,
                  alpha: float = 0.01) -> list[LinkGroup]:
    """Mark candidate sets whose failures noise explains: ``k`` failures among the ``n``
    finished flows that may have crossed a candidate are likely at the run's glitch rate
    (binomial tail above ``alpha`` / number of sets). A confirmed (bad) link always stands."""
    # an intermittence recheck's samples are many short flows aimed at a few NICs, not a
    # sample of the fabric's paths: counted here they would drown a link's failures
    finished = [o for o in observations if o.status in (PASS, FAIL)
                and o.test.test_id not in contended and not o.test.params.recheck_of]
    if not groups or not finished:
        return groups
    rate = max(0.005, glitches / len(finished))
    # like with like: failing single flows are weighed against single-flow tests only (a
    # passing ring of many flows over ECMP "may have crossed" every candidate and would
    # dilute the count, though it most likely took other paths)
    n_flows = {o.test.test_id: len(o.test.flows) for o in observations}
    out = []
    for g in groups:
        cands = set(g.candidates)
        single = all(n_flows.get(t, 1) == 1 for t in g.evidence)
        n = sum(1 for o in finished if (not single or len(o.test.flows) == 1)
                and any(view.flow_links(f)[1] & cands for f in o.test.flows))
        p = binomial_tail(len(g.evidence), max(n, len(g.evidence)), rate)
        out.append(g if g.bad or p < alpha / len(groups) else replace(g, significant=False))
    return out


def _collect_unreachable(observations: Sequence[Observation], inf: Inference) -> None:
    for o in observations:
        if o.status == UNREACHABLE and o.raw is not None:
            for host in o.raw.unreachable:
                inf.unreachable.setdefault(host, Verdict(
                    "node", host, UNREACHABLE, "could not be reached", (o.test.test_id,)))


def _failures(fails: list[Observation], view: FabricView, inf: Inference,
              good_links: set[LinkKey], retested_ok: set[str],
              all_failed: set[tuple[int, str, str]] = frozenset()) -> _Failures:  # type: ignore[assignment]
    """Each failure's candidates: its un-cleared nodes, NICs and links (none for a failure a
    same-route retest passed: a glitch)."""
    roce = view.fabric == "roce"
    ambiguous = _roce_collisions(fails, view, skip=all_failed) if roce else set()
    inf.ambiguous = sorted(ambiguous)
    # devices: any failure that shares a leaf end with another failure of its round may be
    # contention (whatever its value), so it never convicts a node or NIC without confirmation
    shared = _shared_leaf_end(fails, view) if roce else set()
    live: list[Observation] = []
    for o in fails:
        if o.test.test_id in retested_ok:
            inf.glitches.append(o.test.test_id)
        else:
            live.append(o)
    cands: list[list[Comp]] = []
    for o in live:
        c: list[Comp] = [("node", n) for n in o.test.nodes if n not in inf.good_nodes]
        c += [("nic", x) for x in o.test.nics if x not in inf.good_nics]
        # a possible ECMP collision says nothing about links; its devices must still be
        # cleared (a half-speed NIC beside a collision looks the same), by confirmation only
        links = set().union(*(view.flow_links(f)[1] for f in o.test.flows)) \
            if o.test.flows and o.test.test_id not in ambiguous else set()
        c += [("link", lk) for lk in sorted(links - good_links)]
        cands.append(c)
    return _Failures(live, cands, ambiguous, shared)


def _co_suspects(live, cands, chosen, inf: Inference) -> None:
    """Other un-cleared nodes/NICs of a failing test whose culprit is still only a suspect are
    suspects too, so one confirmation round settles all of them (not one per round). A failure
    put on a link leaves its un-cleared devices suspect as well: a link set that explains two
    failures better than two devices do must not hide the devices (confirm before blaming)."""
    settled = set(inf.bad_nodes) | set(inf.bad_nics)
    for i, (o, c) in enumerate(zip(live, cands, strict=True)):
        comp = chosen.get(i)
        if comp is None or comp[1] in settled:
            continue
        for kind, name in c:
            if (kind, name) == comp:
                continue
            why = f"shares failing test {o.test.test_id} with suspect {comp[1]}; needs confirmation"
            if kind == "nic" and name not in inf.nic_suspects and name not in inf.bad_nics:
                inf.nic_suspects[name] = Verdict("nic", name, SUSPECT, why, (o.test.test_id,))
            elif kind == "node" and name not in inf.node_suspects and name not in inf.bad_nodes:
                inf.node_suspects[name] = Verdict("node", name, SUSPECT, why, (o.test.test_id,))


def _hitting_set(cands: list[list[Comp]], partners: list[set[str]]) -> dict[int, Comp]:
    """Greedy minimum hitting set: observation index -> the component chosen to explain it.

    Devices first: a node or NIC that failed with at least two different partners and never
    passed explains its failures before any link does (a node failing everywhere is the node,
    even when all its flows happen to share an uplink). Then the fewest components, preferring
    nodes to NICs to links on ties.
    """
    covers: dict[Comp, set[int]] = defaultdict(set)
    for i, c in enumerate(cands):
        for comp in c:
            covers[comp].add(i)
    strong = {
        comp for comp, idx in covers.items() if comp[0] != "link"
        and len(set().union(*(partners[i] for i in idx)) - {comp[1].split("/", 1)[0]}) >= 2
    }
    left = {i for i, c in enumerate(cands) if c}
    out: dict[int, Comp] = {}
    for pool in (strong, set(covers)):
        while left and pool:
            best = max(pool, key=lambda k: (len(covers[k] & left), -_PRIORITY[k[0]], k[1]))
            got = covers[best] & left
            if not got:
                break
            for i in got:
                out[i] = best
            left -= got
    return out


def _pinned(live: list[Observation], cands: list[list[Comp]]) -> dict[str, str]:
    """Failing test id -> the one node its failure can only come from (every un-cleared
    candidate is that node or one of its NICs: no link, no other node is left to blame)."""
    out: dict[str, str] = {}
    for o, c in zip(live, cands, strict=True):
        owners = {name.split("/", 1)[0] if kind != "link" else "" for kind, name in c}
        if len(owners) == 1 and "" not in owners:
            out[o.test.test_id] = owners.pop()
    return out


def _uncleared_switches(fx: _Failures, view: FabricView, good_links: set[LinkKey]
                        ) -> dict[str, frozenset[str]]:
    """Failing test id -> the switches of the links on its path(s) no passing test cleared."""
    out = {}
    for o in fx.live:
        links = set().union(*(view.flow_links(f)[1] for f in o.test.flows)) - good_links
        out[o.test.test_id] = frozenset(sw for lk in links for sw in lk)
    return out


def _rival_switch(node: str, obs: list[Observation], live: list[Observation],
                  switch_of: dict[str, frozenset[str]]) -> str | None:
    """A switch that explains ``node``'s failures as well as the node does: every failure of
    the node (those with another blamed device aside) crosses an un-cleared link of it, and
    another node's failures (tests without ``node``) do too. Then the node is not convicted on
    pattern alone (a leaf with every uplink at half speed makes all its nodes fail every
    cross-leaf test); a confirmation that crosses no such link still can."""
    common = frozenset.intersection(*(switch_of.get(o.test.test_id, frozenset()) for o in obs))
    for sw in sorted(common):
        if any(node not in o.test.nodes and sw in switch_of.get(o.test.test_id, ())
               for o in live):
            return sw
    return None


def _judge_node(node: str, obs: list[Observation], inf: Inference, min_fails: int,
                confirmed_min: int, pinned: dict[str, str],
                shared: set[str] | frozenset[str] = frozenset(), rival: str | None = None,
                passers: frozenset[str] = frozenset()) -> None:
    partners = partners_of(node, obs)
    # without confirmation only failures against partners whose NICs passed elsewhere count
    # (a node paired with faulty partners on every rail in round 1 is no culprit), and none
    # that may be ECMP contention
    clean = [o for o in obs if o.test.test_id not in shared
             and all(x in inf.good_nics for x in o.test.nics if nic_node(x) != node)]
    rails = {f.src.split("/", 1)[1] for o in obs for f in o.test.flows
             if nic_node(f.src) == node} | {f.dst.split("/", 1)[1] for o in obs
                                             for f in o.test.flows if nic_node(f.dst) == node}
    # a confirmation convicts only when nothing else on its path is left to blame
    confirmed = any(o.test.purpose in ("confirm", "bisect") and pinned.get(o.test.test_id) == node
                    for o in obs)
    strong = (len(clean) >= min_fails and (len(rails) >= 2 or len(clean) >= 2 * min_fails)
              and rival is None)
    ids = tuple(o.test.test_id for o in obs)
    reason = (f"failed {len(obs)} test(s) with {len(partners)} partner(s) "
              f"({listing(sorted(partners))}) and passed none; failed: {_values(obs)}")
    if len(partners) >= 2 and (strong or (confirmed and len(obs) >= confirmed_min)):
        inf.bad_nodes[node] = Verdict("node", node, BAD, reason, ids)
    elif rival is None and (alone := alone_reason(node, obs, pinned, passers)):
        inf.bad_nodes[node] = Verdict("node", node, BAD, reason + alone, ids)
    else:
        why = (f"; switch {rival} explains these failures too (other nodes fail across it): "
               "needs a confirmation that avoids it") if rival else "; needs confirmation"
        inf.node_suspects[node] = Verdict("node", node, SUSPECT, reason + why, ids)


def _judge_nic(nic: str, obs: list[Observation], inf: Inference, confirmed_min: int,
               pinned: dict[str, str], node_passes: Sequence[Observation] = (),
               star: str = "", cands_of: Mapping[str, list[Comp]] | None = None) -> None:
    node = nic_node(nic)
    partners = partners_of(node, obs)
    confirmed = any(o.test.purpose == "confirm" and pinned.get(o.test.test_id) == node
                    for o in obs)
    # an un-cleared link on all its failing paths but one: that one alone (a glitch on the
    # test that avoided the link?) convicts nothing; a second failure off the link does
    most = most_on_one_link(obs, cands_of) if cands_of is not None else 0
    rival = most >= 2 and len(obs) - most < 2
    ids = tuple(o.test.test_id for o in obs)
    others = [o for o in node_passes if nic not in o.test.nics]
    other = (f"its node's other rails pass: {_values(others, 3)}" if others
             else "no other rail of its node passed a test")
    reason = (f"failed {len(obs)} test(s) with {len(partners)} partner(s) "
              f"({listing(sorted(partners))}), never passed; failed: {_values(obs)}; {other}")
    # a job too small for two partner nodes: confirmations pinned to it against two or more
    # different proven-good NICs (other rails of its partner, its own node's other NICs
    # through the switch, HCA loopback) say its only partner is not what fails
    pinned_obs = [o for o in obs if o.test.purpose == "confirm"
                  and pinned.get(o.test.test_id) == node]
    against = {x for o in pinned_obs for x in o.test.nics if x != nic} | {
        nic for o in pinned_obs if o.test.nics == (nic,)}
    pinned_rounds = {o.test.round for o in pinned_obs}
    if rival:
        inf.nic_suspects[nic] = Verdict(
            "nic", nic, SUSPECT, f"{reason}; an un-cleared link lies on {most} of its "
            f"{len(obs)} failing paths and explains them as well: needs another failure off "
            f"that link", ids)
    elif len(partners) >= 2 and confirmed and len(obs) >= confirmed_min:
        inf.bad_nics[nic] = Verdict("nic", nic, BAD, reason, ids)
    elif len(against) >= 2 and len(obs) >= confirmed_min and others:
        why = (f"; failed against {len(against)} proven-good parts with nothing else left to "
               f"blame ({', '.join(o.test.test_id for o in pinned_obs)})")
        inf.bad_nics[nic] = Verdict("nic", nic, BAD, reason + why, ids)
    elif len(pinned_rounds) >= 2 and len(obs) >= confirmed_min and others:
        # a job of two nodes: one partner NIC on its rail, proven good by its passes with
        # this node's other NICs; confirmations pinned to this NIC failed in two rounds
        why = (f"; confirmations against proven-good {listing(sorted(against))} failed in "
               f"{len(pinned_rounds)} rounds with nothing else left to "
               f"blame ({', '.join(o.test.test_id for o in pinned_obs)})")
        inf.bad_nics[nic] = Verdict("nic", nic, BAD, reason + why, ids)
    elif star:
        inf.bad_nics[nic] = Verdict("nic", nic, BAD, f"{reason}; {star}", ids)
    else:
        inf.nic_suspects[nic] = Verdict("nic", nic, SUSPECT, reason + "; needs confirmation", ids)


def _explained_by_bad_partners(by_comp: dict, inf: Inference, confirmed_min: int,
                               pinned: dict[str, str],
                               passes_of: dict[str, list[Observation]]) -> None:
    """A NIC found bad is judged again on its failures that share no other NIC found bad
    and no node found bad or hung (a test against a dead NIC or a slow node fails whatever
    this one is): two failures against a partner whose NIC is down and one glitch against a
    proven-good node are not two partners' worth of evidence (a 6-node gate drained the
    healthy leaf-mate of a slow node that way). It stays bad only if that evidence alone
    convicts it, else it is a suspect."""
    culprits = set(inf.bad_nodes) | set(inf.hung)
    for nic in sorted(inf.bad_nics):
        obs = by_comp.get(("nic", nic), [])
        own = [o for o in obs if not any(x in inf.bad_nics or nic_node(x) in culprits
                                         for x in set(o.test.nics) - {nic})]
        if not obs or len(own) == len(obs):
            continue
        _rejudge(nic, own, inf,
                 lambda n, rest: _judge_nic(n, rest, inf, confirmed_min, pinned,
                                            passes_of.get(nic_node(n), ())),
                 f"{len(obs) - len(own)} of those failures were with a NIC or node found "
                 f"bad itself")


def _rejudge(nic: str, own: list[Observation], inf: Inference,
             judge: Callable[[str, list[Observation]], None], why: str) -> None:
    """A NIC found bad judged again on ``own``, its failures that nothing else explains
    (``why`` says what explains the rest); a suspect when they do not convict it alone."""
    v = inf.bad_nics.pop(nic)
    if own:
        judge(nic, own)
    if nic not in inf.bad_nics:
        inf.nic_suspects[nic] = Verdict(
            "nic", nic, SUSPECT,
            f"{v.reason}; {why}, and the rest do not convict it alone: needs confirmation",
            v.evidence)


def _attribute_hangs(hangs: list[Observation], inf: Inference) -> None:
    by_node: dict[str, list[Observation]] = defaultdict(list)
    for o in hangs:
        for n in o.test.nodes:
            if n not in inf.completed and n not in inf.unreachable:
                by_node[n].append(o)
    for node, obs in sorted(by_node.items()):
        partners = partners_of(node, obs)
        ids = tuple(o.test.test_id for o in obs)
        reason = (f"{len(obs)} test(s) hung (killed at timeout) with {len(partners)} partner(s) "
                  f"({listing(sorted(partners))}); it finished no test")
        if len(partners) >= 2 and len(obs) >= 2:
            inf.hung[node] = Verdict("node", node, BAD, "hung: " + reason, ids)
        elif alone := hung_alone(obs):
            inf.hung[node] = Verdict("node", node, BAD, "hung: " + reason + alone, ids)
        else:
            inf.hang_suspects[node] = Verdict("node", node, SUSPECT, "hang suspect: " + reason,
                                              ids)


def _leaf_ends(o: Observation, att: dict[str, str]) -> list[tuple[str, str]]:
    """``(leaf, "out")`` and ``(leaf, "in")`` of every cross-leaf flow of a test."""
    out = []
    for f in o.test.flows:
        s, d = att.get(f.src), att.get(f.dst)
        if s is not None and d is not None and s != d:
            out += [(s, "out"), (d, "in")]
    return out


def _all_failed_ends(observations: Sequence[Observation], view: FabricView,
                     min_flows: int = 3) -> set[tuple[int, str, str]]:
    """RoCE: ``(round, leaf, out|in)`` ends of leaves where every one of ``min_flows`` or more
    cross-leaf flows of the run failed at that end. Contention is the luck of one round's
    hashing; a leaf end where every flow of every round failed is not unlucky, its uplinks are
    slow (a whole leaf at half speed makes each flow fail at half, and each pair of them "fits
    one link")."""
    att = view.topology.attachment
    tally: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])  # [fails, flows]
    rounds: dict[tuple[str, str], set[int]] = defaultdict(set)
    for o in observations:
        if o.status not in (PASS, FAIL):
            continue
        for end in _leaf_ends(o, att):
            tally[end][1] += 1
            tally[end][0] += o.status == FAIL
            rounds[end].add(o.test.round)
    return {(r, *end) for end, (k, n) in tally.items() if n >= min_flows and k == n
            for r in rounds[end]}


def _roce_collisions(fails: list[Observation], view: FabricView, tol: float = 0.08,
                     skip: set[tuple[int, str, str]] = frozenset(),  # type: ignore[assignment]
                     ) -> set[str]:
    """RoCE: failing cross-leaf tests of one round that contention can explain.

    Flows hashed onto one link share it and fail together; what they get adds up to at most
    the link's rate. So a failure is set aside as possible contention only when another
    cross-leaf flow failed at the same leaf end (out of its source leaf or into its destination
    leaf) in that round and the two values together fit in one link (``v + w <= (1 + tol) x
    expected``). A flow failing alone at both ends, one too fast to have shared a link with
    any other failure there (a slow node at 0.6 beside a collided pair), or a tool failure (no
    number) is evidence. Two flows on a half-speed link (a quarter each) still fit and are set
    aside here; another round or a localization batch settles them.
    """
    att = view.topology.attachment
    ends: dict[tuple[int, str, str], list[Observation]] = defaultdict(list)
    for o in fails:
        if o.value is None or not o.expected:
            continue  # no number: the tool failed, contention does not do that
        for leaf, way in _leaf_ends(o, att):
            ends[(o.test.round, leaf, way)].append(o)
    out: set[str] = set()
    slow_end = {o.test.test_id for end in skip for o in ends.get(end, ())}
    for group in ends.values():
        for o in group:
            cap = (1 + tol) * o.expected  # type: ignore[operator]
            if o.test.test_id not in slow_end and any(
                    p is not o and o.value + p.value <= cap  # type: ignore[operator]
                    and _may_share(o, p, view) for p in group):
                out.add(o.test.test_id)
    return out


def _may_share(o: Observation, p: Observation, view: FabricView) -> bool:
    """Two tests may have shared a link: unless both flows' paths were learned (pinned RoCE
    flows, a traceroute on their 5-tuple) and share no directed switch hop."""
    ho = [view.learned_hops(f) for f in o.test.flows]
    hp = [view.learned_hops(f) for f in p.test.flows]
    if any(h is None for h in ho + hp):
        return True
    return bool(frozenset().union(*ho) & frozenset().union(*hp))


def _shared_leaf_end(fails: list[Observation], view: FabricView) -> set[str]:
    """RoCE: failing cross-leaf tests that share a leaf end (out of one leaf or into one) with
    another failing test of their round: they may have hashed onto one link. A tool failure
    (no number) is not contention: it is never in the set and does not put others in it."""
    att = view.topology.attachment
    ends: dict[tuple[int, str, str], list[Observation]] = defaultdict(list)
    for o in fails:
        if o.value is None:
            continue
        for leaf, way in _leaf_ends(o, att):
            ends[(o.test.round, leaf, way)].append(o)
    return {o.test.test_id for group in ends.values() if len(group) >= 2 for o in group
            if any(p is not o and _may_share(o, p, view) for p in group)}
