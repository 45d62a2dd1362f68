"""The operations around one run: which nodes (scheduler), holding them, history, resume, actions.

:class:`OpsSession` is what ``sweep``/``gate``/``bisect`` wrap around the orchestrator::

    ops = OpsSession(mode, OpsOptions(...), sku=spec.sku, fabric=topology.fabric)
    nodes = ops.select_nodes(nodes, explicit=user_gave_nodes, known=topology.nodes)
    ops.begin(nodes)                         # history: the run starts (or resumes)
    with ops.hold(nodes):                    # Slurm reservation / K8s under-test label
        executor = ops.wrap(executor, spec)  # per-round history, replay, idle re-checks
        result = orchestrator.run(mode, nodes, ..., executor, ...)
    ops.finish(result)                       # safety, actions, exclude file, history, metrics
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from fabriccheck.actions.safety import ActionPolicy
from fabriccheck.errors import ConfigError, ExecutorError
from fabriccheck.models import Observation, RunResult

log = logging.getLogger("fabriccheck.actions")


@dataclass
class OpsOptions:
    """The operations flags of sweep/gate/bisect (see docs/sweep.md)."""

    db: str | None = None
    no_history: bool = False
    resume: str | None = None
    scheduler: str | None = None  # slurm | kubernetes
    partition: str | None = None
    selector: str | None = None
    skip_tested_within_s: float = 0.0
    apply: bool = False
    max_drain: float = 0.1
    exclude_file: str | None = None
    metrics: str | None = None
    #: Slurm reservation length (it is deleted as soon as the run ends)
    reservation_min: int = 240


def refuse_simulated_actions(executor: str | None, opts: OpsOptions) -> None:
    """Simulated measurements never act on a real scheduler: ``--apply`` or ``--scheduler``
    with the ``sim`` executor is a :class:`ConfigError` (exit 2)."""
    if executor != "sim":
        return
    flag = "--apply" if opts.apply else "--scheduler" if opts.scheduler else None
    if flag is not None:
        raise ConfigError(
            "the sim executor only simulates measurements; it never acts on a real scheduler",
            source=flag, hint="use --executor ssh or ray to test real nodes, or drop "
            "--apply/--scheduler to simulate")  # fmt: skip


class OpsSession:
    """History, scheduler and actions for one run (see the module docstring)."""

    def __init__(self, mode: str, opts: OpsOptions, *, sku: str = "", fabric: str = "",
                 executor: str | None = None) -> None:  # fmt: skip
        from fabriccheck.actions.pipeline import BACKENDS  # store, metrics: only when running

        refuse_simulated_actions(executor, opts)  # before any scheduler is contacted
        if opts.scheduler is not None and opts.scheduler not in BACKENDS:
            raise ConfigError(f"unknown scheduler {opts.scheduler!r}", source="--scheduler",
                              hint=f"use one of {', '.join(BACKENDS)}")  # fmt: skip
        if opts.apply and opts.scheduler is None:
            raise ConfigError("--apply needs to know where to act", source="--apply",
                              hint="add --scheduler slurm or --scheduler kubernetes")  # fmt: skip
        ActionPolicy(max_drain=opts.max_drain)  # a bad --max-drain fails now, not after the run
        self.mode, self.opts, self.sku, self.fabric = mode, opts, sku, fabric
        self.executor = executor
        self.store = self._open_store()
        self.inventory = self._make_inventory()
        self.run_id: str | None = None
        self.replay: dict[int, list[Observation]] = {}
        self.notes: dict[str, Any] = {}
        if opts.resume:
            if self.store is None:
                raise ConfigError("--resume needs the history database", source="--resume",
                                  hint="drop --no-history")  # fmt: skip
            rec, self.replay = self.store.resume_run(opts.resume)
            if rec.mode != mode:
                raise ConfigError(f"run {opts.resume!r} was a {rec.mode}, not a {mode}",
                                  source="--resume")  # fmt: skip
            self.run_id = rec.run_id
            self.resumed_nodes: list[str] = rec.nodes

    # -- set-up ------------------------------------------------------------------------------
    def _open_store(self):
        from fabriccheck.store import Store, default_db_path

        if self.opts.no_history:
            return None
        if self.opts.db:
            return Store(self.opts.db)
        try:
            return Store(default_db_path())
        except ConfigError as exc:  # the default place is not writable: run without history
            log.warning("no history: %s (pass --db PATH)", exc)
            return None

    def _make_inventory(self):
        if self.opts.scheduler == "slurm":
            from fabriccheck.inventory.slurm import SlurmInventory

            return SlurmInventory(partition=self.opts.partition)
        if self.opts.scheduler == "kubernetes":
            from fabriccheck.inventory.kubernetes import KubernetesInventory

            return KubernetesInventory(selector=self.opts.selector)
        return None

    def held(self) -> dict[str, Any]:
        """Nodes fabriccheck took out earlier on this scheduler (from history)."""
        if self.store is None or self.opts.scheduler is None:
            return {}
        return self.store.held_nodes(self.opts.scheduler)

    def select_nodes(
        self, nodes: Sequence[str], *, explicit: bool, known: Iterable[str] | None = None
    ) -> list[str]:
        """The nodes to test.

        ``--resume``: the resumed run's nodes. Gate without explicit nodes inside a Slurm job:
        ``SLURM_JOB_NODELIST``. Sweep with ``--scheduler`` and no explicit nodes: the idle nodes
        (plus drained-by-us ones to re-test), minus those tested within
        ``--skip-tested-within``. Scheduler nodes not in ``known`` (the topology) are left out
        and noted; nodes named by the user or the job stay (the orchestrator refuses unknown
        ones with a clear error).
        """
        import os

        if self.opts.resume:
            return list(self.resumed_nodes)
        chosen = list(nodes)
        from_scheduler = False
        if not explicit and self.mode == "gate" and os.environ.get("SLURM_JOB_NODELIST"):
            from fabriccheck.inventory.slurm import gate_nodes

            chosen = gate_nodes()
            self.notes["nodes_from"] = "SLURM_JOB_NODELIST"
        elif not explicit and self.inventory is not None:
            chosen = self.inventory.idle_nodes(recovering=self.held())
            from_scheduler = True
            self.notes["nodes_from"] = f"{self.opts.scheduler} idle nodes"
        if self.mode == "sweep" and self.opts.skip_tested_within_s > 0 and self.store is not None:
            from fabriccheck.store.analytics import learns_from

            recent = self.store.recently_tested(self.opts.skip_tested_within_s,
                                                executor=learns_from(self.executor))  # fmt: skip
            skipped = [n for n in chosen if n in recent]
            chosen = [n for n in chosen if n not in recent]
            if skipped:
                self.notes["skipped_recently_tested"] = skipped
        if known is not None and from_scheduler:
            known_set = set(known)  # scheduler nodes outside the topology: not ours to test
            unknown = [n for n in chosen if n not in known_set]
            if unknown:
                self.notes["not_in_topology"] = unknown
                chosen = [n for n in chosen if n in known_set]
        if from_scheduler and not chosen:
            raise ExecutorError(
                f"no node to test: {self.opts.scheduler} reports none idle"
                + (" (or all were tested recently)" if self.opts.skip_tested_within_s else ""),
                hint="nothing to do now; the next scheduled sweep will try again",
            )
        return chosen

    @contextmanager
    def hold(self, nodes: Sequence[str]) -> Iterator[None]:
        """Keep the scheduler off ``nodes`` while they are tested (sweeps only: a gate's nodes
        already belong to its job)."""
        if self.mode == "gate" or self.inventory is None or not nodes:
            ctx: Any = nullcontext()
        else:
            name = f"fabriccheck-{self.run_id}" if self.run_id else None
            kw: dict[str, Any] = {"name": name} if name else {}
            if self.opts.scheduler == "slurm":
                kw["duration_min"] = self.opts.reservation_min
            ctx = self.inventory.reserve(list(nodes), **kw)
        with ctx:
            yield

    def begin(self, nodes: Sequence[str], params: dict[str, Any] | None = None) -> str | None:
        """Record the run's start (unless resuming); returns the run id.

        ``params`` are kept with the run (``topology``: the file, so ``fabriccheck report RUN_ID``
        can draw it; ``spec``, ``seed``, ``executor``...).
        """
        if self.store is not None and self.run_id is None:
            self.run_id = self.store.begin_run(self.mode, nodes, sku=self.sku, fabric=self.fabric,
                                               params=params, executor=self.executor)  # fmt: skip
        return self.run_id

    def kernel_since(self, nodes: Sequence[str]) -> tuple[tuple[str, str], ...]:
        """Per node, where its last judged kernel log ended (history; runs of this executor's
        kind: simulated with simulated): the preflight judges only what came after."""
        if self.store is None:
            return ()
        from fabriccheck.store.analytics import learns_from

        since = self.store.kernel_log_until(nodes, executor=learns_from(self.executor))
        return tuple(sorted(since.items()))

    def wrap(self, executor: Any, spec: Any = None, signals: Any = ()) -> Any:
        """The executor with idle re-checks (scheduler) and per-round recording (history);
        ``signals`` (SignalSpec values) judge the signal readings as they are recorded."""
        if self.inventory is not None and self.mode != "gate":
            from fabriccheck.inventory.guard import IdleGuardExecutor

            executor = IdleGuardExecutor(executor, self.inventory)
        if self.store is not None and self.run_id is not None:
            from fabriccheck.store.recording import RecordingExecutor

            executor = RecordingExecutor(executor, self.store, self.run_id, spec=spec,
                                         replay=self.replay, signals=signals,
                                         records_rounds=False)  # fmt: skip
        return executor

    # -- after the run -----------------------------------------------------------------------
    def finish(self, result: RunResult, *, topology: Any = None) -> dict[str, Any]:
        """Safety rules, actions, exclude file, history and metrics for the finished run."""
        from fabriccheck.actions.pipeline import apply_run_outcome
        from fabriccheck.store.analytics import learns_from

        result.extra.update(self.notes)
        if self.store is not None:  # learned baselines, beside the spec floor: a warning only
            low = self.store.below_baseline(result.observations, sku=self.sku or None,
                                            exclude_run=self.run_id,
                                            executor=learns_from(self.executor))  # fmt: skip
            if low["tests"]:
                result.extra["below_baseline"] = low
        if self.opts.resume:
            result.extra["resumed"] = self.opts.resume
        summary = apply_run_outcome(
            result, store=self.store, run_id=self.run_id, backend=self.opts.scheduler,
            apply=self.opts.apply, max_drain=self.opts.max_drain,
            exclude_file=self.opts.exclude_file, metrics_path=self.opts.metrics,
            topology=topology, sku=self.sku, fabric=self.fabric,
        )  # fmt: skip
        return summary

    def abort(self, status: str, error: str) -> None:
        """Record that the run ended without a result (refused, failed, crashed, interrupted)."""
        if self.store is not None and self.run_id is not None:
            import sqlite3

            try:
                self.store.mark_run(self.run_id, status, error)
            except sqlite3.Error as exc:  # never hide the error that ended the run
                log.warning("history: could not mark run %s %s: %s", self.run_id, status, exc)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
