"""One pairing round of the sweep: every active node meets a partner it has not met, over a
path the previous round did not use (per rail with a pair probe, or 2-node collectives)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from fabriccheck.inference.state import Inference
from fabriccheck.models import LinkKey, Test
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.context import RunContext
from fabriccheck.planning.cover import plan_sweep_rail_pairs
from fabriccheck.planning.pairing import pair_key, plan_pairs
from fabriccheck.run_history import RunHistory


@dataclass
class SweepMemory:
    """What earlier pairing rounds chose, per rail (``None``: one collective per pair)."""

    #: node pairs already tested (never twice)
    avoid: dict[int | None, set[frozenset[str]]] = field(default_factory=lambda: defaultdict(set))
    #: leaf pairs the previous round crossed (the next one crosses others)
    prev_cross: dict[int | None, frozenset[str]] = field(default_factory=dict)
    #: nodes that received a cross-leaf sweep flow so far: their downlink was crossed
    served: dict[int | None, frozenset[str]] = field(default_factory=dict)
    #: switch links the sweep's flows crossed so far (InfiniBand fat-trees pair to cover more)
    covered: set[LinkKey] = field(default_factory=set)


def plan_sweep_round(ctx: RunContext, k: int, inf: Inference, history: RunHistory,
                     memory: SweepMemory, builder: RoundBuilder | None = None) -> list[Test]:
    """The tests of pairing round ``k`` (bisect: the log's suspects first, in round 1), added
    to ``builder`` when given (tests already in it keep their resources)."""
    pol, view = ctx.policy, ctx.view
    b = builder or ctx.builder(history)
    active = ctx.active(inf)
    if ctx.mode == "bisect" and k == 1 and ctx.log_suspects:
        _log_first(b, active, ctx.log_suspects)
    free = [n for n in active if b.node_free(n)]
    if pol.per_rail:
        # pinned flows with learned paths are spread over free ECMP members by the learner
        share = pol.roce_learned_cross_share if ctx.learns_paths else pol.roce_cross_share
        plans = plan_sweep_rail_pairs(
            free, view, round_no=k, seed=pol.seed, avoid=memory.avoid,
            prev_cross=memory.prev_cross, roce_cross_share=share,
            prev_served=memory.served, covered=memory.covered)
        for rail, plan in plans.items():
            for c, s in plan.pairs:
                b.add_flow(c, s, rail, "sweep", check_links=False)  # planned link-disjoint
            _remember(memory, rail, plan)
    else:
        plan = plan_pairs(free, view, round_no=k, seed=pol.seed, avoid=memory.avoid[None],
                          prev_cross=memory.prev_cross.get(None, ()),
                          roce_cross_share=pol.roce_cross_share,
                          prev_served=memory.served.get(None, ()))
        for a, c in plan.pairs:
            b.add_group((a, c), "sweep", probe=pol.pair_probe)
        _remember(memory, None, plan)
    for t in b.tests:
        if len(t.nodes) < 2:
            continue
        rail = (t.params.rails or (None,))[0] if pol.per_rail else None
        memory.avoid[rail].add(pair_key(*t.nodes[:2]))
    return b.tests


def _remember(memory: SweepMemory, rail: int | None, plan) -> None:
    memory.prev_cross[rail] = plan.cross
    memory.served[rail] = memory.served.get(rail, frozenset()) | plan.served


def _log_first(b: RoundBuilder, active: list[str], log_suspects: tuple[str, ...]) -> None:
    """Bisect mode: hosts named by the job log meet hosts it did not name, every rail."""
    named = [n for n in log_suspects if n in active]
    others = [n for n in active if n not in set(named)]
    for s, partner in zip(named, others, strict=False):
        b.add_pair(s, partner, "sweep")
