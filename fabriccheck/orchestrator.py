"""The one loop: ask the planner for a round, run it, judge it, record it, attribute, repeat.

Modes (DESIGN.md): ``sweep`` (pairing rounds, confirmation, localization, bisection), ``gate``
(one round, a second only if something failed, hard budget) and ``bisect`` (after a timeout:
log suspects first, then pairs, then groups bisected down to the culprit). What each round
holds is the planner's business (:mod:`fabriccheck.planning.planner`); what the observations
mean is inference's (:mod:`fabriccheck.inference`). This module only loops.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence

from fabriccheck.errors import ConfigError
from fabriccheck.executors.base import Executor
from fabriccheck.inference.attribute import Inference, infer, link_name
from fabriccheck.inference.judge import judge_round
from fabriccheck.inference.verdicts import RunEnd, build_result
from fabriccheck.learn_paths import PathLearner
from fabriccheck.models import RunResult
from fabriccheck.planning.planner import (
    FINISHED,
    PAIR_SETUP_S,
    Planner,
    RoundPlan,
    RunContext,
)
from fabriccheck.policy import SweepPolicy
from fabriccheck.run_history import RoundRecord, RunHistory
from fabriccheck.specs import TestSpec
from fabriccheck.topology.model import Topology
from fabriccheck.topology.view import FabricView

ProgressFn = Callable[[dict], None]


def run(
    mode: str,
    nodes: Sequence[str],
    topology: Topology,
    spec: TestSpec,
    executor: Executor,
    policy: SweepPolicy | None = None,
    *,
    progress: ProgressFn | None = None,
    log_suspects: Sequence[str] = (),
) -> RunResult:
    """Run a sweep, gate or bisect over ``nodes`` and return the verdicts.

    Parameters
    ----------
    mode
        ``sweep`` | ``gate`` | ``bisect``.
    nodes
        The nodes to test (all must be in ``topology``).
    topology, spec, executor, policy
        The fabric, what healthy means, who runs the tests, how rounds are planned.
    progress
        Called after every round with a dict (``round``, ``kind``, ``tests``, ``purposes``,
        ``failed``, ``test_seconds``).
    log_suspects
        Bisect: hosts a job log named, tested first against nodes that are not named.

    Returns
    -------
    RunResult
    """
    t0 = time.monotonic()
    policy = policy or SweepPolicy(mode=mode)
    view = FabricView(topology)
    nodes = sorted(set(nodes))
    if not nodes:
        raise ConfigError("no nodes to test", source="--nodes", hint="give --nodes or a topology")
    view.check_nodes(nodes)
    scope = set(nodes)
    ctx = RunContext(mode, tuple(nodes), view, spec, policy,
                     tuple(n for n in log_suspects if n in scope))
    planner = Planner(ctx)
    learner = PathLearner.for_executor(view, executor, policy.seed)
    history, inf, end = _loop(ctx, planner, executor, progress, learner)
    result = build_result(mode, nodes, history, inf, view, policy, end)
    result.wall_seconds = time.monotonic() - t0
    if learner is not None and learner.stats.pinned_flows:
        result.extra["path_learning"] = learner.stats.to_json()
    return result


def _loop(ctx: RunContext, planner: Planner, executor: Executor, progress: ProgressFn | None,
          learner: PathLearner | None = None) -> tuple[RunHistory, Inference, RunEnd]:
    """Plan → budget check → execute → judge → record → attribute → absorb, until finished."""
    history, verdict_rounds = RunHistory(), {}
    inf = infer([], ctx.view)
    stop_reason, budget_hit = "", False
    while (plan := planner.next_round(history, inf)) is not FINISHED:
        assert isinstance(plan, RoundPlan)
        if not _budget_allows(ctx.policy, history, plan):
            budget_hit = True
            stop_reason = f"budget of {ctx.policy.budget_s:g} s test time used up"
            break
        history = history.with_round(_execute(ctx, executor, plan, history, learner))
        inf = infer(history.observations, ctx.view)
        _note_verdict_rounds(inf, history.round_count, verdict_rounds)
        planner.absorb(history, inf)
        if plan.kind == "follow-up":
            for n in planner.bisect.culprits:
                verdict_rounds.setdefault(n, history.round_count)
        if progress is not None:
            progress(_progress_line(history))
    inf = infer(history.observations, ctx.view)
    if not stop_reason and history.round_count >= ctx.policy.max_rounds and _open(inf, planner):
        stop_reason = f"max rounds ({ctx.policy.max_rounds}) reached with suspects open"
    end = RunEnd(stop_reason, budget_hit, verdict_rounds, dict(planner.bisect.culprits))
    return history, inf, end


def _budget_allows(policy: SweepPolicy, history: RunHistory, plan: RoundPlan) -> bool:
    if policy.budget_s is None:
        return True
    left = policy.budget_s - history.test_seconds
    need = min(t.timeout_s for t in plan.tests)
    return not (left <= 0 or need <= 0 or left < policy.duration_s + PAIR_SETUP_S)


def _execute(ctx: RunContext, executor: Executor, plan: RoundPlan, history: RunHistory,
             learner: PathLearner | None = None) -> RoundRecord:
    # pinned RoCE flows: learn their paths first (a traceroute on each flow's 5-tuple)
    tests = learner.learn(plan.tests, executor) if learner else plan.tests
    raws = executor.run_round(list(tests))
    obs, warnings = judge_round(tests, raws, ctx.spec, ctx.policy, history.observations,
                                ctx.view)
    links = tuple(frozenset().union(*(ctx.view.flow_links(f)[1] for f in o.test.flows))
                  for o in obs)
    return RoundRecord(history.round_count + 1, plan.kind, tuple(obs),
                       max((r.duration_s for r in raws), default=0.0), tuple(warnings), links)


def _note_verdict_rounds(inf: Inference, round_no: int, acc: dict[str, int]) -> None:
    """The round in which each bad / hung / unreachable verdict was first reached."""
    for d in (inf.bad_nodes, inf.bad_nics, inf.hung, inf.unreachable):
        for name in d:
            acc.setdefault(name, round_no)
    for g in inf.links:
        if g.bad:
            acc.setdefault(link_name(g.candidates[0]), round_no)


def _open(inf: Inference, planner: Planner) -> bool:
    return bool(inf.nic_suspects or inf.node_suspects or inf.hang_suspects
                or planner.open_work()
                or any(not g.bad and len(g.evidence) > 1 for g in inf.links))


def _progress_line(history: RunHistory) -> dict:
    last = history.rounds[-1]
    return {
        "round": last.number, "kind": str(last.kind), "tests": len(last.observations),
        "purposes": dict(Counter(str(o.test.purpose) for o in last.observations)),
        "failed": last.failed, "test_seconds": history.test_seconds,
    }
