"""The history database (SQLite, WAL): runs, rounds, observations, verdicts and actions.

Every round is written in one transaction as soon as it completes, so a run that crashes or is
killed keeps its finished rounds (:meth:`Store.completed_rounds` gives them back for ``--resume``).
Several processes may write at once: WAL mode, a busy timeout, and ``BEGIN IMMEDIATE`` for writes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fabriccheck.errors import ConfigError
from fabriccheck.models import Observation, RunResult, nic_node
from fabriccheck.serialize import (
    observation_from_dict,
    observation_to_dict,
    run_result_to_dict,
)
from fabriccheck.store import analytics
from fabriccheck.store.actions_log import ActionLogMixin
from fabriccheck.store.analytics import Baseline, DriftReport, LemonScore
from fabriccheck.store.retention import RetentionMixin
from fabriccheck.store.schema import ensure_schema

#: raw tool output kept per observation (the rest is cut: history is not an archive)
MAX_RAW_CHARS = 64_000

#: run states: running (or killed: resumable), finished, failed (could not test, exit 3),
#: refused (usage/config error, exit 2), crashed (fabriccheck itself failed), interrupted
RUN_STATES = ("running", "finished", "failed", "refused", "crashed", "interrupted")


def default_db_path() -> Path:
    """``$FABRICCHECK_DB``, else ``$XDG_STATE_HOME/fabriccheck/history.sqlite``."""
    env = os.environ.get("FABRICCHECK_DB")
    if env:
        return Path(env)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "fabriccheck" / "history.sqlite"


@dataclass(frozen=True)
class RunRecord:
    """One stored run: what was asked (mode, nodes, sku) and, once finished, its summary."""

    run_id: str
    mode: str
    status: str  # one of RUN_STATES
    started_s: float
    finished_s: float | None
    sku: str
    fabric: str
    nodes: list[str]
    params: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    rounds: int = 0
    executor: str = ""  # sim | ssh | ray ("" when not recorded)
    error: str | None = None  # why a run was refused, failed or crashed


class Store(ActionLogMixin, RetentionMixin):
    """The history database at ``path`` (created with its directory when missing).

    Parameters
    ----------
    path : str or Path
        The SQLite file; ``":memory:"`` for a throwaway store.
    busy_timeout_s : float
        How long a writer waits for another process's transaction before failing.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 30.0) -> None:
        self.path = str(path)
        # the observation last written per (run, test): finish_run rewrites only what changed
        self._written: dict[tuple[str, str], Observation] = {}
        if self.path != ":memory:":
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create {exc.filename}: {exc.strerror}",
                                  source="--db") from exc  # fmt: skip
        try:
            self.conn = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None)
            self.conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            with self._tx() as c:
                self.migrated_from = ensure_schema(c, self.path)
        except ConfigError:
            self.conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"not a fabriccheck history database: {exc}", source=self.path,
                              hint="pass another --db PATH") from exc  # fmt: skip

    # -- plumbing ----------------------------------------------------------------------------
    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken up front (``BEGIN IMMEDIATE``) so writers queue."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            self._written.clear()  # what it remembers may not have been committed
            raise
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs --------------------------------------------------------------------------------
    def begin_run(
        self,
        mode: str,
        nodes: Sequence[str],
        *,
        sku: str = "",
        fabric: str = "",
        params: dict[str, Any] | None = None,
        run_id: str | None = None,
        started_s: float | None = None,
        executor: str | None = None,
    ) -> str:
        """Record that a run started; returns its id (a new one unless ``run_id`` is given).

        ``executor`` (default: ``params["executor"]``) keeps simulated runs apart from real ones.
        """
        run_id = run_id or time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
        exe = executor if executor is not None else str((params or {}).get("executor") or "")
        with self._tx() as c:
            c.execute(
                "INSERT INTO runs (run_id, mode, status, started_s, sku, fabric, nodes_json,"
                " params_json, executor) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (run_id, mode, started_s if started_s is not None else time.time(), sku,
                 fabric, json.dumps(list(nodes)), json.dumps(params or {}, default=str), exe),
            )  # fmt: skip
        return run_id

    def mark_run(self, run_id: str, status: str, error: str = "") -> None:
        """End a run that did not finish: ``refused``, ``failed``, ``crashed``, ``interrupted``."""
        if status not in RUN_STATES:
            raise ValueError(f"unknown run state {status!r}")
        with self._tx() as c:
            c.execute("UPDATE runs SET status = ?, finished_s = ?, error = ? WHERE run_id = ?",
                      (status, time.time(), error or None, run_id))  # fmt: skip

    def _insert_observations(
        self,
        c: sqlite3.Connection,
        run_id: str,
        round_no: int | None,
        obs: Iterable[Observation],
        *,
        update: bool = False,
    ) -> int:
        """Insert new observations; with ``update`` also overwrite the judgement of known ones
        (the final, peer-aware verdict replaces the one written when the round completed)."""
        n = 0
        for o in obs:
            key = (run_id, o.test.test_id)
            if update and self._written.get(key) == o:
                continue  # the final judgement is the one this store already wrote
            d = observation_to_dict(o)
            raw = d.get("raw")
            if raw:
                raw["stdout"] = (raw.get("stdout") or "")[:MAX_RAW_CHARS]
                raw["stderr"] = (raw.get("stderr") or "")[:MAX_RAW_CHARS]
            if update:
                cur = c.execute(
                    "UPDATE observations SET status=?, value=?, unit=?, floor=?, obs_json=?"
                    " WHERE run_id=? AND test_id=?",
                    (o.status, o.value, o.unit, o.floor, json.dumps(d, default=str), run_id,
                     o.test.test_id),
                )  # fmt: skip
                if cur.rowcount:
                    self._written[key] = o
                    continue
            cur = c.execute(
                "INSERT OR IGNORE INTO observations (run_id, round, test_id, probe, group_size,"
                " purpose, status, value, unit, floor, obs_json) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, o.test.round if round_no is None else round_no, o.test.test_id,
                 _probe_column(o), o.test.group_size, o.test.purpose, o.status, o.value, o.unit,
                 o.floor, json.dumps(d, default=str)),
            )  # fmt: skip
            if cur.rowcount:
                self._written[key] = o
                obs_id = cur.lastrowid
                c.executemany(
                    "INSERT INTO obs_nodes VALUES (?, ?, ?)",
                    [(obs_id, run_id, node) for node in dict.fromkeys(o.test.nodes)],
                )
                n += 1
        return n

    def record_round(self, run_id: str, round_no: int, observations: Sequence[Observation]) -> int:
        """Write one completed round atomically; returns how many observations were new."""
        with self._tx() as c:
            n = self._insert_observations(c, run_id, round_no, observations)
            c.execute(
                "INSERT OR REPLACE INTO rounds VALUES (?, ?, ?)", (run_id, round_no, time.time())
            )
        return n

    def finish_run(
        self,
        run_id: str,
        result: RunResult,
        *,
        status: str = "finished",
        finished_s: float | None = None,
    ) -> None:
        """Record the verdicts and summary of a run (and any observation not yet recorded)."""
        summary = run_result_to_dict(result)
        with self._tx() as c:
            by_round: dict[int, list[Observation]] = {}
            for o in result.observations:
                by_round.setdefault(o.test.round, []).append(o)
            for rnd, obs in by_round.items():
                if self._insert_observations(c, run_id, rnd, obs, update=True):
                    c.execute(
                        "INSERT OR IGNORE INTO rounds VALUES (?, ?, ?)", (run_id, rnd, time.time())
                    )
            for v in result.verdicts:
                node = v.name if v.kind == "node" else nic_node(v.name) if v.kind == "nic" else None
                c.execute(
                    "INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (run_id, v.kind, v.name, node, v.state, v.reason, json.dumps(list(v.evidence))),
                )
            c.execute(
                "UPDATE runs SET status=?, finished_s=?, summary_json=? WHERE run_id=?",
                (status, finished_s if finished_s is not None else time.time(),
                 json.dumps(summary, default=str), run_id),
            )  # fmt: skip

    def _record(self, row: sqlite3.Row | tuple) -> RunRecord:
        (run_id, mode, status, started, finished, sku, fabric, nodes, params, summary, rounds,
         executor, error) = row  # fmt: skip
        return RunRecord(
            run_id=run_id, mode=mode, status=status, started_s=started, finished_s=finished,
            sku=sku, fabric=fabric, nodes=json.loads(nodes), params=json.loads(params),
            summary=json.loads(summary) if summary else None, rounds=rounds,
            executor=executor, error=error,
        )  # fmt: skip

    _RUN_COLS = (
        "r.run_id, mode, status, started_s, finished_s, sku, fabric, nodes_json, params_json,"
        " summary_json, (SELECT COUNT(*) FROM rounds x WHERE x.run_id = r.run_id), executor,"
        " error"
    )

    def run(self, run_id: str) -> RunRecord:
        """The stored run ``run_id``; :class:`ConfigError` when there is none."""
        row = self.conn.execute(
            f"SELECT {self._RUN_COLS} FROM runs r WHERE r.run_id = ?", (run_id,)
        ).fetchone()
        if row is None:
            raise ConfigError(f"no run {run_id!r} in this history database", source=self.path,
                              hint="`fabriccheck history runs` lists the stored runs")  # fmt: skip
        return self._record(row)

    def runs(
        self, *, limit: int = 20, mode: str | None = None, executor: str | None = None
    ) -> list[RunRecord]:
        """The most recent runs (of ``mode``, by ``executor``), newest first."""
        conds = [(c, v) for c, v in (("mode = ?", mode), ("executor = ?", executor)) if v]
        where = ("WHERE " + " AND ".join(c for c, _ in conds)) if conds else ""
        rows = self.conn.execute(
            f"SELECT {self._RUN_COLS} FROM runs r {where} ORDER BY started_s DESC LIMIT ?",
            (*(v for _, v in conds), limit),
        ).fetchall()
        return [self._record(r) for r in rows]

    def completed_rounds(self, run_id: str) -> dict[int, list[Observation]]:
        """The observations of every round written for ``run_id``, by round (for ``--resume``)."""
        rows = self.conn.execute(
            "SELECT o.round, o.obs_json FROM observations o JOIN rounds r"
            " ON r.run_id = o.run_id AND r.round = o.round WHERE o.run_id = ? ORDER BY o.id",
            (run_id,),
        ).fetchall()
        out: dict[int, list[Observation]] = {}
        for rnd, js in rows:
            out.setdefault(rnd, []).append(observation_from_dict(json.loads(js)))
        return dict(sorted(out.items()))

    def resume_run(self, run_id: str) -> tuple[RunRecord, dict[int, list[Observation]]]:
        """Reopen an unfinished run: its record and the rounds already done (``--resume``).

        Raises :class:`ConfigError` when the run does not exist or already finished.
        """
        rec = self.run(run_id)
        if rec.status == "finished":
            raise ConfigError(f"run {run_id!r} already finished; nothing to resume",
                              source="--resume")  # fmt: skip
        with self._tx() as c:
            c.execute("UPDATE runs SET status = 'running' WHERE run_id = ?", (run_id,))
        return rec, self.completed_rounds(run_id)

    def load_result(self, run_id: str) -> RunResult:
        """A finished run as a :class:`RunResult` (summary, verdicts and observations)."""
        from fabriccheck.serialize import run_result_from_dict, verdict_from_dict

        rec = self.run(run_id)
        if rec.summary is None:
            raise ConfigError(f"run {run_id!r} has not finished", source=self.path)
        result = run_result_from_dict({"mode": rec.mode, "nodes": rec.nodes, **rec.summary})
        rows = self.conn.execute(
            "SELECT kind, name, state, reason, evidence_json FROM verdicts WHERE run_id = ?",
            (run_id,),
        ).fetchall()
        result.verdicts = [
            verdict_from_dict({"kind": k, "name": n, "state": st, "reason": r,
                               "evidence": json.loads(e),
                               "link": n.split(" -- ") if k == "link" and " -- " in n else None})
            for k, n, st, r, e in rows
        ]  # fmt: skip
        result.observations = self.observations(run_id)
        return result

    def latest_finished(
        self, mode: str | None = None, *, executor: str | None = None
    ) -> str | None:
        """The id of the newest finished run (of ``mode``, by ``executor``), or None."""
        q = "SELECT run_id FROM runs r WHERE status = 'finished'"
        args: list[Any] = []
        if mode:
            q += " AND mode = ?"
            args.append(mode)
        cond, cargs = analytics.executor_filter(executor)
        row = self.conn.execute(q + cond + " ORDER BY finished_s DESC LIMIT 1",
                                (*args, *cargs)).fetchone()  # fmt: skip
        return row[0] if row else None

    def observations(self, run_id: str) -> list[Observation]:
        """Every observation recorded for ``run_id``, in the order written."""
        return [o for obs in self.completed_rounds(run_id).values() for o in obs]

    # -- nodes -------------------------------------------------------------------------------
    def last_tested(
        self, nodes: Iterable[str] | None = None, *, executor: str | None = analytics.REAL
    ) -> dict[str, float]:
        """When each node was last in a recorded test (its run's start time); by default only
        real runs count (a simulated sweep tests no real node)."""
        cond, args = analytics.executor_filter(executor)
        rows = self.conn.execute(
            "SELECT n.node, MAX(r.started_s) FROM obs_nodes n JOIN runs r ON r.run_id = n.run_id"
            f" WHERE 1{cond} GROUP BY n.node", args,
        ).fetchall()  # fmt: skip
        want = None if nodes is None else set(nodes)
        return {n: t for n, t in rows if want is None or n in want}

    def kernel_log_until(
        self, nodes: Iterable[str], *, executor: str | None = analytics.REAL
    ) -> dict[str, str]:
        """Per node, where its last judged kernel log without a fault ended (ISO time): the
        next preflight judges only what came after (docs/node-checks.md). A reading with a
        fault does not move it: the fault stays in view until a reboot clears the log."""
        want = set(nodes)
        cond, args = analytics.executor_filter(executor)
        rows = self.conn.execute(
            "SELECT n.node, o.obs_json FROM observations o"
            " JOIN obs_nodes n ON n.obs_id = o.id JOIN runs r ON r.run_id = o.run_id"
            f" WHERE o.probe = 'signal:kernel-log' AND o.status = 'pass'{cond}"
            " ORDER BY r.started_s", args,
        ).fetchall()  # fmt: skip
        best: dict[str, tuple[datetime, str]] = {}
        for node, js in rows:
            until = (json.loads(js).get("facts") or {}).get("last_stamp")
            when = _iso(until) if node in want and isinstance(until, str) else None
            if when is not None and (node not in best or when > best[node][0]):
                best[node] = (when, until)
        return {n: s for n, (_, s) in best.items()}

    def recently_tested(
        self, within_s: float, *, now: float | None = None, executor: str | None = analytics.REAL
    ) -> set[str]:
        """Nodes tested less than ``within_s`` ago (a sweep skips them)."""
        cutoff = (time.time() if now is None else now) - within_s
        return {n for n, t in self.last_tested(executor=executor).items() if t >= cutoff}

    # -- what history teaches (see store.analytics) -------------------------------------------
    def baseline(
        self,
        sku: str | None,
        probe: str,
        group_size: int,
        *,
        min_samples: int = 8,
        exclude_run: str | None = None,
        executor: str | None = analytics.REAL,
    ) -> Baseline | None:
        """Learned baseline (median + MAD of passing results) or None when too few exist."""
        return analytics.baseline(self.conn, sku, probe, group_size, min_samples=min_samples,
                                  exclude_run=exclude_run, executor=executor)  # fmt: skip

    def below_baseline(self, observations: Sequence[Observation], *, sku: str | None,
                       exclude_run: str | None = None,
                       executor: str | None = analytics.REAL) -> dict[str, Any]:  # fmt: skip
        """Passing tests far below the learned baseline; see :func:`analytics.below_baseline`."""
        return analytics.below_baseline(self.conn, observations, sku=sku, exclude_run=exclude_run,
                                        executor=executor)  # fmt: skip

    def drifting_nodes(self, **kwargs: Any) -> list[DriftReport]:
        """Nodes whose bandwidth falls across sweeps; see :func:`analytics.drifting_nodes`."""
        return analytics.drifting_nodes(self.conn, **kwargs)

    def lemon_nodes(
        self, *, last_runs: int = 50, executor: str | None = analytics.REAL
    ) -> list[LemonScore]:
        """Nodes implicated again and again, highest score first (real runs unless told)."""
        return analytics.lemon_nodes(self.conn, last_runs=last_runs, executor=executor)


def _iso(text: str) -> datetime | None:
    """An ISO 8601 time (``,`` or ``.`` before the fraction; naive means UTC), or None."""
    try:
        when = datetime.fromisoformat(text.replace(",", ".").replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _probe_column(o: Observation) -> str:
    """The ``observations.probe`` value: the probe, ``signal:<name>`` for a signal reading or
    ``nccl:domain`` for an NVLink-domain test, so history keeps each apart (baselines, drift,
    lemon queries by probe)."""
    if o.test.probe == "signal":
        return f"signal:{o.test.params.get('signal', '')}"
    if o.test.purpose == "domain":  # an NVLink-domain test: never a scale-out baseline
        return f"{o.test.probe}:domain"
    return o.test.probe
