"""History retention: old runs out, old raw tool output stripped; the action log is kept."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from contextlib import AbstractContextManager


class RetentionMixin:
    """Retention methods of :class:`fabriccheck.store.Store`."""

    conn: sqlite3.Connection
    _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]

    def prune(
        self, *, keep_days: float = 180.0, keep_raw_days: float = 14.0, now: float | None = None
    ) -> dict[str, int]:
        """Retention: delete runs older than ``keep_days`` (actions are kept: they are the audit
        trail) and drop the raw tool output of observations older than ``keep_raw_days``.
        Returns how many runs were deleted and observations stripped."""
        now = time.time() if now is None else now
        old_runs = [r for (r,) in self.conn.execute(
            "SELECT run_id FROM runs WHERE started_s < ?", (now - keep_days * 86400,))]
        raw_cut = now - keep_raw_days * 86400
        with self._tx() as c:
            for run_id in old_runs:
                for table in ("obs_nodes", "observations", "verdicts", "rounds", "runs"):
                    c.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
            rows = c.execute(
                "SELECT o.id, o.obs_json FROM observations o JOIN runs r ON r.run_id = o.run_id"
                " WHERE r.started_s < ? AND o.obs_json LIKE '%\"raw\"%'", (raw_cut,),
            ).fetchall()
            stripped = 0
            for obs_id, js in rows:
                d = json.loads(js)
                raw = d.get("raw")
                if raw and (raw.get("stdout") or raw.get("stderr")):
                    raw["stdout"] = raw["stderr"] = ""
                    c.execute("UPDATE observations SET obs_json = ? WHERE id = ?",
                              (json.dumps(d, default=str), obs_id))
                    stripped += 1
        if old_runs or stripped:
            self.conn.execute("VACUUM")
        return {"runs_deleted": len(old_runs), "raw_stripped": stripped}
