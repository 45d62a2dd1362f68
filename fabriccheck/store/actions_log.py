"""The action log in history: every drain/resume fabriccheck took or planned, with evidence.

``held_nodes`` is what makes "only undo what fabriccheck did" possible: a node is held while its
last *applied* ``drain``/``cordon`` has no later applied ``resume``/``uncordon``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

#: statuses of a recorded action
APPLIED, DRY_RUN, WITHHELD, FAILED = "applied", "dry-run", "withheld", "failed"


@dataclass(frozen=True)
class ActionRecord:
    """One action fabriccheck took (or would have taken: ``dry-run``/``withheld``) on a node."""

    node: str
    action: str  # drain | resume | cordon | uncordon | exclude | include
    backend: str
    status: str
    reason: str
    evidence: tuple[str, ...]
    at_s: float
    run_id: str | None = None


class ActionLogMixin:
    """Action-log methods of :class:`fabriccheck.store.Store`."""

    conn: sqlite3.Connection
    _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]

    # -- actions -----------------------------------------------------------------------------
    def record_action(
        self,
        node: str,
        action: str,
        *,
        backend: str,
        status: str,
        reason: str = "",
        evidence: Sequence[str] = (),
        run_id: str | None = None,
        at_s: float | None = None,
    ) -> None:
        """Log one action with the evidence behind it."""
        with self._tx() as c:
            c.execute(
                "INSERT INTO actions (run_id, node, action, backend, status, reason,"
                " evidence_json, at_s) VALUES (?,?,?,?,?,?,?,?)",
                (run_id, node, action, backend, status, reason, json.dumps(list(evidence)),
                 time.time() if at_s is None else at_s),
            )  # fmt: skip

    def actions(self, *, node: str | None = None, run_id: str | None = None) -> list[ActionRecord]:
        """Recorded actions, oldest first, optionally for one node or one run."""
        q = "SELECT node, action, backend, status, reason, evidence_json, at_s, run_id FROM actions"
        conds, args = [], []
        if node is not None:
            conds.append("node = ?")
            args.append(node)
        if run_id is not None:
            conds.append("run_id = ?")
            args.append(run_id)
        if conds:
            q += " WHERE " + " AND ".join(conds)
        rows = self.conn.execute(q + " ORDER BY id", args).fetchall()
        return [
            ActionRecord(n, a, b, s, r, tuple(json.loads(e)), t, rid)
            for n, a, b, s, r, e, t, rid in rows
        ]

    def held_nodes(self, backend: str | None = None) -> dict[str, ActionRecord]:
        """Nodes fabriccheck took out of service and has not returned: their last applied
        ``drain``/``cordon`` not followed by an applied ``resume``/``uncordon``."""
        held: dict[str, ActionRecord] = {}
        for a in self.actions():
            if a.status != APPLIED or (backend is not None and a.backend != backend):
                continue
            if a.action in ("drain", "cordon"):
                held[a.node] = a
            elif a.action in ("resume", "uncordon"):
                held.pop(a.node, None)
        return held
