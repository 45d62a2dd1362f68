"""The report's signals table: one row per signal (bound, readings per status, value range) and
the readings that did not pass, with their values and tests (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: readings listed per signal at most (the rest are in results.json)
MAX_ODD = 50


@dataclass(frozen=True)
class SignalRow:
    name: str
    where: str  # "1 node / nic"
    bound: str
    counts: str  # "1,023 pass · 1 fail"
    span: str  # "0.5 – 1"
    odd: list[dict[str, Any]] = field(default_factory=list)
    more: int = 0


def _fmt(x: float) -> str:
    return f"{x:g}"


def signal_rows(signals: dict[str, Any]) -> list[SignalRow]:
    """Rows for the ``signals`` key of a run result (worst signals first).

    >>> rows = signal_rows({"gpu-count": {"level": 1, "per": "node", "unit": "GPUs",
    ...     "pass": {"min": 8}, "values": {"n1": {"value": 8, "status": "pass", "reason": "",
    ...     "tests": ["t1"]}, "n2": {"value": 7, "status": "fail", "reason": "7 < 8",
    ...     "tests": ["t2"]}}}})
    >>> rows[0].counts, rows[0].bound, rows[0].odd[0]["target"]
    ('1 pass · 1 fail', '>= 8 GPUs', 'n2')
    """
    rows = []
    for name, sig in signals.items():
        values = sig.get("values", {})
        tally: dict[str, int] = {}
        for v in values.values():
            tally[v["status"]] = tally.get(v["status"], 0) + 1
        nums = [float(v["value"]) for v in values.values() if v.get("value") is not None]
        unit = f" {sig.get('unit')}" if sig.get("unit") else ""
        p = sig.get("pass", {})
        if "min" in p and "max" in p:
            bound = f"in [{_fmt(p['min'])}, {_fmt(p['max'])}]{unit}"
        else:
            bound = (f">= {_fmt(p['min'])}" if "min" in p else f"<= {_fmt(p.get('max', 0))}") + unit
        odd = [{"target": t, **v} for t, v in sorted(values.items()) if v["status"] != "pass"]
        rows.append(SignalRow(
            name=name, where=f"{sig.get('level', 1)} node{'s' if sig.get('level', 1) > 1 else ''}"
                             f" / {sig.get('per', 'node')}", bound=bound,
            counts=" · ".join(f"{n:,} {s}" for s, n in sorted(
                tally.items(), key=lambda kv: (kv[0] != "pass", kv[0]))),
            span=f"{_fmt(min(nums))} – {_fmt(max(nums))}{unit}" if nums else "no readings",
            odd=odd[:MAX_ODD], more=max(0, len(odd) - MAX_ODD)))
    return sorted(rows, key=lambda r: (not r.odd, r.name))
