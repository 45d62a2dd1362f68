"""Planning: carve groups, pair rounds, bisection steps (pure)."""

from __future__ import annotations

from fabriccheck.planning.bisect_steps import BisectTask, bisect_round_bound, split_halves
from fabriccheck.planning.build import RoundBuilder, ring_flows
from fabriccheck.planning.pairing import PairPlan, plan_pairs, plan_rail_pairs

__all__ = [
    "BisectTask",
    "PairPlan",
    "RoundBuilder",
    "bisect_round_bound",
    "plan_pairs",
    "plan_rail_pairs",
    "ring_flows",
    "split_halves",
]
