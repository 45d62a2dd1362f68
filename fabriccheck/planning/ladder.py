"""The ladder: which levels (nodes per test) a run climbs, in which rounds, and how each level
carves the nodes into groups (docs/design.md "How faults are found", steps 0-2).

Levels are 1, 2, 4 and 8 nodes per test (the test spec's ``levels``, or ``--levels``). A level
is kept when the spec has a probe for it and the hardware can run it; otherwise it is skipped
with a stated reason (a GPU-less spec has no 1x: there is no NVLink/PCIe path to test).

Rounds (every level >= 2 runs two carvings, each node with different partners over different
paths; a node is in one collective per round, so levels cannot share a node's round except 1x):

====== ============================================================================
round  tests
====== ============================================================================
1      1x nccl on every node (NVLink/PCIe only) **beside** 2x ib_write_bw carving 1
2      2x ib_write_bw carving 2
3, 4   2x nccl over pairs, carvings 1 and 2
5, 6   4x nccl groups across leaves (and pods), carvings 1 and 2
7, 8   8x nccl groups, carvings 1 and 2
====== ============================================================================

1x shares round 1 with the first rail-pair round because the two use disjoint parts of a
node: a 1x collective runs over NVLink inside the node and touches no NIC, ib_write_bw runs NIC
to NIC. Everything else owns what it measures. The gate climbs a shorter ladder (1x beside one
rail-pair round, then one collective over all the job's nodes); follow-up rounds only where
something failed.

The planner (:mod:`fabriccheck.planning.planner`) walks :func:`ladder_steps` one round at a
time; a preflight/signals phase would be one more :class:`Step` kind ahead of them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from fabriccheck.errors import ConfigError
from fabriccheck.inference.state import Inference
from fabriccheck.models import RoundKind, Test
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.confirm import retest_solo
from fabriccheck.planning.context import RunContext
from fabriccheck.planning.domain_level import DOMAIN_STEPS
from fabriccheck.planning.ecmp_groups import carve_ecmp_groups, is_ecmp
from fabriccheck.planning.ib_groups import carve_ib_groups, place_groups
from fabriccheck.planning.ladder_cover import LadderCoverage
from fabriccheck.planning.pairing import pair_key
from fabriccheck.planning.sweep_round import SweepMemory, plan_sweep_round
from fabriccheck.policy import GROUP_PROBES
from fabriccheck.run_history import RunHistory

#: the levels a sweep climbs when neither the spec nor ``--levels`` says
DEFAULT_LEVELS = (1, 2, 4, 8)
#: every level fabriccheck can plan
LEVELS = (1, 2, 4, 8)
#: pseudo-level of the gate's collective over all of the job's nodes
JOB = 0


@dataclass(frozen=True)
class Step:
    """One ladder round: ``level`` nodes per test, ``carving`` 1 or 2, what runs.

    ``pairs``: the per-rail pair probe (ib_write_bw/iperf3) carving; ``group``: a collective
    level (``level`` 1: each node alone; :data:`JOB`: all nodes in one group); ``with_solo``:
    the 1x tests run beside this round's pair tests.
    """

    level: int
    carving: int
    pairs: bool = False
    group: bool = False
    with_solo: bool = False
    #: an NVLink-domain round (:data:`~fabriccheck.planning.domain_level.DOMAIN_STEPS`)
    domain: str = ""

    @property
    def kind(self) -> RoundKind:
        return RoundKind.SCALE if self.group and self.level in (4, 8, JOB) else RoundKind.SWEEP

    @property
    def name(self) -> str:
        if self.domain:
            return f"domain {self.domain}" + (f" carving {self.carving}" if self.carving else "")
        what = "job" if self.level == JOB else f"{self.level}x"
        probe = "pairs" if self.pairs else "collective"
        return f"{what} {probe} carving {self.carving}" + (" + 1x" if self.with_solo else "")


@dataclass(frozen=True)
class LadderPlan:
    """The levels kept, the levels skipped (level -> reason) and the rounds to run."""

    levels: tuple[int, ...]
    skipped: dict[int, str]
    steps: tuple[Step, ...]
    #: what the rounds kept of the two carvings (a sweep's planner records it as it goes)
    coverage: LadderCoverage | None = field(default=None, compare=False)

    def info(self) -> dict:
        """For the run result (``ladder``): levels, skipped levels with reasons, rounds, and
        (sweeps) ``coverage``: per level, nodes that met two different groups, one or none,
        with the reason (:mod:`~fabriccheck.planning.ladder_cover`)."""
        out = {"levels": list(self.levels),
               "skipped": {str(k): v for k, v in sorted(self.skipped.items())},
               "steps": [s.name for s in self.steps]}
        if self.coverage is not None and self.coverage.nodes:
            out["coverage"] = self.coverage.info()
        return out


def parse_levels(text: str, source: str = "--levels") -> tuple[int, ...]:
    """``"1,2,4"`` -> ``(1, 2, 4)``; a :class:`ConfigError` naming what is wrong.

    >>> parse_levels("8, 1,2")
    (1, 2, 8)
    """
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"levels must be integers, got {text!r}", source=source,
                          hint="e.g. --levels 1,2 (any of 1, 2, 4, 8)") from None
    return check_levels(vals, source)


def check_levels(vals: Sequence[int], source: str = "levels") -> tuple[int, ...]:
    """Sorted, unique levels, each one of :data:`LEVELS` (a :class:`ConfigError` otherwise)."""
    bad = [v for v in vals if v not in LEVELS]
    if bad or not vals:
        raise ConfigError(f"unknown level {bad[0]!r}" if bad else "no levels given",
                          source=source, hint="levels are nodes per test: 1, 2, 4 or 8")
    return tuple(sorted(set(vals)))


def group_probe(ctx: RunContext) -> str | None:
    """The collective the ladder runs (the policy's scale probe when the spec defines it)."""
    have = {p.probe for p in ctx.spec.probes}
    for probe in (ctx.policy.scale_probe, *GROUP_PROBES):
        if probe in have:
            return probe
    return None


def plan_ladder(ctx: RunContext) -> LadderPlan:
    """The ladder of this run: requested levels, minus those the spec or hardware cannot run."""
    pol = ctx.policy
    want = pol.levels if pol.levels is not None else (
        DEFAULT_LEVELS if ctx.mode in ("sweep", "gate") else ())
    if not want:
        return LadderPlan((), {}, ())
    probe = group_probe(ctx)
    skipped: dict[int, str] = {}
    keep: list[int] = []
    n = len(ctx.nodes)
    for lv in want:
        why = _skip_reason(ctx, lv, probe, n)
        if why:
            skipped[lv] = why
        else:
            keep.append(lv)
    steps = _gate_steps(ctx, keep, probe) if ctx.mode == "gate" else _sweep_steps(ctx, keep)
    if steps and ctx.view.topology.domains and ctx.spec.gpus_per_node:  # docs/nvl72.md
        steps += [Step(0, c, domain=carve) for carve, c in DOMAIN_STEPS]
    return LadderPlan(tuple(keep), skipped, tuple(steps))


def _skip_reason(ctx: RunContext, level: int, probe: str | None, n: int) -> str:
    spec = ctx.spec
    if level == 1:
        if probe != "nccl" or not spec.gpus_per_node:
            return ("no GPUs in the spec (gpus_per_node 0): 1x tests the NVLink/PCIe path "
                    "inside a node with nccl-tests" if not spec.gpus_per_node else
                    "the spec has no nccl entry for the 1x test")
        if not any(p.probe == probe and p.group_size == 1 for p in spec.probes):
            return f"the spec has no 1-node {probe} bar"
        return ""
    if level == 2:
        return "" if ctx.policy.per_rail or probe else "the spec has no probe for pairs"
    if probe is None:
        return "the spec has no collective probe (nccl or allreduce-cpu)"
    if n < level:
        return f"only {n} node(s) in scope"
    return ""


def _sweep_steps(ctx: RunContext, levels: Sequence[int]) -> list[Step]:
    steps: list[Step] = []
    solo = 1 in levels
    if 2 in levels:
        if ctx.policy.per_rail:
            steps += [Step(2, 1, pairs=True, with_solo=solo), Step(2, 2, pairs=True)]
            solo = False
        steps += [Step(2, 1, group=True), Step(2, 2, group=True)] if group_probe(ctx) else []
    if solo:
        steps.insert(0, Step(1, 1, group=True))
    steps += [Step(lv, c, group=True) for lv in (4, 8) if lv in levels for c in (1, 2)]
    return steps


def _gate_steps(ctx: RunContext, levels: Sequence[int], probe: str | None) -> list[Step]:
    """1x beside one rail-pair round, then one collective over the job's nodes (its own
    shape); what failed is followed up after that (confirmations, 1x retests, untested NICs)."""
    steps: list[Step] = []
    solo = 1 in levels
    if 2 in levels and ctx.policy.per_rail:
        steps.append(Step(2, 1, pairs=True, with_solo=solo))
    elif 2 in levels:
        steps.append(Step(2, 1, group=True))
    elif solo:
        steps.append(Step(1, 1, group=True))
    if probe and len(ctx.nodes) > 2 and any(lv > 2 for lv in levels):
        steps.append(Step(JOB, 1, group=True))
    return steps


@dataclass
class LadderMemory:
    """What earlier ladder rounds chose: pair memory per probe, groups per level."""

    rails: SweepMemory
    pairs: SweepMemory
    #: level -> node -> the members of its group in earlier carvings
    met: dict[int, dict[str, set[str]]]

    @classmethod
    def new(cls, rails: SweepMemory) -> LadderMemory:
        return cls(rails, SweepMemory(), defaultdict(lambda: defaultdict(set)))


def plan_step(step: Step, ctx: RunContext, history: RunHistory, inf: Inference,
              memory: LadderMemory, tries: dict[str, int] | None = None,
              follow_up: Callable[[RoundBuilder], object] | None = None) -> list[Test]:
    """The tests of one ladder round.

    Collective rounds after the rail pairs first give the round to ``follow_up`` (the planner's
    follow-up steps: confirmations of suspects against known-good partners, 1x retests,
    localization, bisection), then carve the nodes left free: suspects are settled while the
    ladder climbs instead of after it (node/NIC verdicts by round 3). Rounds of 4x/8x groups,
    which leave blamed nodes out, also retest the 1x of nodes whose 1x failed (``tries``
    counts retests, as follow-up rounds do); so do the second rail-pair round's nodes (a 1x
    beside ib_write_bw), so a node-internal verdict comes by round 3."""
    probe = group_probe(ctx)
    tries = {} if tries is None else tries
    if step.pairs:
        b = ctx.builder(history)
        if step.with_solo:
            for n in ctx.active(inf):
                b.add_solo(n, probe)  # type: ignore[arg-type]
        else:  # 1x retests beside the rail pairs too: a node-internal verdict by round 3
            retest_solo(b, inf, probe, tries)
        return plan_sweep_round(ctx, step.carving, inf, history, memory.rails, builder=b)
    if step.level == 1:
        b = ctx.builder(history)
        for n in ctx.active(inf):
            b.add_solo(n, probe)  # type: ignore[arg-type]
        return b.tests
    b = ctx.builder(history)
    if follow_up is not None and step.level != JOB:
        follow_up(b)
    ecmp = step.level != JOB and is_ecmp(ctx.view)
    if step.level == 2 and not ecmp:
        pctx = replace(ctx, policy=ctx.policy.with_(pair_probe=probe))
        return plan_sweep_round(pctx, step.carving, inf, history, memory.pairs, builder=b)
    if step.level > 2:
        retest_solo(b, inf, probe, tries)
    active = [n for n in ctx.active(inf) if n not in inf.blamed_nodes
              and b.node_free(n) and n not in b.busy_gpus]
    if step.level == JOB:
        if len(active) >= 2:  # every node blamed or out of play: nothing left to run together
            b.add_group(sorted(active, key=lambda n: (ctx.view.pod(n), n)), "scale",
                        probe=probe)
        return b.tests
    if ecmp:  # unpinned collective flows: carved so that none can collide
        groups = carve_ecmp_groups(active, step.level, ctx.view, step.carving, ctx.policy.seed)
        _add_ecmp_groups(b, groups, ctx, probe, "sweep" if step.level == 2 else "scale")
        if step.level == 2:
            for t in b.tests:
                if t.purpose == "sweep" and len(t.nodes) == 2:
                    memory.pairs.avoid[None].add(pair_key(*t.nodes))
            return b.tests
    else:
        groups = carve_groups(active, step.level, ctx, step.carving, memory.met[step.level])
        _add_groups(b, groups, ctx, probe, step.carving)  # type: ignore[arg-type]
    for t in b.tests:
        if t.purpose != "scale":
            continue
        for n in t.nodes:
            memory.met[step.level][n].update(set(t.nodes) - {n})
    return b.tests


def _add_ecmp_groups(b: RoundBuilder, groups: list[tuple[str, ...]], ctx: RunContext,
                     probe: str | None, purpose: str) -> None:
    """Each group as a ring ordered by pod; a group refused because a follow-up of the round
    already crosses one of its leaves is re-cut inside each pod (rings that cross nothing)."""
    refused: list[str] = []
    for g in groups:
        ring = tuple(sorted(g, key=lambda n: (ctx.view.pod(n), n)))
        if b.add_group(ring, purpose, probe=probe) is None:
            refused += ring
    by_pod: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for n in refused:
        if b.node_free(n):
            by_pod[ctx.view.pod(n)].append(n)
    k = max((len(g) for g in groups), default=2)
    for members in by_pod.values():
        for i in range(0, len(members), k):
            if len(members[i:i + k]) >= 2:
                b.add_group(tuple(members[i:i + k]), purpose, probe=probe)


def carve_groups(nodes: Sequence[str], k: int, ctx: RunContext, carving: int,
                 met: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """Groups of ``k`` nodes spanning as many leaves (pods) as possible, members new to each
    other where possible (``met``: who shared a group with whom in earlier carvings), no two
    rings sharing a link (:func:`~fabriccheck.planning.ib_groups.carve_ib_groups`).

    Nodes are dealt round-robin over their leaves (a seeded leaf order per carving; nodes an
    earlier carving left out first), and each group is filled from the head of the deal with
    nodes whose ring still fits; a remainder of fewer than ``k`` nodes forms one smaller group
    (two nodes at least).
    """
    return carve_ib_groups(nodes, k, ctx.view, carving, met, ctx.policy.seed, ctx.nodes)


def _add_groups(b: RoundBuilder, groups: list[tuple[str, ...]], ctx: RunContext,
                probe: str, carving: int = 1) -> None:
    """Each group with its ring ordered by leaf (fewest crossings). The members of a ring
    that would share a link with another test of the round (a follow-up) are carved again
    among themselves, a ring at a time with the round's budget; what finds no room is left
    over, said in ``ladder.coverage`` (two rings on one link halve each other and look like a
    fault: never forced)."""
    place_groups(b, groups, ctx.view, ctx.nodes, probe, carving)
