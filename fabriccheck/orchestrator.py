"""The one loop: plan a round → execute it → parse → judge → attribute → plan the next, until done.

Modes (DESIGN.md): ``sweep`` (pairing rounds, confirmation, localization, bisection), ``gate``
(one round, a second only if something failed, hard budget) and ``bisect`` (after a timeout:
log suspects first, then pairs, then groups bisected down to the culprit).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from fabriccheck.errors import ConfigError
from fabriccheck.executors.base import Executor
from fabriccheck.inference.attribute import Inference, infer
from fabriccheck.inference.evaluate import evaluate, evaluate_peers
from fabriccheck.inference.verdicts import build_result
from fabriccheck.models import FAIL, HANG, PASS, Observation, RunResult, Test, nic_node
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.followup import (
    BisectTask,
    GoodPool,
    plan_bisect,
    plan_link_probes,
    plan_nic_confirm,
    plan_node_confirm,
    plan_roce_batch,
    plan_roce_sampling,
)
from fabriccheck.planning.pairing import pair_key, plan_pairs, plan_rail_pairs
from fabriccheck.planning.view import FabricView
from fabriccheck.policy import SweepPolicy
from fabriccheck.probes.detect import parse_raw
from fabriccheck.specs import TestSpec
from fabriccheck.topology.model import Topology

ProgressFn = Callable[[dict], None]
#: setup time a pair test needs on top of its duration (perftest/iperf3 start, connect)
PAIR_SETUP_S = 2.0


@dataclass
class RunState:
    """Everything one run has learned so far (internal to :func:`run`)."""

    observations: list[Observation] = field(default_factory=list)
    rounds: int = 0
    tests: int = 0
    test_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    avoid: dict[int | None, set[frozenset[str]]] = field(default_factory=lambda: defaultdict(set))
    prev_cross: dict[int | None, frozenset[str]] = field(default_factory=dict)
    #: nodes that received a cross-leaf sweep flow so far (per rail): their downlink was crossed
    served: dict[int | None, frozenset[str]] = field(default_factory=dict)
    bisect: list[BisectTask] = field(default_factory=list)
    bisect_halves: dict[str, tuple[BisectTask, tuple[str, ...]]] = field(default_factory=dict)
    scale_culprits: dict[str, list[str]] = field(default_factory=dict)
    #: nodes of failing group tests not yet cleared by a passing group (never padding)
    scale_suspects: set[str] = field(default_factory=set)
    #: the round in which each bad / hung / unreachable verdict was first reached
    verdict_rounds: dict[str, int] = field(default_factory=dict)
    tries: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    budget_hit: bool = False
    stop_reason: str = ""


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
        Called after every round with a dict (``round``, ``tests``, ``test_seconds``, ``found``).
    log_suspects
        Bisect: hosts a job log named, tested first against nodes that are not named.

    Returns
    -------
    RunResult
    """
    policy = policy or SweepPolicy(mode=mode)
    view = FabricView(topology)
    nodes = sorted(set(nodes))
    if not nodes:
        raise ConfigError("no nodes to test", source="--nodes", hint="give --nodes or a topology")
    view.check_nodes(nodes)
    st = RunState()
    t0 = time.monotonic()
    loop = _Loop(mode, nodes, view, spec, executor, policy, st, progress, tuple(log_suspects))
    inf = loop.go()
    result = build_result(mode, nodes, st, inf, view, policy)
    result.wall_seconds = time.monotonic() - t0
    return result


class _Loop:
    def __init__(self, mode, nodes, view, spec, executor, policy, st, progress, log_suspects):
        self.mode, self.nodes, self.view, self.spec = mode, nodes, view, spec
        self.executor, self.policy, self.st, self.progress = executor, policy, st, progress
        self.log_suspects = [n for n in log_suspects if n in set(nodes)]

    # ---- the loop ----------------------------------------------------------------------------
    def go(self) -> Inference:
        st, policy = self.st, self.policy
        inf = infer([], self.view)
        for k in range(1, policy.sweep_rounds + 1):
            if k > 1 and policy.second_round_only_on_failure and not _anything_failed(st):
                break
            tests = self._sweep_round(k, inf)
            if not tests or not self._execute(tests, "sweep"):
                break
            inf = self._infer()
        at_scale = policy.scale_group_size and (self.mode != "bisect" or not _anything_failed(st))
        if at_scale and not self._stopped():  # bisect: groups only when pairs show nothing
            inf = self._scale_round(inf)
        while st.rounds < policy.max_rounds and not self._stopped():
            tests = self._followup_round(inf)
            if not tests or not self._execute(tests, "follow-up"):
                break
            inf = self._infer()
            self._advance_bisect(inf)
            for n in st.scale_culprits:
                st.verdict_rounds.setdefault(n, st.rounds)
        inf = infer(st.observations, self.view)
        open_items = (inf.nic_suspects or inf.node_suspects or inf.hang_suspects or st.bisect
                      or any(not g.bad and len(g.evidence) > 1 for g in inf.links))
        if st.rounds >= policy.max_rounds and open_items and not st.stop_reason:
            st.stop_reason = f"max rounds ({policy.max_rounds}) reached with suspects open"
        return inf

    def _infer(self) -> Inference:
        inf = infer(self.st.observations, self.view)
        for d in (inf.bad_nodes, inf.bad_nics, inf.hung, inf.unreachable):
            for name in d:
                self.st.verdict_rounds.setdefault(name, self.st.rounds)
        for g in inf.links:
            if g.bad:
                self.st.verdict_rounds.setdefault(" -- ".join(g.candidates[0]), self.st.rounds)
        return inf

    def _stopped(self) -> bool:
        return self.st.budget_hit

    def _active(self, inf: Inference) -> list[str]:
        out = set(inf.bad_nodes) | set(inf.hung) | set(inf.unreachable)
        return [n for n in self.nodes if n not in out]

    def _builder(self) -> RoundBuilder:
        pol = self.policy
        timeout = float(pol.timeout_s or min(self.spec.timeout_s,
                                             3 * pol.duration_s + 15.0 + PAIR_SETUP_S))
        if pol.budget_s is not None:
            timeout = min(timeout, pol.budget_s - self.st.test_seconds)
        return RoundBuilder(self.st.rounds + 1, self.view, self.spec, pol.with_(timeout_s=timeout))

    # ---- rounds ------------------------------------------------------------------------------
    def _sweep_round(self, k: int, inf: Inference) -> list[Test]:
        st, pol, view = self.st, self.policy, self.view
        b = self._builder()
        active = self._active(inf)
        if self.mode == "bisect" and k == 1 and self.log_suspects:
            self._log_first(b, active)
        if pol.per_rail:
            plans = plan_rail_pairs(
                [n for n in active if b.node_free(n)], view, round_no=k, seed=pol.seed,
                avoid=st.avoid, prev_cross=st.prev_cross, roce_cross_share=pol.roce_cross_share,
                prev_served=st.served)
            for rail, plan in plans.items():
                for c, s in plan.pairs:
                    b.add_flow(c, s, rail, "sweep", check_links=False)  # planned link-disjoint
                st.prev_cross[rail] = plan.cross
                st.served[rail] = st.served.get(rail, frozenset()) | plan.served
        else:
            plan = plan_pairs([n for n in active if b.node_free(n)], view, round_no=k,
                              seed=pol.seed, avoid=st.avoid[None],
                              prev_cross=st.prev_cross.get(None, ()),
                              roce_cross_share=pol.roce_cross_share,
                              prev_served=st.served.get(None, ()))
            for a, c in plan.pairs:
                b.add_group((a, c), "sweep", probe=pol.pair_probe)
            st.prev_cross[None] = plan.cross
            st.served[None] = st.served.get(None, frozenset()) | plan.served
        for t in b.tests:
            rail = t.params.get("rails", (None,))[0] if pol.per_rail else None
            st.avoid[rail].add(pair_key(*t.nodes[:2]))
        return b.tests

    def _log_first(self, b: RoundBuilder, active: list[str]) -> None:
        """Bisect mode: hosts named by the job log meet hosts it did not name, every rail."""
        named = [n for n in self.log_suspects if n in active]
        others = [n for n in active if n not in set(named)]
        for s, partner in zip(named, others, strict=False):
            b.add_pair(s, partner, "sweep")

    def _scale_round(self, inf: Inference) -> Inference:
        """One collective round over groups of ``scale_group_size``; failing groups not explained
        by the pairs are queued for bisection."""
        st, k = self.st, self.policy.scale_group_size
        active = [n for n in self._active(inf) if n not in inf.blamed_nodes]
        active.sort(key=lambda n: (self.view.pod(n), n))
        b = self._builder()
        for i in range(0, len(active) - k + 1, k):
            b.add_group(active[i:i + k], "scale")
        if not b.tests or not self._execute(b.tests, "scale"):
            return inf
        inf = self._infer()
        for o in st.observations[-len(b.tests):]:
            if o.status in (FAIL, HANG) and not (set(o.test.nodes) & inf.blamed_nodes):
                st.bisect.append(BisectTask(o.test.nodes, len(o.test.nodes), o.test.test_id))
                st.scale_suspects.update(o.test.nodes)
        return inf

    def _followup_round(self, inf: Inference) -> list[Test]:
        st, pol = self.st, self.policy
        b = self._builder()
        blamed = inf.blamed_nodes
        pool = GoodPool(inf.known_good() - set(st.scale_culprits) - st.scale_suspects, self.view,
                        pol.seed, b.round_no)
        local = self._active(inf)
        # strongest suspects first: partners on their leaf are few
        todo = sorted([*inf.nic_suspects.values(), *inf.node_suspects.values()],
                      key=lambda v: (-len(v.evidence), v.name))
        met: dict[str, set[str]] = defaultdict(set)  # partners each node was tested with
        for o in st.observations:
            for n in o.test.nodes:
                met[n].update(o.test.nodes)
        todo = [v for v in todo if st.tries[v.name] < 2]
        made_for: set[str] = set()
        for way in ("client", "server"):  # every suspect's client test first: partners shared
            for v in todo:
                seen = frozenset(met[v.name.split("/", 1)[0]])
                if v.kind == "nic":
                    made = plan_nic_confirm(v.name, b, pool, inf.good_nics, local, met=seen,
                                            directions=(way,))
                else:
                    made = plan_node_confirm(v.name, b, pool, inf.good_nics, local=local,
                                             met=seen, directions=(way,))
                if made:
                    made_for.add(v.name)
        for name in made_for:
            st.tries[name] += 1
        for nic in self._shadowed_nics(inf):  # met only culprits so far: test it again
            if st.tries[nic] < 2 and plan_nic_confirm(nic, b, pool, inf.good_nics, local,
                                                      met=frozenset(met[nic_node(nic)])):
                st.tries[nic] += 1
        for node in sorted(inf.hang_suspects):
            if st.tries[node] < 2 and plan_node_confirm(node, b, pool, inf.good_nics, hang=True):
                st.tries[node] += 1
        if pol.localize and self.view.fabric == "infiniband":
            # one-candidate sets first: probes from fresh pairs make them exact (twice at most)
            for g in sorted(inf.links, key=lambda g: (len(g.candidates), -len(g.evidence))):
                key = "link:" + "|".join(f"{a}-{c}" for a, c in g.candidates)
                if g.bad or st.tries[key] >= 2:
                    continue
                flows = [(tid, s, d) for tid, (s, d) in zip(g.evidence, g.flows, strict=False)]
                if plan_link_probes(flows, g.candidates, b, inf.good_nics, seed=pol.seed,
                                    retest=st.tries[key] == 0):
                    st.tries[key] += 1
        elif pol.localize:
            self._roce_localize(inf, b)
        # deeper steps first: a part that failed narrows the search more than parts still
        # waiting for room (those may be moot once the culprit is found)
        for task in sorted(st.bisect, key=lambda t: -t.depth):
            planned, left = plan_bisect(task, b, pool)
            for test_id, half in planned:
                st.bisect_halves[test_id] = (task, half)
            if planned:
                st.bisect.remove(task)
                st.bisect += [replace(task, suspects=p, split=False) for p in left]
        # nodes nothing has judged yet (odd counts, a partner that was unreachable)
        untested = [n for n in self._active(inf) if n not in inf.completed and n not in blamed]
        for n in untested:
            if st.tries["untested:" + n] >= 2:
                continue
            partner = pool.take_nodes(1, b, near=[n])
            if partner and b.add_pair(n, partner[0], "sweep"):
                st.tries["untested:" + n] += 1
            elif not partner and self._solo_probe() and b.add_group((n,), "sweep",
                                                                    probe=self._solo_probe()):
                st.tries["untested:" + n] += 2  # nobody to pair with: its intra-node test
        return b.tests

    def _roce_localize(self, inf: Inference, b: RoundBuilder, max_pairs: int = 16) -> None:
        """RoCE: batches of fresh flows between the leaf pairs of unexplained cross-leaf
        failures (a link group short of two failures) and of failures set aside as possible
        contention, until two failures show (a candidate set), ``roce_probe_rounds`` at most."""
        st, pol = self.st, self.policy
        att = self.view.topology.attachment
        by_id = {o.test.test_id: o for o in st.observations}
        want: dict[tuple[str, str, int], int] = {}  # (leaf, leaf, rail) -> priority
        seen: dict[tuple[str, str, int], int] = defaultdict(int)  # unexplained failures
        for g in inf.links:
            if g.bad:
                continue
            for src, dst in g.flows:
                key3 = (*sorted((att[src], att[dst])), self.view.topology.nics[src].rail)
                seen[key3] += 1  # type: ignore[index]
                if len(g.evidence) < 2:
                    want.setdefault(key3, 0)  # type: ignore[arg-type]
        for tid in (inf.ambiguous if self.policy.roce_probe_contention else ()):
            o = by_id.get(tid)
            for f in (o.test.flows if o else ()):
                if att.get(f.src) != att.get(f.dst):
                    key = (*sorted((att[f.src], att[f.dst])), self.view.topology.nics[f.src].rail)
                    want.setdefault(key, 1)  # type: ignore[arg-type]
        if pol.roce_sample_flows and st.tries["roce:sampled"] < pol.roce_sample_rounds:
            st.tries["roce:sampled"] += 1  # every leaf pair of a matching, every rail
            plan_roce_sampling(b, inf.good_nics, seed=pol.seed, per_way=pol.roce_sample_flows)
        todo = sorted(want, key=lambda k: (want[k], k))
        for la, lb, rail in todo[:max_pairs]:
            key = f"roce:{la}|{lb}"
            # another batch only while the last one showed a new unexplained failure
            grew = seen[(la, lb, rail)] > st.tries[key + ":seen"]
            if st.tries[key] >= pol.roce_probe_rounds or (st.tries[key] and not grew):
                continue
            if plan_roce_batch(la, lb, rail, b, inf.good_nics, seed=pol.seed,
                               per_way=pol.roce_probe_flows):
                st.tries[key] += 1
                st.tries[key + ":seen"] = seen[(la, lb, rail)]

    def _shadowed_nics(self, inf: Inference) -> list[str]:
        """NICs of healthy-looking nodes that never passed and whose every test ran with a
        node now blamed (bad, hung, unreachable): their own state is still unknown."""
        culprits = set(inf.bad_nodes) | set(inf.hung) | set(inf.unreachable)
        blamed = inf.blamed_nodes
        seen: dict[str, list[bool]] = defaultdict(list)  # nic -> [shadowed?] per test
        for o in self.st.observations:
            for nic in o.test.nics:
                seen[nic].append(bool(culprits & (set(o.test.nodes) - {nic_node(nic)})))
        return sorted(nic for nic, marks in seen.items()
                      if nic not in inf.good_nics and nic_node(nic) not in blamed
                      and nic not in inf.nic_suspects and marks and all(marks))

    def _solo_probe(self) -> str | None:
        """The collective a lone node can run by itself (1x: intra-node only), if specified."""
        for probe in (self.policy.scale_probe, "nccl", "allreduce-cpu"):
            if any(p.probe == probe and p.group_size == 1 for p in self.spec.probes):
                return probe
        return None

    def _advance_bisect(self, inf: Inference) -> None:
        st = self.st
        by_id = {o.test.test_id: o for o in st.observations}
        for test_id, (task, half) in list(st.bisect_halves.items()):
            o = by_id.get(test_id)
            if o is None:
                continue
            del st.bisect_halves[test_id]
            if o.status not in (FAIL, HANG) or set(half) & inf.blamed_nodes:
                if o.status == PASS:
                    st.scale_suspects -= set(o.test.nodes)
                continue
            chain = [task.origin, test_id]
            if len(half) == 1:
                st.scale_culprits.setdefault(half[0], []).extend(chain)
            else:
                st.bisect.append(BisectTask(half, task.size, test_id, task.depth + 1))

    # ---- execution ---------------------------------------------------------------------------
    def _execute(self, tests: list[Test], kind: str) -> bool:
        st, pol = self.st, self.policy
        if pol.budget_s is not None:
            left = pol.budget_s - st.test_seconds
            need = min(t.timeout_s for t in tests)
            if left <= 0 or need <= 0 or left < pol.duration_s + PAIR_SETUP_S:
                st.budget_hit = True
                st.stop_reason = f"budget of {pol.budget_s:g} s test time used up"
                return False
        raws = self.executor.run_round(tests)
        obs = [evaluate(t, r, parse_raw(t, r), self.spec) for t, r in zip(tests, raws, strict=True)]
        obs, warnings = evaluate_peers(obs, z=pol.peer_z, min_drop=pol.peer_min_drop,
                                       slow_fraction=pol.fabric_slow_fraction)
        st.rounds += 1
        st.tests += len(tests)
        st.test_seconds += max((r.duration_s for r in raws), default=0.0)
        st.observations.extend(obs)
        st.warnings.extend(f"round {st.rounds}: {w}" for w in warnings)
        if self.progress is not None:
            self.progress({
                "round": st.rounds, "kind": kind, "tests": len(tests),
                "purposes": _count(t.purpose for t in tests),
                "failed": sum(o.status != PASS for o in obs),
                "test_seconds": st.test_seconds,
            })
        return True


def _anything_failed(st: RunState) -> bool:
    return any(o.status != PASS for o in st.observations)


def _count(items) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for i in items:
        out[i] += 1
    return dict(out)


def with_timeout(test: Test, timeout_s: float) -> Test:
    return replace(test, timeout_s=timeout_s)
