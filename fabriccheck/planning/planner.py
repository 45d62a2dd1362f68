"""The run's planner: a small state machine that hands the loop one round at a time.

Phases, in order (DESIGN.md "How faults are found"):

0. **preflight**: the level-1 signals (built-in node-local checks and user signals) ride along
   with the first round (they are node-local and take seconds: the round's time barely
   grows, and the round count of the traffic phases is unchanged); readings within noise of
   their bound are retested once, with the second round
   (:class:`~fabriccheck.planning.signal_rounds.SignalPhases`);
1. **sweep**: ``policy.sweep_rounds`` pairing rounds, each node with a different partner over
   a different path (gate: the second only when the first found something);
2. **scale**: one collective round over groups of ``policy.scale_group_size`` (off by default;
   bisect runs it only when the pairs showed nothing), whose failing groups are queued for
   bisection;
   then the **signals** of level 2, 4 and 8 over the nodes still in play;
3. **follow-up**: confirmations, retests of untested nodes, link localization and bisection
   steps (:mod:`fabriccheck.planning.followup`), until nothing is left to plan or
   ``policy.max_rounds`` is reached.

The planner never runs a test: :meth:`Planner.next_round` returns a :class:`RoundPlan` (or
:data:`FINISHED`), the loop executes it, and :meth:`Planner.absorb` reads what came back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fabriccheck.inference.attribute import Inference
from fabriccheck.models import FAIL, HANG, PASS, RoundKind, Test
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.followup import BisectTask
from fabriccheck.planning.followup_round import plan_followup_round
from fabriccheck.planning.signal_rounds import SignalPhases
from fabriccheck.planning.sweep_round import SweepMemory, plan_sweep_round
from fabriccheck.policy import SweepPolicy
from fabriccheck.run_history import RunHistory
from fabriccheck.specs import SignalSpec, TestSpec
from fabriccheck.topology.view import FabricView

#: setup time a pair test needs on top of its duration (perftest/iperf3 start, connect)
PAIR_SETUP_S = 2.0


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


@dataclass
class BisectState:
    """Bisection bookkeeping: parts still to narrow, parts in flight, culprits found."""

    tasks: list[BisectTask] = field(default_factory=list)
    halves: dict[str, tuple[BisectTask, tuple[str, ...]]] = field(default_factory=dict)
    #: node -> the chain of test ids that convicted it (fails only at scale)
    culprits: dict[str, list[str]] = field(default_factory=dict)
    #: nodes of failing group tests not yet cleared by a passing group (never padding)
    suspects: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class RunContext:
    """What every planning step reads: the run's scope, fabric, spec and policy."""

    mode: str
    nodes: tuple[str, ...]
    view: FabricView
    spec: TestSpec
    policy: SweepPolicy
    log_suspects: tuple[str, ...] = ()
    #: every signal the run reads (built-in preflight, the spec's, --signals files)
    signals: tuple[SignalSpec, ...] = ()

    def builder(self, history: RunHistory) -> RoundBuilder:
        """A builder for the next round, its timeout cut to what the budget has left."""
        pol = self.policy
        timeout = float(pol.timeout_s or min(self.spec.timeout_s,
                                             3 * pol.duration_s + 15.0 + PAIR_SETUP_S))
        if pol.budget_s is not None:
            timeout = min(timeout, pol.budget_s - history.test_seconds)
        return RoundBuilder(history.round_count + 1, self.view, self.spec,
                            pol.with_(timeout_s=timeout))

    def active(self, inf: Inference) -> list[str]:
        """Nodes still worth testing (not bad, hung or unreachable)."""
        out = set(inf.bad_nodes) | set(inf.hung) | set(inf.unreachable)
        return [n for n in self.nodes if n not in out]


class Planner:
    """Plans a run round by round; keeps only planning memory (what it asked for)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.sweeps_done = 0
        self.scale_done = False
        self.memory = SweepMemory()
        self.bisect = BisectState()
        self.tries: dict[str, int] = {}
        self.signals = SignalPhases(ctx.signals, ctx.spec.gpus_per_node)

    # ---- the state machine -------------------------------------------------------------------
    def next_round(self, history: RunHistory, inf: Inference,
                   signal_retests: Sequence = ()) -> RoundPlan | _Finished:
        """The next round to run, or :data:`FINISHED` (``signal_retests``: failing signal
        readings within noise of their bound, :attr:`SignalState.retest`)."""
        ctx = self.ctx
        local = self.signals.before_traffic(ctx.nodes, ctx.view, history.round_count + 1,
                                            signal_retests, self._budget_left(history))
        plan = self._traffic_round(history, inf)
        if not local:
            return plan
        if isinstance(plan, _Finished):
            return RoundPlan(RoundKind.PREFLIGHT, tuple(local))
        return RoundPlan(plan.kind, (*local, *plan.tests))

    def _traffic_round(self, history: RunHistory, inf: Inference) -> RoundPlan | _Finished:
        pol, ctx, next_no = self.ctx.policy, self.ctx, history.round_count + 1
        while self.sweeps_done < pol.sweep_rounds:
            self.sweeps_done += 1
            if (self.sweeps_done > 1 and pol.second_round_only_on_failure
                    and not history.anything_failed()):
                break
            tests = plan_sweep_round(self.ctx, self.sweeps_done, inf, history, self.memory)
            if tests:
                return RoundPlan(RoundKind.SWEEP, tuple(tests))
            break  # nobody left to pair: on to the next phase
        self.sweeps_done = pol.sweep_rounds
        if not self.scale_done:
            self.scale_done = True
            tests = self._scale_round(history, inf)
            if tests:
                return RoundPlan(RoundKind.SCALE, tuple(tests))
        tests = self.signals.after_traffic(ctx.active(inf), ctx.view, next_no,
                                           self._budget_left(history))
        if tests:
            return RoundPlan(RoundKind.SIGNALS, tuple(tests))
        if history.traffic_rounds >= pol.max_rounds:
            return FINISHED
        tests = plan_followup_round(self.ctx, history, inf, self.bisect, self.tries)
        return RoundPlan(RoundKind.FOLLOW_UP, tuple(tests)) if tests else FINISHED

    def _budget_left(self, history: RunHistory) -> float | None:
        """Test time the budget has left (None: no budget): no signal may wait longer."""
        budget = self.ctx.policy.budget_s
        return None if budget is None else max(0.0, budget - history.test_seconds)

    def absorb(self, history: RunHistory, inf: Inference) -> None:
        """Read the round just run: queue failing scale groups, advance bisection steps."""
        last = history.last
        if last is None:
            return
        if last.kind == RoundKind.SCALE:
            self._queue_scale_failures([o for o in last.observations
                                        if o.test.probe != "signal"], inf)
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
            if len(half) == 1:
                bs.culprits.setdefault(half[0], []).extend(chain)
            else:
                bs.tasks.append(BisectTask(half, task.size, test_id, task.depth + 1))
