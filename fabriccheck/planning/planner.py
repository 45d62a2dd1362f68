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
   bisection (so are the failing groups of the ladder's 4x/8x rounds);
4. **signals**: the signals of level 2, 4 and 8 over the nodes still in play;
5. **follow-up**: confirmations, 1x retests, retests of untested nodes, link localization and
   bisection steps (:mod:`~fabriccheck.planning.confirm`,
   :mod:`~fabriccheck.planning.link_probes`, :mod:`~fabriccheck.planning.roce_link_probes`,
   :mod:`~fabriccheck.planning.bisect_steps`), until nothing is left to plan or
   ``policy.max_rounds`` is reached.

The planner never runs a test: :meth:`Planner.next_round` returns a :class:`RoundPlan` (or
:data:`FINISHED`), the loop executes it, and :meth:`Planner.absorb` reads what came back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from fabriccheck.inference.state import Inference
from fabriccheck.models import FAIL, HANG, PASS, RoundKind, Test
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
    """The tests of the next round and what the round is for."""

    kind: RoundKind
    tests: tuple[Test, ...]


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
        #: node -> (its failing 4x/8x ladder group test ids, its 4x/8x group tests)
        self.at_scale: dict[str, tuple[list[str], int]] = {}
        #: node -> the failing bisection part it was alone in, awaiting its confirmation
        self.lone_fail: dict[str, str] = {}
        #: at-scale suspects whose lone failing part crossed spines (not convicted)
        self.unsettled: set[str] = set()
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
        return RoundPlan(plan.kind, (*local, *plan.tests))

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
            if history.anything_failed():
                plan_followup_round(self.ctx, history, inf, self.bisect, self.tries, builder=b,
                                    confirm_only=True)
        return plan

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
        return RoundPlan(RoundKind.FOLLOW_UP, tuple(tests)) if tests else None

    def _ladder_done(self) -> bool:
        """The ladder and the scale phase are behind (the run is in its follow-ups)."""
        return self.phase >= PHASES.index("signals")

    def _budget_left(self, history: RunHistory) -> float | None:
        """Test time the budget has left (None: no budget): no signal may wait longer."""
        return self.ctx.policy.budget_left(history.test_seconds)

    def absorb(self, history: RunHistory, inf: Inference) -> None:
        """Read the round just run: queue failing scale groups, advance bisection steps."""
        last = history.last
        if last is None:
            return
        step, self.last_step = self.last_step, None
        observations = [o for o in last.observations if o.test.probe != "signal"]
        if last.kind == RoundKind.SCALE and step is not None and step.level != JOB:
            self._note_ladder_groups(step, observations, inf)
        elif last.kind == RoundKind.SCALE:
            self._queue_scale_failures(observations, inf)
        elif last.kind == RoundKind.FOLLOW_UP:
            self._advance_bisect(history, inf)

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
        """Failing groups not explained by the pairs are queued for bisection."""
        for o in observations:
            if o.status in (FAIL, HANG) and not (set(o.test.nodes) & inf.blamed_nodes):
                self.bisect.tasks.append(BisectTask(o.test.nodes, len(o.test.nodes),
                                                    o.test.test_id))
                self.bisect.suspects.update(o.test.nodes)

    def _note_ladder_groups(self, step: Step, observations: Sequence, inf: Inference) -> None:
        """Count each node's 4x/8x group tests and failures; after the last 4x/8x round, nodes
        that failed in every group they were in (two at least: both carvings, different
        members over different paths; four with both levels) and that nothing else explains
        are bisected. A group failing in one carving only is a glitch, contention or its
        path's business (links)."""
        seen = self.at_scale
        roce = self.ctx.view.fabric == "roce"
        for o in observations:
            if len(o.test.nodes) < 2 or o.test.purpose != "scale" \
                    or o.status not in (PASS, FAIL, HANG):
                continue
            if roce and o.status != PASS and not self._pod_local(o.test.nodes):
                continue  # rings over ECMP spines may hash onto one link: says nothing
            for n in o.test.nodes:
                ids, k = seen.get(n, ([], 0))
                seen[n] = ([*ids, o.test.test_id] if o.status != PASS else ids, k + 1)
        if any(s.group and s.level in (4, 8) for s in self.ladder.steps[self.steps_done:]):
            return
        suspects = sorted(n for n, (ids, k) in seen.items()
                          if k >= 2 and len(ids) == k and n not in inf.blamed_nodes)
        if suspects:
            origin = seen[suspects[0]][0][0]
            self.bisect.tasks.append(BisectTask(tuple(suspects), step.level, origin))
            self.bisect.suspects.update(suspects)

    def _pod_local(self, nodes: Sequence[str]) -> bool:
        """True when a group's nodes hang off the same leaves (its ring crosses no spine)."""
        view = self.ctx.view
        return len({view.pod(n) for n in nodes}) == 1

    def open_suspects(self) -> list[str]:
        """At-scale suspects the ladder could not settle (see :meth:`_advance_bisect`)."""
        return sorted(self.unsettled - set(self.bisect.culprits))

    def _advance_bisect(self, history: RunHistory, inf: Inference) -> None:
        """A failing part is split again (or is the culprit); a passing one clears its nodes."""
        bs = self.bisect
        by_id = history.by_test_id
        for test_id, (task, half) in list(bs.halves.items()):
            o = by_id.get(test_id)
            if o is None:
                continue
            del bs.halves[test_id]
            if o.status not in (FAIL, HANG) or set(half) & inf.blamed_nodes:
                if o.status == PASS:
                    bs.suspects -= set(o.test.nodes)
                continue
            chain = [task.origin, test_id]
            if len(half) == 1 and self.ladder.steps and not self._pod_local(o.test.nodes):
                # its padded ring crossed spines: a slow link (or, on RoCE, two rings hashed
                # onto one) explains it as well as the node; it convicts nobody, and the node
                # stays an open suspect (``Planner.open_suspects``)
                self.unsettled.add(half[0])
                continue
            if len(half) == 1 and self.ladder.steps and half[0] not in self.lone_fail:
                # the ladder's suspects come from many groups, some failing by chance: one
                # failing padded part is confirmed by a second with other padding
                self.lone_fail[half[0]] = test_id
                bs.tasks.append(BisectTask(half, task.size, test_id, task.depth + 1,
                                           split=False))
            elif len(half) == 1:
                first = self.lone_fail.get(half[0])
                bs.culprits.setdefault(half[0], []).extend(
                    [task.origin, first, test_id] if first else chain)
            else:
                bs.tasks.append(BisectTask(half, task.size, test_id, task.depth + 1))
