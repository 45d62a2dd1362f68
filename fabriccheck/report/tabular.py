"""Machine-readable report files: ``results.json`` (the full run) and ``observations.csv``."""

from __future__ import annotations

import csv
import io
import json

from fabriccheck.models import RunResult
from fabriccheck.serialize import run_result_to_dict

#: observations.csv columns, one row per test (pandas: ``pd.read_csv(path)``)
CSV_COLUMNS = (
    "test_id", "round", "probe", "purpose", "nodes", "nics", "status", "value", "unit", "floor",
    "expected", "duration_s", "reason",
)  # fmt: skip


#: results.json is indented for people up to this many tests, compact (and ~3x faster) above
INDENT_MAX_TESTS = 2000


def render_json(result: RunResult) -> str:
    """``results.json``: :func:`~fabriccheck.serialize.run_result_to_dict` with observations.

    >>> import json
    >>> from fabriccheck.models import RunResult
    >>> json.loads(render_json(RunResult(mode="sweep", nodes=["node-001"])))["drain"]
    []
    """
    indent = 1 if len(result.observations) <= INDENT_MAX_TESTS else None  # C encoder when big
    doc = run_result_to_dict(result, observations=True)
    return json.dumps(doc, indent=indent, default=str) + "\n"


def render_csv(result: RunResult) -> str:
    """``observations.csv``: one row per test; ``nodes`` and ``nics`` are space-separated.

    Missing numbers are empty cells (NaN in pandas).
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for o in result.observations:
        t = o.test
        w.writerow([
            t.test_id, t.round, t.probe, t.purpose, " ".join(t.nodes), " ".join(t.nics),
            o.status, _n(o.value), o.unit, _n(o.floor), _n(o.expected),
            _n(o.raw.duration_s if o.raw is not None else None), o.reason,
        ])  # fmt: skip
    return buf.getvalue()


def _n(x: float | None) -> str:
    return "" if x is None else repr(float(x))
