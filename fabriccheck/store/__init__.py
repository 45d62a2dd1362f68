"""History (SQLite): runs, rounds, observations, verdicts, actions, and what they teach."""

from __future__ import annotations

from fabriccheck.store.actions_log import APPLIED, DRY_RUN, FAILED, WITHHELD, ActionRecord
from fabriccheck.store.analytics import Baseline, DriftReport, LemonScore
from fabriccheck.store.db import RunRecord, Store, default_db_path

__all__ = [
    "APPLIED",
    "DRY_RUN",
    "FAILED",
    "WITHHELD",
    "ActionRecord",
    "Baseline",
    "DriftReport",
    "LemonScore",
    "RunRecord",
    "Store",
    "default_db_path",
]
