"""The history database's schema, its version (``PRAGMA user_version``) and forward migrations.

Version 1 had no ``user_version`` (it is 0 there; ``meta.schema_version`` said 1). Version 2 adds
``runs.executor`` (sim | ssh | ray: simulated runs are kept apart from real ones) and
``runs.error`` (why a run was refused or crashed). A database newer than this program is refused
with one line, never half-read.
"""

from __future__ import annotations

import json
import sqlite3

from fabriccheck.errors import ConfigError

SCHEMA_VERSION = 2

#: the tables as this program writes them (a fresh database gets exactly this)
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY, mode TEXT NOT NULL, status TEXT NOT NULL,
  started_s REAL NOT NULL, finished_s REAL, sku TEXT NOT NULL DEFAULT '',
  fabric TEXT NOT NULL DEFAULT '', nodes_json TEXT NOT NULL, params_json TEXT NOT NULL,
  summary_json TEXT, executor TEXT NOT NULL DEFAULT '', error TEXT);
CREATE INDEX IF NOT EXISTS runs_executor ON runs (executor);
CREATE TABLE IF NOT EXISTS rounds (
  run_id TEXT NOT NULL, round INTEGER NOT NULL, recorded_s REAL NOT NULL,
  PRIMARY KEY (run_id, round));
CREATE TABLE IF NOT EXISTS observations (
  id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, round INTEGER NOT NULL, test_id TEXT NOT NULL,
  probe TEXT NOT NULL, group_size INTEGER NOT NULL, purpose TEXT NOT NULL, status TEXT NOT NULL,
  value REAL, unit TEXT, floor REAL, obs_json TEXT NOT NULL, UNIQUE (run_id, test_id));
CREATE TABLE IF NOT EXISTS obs_nodes (
  obs_id INTEGER NOT NULL, run_id TEXT NOT NULL, node TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS obs_nodes_node ON obs_nodes (node);
CREATE INDEX IF NOT EXISTS obs_probe ON observations (probe, group_size, status);
CREATE TABLE IF NOT EXISTS verdicts (
  run_id TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, node TEXT, state TEXT NOT NULL,
  reason TEXT NOT NULL, evidence_json TEXT NOT NULL, PRIMARY KEY (run_id, kind, name));
CREATE INDEX IF NOT EXISTS verdicts_node ON verdicts (node);
CREATE TABLE IF NOT EXISTS actions (
  id INTEGER PRIMARY KEY, run_id TEXT, node TEXT NOT NULL, action TEXT NOT NULL,
  backend TEXT NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL,
  evidence_json TEXT NOT NULL, at_s REAL NOT NULL);
CREATE INDEX IF NOT EXISTS actions_node ON actions (node);
"""


def _v1_to_v2(c: sqlite3.Connection) -> None:
    """Add ``runs.executor`` (filled from the run's stored params) and ``runs.error``."""
    c.execute("ALTER TABLE runs ADD COLUMN executor TEXT NOT NULL DEFAULT ''")
    c.execute("ALTER TABLE runs ADD COLUMN error TEXT")
    for run_id, params in c.execute("SELECT run_id, params_json FROM runs").fetchall():
        try:
            exe = (json.loads(params) or {}).get("executor") or ""
        except (ValueError, AttributeError):
            exe = ""
        c.execute("UPDATE runs SET executor = ? WHERE run_id = ?", (str(exe), run_id))


#: version -> the step that brings a database of that version to the next one
MIGRATIONS = {1: _v1_to_v2}


def stored_version(c: sqlite3.Connection) -> int:
    """The schema version of the database: ``user_version``; 1 for a pre-versioning database
    that has tables; 0 for an empty file."""
    version = c.execute("PRAGMA user_version").fetchone()[0]
    if version:
        return int(version)
    has_runs = c.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'"
    ).fetchone()
    return 1 if has_runs else 0


def ensure_schema(c: sqlite3.Connection, path: str) -> int:
    """Create or migrate (forward only) inside the caller's write transaction; returns the
    version found. Raises :class:`ConfigError` when the database is newer than this program."""
    found = stored_version(c)
    if found > SCHEMA_VERSION:
        raise ConfigError(
            f"history database schema v{found} is newer than this fabriccheck (v{SCHEMA_VERSION})",
            source=path, hint="upgrade fabriccheck, or pass another --db PATH")  # fmt: skip
    version = found
    while 0 < version < SCHEMA_VERSION:
        MIGRATIONS[version](c)
        version += 1
    for stmt in SCHEMA.split(";"):
        if stmt.strip():
            c.execute(stmt)
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    c.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    return found
