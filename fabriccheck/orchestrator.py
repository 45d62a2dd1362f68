"""The one loop: ask the planner for a round, run it, judge it, record it, attribute, repeat.

Modes (docs/design.md): ``sweep`` (pairing rounds, confirmation, localization, bisection), ``gate``
(one round, a second only if something failed, hard budget) and ``bisect`` (after a timeout:
log suspects first, then pairs, then groups bisected down to the culprit). What each round
holds is the planner's business (:mod:`fabriccheck.planning.planner`); what the observations
mean is inference's (:mod:`fabriccheck.inference`). This module only loops.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence

from fabriccheck.costs import NO_METER, CostMeter
from fabriccheck.errors import ConfigError
from fabriccheck.executors.base import Executor
from fabriccheck.inference.bisection import BisectVerdicts, judge_bisection
from fabriccheck.inference.domain_judge import is_domain_test, judge_domain_round
from fabriccheck.inference.domain_result import add_domain_results
from fabriccheck.inference.judge import judge_round
from fabriccheck.inference.run_result import assemble_result, infer_run
from fabriccheck.inference.signals import SignalState, judge_signal_round
from fabriccheck.inference.state import Inference
from fabriccheck.inference.verdicts import RunEnd, bad_switches
from fabriccheck.inference.wording import link_name
from fabriccheck.learn_paths import PathLearner
from fabriccheck.models import Probe, RawResult, RunResult, Test
from fabriccheck.planning.context import PAIR_SETUP_S, RunContext
from fabriccheck.planning.planner import FINISHED, Planner, RoundPlan
from fabriccheck.planning.preflight import run_signals
from fabriccheck.policy import SweepPolicy
from fabriccheck.probes.node.catalogue import load_catalogue
from fabriccheck.run_history import RoundRecord, RunHistory
from fabriccheck.specs import TestSpec
from fabriccheck.topology.model import Topology
from fabriccheck.topology.view import FabricView

ProgressFn = Callable[[dict], None]
RoundFn = Callable[[RoundRecord], None]


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
    on_round: RoundFn | None = None,
    meter: CostMeter = NO_METER,
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
    on_round
        Called with every round as it is judged; default: the executor's own ``on_round`` if
        it has one (the history's recorder, :class:`~fabriccheck.store.recording.
        RecordingExecutor`: each round is written once, as the run judged it).
    meter
        Charged with each round's CPU per phase (plan, execute, parse, judge, signals, infer):
        :mod:`fabriccheck.costs`, ``bench/bench_cost.py``.

    Returns
    -------
    RunResult
    """
    t0 = time.monotonic()
    policy = policy or SweepPolicy(mode=mode)
    nodes = sorted(set(nodes))
    ctx, skipped, learner = _context(mode, nodes, topology, spec, executor, policy, log_suspects)
    view = ctx.view
    planner = Planner(ctx)
    on_round = on_round or getattr(executor, "on_round", None)
    history, inf, end, sig = _loop(ctx, planner, executor, progress, learner, on_round, meter)
    ladder = None
    if planner.ladder.steps or planner.ladder.skipped:
        ladder = {**planner.ladder.info(), "scale_suspects": list(end.scale_suspects)}
    result = assemble_result(mode, nodes, history, inf, view, policy, end, sig, skipped, ladder)
    add_domain_results(result, history, topology)  # NVLink domains (docs/nvl72.md)
    result.wall_seconds = time.monotonic() - t0
    if learner is not None and learner.stats.pinned_flows:
        result.extra["path_learning"] = learner.stats.to_json()
    return result


def _context(mode: str, nodes: list[str], topology: Topology, spec: TestSpec, executor: Executor,
             policy: SweepPolicy, log_suspects: Sequence[str],
             ) -> tuple[RunContext, tuple[str, ...], PathLearner | None]:
    """What every round of the run shares: the checked nodes, the node-local signals, the
    catalogue of node checks and the path learner (when the executor learns paths)."""
    view = FabricView(topology)
    if not nodes:
        raise ConfigError("no nodes to test", source="--nodes", hint="give --nodes or a topology")
    view.check_nodes(nodes)
    scope = set(nodes)
    signals, skipped = run_signals(spec, topology, nodes, policy)
    catalogue = load_catalogue(spec.node_checks, source=f"{spec.source or spec.name}:node_checks")
    learner = PathLearner.for_executor(view, executor, policy.seed)
    ctx = RunContext(mode, tuple(nodes), view, spec, policy,
                     tuple(n for n in log_suspects if n in scope), signals,
                     learns_paths=learner is not None, catalogue=catalogue)
    return ctx, skipped, learner


def _loop(ctx: RunContext, planner: Planner, executor: Executor, progress: ProgressFn | None,
          learner: PathLearner | None = None, on_round: RoundFn | None = None,
          meter: CostMeter = NO_METER,
          ) -> tuple[RunHistory, Inference, RunEnd, SignalState]:
    """Plan → budget check → execute → judge → record → attribute → absorb, until finished."""
    history, verdict_rounds, bis = RunHistory(), {}, BisectVerdicts()
    climbs = bool(planner.ladder.steps)  # a ladder run confirms a lone at-scale suspect
    with meter.timed("infer"):
        inf, sig = infer_run(history, ctx.view, ctx.signals, screen_links=ctx.screens_links)
    stop_reason, budget_hit = "", False
    while True:
        with meter.timed("plan"):
            plan = planner.next_round(history, inf, sig.retest)
        if plan is FINISHED:
            break
        assert isinstance(plan, RoundPlan)
        if not _budget_allows(ctx.policy, history, plan):
            budget_hit = True
            stop_reason = f"budget of {ctx.policy.budget_s:g} s test time used up"
            break
        history = history.with_round(_execute(ctx, executor, plan, history, learner, meter))
        if on_round is not None:
            on_round(history.rounds[-1])
        with meter.timed("infer"):
            inf, sig = infer_run(history, ctx.view, ctx.signals, sig,
                                 screen_links=ctx.screens_links)
            bis = judge_bisection(history, inf.blamed_nodes, ctx.view, plan.parts,
                                  ladder=climbs, last=bis)
            _note_verdict_rounds(inf, history.round_count, verdict_rounds, ctx.view)
        with meter.timed("plan"):
            planner.absorb(history, inf, bis)
        if plan.kind == "follow-up":
            for n in bis.culprits:
                verdict_rounds.setdefault(n, history.round_count)
        last = history.rounds[-1]
        meter.close_round(tests=len(last.observations), test_seconds=last.seconds)
        if progress is not None:
            progress(_progress_line(history))
    with meter.timed("infer"):
        inf, sig = infer_run(history, ctx.view, ctx.signals, sig, screen_links=ctx.screens_links)
    if (not stop_reason and history.traffic_rounds >= planner.round_limit
            and _open(inf, planner)):
        stop_reason = f"max rounds ({planner.round_limit}) reached with suspects open"
    end = RunEnd(stop_reason, budget_hit, verdict_rounds,
                 {n: list(ids) for n, ids in bis.culprits.items()}, tuple(bis.open_suspects()))
    return history, inf, end, sig


def _budget_allows(policy: SweepPolicy, history: RunHistory, plan: RoundPlan) -> bool:
    left = policy.budget_left(history.test_seconds)
    if left is None:
        return True
    need = min(t.timeout_s for t in plan.tests)
    return not (left <= 0 or need <= 0 or left < policy.duration_s + PAIR_SETUP_S)


def _execute(ctx: RunContext, executor: Executor, plan: RoundPlan, history: RunHistory,
             learner: PathLearner | None = None, meter: CostMeter = NO_METER) -> RoundRecord:
    # pinned RoCE flows: learn their paths first (a traceroute on each flow's 5-tuple)
    with meter.timed("execute"):
        planned = learner.learn(plan.tests, executor) if learner else plan.tests
        tests, raws, seconds = run_waves(executor, planned)
    obs, warnings = _judge(ctx, tests, raws, history, meter)
    return RoundRecord(history.round_count + 1, plan.kind, tuple(obs), seconds,
                       tuple(warnings))


def _judge(ctx: RunContext, tests: Sequence[Test], raws: Sequence[RawResult],
           history: RunHistory, meter: CostMeter) -> tuple[list, list[str]]:
    """The round's observations in test order: traffic judged against the spec and its peers,
    signal readings by their own judge, NVLink-domain tests apart (docs/nvl72.md)."""
    kinds = ["signal" if t.probe == Probe.SIGNAL else "domain" if is_domain_test(t) else "traffic"
             for t in tests]
    picked = {k: ([t for t, x in zip(tests, kinds, strict=True) if x == k],
                  [r for r, x in zip(raws, kinds, strict=True) if x == k]) for k in set(kinds)}
    traffic_t, traffic_r = picked.get("traffic", ([], []))
    obs, warnings = judge_round(traffic_t, traffic_r, ctx.spec, ctx.policy,
                                history.observations, ctx.view, meter)
    parts = {"traffic": iter(obs)}
    if "domain" in picked:
        with meter.timed("judge"):
            parts["domain"] = iter(judge_domain_round(*picked["domain"], ctx.spec,
                                                      history.domain_observations))
    if "signal" in picked:
        specs = {s.name: s for s in ctx.signals}
        with meter.timed("signals"):
            parts["signal"] = iter(judge_signal_round(
                *picked["signal"], specs, ctx.catalogue,
                {o.test.test_id: o for o in history.signal_observations}))
    return [next(parts[k]) for k in kinds], warnings


def run_waves(executor: Executor, tests: Sequence[Test]
              ) -> tuple[list[Test], list[RawResult], float]:
    """Run a round: its tests at once, then each later wave (repeated samples of the same
    NICs, ``params.wave``) after the one before. Returns the tests in the order run, their
    raw results and the round's test time (the waves' longest tests, summed)."""
    waves: dict[int, list[Test]] = {}
    for t in tests:
        waves.setdefault(t.params.wave or 0, []).append(t)
    order: list[Test] = []
    raws: list[RawResult] = []
    seconds = 0.0
    for w in sorted(waves):
        got = executor.run_round(waves[w])
        order += waves[w]
        raws += got
        seconds += max((r.duration_s for r in got), default=0.0)
    return order, raws, seconds


def _note_verdict_rounds(inf: Inference, round_no: int, acc: dict[str, int],
                         view: FabricView) -> None:
    """The round in which each bad / hung / unreachable verdict was first reached (a switch:
    the round its bad links first made it one switch verdict)."""
    for d in (inf.bad_nodes, inf.bad_nics, inf.hung, inf.unreachable):
        for name in d:
            acc.setdefault(name, round_no)
    for g in inf.links:
        if g.bad:
            acc.setdefault(link_name(g.candidates[0]), round_no)
    for sw in bad_switches(inf, view):
        acc.setdefault(sw, round_no)


def _open(inf: Inference, planner: Planner) -> bool:
    return bool(inf.nic_suspects or inf.node_suspects or inf.hang_suspects or inf.intra_suspects
                or planner.open_work()
                or any(not g.bad and len(g.evidence) > 1 for g in inf.links))


def _progress_line(history: RunHistory) -> dict:
    last = history.rounds[-1]
    return {
        "round": last.number, "kind": str(last.kind), "tests": len(last.observations),
        "purposes": dict(Counter(str(o.test.purpose) for o in last.observations)),
        "failed": last.failed, "test_seconds": history.test_seconds,
    }
