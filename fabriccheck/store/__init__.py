"""History (SQLite): runs, rounds, observations, verdicts, actions, and what they teach."""

from __future__ import annotations

from fabriccheck.store.analytics import Baseline, DriftReport, LemonScore
from fabriccheck.store.db import (
    APPLIED,
    DRY_RUN,
    FAILED,
    WITHHELD,
    ActionRecord,
    RunRecord,
    Store,
    default_db_path,
)

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
