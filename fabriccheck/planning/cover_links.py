"""Targeted flows over the switch links the sweep's carvings left uncrossed (InfiniBand).

The two carvings are planned by destination so their flows cross nearly every switch link
(:mod:`.cover`); a few links (about 0.3% on a 3-tier fat-tree) can stay uncrossed. A follow-up
round aims one ``ib_write_bw`` flow at each: a NIC pair of nodes in play whose route takes the
link (:class:`~fabriccheck.topology.link_reach.LinkReach`), twice at most per link, in a wave
after the round's other tests (``params.wave``: the ladder's collectives hold their nodes'
NICs, and the link's verdict must not wait for the ladder's end). A link
still uncrossed at the end is listed as untested (exit 3), never passed over.
"""

from __future__ import annotations

from fabriccheck.inference.link_cover import crossed_links, ladder_tests_links
from fabriccheck.inference.state import Inference
from fabriccheck.models import nic_node
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.context import RunContext
from fabriccheck.planning.roce_link_probes import plan_roce_sampling
from fabriccheck.run_history import RunHistory
from fabriccheck.topology.link_reach import LinkReach

#: waves of cover flows a round carries at most
COVER_WAVES = 3
#: the ``tries`` entry counting the run's RoCE sampling batches (``SAMPLED + "@"``: the round
#: of the last one)
SAMPLED = "roce:sampled"



def plan_link_cover(ctx: RunContext, history: RunHistory, inf: Inference, b: RoundBuilder,
                    tries: dict[str, int]) -> int:
    """Add to ``b`` one flow per uncrossed switch link that finds free NICs (sweeps on
    InfiniBand only; each link at most twice). Returns the number of flows added."""
    view = ctx.view
    if ctx.mode != "sweep" or not ladder_tests_links(ctx.policy.levels):
        return 0
    if view.fabric != "infiniband":
        return _sample_roce(ctx, inf, b, tries)
    left = sorted(view.switch_links - crossed_links(view, history.observations))
    if not left:
        return 0
    blamed = inf.blamed_nodes
    nics = [nic for n in ctx.active(inf) if n not in blamed
            for nic in view.rails_of[n].values()]
    # in waves of their own after the round's tests (the ladder's collectives hold every
    # NIC of their nodes, and a link left uncrossed must not wait for the ladder's end); a
    # wave gives each NIC one flow and each link one, so a fabric with many links left
    # (odd leaf counts) takes up to COVER_WAVES of them
    first = b.next_wave()
    reach = LinkReach(view, nics, seed=ctx.policy.seed + b.round_no)
    added = 0
    todo = [lk for lk in left if tries.get(_try_key(lk), 0) < 2]
    for wave in range(first, first + COVER_WAVES):
        sub = RoundBuilder(b.round_no, view, b.spec, b.policy)
        busy: set[str] = set()
        rest = []
        for lk in todo:
            got = reach.find(lk, skip=busy)
            t = None if got is None else sub.add_flow(
                nic_node(got[0]), nic_node(got[1]), view.topology.nics[got[0]].rail, "sweep")
            if t is None:
                rest.append(lk)
                continue
            b.add_in_wave(t, wave)
            tries[_try_key(lk)] = tries.get(_try_key(lk), 0) + 1
            busy.update(got)  # type: ignore[arg-type]
            added += 1
        if len(rest) == len(todo):
            break
        todo = rest
    return added


def _sample_roce(ctx: RunContext, inf: Inference, b: RoundBuilder,
                 tries: dict[str, int]) -> int:
    """RoCE with learned paths: the first follow-up round's sampling batch (every leaf pair
    of a matching, every rail: :func:`~fabriccheck.planning.roce_link_probes.plan_roce_sampling`)
    in a wave of its own, so it rides the ladder's collective rounds. The two rail-pair
    rounds give a small leaf's few NICs a handful of cross-leaf flows, each on one of many
    equal-cost uplinks: an eighth of a 256-node fabric's links were never crossed, and a
    half-speed uplink waited for the ladder's end (round 9). Counts as one of the run's
    ``roce_sample_rounds``; the round's own sampling (after the ladder) skips a round that
    has one."""
    pol = ctx.policy
    if (not ctx.learns_paths or not pol.localize or not pol.roce_sample_flows
            or tries.get(SAMPLED, 0) > 0):
        return 0
    blamed = inf.blamed_nodes
    good = {x for x in inf.good_nics if nic_node(x) not in blamed}
    sub = RoundBuilder(b.round_no, ctx.view, b.spec, b.policy)
    made = plan_roce_sampling(sub, good, seed=pol.seed, per_way=pol.roce_sample_flows)
    if made:
        wave = b.next_wave()
        for t in sub.tests:
            b.add_in_wave(t, wave)
        tries[SAMPLED] = tries.get(SAMPLED, 0) + 1
        tries[SAMPLED + "@"] = b.round_no
    return made


def _try_key(lk: tuple[str, str]) -> str:
    """The ``tries`` entry counting a link's cover flows."""
    return f"cover:{lk[0]}|{lk[1]}"
