"""The report's configuration table: per setting, the majority value among the parts that
reported it and each outlier (docs/config-checks.md), outliers first (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ConfigRow:
    setting: str
    majority: str
    parts: int
    outliers: list[tuple[str, str]] = field(default_factory=list)


def config_rows(config: dict[str, Any]) -> list[ConfigRow]:
    """Rows for the ``config`` key of a run result: settings with outliers first.

    >>> rows = config_rows({"mtu": {"majority": 9000, "parts": 40,
    ...     "outliers": {"node-004/mlx5_2": 1500}}, "trust": {"majority": "dscp", "parts": 40}})
    >>> [(r.setting, r.majority, r.outliers) for r in rows]
    [('mtu', '9000', [('node-004/mlx5_2', '1500')]), ('trust', 'dscp', [])]
    """
    rows = [ConfigRow(name, "-" if v.get("majority") is None else str(v["majority"]),
                      int(v.get("parts", 0)),
                      sorted((t, str(x)) for t, x in (v.get("outliers") or {}).items()))
            for name, v in config.items() if isinstance(v, dict)]
    return sorted(rows, key=lambda r: (not r.outliers, r.setting))
