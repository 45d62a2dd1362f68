"""One follow-up round: confirm suspects, retest what met only culprits, localize links, take
the next bisection steps and give untested nodes a partner — all in the same round, on
disjoint NICs. Every kind of step is tried at most twice per component (``tries``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace

from fabriccheck.inference.link_screen import CAP, screenable
from fabriccheck.inference.state import Inference
from fabriccheck.models import FAIL, PASS, Test, nic_node
from fabriccheck.planning.bisect_steps import plan_bisect
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.confirm import (
    GoodPool,
    plan_nic_confirm,
    plan_node_confirm,
    retest_solo,
)
from fabriccheck.planning.context import BisectState, RunContext
from fabriccheck.planning.cover_links import SAMPLED, plan_link_cover
from fabriccheck.planning.link_probes import plan_link_probes
from fabriccheck.planning.link_topup import plan_link_topup
from fabriccheck.planning.partnerless import plan_loopback, plan_partnerless_nic
from fabriccheck.planning.recheck import plan_recheck, plan_topup
from fabriccheck.planning.roce_link_probes import (
    plan_roce_batch,
    plan_roce_link_probes,
    plan_roce_sampling,
)
from fabriccheck.run_history import RunHistory

#: follow-up rounds that may carry intermittence rechecks (each part is rechecked once)
RECHECK_ROUNDS = 2



def plan_followup_round(ctx: RunContext, history: RunHistory, inf: Inference,
                        bisect: BisectState, tries: dict[str, int],
                        builder: RoundBuilder | None = None, confirm_only: bool = False,
                        pairs_done: bool = True) -> list[Test]:
    """Every follow-up step that finds room this round, strongest evidence first (added to
    ``builder`` when given: a ladder round whose groups take the nodes left over;
    ``confirm_only``: only 1x retests, confirmations of suspect nodes, NICs and hangs,
    InfiniBand link probes and RoCE flows aimed at small candidate sets, which take few nodes,
    and flows over InfiniBand links left uncrossed or open (in waves of their own; open links
    once ``pairs_done``: the ladder's pair rounds are behind);
    RoCE sampling batches wait for the end of the ladder)."""
    b = builder or ctx.builder(history)
    pool = GoodPool(inf.known_good() - bisect.convicted - bisect.suspects, ctx.view,
                    ctx.policy.seed, b.round_no)
    retest_solo(b, inf, solo_probe(ctx), tries)  # first in the round, beside NIC tests
    _confirm_suspects(ctx, history, inf, b, pool, tries)
    for node in sorted(inf.hang_suspects):
        if tries.get(node, 0) < 2 and (plan_node_confirm(node, b, pool, inf.good_nics, hang=True)
                                       or _hang_alone(node, b)):
            _count(tries, node)
    if ctx.policy.localize and ctx.view.fabric == "infiniband":
        _localize_ib(ctx, inf, b, tries)  # a few probe flows per candidate set
    elif ctx.policy.localize:
        _probe_learned_roce_links(ctx, inf, b, tries)  # RoCE: flows aimed at small sets
    # IB sweeps: switch links the rail pairs left uncrossed, in a wave of their own (so they
    # ride the ladder's collective rounds too: a link verdict must not wait for its end)
    plan_link_cover(ctx, history, inf, b, tries)
    if confirm_only:
        if pairs_done:
            _top_up_links(ctx, inf, b, tries)
        return b.tests
    _retest_shadowed(ctx, history, inf, b, pool, tries)
    _recheck_lonely(ctx, history, inf, b, pool, tries)
    if ctx.policy.localize and ctx.view.fabric != "infiniband":
        _localize_roce(ctx, history, inf, b, tries)
    _bisect_steps(bisect, b, pool)
    _pair_untested(ctx, inf, b, pool, tries)
    _test_untested_nics(ctx, history, inf, b, pool, tries)
    _top_up_links(ctx, inf, b, tries)
    return b.tests


def _hang_alone(node: str, b: RoundBuilder, nics: int = 2) -> int:
    """A hang suspect with nobody proven good to meet (a two-node job where one hangs: each
    hung only with the other) runs tests alone on ``nics`` of its NICs (to a sibling NIC
    through the switch, or HCA loopback): the node that hangs hangs alone, the other
    finishes and is cleared (:func:`fabriccheck.inference.alone.hung_alone`)."""
    made, used = 0, set()
    for nic in [n.endpoint for n in b.view.topology.nodes[node].nics][:nics]:
        made += plan_partnerless_nic(nic, b, set(), [node], "confirm", avoid=used) is not None
    return made


def _count(tries: dict[str, int], key: str, by: int = 1) -> None:
    tries[key] = tries.get(key, 0) + by


def _confirm_suspects(ctx: RunContext, history: RunHistory, inf: Inference, b: RoundBuilder,
                      pool: GoodPool, tries: dict[str, int]) -> None:
    """Suspect NICs and nodes against known-good partners; strongest suspects first, since
    partners on their leaf are few, and every suspect's client test before any server test."""
    local = ctx.active(inf)
    todo = sorted([*inf.nic_suspects.values(), *inf.node_suspects.values()],
                  key=lambda v: (-len(v.evidence), v.name))
    met = history.partners
    todo = [v for v in todo if tries.get(v.name, 0) < 2]
    made_for: set[str] = set()
    used: dict[str, dict] = {v.name: {} for v in todo}  # partners each suspect has this round
    _confirm_alone(ctx, inf, b, sorted(inf.nic_suspects), tries, local)
    for way in ("client", "server"):
        for v in todo:
            seen = met.get(nic_node(v.name), frozenset())
            if v.kind == "nic" and not _rail_partner_good(ctx, inf, v.name, local):
                # nobody proven good on its rail in scope (a 2-3-node job: its only partners
                # are suspects too, meeting them again is no evidence): a proven-good NIC of
                # another rail, its own node's other NICs, or HCA loopback
                made = plan_partnerless_nic(
                    v.name, b, inf.good_nics, local, "confirm", only_good=True,
                    receive=way == "server",
                    avoid=used[v.name].setdefault("partnerless", set())) is not None
            elif v.kind == "nic":
                made = plan_nic_confirm(v.name, b, pool, inf.good_nics, local, met=seen,
                                        directions=(way,),
                                        used=used[v.name].setdefault("nic", set()),
                                        avoid=inf.nic_rival_links.get(v.name, frozenset()),
                                        later=True)
            else:
                made = plan_node_confirm(v.name, b, pool, inf.good_nics, local=local,
                                         met=seen, directions=(way,), used=used[v.name])
            if made:
                made_for.add(v.name)
    for name in made_for:
        _count(tries, name)


def _confirm_alone(ctx: RunContext, inf: Inference, b: RoundBuilder, nics: list[str],
                   tries: dict[str, int], local: Iterable[str]) -> None:
    """A suspect NIC a confirmation round left open, with an un-cleared link on its failing
    paths that explains them as well (``inf.nic_rival_links``: the confirmations could not
    avoid it) or no proven-good partner on its own leaf in scope (every partner's path
    crosses its leaf's uplinks, which its own failures leave un-cleared: a RoCE gate on nodes
    spread over many leaves), is also tested alone, by HCA loopback, in up to two rounds: a
    failure there pins the NIC (two of them are two failures off the rival link), a pass
    clears it and leaves its failures to the links."""
    for nic in nics:
        key = f"{nic} alone"
        if (1 <= tries.get(nic, 0) and tries.get(key, 0) < 2
                and (nic in inf.nic_rival_links or not _leaf_partner_good(ctx, inf, nic, local))
                and plan_loopback(nic, b) is not None):
            _count(tries, key)


def _retest_shadowed(ctx: RunContext, history: RunHistory, inf: Inference, b: RoundBuilder,
                     pool: GoodPool, tries: dict[str, int]) -> None:
    """NICs that met only culprits so far are tested again."""
    local = ctx.active(inf)
    met = history.partners
    for nic in shadowed_nics(history.observations, inf):
        if tries.get(nic, 0) < 2 and plan_nic_confirm(
                nic, b, pool, inf.good_nics, local, met=met.get(nic_node(nic), frozenset())):
            _count(tries, nic)


def _recheck_lonely(ctx: RunContext, history: RunHistory, inf: Inference, b: RoundBuilder,
                    pool: GoodPool, tries: dict[str, int]) -> None:
    """NICs that failed a test (of any size) with nothing else to blame (noise, or an
    intermittent part?) and IB links with two such failures get ``policy.recheck_samples``
    short tests against proven-good partners, in waves of one round
    (:mod:`fabriccheck.planning.recheck`). A part is rechecked once (its samples never make
    it a candidate again); parts that become candidates later (a recheck's passes clear the
    partners of their failures) get theirs in a later round, :data:`RECHECK_ROUNDS` at most;
    what is still waiting then is reported as a suspect, never passed.
    :mod:`fabriccheck.inference.flaky` tells noise from a part on those samples."""
    if not ctx.policy.per_rail or tries.get("recheck", 0) >= RECHECK_ROUNDS:
        return
    fl = inf.flakiness  # parts with samples are no longer candidates (inference.flaky)
    nics = [x for x in fl.recheck_nics if nic_node(x) in inf.completed]
    if nics or fl.recheck_links:
        _count(tries, "recheck")
        # a flaky or undecided NIC passed some tests, but is no partner to judge others by
        good = inf.good_nics - set(fl.flaky) - set(fl.undecided)
        plan_recheck(b, nics, fl.recheck_links, pool, good, ctx.active(inf),
                     history.partners, seed=ctx.policy.seed)
    # InfiniBand only for now: on RoCE the top-up round loses a slow link's localization
    # evidence (docs/examples/roce-link-fault.yaml), a cause not yet found
    if (ctx.mode == "sweep" and ctx.policy.screen_tests and not tries.get("topup", 0)
            and ctx.view.fabric == "infiniband"):
        _count(tries, "topup")  # once, in waves after the recheck's: they feed the next one
        _top_up(ctx, history, inf, b)


def _top_up(ctx: RunContext, history: RunHistory, inf: Inference, b: RoundBuilder) -> None:
    """NICs of healthy-looking nodes with fewer than ``policy.screen_tests`` finished tests
    (a ladder level found no room for their node) get short same-leaf samples up to that
    many (:func:`fabriccheck.planning.recheck.plan_topup`)."""
    counts: dict[str, int] = defaultdict(int)
    for o in history.observations:
        if o.status in (PASS, FAIL) and not o.test.params.recheck_of:
            for x in o.test.nics:
                counts[x] += 1
    blamed = inf.blamed_nodes
    nics = [x for n in ctx.active(inf) if n not in blamed and n in inf.completed
            for x in ctx.view.rails_of[n].values()
            if x not in inf.bad_nics and x not in inf.nic_suspects]
    plan_topup(b, nics, counts, ctx.policy.screen_tests)


def _top_up_links(ctx: RunContext, inf: Inference, b: RoundBuilder,
                  tries: dict[str, int]) -> None:
    """The link top-up of an InfiniBand sweep, ``policy.link_topup_rounds`` rounds at most,
    in waves after every other wave of the round (the recheck's samples number theirs from
    wave 1: planned after them, the top-up's flows never share a wave with them)."""
    stage = tries.get("link-topup", 0)
    if (ctx.screens_links and stage < ctx.policy.link_topup_rounds
            and _plan_link_topup(ctx, inf, b, STAGE_Z[min(stage, len(STAGE_Z) - 1)])):
        _count(tries, "link-topup")


#: how sure each top-up round makes a healthy open link's clearing (``z`` of
#: :meth:`~fabriccheck.inference.link_screen.LinkTally.crossings_to_clear`): the first asks
#: for the average (half the links are left for the next, which ask for few crossings more),
#: later ones for more, so the last rounds leave nothing open
STAGE_Z = (0.0, 1.0, 2.0)


def _plan_link_topup(ctx: RunContext, inf: Inference, b: RoundBuilder, z: float) -> int:
    """Switch links the link screen left open get the crossings that clear a healthy link
    (:meth:`~fabriccheck.inference.link_screen.LinkTally.crossings_to_clear`, :data:`CAP` at
    most), between NICs of healthy-looking nodes
    (:func:`fabriccheck.planning.link_topup.plan_link_topup`); none on a fabric too noisy
    to screen. Returns the flows planned."""
    fl = inf.flakiness
    if not screenable(fl.link_rate):
        return 0  # too noisy to settle links: the run's fabric warning says so
    need = {lk: min(CAP, t.crossings_to_clear(fl.link_rate, z)) for lk, t in fl.links.items()
            if t.state == "open" and str(lk) not in fl.flaky}
    if not need:
        return 0
    blamed = inf.blamed_nodes
    nics = [x for n in ctx.active(inf) if n not in blamed and n in inf.completed
            for x in ctx.view.rails_of[n].values()
            if x in inf.good_nics and x not in fl.recheck_nics and x not in fl.flaky]
    # links found bad or under localization are the localizer's: flows across them only fail
    avoid = {lk for g in inf.links for lk in g.candidates}
    return plan_link_topup(b, nics, need, seed=ctx.policy.seed, avoid=avoid)


def shadowed_nics(observations: Iterable, inf: Inference) -> list[str]:
    """NICs of healthy-looking nodes that never passed and whose every test ran with a
    node now blamed (bad, hung, unreachable): their own state is still unknown."""
    culprits = set(inf.bad_nodes) | set(inf.hung) | set(inf.unreachable)
    blamed = inf.blamed_nodes
    seen: dict[str, list[bool]] = defaultdict(list)  # nic -> [shadowed?] per test
    for o in observations:
        for nic in o.test.nics:
            seen[nic].append(bool(culprits & (set(o.test.nodes) - {nic_node(nic)})))
    return sorted(nic for nic, marks in seen.items()
                  if nic not in inf.good_nics and nic_node(nic) not in blamed
                  and nic not in inf.nic_suspects and marks and all(marks))


def _localize_ib(ctx: RunContext, inf: Inference, b: RoundBuilder,
                 tries: dict[str, int]) -> None:
    """InfiniBand: one-candidate sets first; probes from fresh pairs make them exact (twice
    at most per candidate set)."""
    suspected = {lk for g in inf.links for lk in g.candidates}
    for g in sorted(inf.links, key=lambda g: (len(g.candidates), -len(g.evidence))):
        key = "link:" + "|".join(f"{a}-{c}" for a, c in g.candidates)
        if g.bad or tries.get(key, 0) >= 2:
            continue
        flows = [(tid, s, d) for tid, (s, d) in zip(g.evidence, g.flows, strict=False)]
        if plan_link_probes(flows, g.candidates, b, inf.good_nics, seed=ctx.policy.seed,
                            retest=tries.get(key, 0) == 0, avoid=g.rivals,
                            cleared=inf.cleared_links, suspected=suspected):
            _count(tries, key)


def _localize_roce(ctx: RunContext, history: RunHistory, inf: Inference, b: RoundBuilder,
                   tries: dict[str, int], max_pairs: int = 16) -> None:
    """RoCE: batches of fresh flows between the leaf pairs of unexplained cross-leaf
    failures (a link group short of two failures) and of failures set aside as possible
    contention, until two failures show (a candidate set), ``roce_probe_rounds`` at most."""
    pol = ctx.policy
    _probe_learned_roce_links(ctx, inf, b, tries)
    want, seen = _roce_wanted(ctx, history, inf)
    if (pol.roce_sample_flows and tries.get(SAMPLED, 0) < pol.roce_sample_rounds
            and tries.get(SAMPLED + "@") != b.round_no):  # one batch a round
        _count(tries, SAMPLED)  # every leaf pair of a matching, every rail
        plan_roce_sampling(b, inf.good_nics, seed=pol.seed, per_way=pol.roce_sample_flows)
    todo = sorted(want, key=lambda k: (want[k], k))
    for la, lb, rail in todo[:max_pairs]:
        key = f"roce:{la}|{lb}"
        # another batch only while the last one showed a new unexplained failure
        grew = seen[(la, lb, rail)] > tries.get(key + ":seen", 0)
        if tries.get(key, 0) >= pol.roce_probe_rounds or (tries.get(key, 0) and not grew):
            continue
        if plan_roce_batch(la, lb, rail, b, inf.good_nics, seed=pol.seed,
                           per_way=pol.roce_probe_flows):
            _count(tries, key)
            tries[key + ":seen"] = seen[(la, lb, rail)]


def _probe_learned_roce_links(ctx: RunContext, inf: Inference, b: RoundBuilder,
                              tries: dict[str, int], max_links: int = 4) -> None:
    """RoCE: a candidate set of at most ``max_links`` links (learned paths make them small)
    gets flows aimed at each of its links, twice at most per set: the path learner pins them
    onto the link, so two failures from fresh pairs convict it, or passes clear it."""
    for g in sorted(inf.links, key=lambda g: (len(g.candidates), -len(g.evidence))):
        key = "roce-link:" + "|".join(f"{a}-{c}" for a, c in g.candidates)
        if g.bad or len(g.candidates) > max_links or tries.get(key, 0) >= 2:
            continue
        if plan_roce_link_probes(g.candidates, b, inf.good_nics, seed=ctx.policy.seed):
            _count(tries, key)


def _roce_wanted(ctx: RunContext, history: RunHistory, inf: Inference
                 ) -> tuple[dict[tuple[str, str, int], int], dict[tuple[str, str, int], int]]:
    """Leaf pairs (per rail) worth a batch, with their priority, and the unexplained failures
    seen between each."""
    topo = ctx.view.topology
    att = topo.attachment
    want: dict[tuple[str, str, int], int] = {}  # (leaf, leaf, rail) -> priority
    seen: dict[tuple[str, str, int], int] = defaultdict(int)  # unexplained failures
    for g in inf.links:
        if g.bad:
            continue
        for src, dst in g.flows:
            key3 = (*sorted((att[src], att[dst])), topo.nics[src].rail)
            seen[key3] += 1  # type: ignore[index]
            if len(g.evidence) < 2 or not g.significant:  # not yet beyond noise: sample more
                want.setdefault(key3, 0)  # type: ignore[arg-type]
    by_id = history.by_test_id
    for tid in (inf.ambiguous if ctx.policy.roce_probe_contention else ()):
        o = by_id.get(tid)
        for f in (o.test.flows if o else ()):
            if att.get(f.src) != att.get(f.dst):
                key = (*sorted((att[f.src], att[f.dst])), topo.nics[f.src].rail)
                want.setdefault(key, 1)  # type: ignore[arg-type]
    return want, seen


def _bisect_steps(bisect: BisectState, b: RoundBuilder, pool: GoodPool) -> None:
    """Deeper steps first: a part that failed narrows the search more than parts still
    waiting for room (those may be moot once the culprit is found)."""
    for task in sorted(bisect.tasks, key=lambda t: -t.depth):
        planned, left = plan_bisect(task, b, pool)
        for test_id, half in planned:
            bisect.halves[test_id] = (task, half)
        if planned:
            bisect.tasks.remove(task)
            bisect.tasks += [replace(task, suspects=p, split=False) for p in left]


def _pair_untested(ctx: RunContext, inf: Inference, b: RoundBuilder, pool: GoodPool,
                   tries: dict[str, int]) -> None:
    """Nodes nothing has judged yet (odd counts, a partner that was unreachable)."""
    blamed = inf.blamed_nodes
    solo = solo_probe(ctx)
    active = ctx.active(inf)
    for n in active:
        if n in inf.completed or n in blamed or tries.get("untested:" + n, 0) >= 2:
            continue
        partner = pool.take_nodes(1, b, near=[n])
        if partner and b.add_pair(n, partner[0], "sweep"):
            _count(tries, "untested:" + n)
        elif any([plan_partnerless_nic(nic, b, inf.good_nics, active) is not None
                  for rail, nic in sorted(ctx.view.rails_of[n].items())
                  if not _rail_partner_exists(ctx, n, rail, active)]):
            _count(tries, "untested:" + n)  # its rails have no partner: see partnerless
        elif not partner and solo and b.add_group((n,), "sweep", probe=solo):
            _count(tries, "untested:" + n, 2)  # nobody to pair with: its intra-node test


def _test_untested_nics(ctx: RunContext, history: RunHistory, inf: Inference, b: RoundBuilder,
                        pool: GoodPool, tries: dict[str, int]) -> None:
    """NICs of tested, unblamed nodes that no finished test cleared or blamed (the round had
    no room for their rail, or they only met culprits), twice at most each: paired with each
    other per rail (a pass clears both, a failure makes both suspects), the odd one out with a
    known-good partner. Without a per-NIC probe nothing can be done here."""
    if not ctx.policy.per_rail:
        return
    blamed = inf.blamed_nodes
    judged = inf.good_nics | set(inf.bad_nics) | set(inf.nic_suspects)
    active = ctx.active(inf)
    waiting: dict[int, list[str]] = defaultdict(list)  # rail -> nodes whose NIC waits
    for n in active:
        if n in blamed or n not in inf.completed:
            continue
        for rail, nic in sorted(ctx.view.rails_of[n].items()):
            if nic not in judged and tries.get("untested:" + nic, 0) < 2:
                waiting[rail].append(n)
    met = history.partners
    for rail, nodes in sorted(waiting.items()):
        for i in range(0, len(nodes) - 1, 2):
            # the round's links may be taken (a probe up the leaf's uplink): an overflow wave
            if b.now_or_later(lambda bb, a=nodes[i], z=nodes[i + 1], r=rail:
                              bb.add_flow(a, z, r, "sweep")):
                for n in nodes[i:i + 2]:
                    _count(tries, "untested:" + ctx.view.rails_of[n][rail])
        if len(nodes) % 2:
            n = nodes[-1]
            nic = ctx.view.rails_of[n][rail]

            def odd(bb: RoundBuilder, n: str = n, nic: str = nic, r: int = rail
                    ) -> Test | None:
                partner = pool.take_nic_partner(nic, r, bb, inf.good_nics, {n}, "rx",
                                                active, met.get(n, frozenset()))
                return None if partner is None else bb.add_flow(n, partner, r, "confirm")

            if b.now_or_later(odd):
                _count(tries, "untested:" + nic)
            elif not _rail_partner_exists(ctx, n, rail, active):
                # nobody in scope on its rail: another rail, its own node, or HCA loopback
                if plan_partnerless_nic(nic, b, inf.good_nics, active) is not None:
                    _count(tries, "untested:" + nic)


def _rail_partner_good(ctx: RunContext, inf: Inference, nic: str, active: Iterable[str]
                       ) -> bool:
    """Whether a proven-good NIC of ``nic``'s rail exists in scope (then wait for it)."""
    rail = ctx.view.topology.nics[nic].rail
    node = nic_node(nic)
    return any(m != node and ctx.view.rails_of[m].get(rail) in inf.good_nics for m in active)


def _leaf_partner_good(ctx: RunContext, inf: Inference, nic: str, active: Iterable[str]
                       ) -> bool:
    """Whether a proven-good NIC in scope hangs off ``nic``'s own leaf (a test with it
    crosses no switch link)."""
    att = ctx.view.topology.attachment
    leaf, node = att.get(nic), nic_node(nic)
    return any(m != node and x in inf.good_nics and att.get(x) == leaf
               for m in active for x in ctx.view.rails_of[m].values())


def _rail_partner_exists(ctx: RunContext, node: str, rail: int, active: Iterable[str]) -> bool:
    """Whether another node in scope has a NIC on ``rail`` (a same-rail partner may only be
    busy this round: then wait for it rather than test across rails)."""
    return any(m != node and rail in ctx.view.rails_of[m] for m in active)


def solo_probe(ctx: RunContext) -> str | None:
    """The collective a lone node can run by itself (1x: intra-node only), if specified."""
    for probe in (ctx.policy.scale_probe, "nccl", "allreduce-cpu"):
        if any(p.probe == probe and p.group_size == 1 for p in ctx.spec.probes):
            return probe
    return None
