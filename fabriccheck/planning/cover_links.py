"""Targeted flows over the switch links the sweep's carvings left uncrossed (InfiniBand).

The two carvings are planned by destination so their flows cross nearly every switch link
(:mod:`.cover`); a few links (about 0.3% on a 3-tier fat-tree) can stay uncrossed. A follow-up
round aims one ``ib_write_bw`` flow at each: a NIC pair of nodes in play whose route takes the
link (:class:`~fabriccheck.topology.link_reach.LinkReach`), twice at most per link. A link
still uncrossed at the end is listed as untested (exit 3), never passed over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fabriccheck.inference.attribute import Inference
from fabriccheck.inference.link_cover import crossed_links, ladder_tests_links
from fabriccheck.models import nic_node
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.run_history import RunHistory
from fabriccheck.topology.link_reach import LinkReach

if TYPE_CHECKING:  # the planner imports this module; the type only annotates
    from fabriccheck.planning.planner import RunContext


def plan_link_cover(ctx: RunContext, history: RunHistory, inf: Inference, b: RoundBuilder,
                    tries: dict[str, int]) -> int:
    """Add to ``b`` one flow per uncrossed switch link that finds free NICs (sweeps on
    InfiniBand only; each link at most twice). Returns the number of flows added."""
    view = ctx.view
    if (view.fabric != "infiniband" or ctx.mode != "sweep"
            or not ladder_tests_links(ctx.policy.levels)):
        return 0
    left = sorted(view.switch_links - crossed_links(view, history.observations))
    if not left:
        return 0
    blamed = inf.blamed_nodes
    nics = [nic for n in ctx.active(inf) if n not in blamed
            for nic in view.rails_of[n].values()]
    busy = {n for n in nics if not b.nic_free(n)}
    reach = LinkReach(view, nics, seed=ctx.policy.seed + b.round_no)
    added = 0
    for lk in left:
        key = f"cover:{lk[0]}|{lk[1]}"
        if tries.get(key, 0) >= 2:
            continue
        got = reach.find(lk, skip=busy)
        if got is None:
            continue
        src, dst = got
        rail = view.topology.nics[src].rail
        if b.add_flow(nic_node(src), nic_node(dst), rail, "sweep") is not None:
            tries[key] = tries.get(key, 0) + 1
            busy.update((src, dst))
            added += 1
    return added
