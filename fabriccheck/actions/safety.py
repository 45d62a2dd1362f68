"""Safety rules before any action: confirmation (≥2 evidence tests) and the drain budget.

A node is taken out of service only when a ``bad`` verdict (for the node, or for one of its
NICs) is backed by at least ``min_evidence`` distinct failing tests. If more than ``max_drain``
of the tested nodes would go, nothing is drained: that many bad nodes at once is a fabric-wide
problem (a switch, the spec, the fabric manager), reported as such instead of answered by
draining the cluster. Returning a node (resume) needs a healthy verdict in this run and is
only done for nodes fabriccheck itself took out.
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from typing import Any

from fabriccheck.errors import ConfigError
from fabriccheck.models import BAD, HEALTHY, Observation, RunResult, Verdict, nic_node

#: Slurm keeps reasons short in listings; ours stays readable in `sinfo -R`
MAX_REASON_CHARS = 200


@dataclass(frozen=True)
class ActionPolicy:
    """``max_drain``: largest share of tested nodes one run may take out (0..1);
    ``min_evidence``: distinct failing tests a bad verdict needs before anything is done."""

    max_drain: float = 0.1
    min_evidence: int = 2

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_drain <= 1.0:
            raise ConfigError(f"must be a fraction in [0, 1], got {self.max_drain}",
                              source="--max-drain", hint="e.g. --max-drain 0.05")  # fmt: skip
        if self.min_evidence < 2:
            raise ConfigError("a node is never acted on with fewer than 2 evidence tests",
                              source="min_evidence")  # fmt: skip


@dataclass(frozen=True)
class PlannedAction:
    """One node to take out (``drain``) or give back (``resume``), with why and the tests."""

    node: str
    action: str
    reason: str
    evidence: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "action": self.action, "reason": self.reason,
                "evidence": list(self.evidence)}  # fmt: skip


@dataclass
class ActionPlan:
    """What the safety rules allow for one run."""

    tested: int
    budget: int
    drain: list[PlannedAction] = field(default_factory=list)
    resume: list[PlannedAction] = field(default_factory=list)
    unconfirmed: dict[str, str] = field(default_factory=dict)
    recovered: list[str] = field(default_factory=list)  # healthy now, with passing tests
    withheld: bool = False
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "withheld": self.withheld,
            "reason": self.reason,
            "tested": self.tested,
            "budget": self.budget,
            "drain": [a.to_json() for a in self.drain],
            "resume": [a.to_json() for a in self.resume],
            "unconfirmed": dict(self.unconfirmed),
        }


def _failing(obs: Observation) -> bool:
    """Evidence against a node: a failed or hung test (``error``, unreadable output, is not)."""
    return obs.status in ("fail", "hang")


def tested_nodes(result: RunResult) -> list[str]:
    """Nodes some test of this run ran on (all of ``result.nodes`` without observations)."""
    seen = dict.fromkeys(n for o in result.observations for n in o.test.nodes)
    return list(seen) or list(result.nodes)


def _num(x: float) -> str:
    """Short numbers for reasons: ``96`` for 96.4, ``0.18`` for 0.182."""
    return f"{x:.0f}" if abs(x) >= 10 else f"{x:.2g}"


def _measured(verdict: Verdict, obs_by_id: dict[str, Observation]) -> bool:
    """Whether ``verdict`` cites a failing test we can quote (else its reason is quoted)."""
    return any(e in obs_by_id and _failing(obs_by_id[e]) for e in verdict.evidence)


def describe(verdict: Verdict, obs_by_id: dict[str, Observation]) -> str:
    """One phrase for one bad verdict: ``mlx5_3 ib_write_bw 96 Gb/s < 380``.

    >>> from fabriccheck.models import Test
    >>> t = Test("t1", "ib_write_bw", ("n1", "n2"))
    >>> o = Observation(t, "fail", 96.04, "Gb/s", floor=380.0)
    >>> describe(Verdict("nic", "n1/mlx5_3", "bad", evidence=("t1",)), {"t1": o})
    'mlx5_3 ib_write_bw 96 Gb/s < 380'
    """
    what = verdict.name.split("/", 1)[1] if verdict.kind == "nic" else ""
    failing = [obs_by_id[e] for e in verdict.evidence if e in obs_by_id and _failing(obs_by_id[e])]
    hung = [o for o in failing if o.status == "hang"]
    valued = [o for o in failing if o.value is not None]
    if valued:
        w = min(valued, key=lambda o: o.value)  # type: ignore[arg-type,return-value]
        floor = f" < {_num(w.floor)}" if w.floor is not None else ""
        phrase = f"{w.test.probe} {_num(w.value)} {w.unit}{floor}".replace("  ", " ")
    elif hung:
        phrase = f"{hung[0].test.probe} hung"
    else:
        phrase = verdict.reason or verdict.state
    return f"{what} {phrase}".strip()


def drain_reason(verdicts: Iterable[Verdict], obs_by_id: dict[str, Observation]) -> str:
    """The Slurm/Kubernetes reason text: ``fabriccheck: <what was found> (N tests)``."""
    vs = list(verdicts)
    evidence = sorted({e for v in vs for e in v.evidence})
    measured = [v for v in vs if _measured(v, obs_by_id)]
    nic_ev = {e for v in measured if v.kind == "nic" for e in v.evidence}
    # numbers beat prose; a NIC's numbers beat its node's, unless the node has its own
    quoted = [
        v for v in measured
        if v.kind == "nic" or any(e not in nic_ev and e in obs_by_id and _failing(obs_by_id[e])
                                  for e in v.evidence)
    ] or measured or vs  # fmt: skip
    phrases = list(dict.fromkeys(describe(v, obs_by_id) for v in quoted))
    text = "fabriccheck: " + "; ".join(phrases)
    text += f" ({len(evidence)} tests)"
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


def plan_actions(
    result: RunResult, policy: ActionPolicy | None = None, *, held: Iterable[str] = ()
) -> ActionPlan:
    """Apply the confirmation rule and the drain budget to one run's outcome.

    Parameters
    ----------
    result : RunResult
        The run; candidates are ``drain``, ``bad_nodes`` and the nodes of ``bad_nics``.
    policy : ActionPolicy, optional
        Budget and evidence rule (defaults: 10 %, 2 tests).
    held : iterable of str
        Nodes fabriccheck took out earlier (from the store); those with a healthy verdict
        now are planned for ``resume``.
    """
    policy = policy or ActionPolicy()
    tested = tested_nodes(result)
    budget = math.floor(policy.max_drain * len(tested) + 1e-9)
    plan = ActionPlan(tested=len(tested), budget=budget)
    candidates = dict.fromkeys(
        [*result.drain, *result.bad_nodes, *(nic_node(n) for n in result.bad_nics)]
    )
    _confirm_drains(plan, result, candidates, policy.min_evidence)
    if len(plan.drain) > budget:
        share = len(plan.drain) / max(1, len(tested))
        plan.withheld = True
        plan.reason = (
            f"fabric-wide problem: {len(plan.drain)} of {len(tested)} tested nodes ({share:.0%})"
            f" confirmed bad, above the drain budget of {policy.max_drain:.0%} ({budget} nodes);"
            " no node was taken out. Check switches, links and the spec before draining"
            " (raise --max-drain to act anyway)"
        )
    _plan_returns(plan, result, tested, candidates, held)
    return plan


def _confirm_drains(plan: ActionPlan, result: RunResult, candidates: Iterable[str],
                    min_evidence: int) -> None:  # fmt: skip
    """The confirmation rule: each candidate goes to ``plan.drain`` when its bad node/NIC
    verdicts cite ``min_evidence`` distinct failing tests, else to ``plan.unconfirmed``."""
    obs_by_id = {o.test.test_id: o for o in result.observations}
    bad_by_node: dict[str, list[Verdict]] = {}
    for v in result.verdicts:
        if v.state == BAD and v.kind in ("node", "nic"):
            node = v.name if v.kind == "node" else nic_node(v.name)
            bad_by_node.setdefault(node, []).append(v)
    for node in candidates:
        vs = bad_by_node.get(node, [])
        evidence = {
            e for v in vs for e in v.evidence if e not in obs_by_id or _failing(obs_by_id[e])
        }
        if not vs:
            plan.unconfirmed[node] = "no bad verdict backs it"
        elif len(evidence) < min_evidence:
            plan.unconfirmed[node] = (
                f"only {len(evidence)} failing test(s) ({', '.join(sorted(evidence)) or '-'});"
                f" {min_evidence} needed before acting"
            )
        else:
            plan.drain.append(
                PlannedAction(node, "drain", drain_reason(vs, obs_by_id), tuple(sorted(evidence)))
            )


def _plan_returns(plan: ActionPlan, result: RunResult, tested: list[str],
                  candidates: Container[str], held: Iterable[str]) -> None:  # fmt: skip
    """Nodes healthy now with passing tests and not drain candidates: the tested ones go to
    ``plan.recovered``, the ``held`` ones (taken out earlier by fabriccheck) to ``plan.resume``."""
    healthy = {v.name for v in result.verdicts if v.kind == "node" and v.state == HEALTHY}
    passed: dict[str, list[str]] = {}
    for o in result.observations:
        if o.passed:
            for n in o.test.nodes:
                passed.setdefault(n, []).append(o.test.test_id)
    plan.recovered = [n for n in tested if n in healthy and n in passed and n not in candidates]
    for node in held:
        if node in healthy and node in passed and node not in candidates:
            ev = tuple(sorted(passed[node]))
            plan.resume.append(
                PlannedAction(node, "resume", f"fabriccheck: passed {len(ev)} tests", ev)
            )
