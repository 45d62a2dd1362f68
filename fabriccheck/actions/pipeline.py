"""After a run: safety rules, actions (dry-run unless ``apply``), exclude list, history, metrics.

The orchestrator's caller does, in one line::

    apply_run_outcome(result, store=store, run_id=run_id, backend="slurm", apply=args.apply,
                      max_drain=args.max_drain, exclude_file=args.exclude_file,
                      metrics_path=args.metrics)

and ``result.extra["actions"]`` then says what was done, what was withheld and why.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Protocol

from fabriccheck.actions.exclude import update_exclude_file
from fabriccheck.actions.metrics import write_metrics
from fabriccheck.actions.safety import ActionPlan, ActionPolicy, PlannedAction, plan_actions
from fabriccheck.errors import ConfigError, ExecutorError
from fabriccheck.models import RunResult
from fabriccheck.store import APPLIED, DRY_RUN, FAILED, WITHHELD, Store

log = logging.getLogger("fabriccheck.actions")

BACKENDS = ("slurm", "kubernetes")


class Actuator(Protocol):
    """Takes a node out of service and gives it back (Slurm drain/resume, K8s cordon/...)."""

    backend: str

    def take_out(self, node: str, reason: str) -> str: ...

    def give_back(self, node: str) -> str: ...


def make_actuator(backend: str | Actuator | None, **kwargs: Any) -> Actuator | None:
    """``"slurm"`` / ``"kubernetes"`` -> the actuator; an object is returned as is."""
    if backend is None or not isinstance(backend, str):
        return backend
    if backend == "slurm":
        from fabriccheck.actions.slurm import SlurmActions

        return SlurmActions(**kwargs)
    if backend == "kubernetes":
        from fabriccheck.actions.kubernetes import KubernetesActions

        return KubernetesActions(**kwargs)
    raise ConfigError(f"unknown action backend {backend!r}", source="--actions",
                      hint=f"use one of {', '.join(BACKENDS)}")  # fmt: skip


def _act(
    a: PlannedAction, actuator: Actuator | None, apply: bool
) -> tuple[str, str]:
    """Do one planned action; returns (status, detail)."""
    if actuator is None or not apply:
        return DRY_RUN, "dry-run: pass --apply to act" if actuator else "no scheduler backend"
    try:
        if a.action == "drain":
            return APPLIED, actuator.take_out(a.node, a.reason)
        detail = actuator.give_back(a.node)
        return (APPLIED if detail in ("resumed", "returned") else DRY_RUN), detail
    except ExecutorError as exc:
        return FAILED, str(exc)


def _act_batch(actions: list[PlannedAction], actuator: Actuator | None, apply: bool
               ) -> list[tuple[str, str]]:
    """Do planned actions of one kind; an actuator with batched calls (``take_out_many`` /
    ``give_back_many``: one scheduler call per batch of nodes) gets them all at once."""
    many = None
    if actuator is not None and apply and actions:
        many = getattr(actuator, "take_out_many" if actions[0].action == "drain"
                       else "give_back_many", None)
    if many is None:
        return [_act(a, actuator, apply) for a in actions]
    drain = actions[0].action == "drain"
    done = many({a.node: a.reason for a in actions} if drain else [a.node for a in actions])
    out = []
    for a in actions:
        detail = done.get(a.node, "not done")
        if isinstance(detail, ExecutorError):
            out.append((FAILED, str(detail)))
        elif drain:
            out.append((APPLIED, str(detail)))
        else:
            out.append((APPLIED if detail in ("resumed", "returned") else DRY_RUN, str(detail)))
    return out


def apply_run_outcome(
    result: RunResult,
    *,
    store: Store | None = None,
    run_id: str | None = None,
    backend: str | Actuator | None = None,
    apply: bool = False,
    max_drain: float = 0.1,
    exclude_file: str | os.PathLike[str] | None = None,
    metrics_path: str | os.PathLike[str] | None = None,
    topology: Any = None,
    sku: str = "",
    fabric: str = "",
) -> dict[str, Any]:
    """Plan, act (or not), record and export one finished run; returns ``extra["actions"]``.

    Parameters
    ----------
    result : RunResult
        The finished run; ``result.extra["actions"]`` is set.
    store : Store, optional
        History; the run is recorded (``begin_run`` now unless ``run_id`` names one already
        begun), every action is logged with its evidence, and held nodes are known.
    backend : "slurm", "kubernetes" or an Actuator, optional
        Where actions go; None plans only.
    apply : bool
        Act for real; by default nothing changes (dry-run) but the plan is recorded.
    max_drain : float
        Drain budget: largest share of tested nodes one run may take out.
    exclude_file, metrics_path : path, optional
        Keep an exclude list up to date (confirmed bad nodes in, recovered nodes out; kept in
        dry-run too, since it changes no scheduler); write the Prometheus textfile.
    """
    policy = ActionPolicy(max_drain=max_drain)
    actuator = make_actuator(backend)
    backend_name = actuator.backend if actuator is not None else "none"
    if store is not None and run_id is None:
        run_id = store.begin_run(result.mode, result.nodes, sku=sku, fabric=fabric,
                                 executor=result.extra.get("executor"))  # fmt: skip
    held = store.held_nodes(actuator.backend if actuator else None) if store else {}
    plan = plan_actions(result, policy, held=held)
    done = _carry_out(plan, actuator, apply, store=store, run_id=run_id,
                      backend_name=backend_name)  # fmt: skip
    summary = plan.to_json()
    summary.update(applied=apply, backend=backend_name, done=done)
    if exclude_file is not None:
        summary["exclude_file"] = _update_exclude(plan, exclude_file)
    result.extra["actions"] = summary
    if store is not None and run_id is not None:
        store.finish_run(run_id, result)
        result.extra["run_id"] = run_id
    if metrics_path is not None:
        write_metrics(metrics_path, result, topology=topology, actions=done)
    return summary


def _carry_out(plan: ActionPlan, actuator: Actuator | None, apply: bool, *,
               store: Store | None, run_id: str | None,
               backend_name: str) -> list[dict[str, Any]]:  # fmt: skip
    """Act on ``plan`` (drains withheld past the budget, then drains and resumes in batches),
    log and record every action in ``store``; returns the actions as done, in order."""
    done: list[dict[str, Any]] = []

    def record(a: PlannedAction, status: str, detail: str) -> None:
        entry = {**a.to_json(), "status": status, "detail": detail, "backend": backend_name}
        done.append(entry)
        level = logging.INFO if status == DRY_RUN else logging.WARNING
        log.log(level, "%s %s %s [%s] evidence=%s: %s", status, a.action, a.node, detail,
                ",".join(a.evidence), a.reason)  # fmt: skip
        if store is not None:
            store.record_action(a.node, a.action, backend=backend_name, status=status,
                                reason=a.reason, evidence=a.evidence, run_id=run_id)  # fmt: skip

    for a in plan.drain if plan.withheld else ():
        record(a, WITHHELD, "drain budget exceeded (see actions.reason)")
    for actions in ([] if plan.withheld else plan.drain, plan.resume):
        for a, outcome in zip(actions, _act_batch(actions, actuator, apply), strict=True):
            record(a, *outcome)
    for node, why in plan.unconfirmed.items():
        log.info("not acting on %s: %s", node, why)
    return done


def _update_exclude(plan: ActionPlan, exclude_file: str | os.PathLike[str]) -> dict[str, Any]:
    """Put the nodes drained by ``plan`` in the exclude list and take its recovered ones out;
    returns the list's path and hosts for ``extra["actions"]["exclude_file"]``."""
    out = [] if plan.withheld else [a.node for a in plan.drain]
    back = plan.recovered
    return {
        "path": str(exclude_file),
        "hosts": update_exclude_file(exclude_file, add=out, remove=back),
    }
