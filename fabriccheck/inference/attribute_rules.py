"""Attribution's rules, each a function of the shared :class:`Work`, in the order they run.

:data:`~fabriccheck.inference.attribute.RULES` names them in order. Passing tests clear what
they touched (:func:`exonerate`); the failures' candidates and the fewest parts that explain
them follow (:func:`explain_failures`), then the verdicts on devices, links, intermittent parts
and the 1x tests, each rule reading what earlier ones left in :class:`Work`. A rule's longer
logic lives in the module of its concept: :mod:`~fabriccheck.inference.candidates`,
:mod:`~fabriccheck.inference.device_judges`, :mod:`~fabriccheck.inference.localize`,
:mod:`~fabriccheck.inference.flaky`, :mod:`~fabriccheck.inference.intra`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

from fabriccheck.inference.alone import alone_passers, hung_alone
from fabriccheck.inference.attribute_work import Work
from fabriccheck.inference.beside_links import link_levels, split
from fabriccheck.inference.candidates import (
    failure_candidates,
    hitting_set,
    pinned_nodes,
    uncleared_switches,
)
from fabriccheck.inference.chance import demote_unlikely, noise_rate, tested_nodes
from fabriccheck.inference.contention import all_failed_ends
from fabriccheck.inference.device_judges import judge_nic, judge_node, rejudge, rival_switch
from fabriccheck.inference.flaky import binomial_tail, find_flaky, may_cross
from fabriccheck.inference.intra import judge_intra
from fabriccheck.inference.localize import LinkGroup, localize_links
from fabriccheck.inference.nic_rivals import partners_of, rival_links, star_reason
from fabriccheck.inference.peers import passed_like_peers
from fabriccheck.inference.state import Inference
from fabriccheck.inference.wording import link_name, listing
from fabriccheck.models import (
    BAD,
    FAIL,
    HANG,
    PASS,
    SUSPECT,
    UNREACHABLE,
    Link,
    Observation,
    Verdict,
    nic_node,
)
from fabriccheck.topology.view import FabricView


def exonerate(w: Work) -> None:
    """Passing tests clear their nodes, NICs and the links they surely crossed (a group test
    that passed only in line with equally slow peers clears no link). Notes the cleared links
    and the failing tests a same-route retest passed (glitches)."""
    inf = w.inf
    fails: set[str] = set()
    for o in w.observations:
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
            w.good_links |= w.view.flow_links(f)[0]
        if o.test.params.retest_of:
            w.retested_ok.add(o.test.params.retest_of)
    inf.completed = inf.good_nodes | fails
    inf.cleared_links = frozenset(w.good_links)


def collect_unreachable(w: Work) -> None:
    """The hosts the executor could not reach: unreachable, not drained."""
    for o in w.observations:
        if o.status == UNREACHABLE and o.raw is not None:
            for host in o.raw.unreachable:
                w.inf.unreachable.setdefault(host, Verdict(
                    "node", host, UNREACHABLE, "could not be reached", (o.test.test_id,)))


def judge_hangs(w: Work) -> None:
    """A node that finished no test and hung with at least two different partners is hung,
    or alone on two of its NICs (:func:`fabriccheck.inference.alone.hung_alone`); one hang
    is a suspect."""
    inf = w.inf
    by_node: dict[str, list[Observation]] = defaultdict(list)
    for o in w.observations:
        if o.status != HANG:
            continue
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


def explain_failures(w: Work) -> None:
    """Each failure's un-cleared candidates (:func:`failure_candidates`) and the fewest parts
    that explain them all (:func:`hitting_set`). A failure with nothing left to blame is noise
    (a glitch), unless ECMP contention may explain it."""
    fails = [o for o in w.observations if o.status == FAIL]
    w.fx = fx = failure_candidates(fails, w.view, w.inf, w.good_links, w.retested_ok,
                                   all_failed_ends(w.observations, w.view))
    w.chosen = hitting_set(fx.cands, [set(o.test.nodes) for o in fx.live])
    for o, c in zip(fx.live, fx.cands, strict=True):
        if not c and o.test.test_id not in fx.ambiguous:
            w.inf.glitches.append(o.test.test_id)
        for comp in c:
            w.by_comp[comp].append(o)
    w.cands_of = {o.test.test_id: c for o, c in zip(fx.live, fx.cands, strict=True)}


def pin_failures(w: Work) -> None:
    """What the judges weigh beside the candidates: the one node each failure can only come
    from, the switches of the un-cleared links on each failing path (``dark``: those no
    passing test crossed), each node's passes, and the failures contention may explain."""
    fx = w.fx
    # a possibly-contended failure pins nobody (dropping its links must not convict a device)
    w.pinned = {t: n for t, n in pinned_nodes(fx.live, fx.cands).items()
                if t not in fx.ambiguous and t not in fx.shared}
    w.switch_of = uncleared_switches(fx, w.view, w.good_links)
    lit = {sw for lk in w.good_links for sw in lk}
    for o in fx.live:
        for sw in w.switch_of.get(o.test.test_id, frozenset()) - lit:
            w.dark[sw].add(frozenset(o.test.nodes))
    for o in w.observations:
        if o.status == PASS:
            for n in o.test.nodes:
                w.passes_of[n].append(o)
    w.unsure = set(fx.ambiguous) | set(fx.shared)  # possible ECMP contention
    w.n_nics = len({x for o in w.observations for x in o.test.nics})


def _judge_nic(w: Work, nic: str, obs: list[Observation]) -> None:
    """:func:`judge_nic` on all the evidence: its node's passes, its failures' candidates,
    and whether it is the centre of a star of failures (:func:`star_reason`)."""
    judge_nic(nic, obs, w.inf, w.confirmed_min_fails, w.pinned,
              w.passes_of.get(nic_node(nic), ()), cands_of=w.cands_of,
              star=star_reason(nic, obs, w.cands_of, w.inf, w.view, w.n_nics, unsure=w.unsure,
                               switch_of=w.switch_of, dark=w.dark))


def judge_devices(w: Work) -> None:
    """Every node and NIC the hitting set chose, judged on the failures it could explain. A
    node held a suspect because a switch explains its failures as well leaves them to the
    links too (``rivalled``)."""
    inf, by_comp = w.inf, w.by_comp
    devices = {nic_node(c[1]) for c in w.chosen.values() if c[0] != "link"}
    for comp in sorted(set(w.chosen.values())):
        if comp[0] == "node":
            own = [o for o in by_comp[comp] if not (set(o.test.nodes) - {comp[1]}) & devices]
            rival = rival_switch(comp[1], own or by_comp[comp], w.fx.live, w.switch_of)
            judge_node(comp[1], by_comp[comp], inf, w.node_min_fails, w.confirmed_min_fails,
                       w.pinned, w.fx.shared, rival, alone_passers(w.observations))
            if rival and comp[1] in inf.node_suspects:
                w.rivalled += own
        elif comp[0] == "nic":
            _judge_nic(w, comp[1], by_comp[comp])


def note_rivals(w: Work) -> None:
    """A NIC held a suspect by a cable on its paths leaves its failures across those links to
    the links too (``rivalled``)."""
    for nic in sorted(w.inf.nic_suspects):
        own = w.by_comp.get(("nic", nic), [])
        if rivals := rival_links(own, w.cands_of):
            w.rivalled += [o for o in own if any(kind == "link" and name in rivals
                                                 for kind, name in w.cands_of[o.test.test_id])]


def localize(w: Work) -> None:
    """The links (:func:`localize_links`): the failures the hitting set put on a link, and the
    rivalled ones with links among their candidates (both hypotheses stay open: say both)."""
    rival_ids = {o.test.test_id for o in w.rivalled}
    link_obs = [(o, [x[1] for x in c if x[0] == "link"])
                for i, (o, c) in enumerate(zip(w.fx.live, w.fx.cands, strict=True))
                if w.chosen.get(i, ("",))[0] == "link"
                or (o.test.test_id in rival_ids and any(x[0] == "link" for x in c))]
    w.inf.links = localize_links(link_obs, ib=w.view.fabric == "infiniband",
                                 cleared=w.inf.cleared_links)


def beyond_noise(w: Work) -> None:
    """Link candidate sets whose failures the run's glitch rate explains are marked not
    significant (:func:`_beyond_noise`)."""
    w.inf.links = _beyond_noise(w.inf.links, w.observations, w.view,
                                w.fx.ambiguous | w.fx.shared, len(w.inf.glitches))


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


def rejudge_across_bad_links(w: Work) -> None:
    """A NIC found bad is judged again without its failures across a link found bad that
    explains them (their values are not below the link's own: :func:`split`)."""
    levels = link_levels(w.inf.links, {o.test.test_id: o for o in w.fx.live})
    for nic in sorted(w.inf.bad_nics) if levels else ():
        # a failure across a cable found bad says nothing about the NIC: judged on the rest
        own, aside = split(w.by_comp.get(("nic", nic), []), levels, w.view)
        if not aside:
            continue
        rejudge(nic, own, w.inf, lambda n, rest: _judge_nic(w, n, rest),
                f"{len(aside)} of those failures crossed "
                f"{link_name(next(iter(aside.values())))}, found bad, which explains them "
                f"(their values are not below its own)")
        w.by_comp[("nic", nic)] = own


def explained_by_bad_partners(w: Work) -> None:
    """A NIC found bad is judged again on its failures that share no other NIC found bad
    and no node found bad or hung (a test against a dead NIC or a slow node fails whatever
    this one is): two failures against a partner whose NIC is down and one glitch against a
    proven-good node are not two partners' worth of evidence (a 6-node gate drained the
    healthy leaf-mate of a slow node that way). It stays bad only if that evidence alone
    convicts it, else it is a suspect."""
    inf = w.inf
    culprits = set(inf.bad_nodes) | set(inf.hung)
    for nic in sorted(inf.bad_nics):
        obs = w.by_comp.get(("nic", nic), [])
        own = [o for o in obs if not any(x in inf.bad_nics or nic_node(x) in culprits
                                         for x in set(o.test.nics) - {nic})]
        if not obs or len(own) == len(obs):
            continue
        rejudge(nic, own, inf,
                lambda n, rest: judge_nic(n, rest, inf, w.confirmed_min_fails, w.pinned,
                                          w.passes_of.get(nic_node(n), ())),
                f"{len(obs) - len(own)} of those failures were with a NIC or node found "
                f"bad itself")


def beyond_chance(w: Work) -> None:
    """Nodes and NICs found bad on fewer failures than the run's noise makes likely among
    the devices it tested are suspects instead (:mod:`fabriccheck.inference.chance`)."""
    inf = w.inf
    if not (inf.bad_nodes or inf.bad_nics):
        return  # nothing to weigh: no pass over the run's tests
    nodes = set(inf.bad_nodes) | set(inf.node_suspects) | set(inf.hung) | set(inf.unreachable)
    nics = set(inf.bad_nics) | set(inf.nic_suspects)
    skip = set(w.unsure)
    if bad_links := _bad_links(inf):
        skip |= {o.test.test_id for o in w.observations if may_cross(o, bad_links, w.view)}
    rate = noise_rate(w.observations, nodes, nics, skip)
    demote_unlikely(inf.bad_nics, inf.nic_suspects, rate, w.n_nics, "NICs")
    demote_unlikely(inf.bad_nodes, inf.node_suspects, rate, tested_nodes(w.observations),
                    "nodes")


def _bad_links(inf: Inference) -> set[Link]:
    """The candidate links of every link group found bad."""
    return {lk for g in inf.links if g.bad for lk in g.candidates}


def co_suspects(w: Work) -> None:
    """Other un-cleared nodes/NICs of a failing test whose culprit is still only a suspect are
    suspects too, so one confirmation round settles all of them (not one per round). A failure
    put on a link leaves its un-cleared devices suspect as well: a link set that explains two
    failures better than two devices do must not hide the devices (confirm before blaming)."""
    inf = w.inf
    settled = set(inf.bad_nodes) | set(inf.bad_nics)
    for i, (o, c) in enumerate(zip(w.fx.live, w.fx.cands, strict=True)):
        comp = w.chosen.get(i)
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


def nic_rival_links(w: Work) -> None:
    """Each suspect NIC's rival links: the un-cleared links on every one of its failing paths
    (a confirmation that avoids them separates the two)."""
    for nic in w.inf.nic_suspects:
        rivals = rival_links(w.by_comp.get(("nic", nic), []), w.cands_of)
        if rivals:
            w.inf.nic_rival_links[nic] = rivals


def flakiness(w: Work) -> None:
    """Intermittent parts: failing beyond the run's noise and passing otherwise
    (:func:`find_flaky`), bad and suspected links aside."""
    inf = w.inf
    bad_links = _bad_links(inf)
    suspected = {g.candidates[0] for g in inf.links
                 if not g.bad and g.significant and len(g.candidates) == 1}
    inf.flakiness = find_flaky(w.observations, w.view, inf.good_nodes, inf.good_nics,
                               w.good_links, w.fx.ambiguous | w.fx.shared, bad_links=bad_links,
                               suspected=suspected, screen_links=w.screen_links)


def intra(w: Work) -> None:
    """The 1x (single-node) tests, judged apart (:func:`judge_intra`; a node already bad,
    hung or unreachable is not judged again); a node whose 1x test finished is completed."""
    inf = w.inf
    bad, inf.intra_suspects, inf.intra_needed = judge_intra(
        w.solo, set(inf.bad_nodes) | set(inf.hung) | set(inf.unreachable))
    inf.bad_nodes.update(bad)
    inf.completed |= {o.test.nodes[0] for o in w.solo if o.status in (PASS, FAIL)}
