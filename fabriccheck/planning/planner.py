"""The run's planner: a small state machine that hands the loop one round at a time.

Phases, in order (docs/design.md "How faults are found"; :data:`PHASES`):

0. **preflight**: the level-1 signals (built-in node-local checks and user signals) ride along
   with the first round (they are node-local and take seconds: the round's time barely
   grows, and the round count of the traffic phases is unchanged); readings within noise of
   their bound are retested once, with the second round
   (:class:`~fabriccheck.planning.signal_rounds.SignalPhases`);
1. **ladder**: the levels of the run (:mod:`fabriccheck.planning.ladder`): 1x beside the first
   rail-pair round, the second rail-pair round, 2x/4x/8x collectives in two carvings each (the
   default of sweep and gate);
2. **sweep**: without a ladder (``levels=()``, bisect), ``policy.sweep_rounds`` pairing rounds,
   each node with a different partner over a different path (gate: the second only when the
   first found something);
3. **scale**: one collective round over groups of ``policy.scale_group_size`` (off by default;
   bisect runs it only when the pairs showed nothing), whose failing groups are queued for
   bisection (so are the ladder's at-scale suspects after its 4x/8x rounds);
4. **signals**: the signals of level 2, 4 and 8 over the nodes still in play;
5. **follow-up**: confirmations, 1x retests, retests of untested nodes, link localization and
   bisection steps (:mod:`~fabriccheck.planning.confirm`,
   :mod:`~fabriccheck.planning.link_probes`, :mod:`~fabriccheck.planning.roce_link_probes`,
   :mod:`~fabriccheck.planning.bisect_steps`), until nothing is left to plan or
   ``policy.max_rounds`` is reached.

The planner never runs a test: :meth:`Planner.next_round` returns a :class:`RoundPlan` (or
:data:`FINISHED`), the loop executes it, and :meth:`Planner.absorb` reads what came back.
Nor does it judge: which failing groups are worth bisecting, which nodes the ladder suspects at
scale and what each bisection part showed (culprit, cleared, split again, ...) are inference's
(:mod:`fabriccheck.inference.bisection`); the planner only queues and pads the parts to test.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from fabriccheck.inference.bisection import (
    BisectPart,
    BisectVerdicts,
    PartOutcome,
    at_scale_suspects,
    unexplained_failures,
)
from fabriccheck.inference.state import Inference
from fabriccheck.models import RoundKind, Test
from fabriccheck.planning.bisect_steps import BisectTask
from fabriccheck.planning.context import BisectState, RunContext
from fabriccheck.planning.domain_level import plan_domain_round
from fabriccheck.planning.followup_round import plan_followup_round
from fabriccheck.planning.ladder import (
    JOB,
    LadderMemory,
    LadderPlan,
    Step,
    plan_ladder,
    plan_step,
)
from fabriccheck.planning.ladder_cover import LadderCoverage
from fabriccheck.planning.signal_rounds import SignalPhases
from fabriccheck.planning.sweep_round import SweepMemory, plan_sweep_round
from fabriccheck.run_history import RunHistory


@dataclass(frozen=True)
class RoundPlan:
    """The tests of the next round and what the round is for (``parts``: what each of its
    bisection tests tests, for inference to judge)."""

    kind: RoundKind
    tests: tuple[Test, ...]
    parts: Mapping[str, BisectPart] = field(default_factory=dict)


class _Finished:
    def __repr__(self) -> str:
        return "FINISHED"


#: what :meth:`Planner.next_round` returns when nothing is left to plan
FINISHED = _Finished()

#: the planner's phases, in order (:attr:`Planner.phases` pairs each name with its step)
PHASES = ("ladder", "sweep", "scale", "signals", "follow_up")
Phase = Callable[[RunHistory, Inference], "RoundPlan | None"]


class Planner:
    """Plans a run round by round; keeps only planning memory (what it asked for)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.phase = 0
        self.ladder: LadderPlan = plan_ladder(ctx)
        if ctx.mode == "sweep" and self.ladder.steps:  # the promise of two carvings, kept?
            self.ladder = replace(self.ladder, coverage=LadderCoverage())
        self.steps_done = 0
        self.sweeps_done = 0
        self.scale_done = False
        self.last_step: Step | None = None
        #: the ladder's 4x/8x group rounds run so far (their numbers)
        self.group_rounds: list[int] = []
        self.memory = SweepMemory()
        self.ladder_memory = LadderMemory.new(self.memory)
        self.bisect = BisectState()
        self.tries: dict[str, int] = {}
        self.signals = SignalPhases(ctx.signals, ctx.spec.gpus_per_node,
                                    dict(ctx.policy.kernel_since))
        #: the phases in order (:data:`PHASES`): each plans a round or says it is done (None)
        self.phases: tuple[tuple[str, Phase], ...] = (
            ("ladder", self._ladder), ("sweep", self._sweep), ("scale", self._scale),
            ("signals", self._signals), ("follow_up", self._follow_up))
        assert tuple(name for name, _ in self.phases) == PHASES

    # ---- the state machine -------------------------------------------------------------------
    def next_round(self, history: RunHistory, inf: Inference,
                   signal_retests: Sequence = ()) -> RoundPlan | _Finished:
        """The next round to run, or :data:`FINISHED` (``signal_retests``: failing signal
        readings within noise of their bound, :attr:`SignalState.retest`)."""
        ctx = self.ctx
        local = self.signals.before_traffic(ctx.nodes, ctx.view, history.round_count + 1,
                                            signal_retests, self._budget_left(history))
        plan = self._traffic_round(history, inf)
        if not local and self._ladder_done() and not isinstance(plan, _Finished):
            # counters read again with the first round after the ladder: errors over its traffic
            local = self.signals.closing(ctx.active(inf), history.preflight_signal_tests,
                                         history.round_count + 1, self._budget_left(history))
        if not local:
            return plan
        if isinstance(plan, _Finished):
            return RoundPlan(RoundKind.PREFLIGHT, tuple(local))
        return replace(plan, tests=(*local, *plan.tests))

    def _traffic_round(self, history: RunHistory, inf: Inference) -> RoundPlan | _Finished:
        while self.phase < len(self.phases):
            plan = self.phases[self.phase][1](history, inf)
            if plan is not None:
                return plan
            self.phase += 1
        return FINISHED

    def _ladder(self, history: RunHistory, inf: Inference) -> RoundPlan | None:
        steps = self.ladder.steps
        while self.steps_done < len(steps):
            step = steps[self.steps_done]
            self.steps_done += 1
            tests = (plan_domain_round(step.domain, step.carving, self.ctx, history, inf)
                     if step.domain else  # NVLink domains (docs/nvl72.md)
                     plan_step(step, self.ctx, history, inf, self.ladder_memory, self.tries,
                               follow_up=self._follow_up_into(history, inf)))
            if self.ladder.coverage is not None and not step.domain:
                self.ladder.coverage.record(step.level, step.name, tests, self.ctx.nodes,
                                            self.ctx.active(inf), inf.blamed_nodes)
            self.last_step = step
            if tests:
                return RoundPlan(step.kind, tuple(tests))
        return None

    def _sweep(self, history: RunHistory, inf: Inference) -> RoundPlan | None:
        pol = self.ctx.policy
        if self.ladder.steps or self.ctx.policy.levels:
            return None  # the ladder ran the pairing rounds
        while self.sweeps_done < pol.sweep_rounds:
            self.sweeps_done += 1
            if (self.sweeps_done > 1 and pol.second_round_only_on_failure
                    and not history.anything_failed()):
                return None
            tests = plan_sweep_round(self.ctx, self.sweeps_done, inf, history, self.memory)
            if tests:
                return RoundPlan(RoundKind.SWEEP, tuple(tests))
            return None  # nobody left to pair: on to the next phase
        return None

    def _scale(self, history: RunHistory, inf: Inference) -> RoundPlan | None:
        if self.scale_done:
            return None
        self.scale_done = True  # one round at most
        tests = self._scale_round(history, inf)
        return RoundPlan(RoundKind.SCALE, tuple(tests)) if tests else None

    def _signals(self, history: RunHistory, inf: Inference) -> RoundPlan | None:
        tests = self.signals.after_traffic(self.ctx.active(inf), self.ctx.view,
                                           history.round_count + 1, self._budget_left(history))
        return RoundPlan(RoundKind.SIGNALS, tuple(tests)) if tests else None

    def _follow_up_into(self, history: RunHistory, inf: Inference):
        """Follow-up steps planned into a ladder round's builder (once suspects exist)."""
        def plan(b) -> None:
            if history.anything_failed() or self._pairs_done():
                plan_followup_round(self.ctx, history, inf, self.bisect, self.tries, builder=b,
                                    confirm_only=True, pairs_done=self._pairs_done())
        return plan

    def _pairs_done(self) -> bool:
        """While a ladder round is planned: the ladder's pair rounds are behind, this one
        included (the pair tests the link screen counts are in:
        :mod:`fabriccheck.planning.link_topup` may start)."""
        return not any(s.pairs for s in self.ladder.steps[max(0, self.steps_done - 1):])

    @property
    def round_limit(self) -> int:
        """``policy.max_rounds``, plus the ladder's rounds beyond the ``sweep_rounds`` pairing
        rounds it stands for (the ladder does not eat the follow-up rounds)."""
        pol = self.ctx.policy
        return pol.max_rounds + max(0, len(self.ladder.steps) - pol.sweep_rounds)

    def _follow_up(self, history: RunHistory, inf: Inference) -> RoundPlan | None:
        if history.traffic_rounds >= self.round_limit:
            return None
        tests = plan_followup_round(self.ctx, history, inf, self.bisect, self.tries)
        if not tests:
            return None
        ids = {t.test_id for t in tests}
        parts = {tid: BisectPart(half, task.origin)
                 for tid, (task, half) in self.bisect.halves.items() if tid in ids}
        return RoundPlan(RoundKind.FOLLOW_UP, tuple(tests), parts)

    def _ladder_done(self) -> bool:
        """The ladder and the scale phase are behind (the run is in its follow-ups)."""
        return self.phase >= PHASES.index("signals")

    def _budget_left(self, history: RunHistory) -> float | None:
        """Test time the budget has left (None: no budget): no signal may wait longer."""
        return self.ctx.policy.budget_left(history.test_seconds)

    def absorb(self, history: RunHistory, inf: Inference, verdicts: BisectVerdicts) -> None:
        """Read the round just run: queue failing scale groups and the ladder's at-scale
        suspects, advance bisection steps by what inference made of them (``verdicts``:
        :func:`~fabriccheck.inference.bisection.judge_bisection` after this round)."""
        last = history.last
        if last is None:
            return
        step, self.last_step = self.last_step, None
        observations = [o for o in last.observations if o.test.probe != "signal"]
        if last.kind == RoundKind.SCALE and step is not None and step.level != JOB:
            self._note_ladder_groups(step, history, inf)
        elif last.kind == RoundKind.SCALE:
            self._queue_scale_failures(observations, inf)
        elif last.kind == RoundKind.FOLLOW_UP:
            self._advance_bisect(history, verdicts)
        self.bisect.convicted = set(verdicts.culprits)

    def open_work(self) -> bool:
        """True while bisection steps are still queued."""
        return bool(self.bisect.tasks)

    # ---- scale and bisection -----------------------------------------------------------------
    def _scale_round(self, history: RunHistory, inf: Inference) -> list[Test]:
        """One collective round over groups of ``scale_group_size`` (bisect: only when the
        pairs showed nothing)."""
        ctx, k = self.ctx, self.ctx.policy.scale_group_size
        if not k or (ctx.mode == "bisect" and history.anything_failed()):
            return []
        active = [n for n in ctx.active(inf) if n not in inf.blamed_nodes]
        active.sort(key=lambda n: (ctx.view.pod(n), n))
        b = ctx.builder(history)
        for i in range(0, len(active) - k + 1, k):
            b.add_group(active[i:i + k], "scale")
        return b.tests

    def _queue_scale_failures(self, observations: Sequence, inf: Inference) -> None:
        """Failing groups not explained by the pairs (inference says which) are queued for
        bisection."""
        for t in unexplained_failures(observations, inf.blamed_nodes):
            self.bisect.tasks.append(BisectTask(t.nodes, len(t.nodes), t.test_id))
            self.bisect.suspects.update(t.nodes)

    def _note_ladder_groups(self, step: Step, history: RunHistory, inf: Inference) -> None:
        """Note a 4x/8x round of the ladder; after the last, the nodes inference suspects at
        scale (:func:`~fabriccheck.inference.bisection.at_scale_suspects`) are bisected."""
        self.group_rounds.append(history.round_count)
        if any(s.group and s.level in (4, 8) for s in self.ladder.steps[self.steps_done:]):
            return
        suspects, origin = at_scale_suspects(history, self.group_rounds, self.ctx.view,
                                             inf.blamed_nodes)
        if suspects:
            self.bisect.tasks.append(BisectTask(tuple(suspects), step.level, origin))
            self.bisect.suspects.update(suspects)

    def _advance_bisect(self, history: RunHistory, verdicts: BisectVerdicts) -> None:
        """A failing part is split again (or confirmed with other padding); a passing one
        clears its nodes; culprits and unsettled parts end their branch (inference judged
        each part: ``verdicts.outcomes``)."""
        bs = self.bisect
        for test_id, (task, half) in list(bs.halves.items()):
            outcome = verdicts.outcomes.get(test_id)
            if outcome is None:
                continue
            del bs.halves[test_id]
            if outcome is PartOutcome.CLEARED:
                bs.suspects -= set(history.by_test_id[test_id].test.nodes)
            elif outcome is PartOutcome.SPLIT:
                bs.tasks.append(BisectTask(half, task.size, test_id, task.depth + 1))
            elif outcome is PartOutcome.CONFIRM:
                bs.tasks.append(BisectTask(half, task.size, test_id, task.depth + 1,
                                           split=False))
