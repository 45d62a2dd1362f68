"""nccl-tests ``-J file.json`` reports (JSON_FILE_VERSION 2-3, since 2025-10): same result type."""

from __future__ import annotations

import json
import math
from typing import Any

from fabriccheck.probes._text import ordered_unique
from fabriccheck.probes.results import (
    FAILED,
    INCOMPLETE,
    OK,
    UNPARSEABLE,
    NcclRow,
    NcclTestsResult,
    ToolError,
)


def looks_like_nccl_tests_json(text: str) -> bool:
    """True when ``text`` opens like an nccl-tests ``-J`` report (not an iperf3 one)."""
    head = text.lstrip()[:4000]
    return head.startswith("{") and '"nccl_version"' in head and '"config"' in head


def parse_nccl_tests_json(text: str) -> NcclTestsResult:
    """Parse an nccl-tests JSON report into the same :class:`NcclTestsResult` as stdout.

    ``root`` arrives as a padded string, ``nwrong`` as a number or null, NaN as ``"nan"``;
    a file cut short (killed run) is ``incomplete``.

    >>> r = parse_nccl_tests_json('{"version":3,"nccl_version":22703,"config":{"devices":'
    ...     '[{"rank":0,"hostname":"n1"}]},"results":[{"size":8,"count":2,"type":"float",'
    ...     '"redop":"sum","root":"    -1","out_of_place":{"time":9.5,"alg_bw":0.0,"bus_bw":0.0,'
    ...     '"nwrong":0},"in_place":{"time":9.1,"alg_bw":0.0,"bus_bw":0.0,"nwrong":null}}],'
    ...     '"out_of_bounds":{"count":0,"okay":"true"},"average_bus_bandwidth":'
    ...     '{"bandwidth":0.0,"okay":"unchecked"},"errors":[]}')
    >>> r.status, r.rows[0].root, r.rows[0].wrong_inplace, r.hosts
    ('ok', -1, None, ('n1',))
    """
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return NcclTestsResult(INCOMPLETE, reason="JSON report cut short (run killed?)")
    if not isinstance(doc, dict):
        return NcclTestsResult(UNPARSEABLE, reason="JSON that is not an nccl-tests report")
    config = _d(doc.get("config"))
    devices = [x for x in _l(config.get("devices")) if isinstance(x, dict)]
    rows = [r for r in (_row(_d(x)) for x in _l(doc.get("results"))) if r is not None]
    errors = _errors(doc, rows)
    status, reason = _status(doc, rows, errors)
    oob = _d(doc.get("out_of_bounds"))
    avg = _d(doc.get("average_bus_bandwidth"))
    args = _l(doc.get("args"))
    program = args[0].rsplit("/", 1)[-1] if args and isinstance(args[0], str) else ""
    return NcclTestsResult(
        status=status,
        rows=tuple(rows),
        collective=program.removesuffix("_mpi").removesuffix("_perf") or None,
        hosts=ordered_unique(d["hostname"] for d in devices if isinstance(d.get("hostname"), str)),
        ranks=len({_int(d.get("rank")) for d in devices}),
        avg_busbw_gbps=_num(avg.get("bandwidth")),
        errors=tuple(errors),
        reason=reason,
        min_bytes=_int(config.get("minimum_bytes")),
        max_bytes=_int(config.get("maximum_bytes")),
        validation=_int(config.get("validation")),
        out_of_bounds=_int(oob.get("count")),
    )


def _errors(doc: dict[str, Any], rows: list[NcclRow]) -> list[ToolError]:
    """The report's own errors, then wrong results (a row's ``nwrong`` or ``out_of_bounds``
    not okay) and an average bus bandwidth below ``NCCL_TESTS_MIN_BW``."""
    errors = [ToolError("nccl", e[:300]) for e in _l(doc.get("errors"))
              if isinstance(e, str) and e.strip()]
    bad = [r for r in rows if (r.wrong or 0) > 0 or (r.wrong_inplace or 0) > 0]
    oob = _d(doc.get("out_of_bounds"))
    if bad or _false(oob.get("okay")):
        first = bad[0].size_bytes if bad else None
        errors.append(ToolError("wrong_results", f"wrong results (out_of_bounds count "
                                f"{oob.get('count')}); first at {first} B"))
    avg = _d(doc.get("average_bus_bandwidth"))
    if _false(avg.get("okay")):
        errors.append(ToolError("bandwidth", f"average bus bandwidth {avg.get('bandwidth')} "
                                "GB/s below NCCL_TESTS_MIN_BW"))
    return errors


def _status(doc: dict[str, Any], rows: list[NcclRow], errors: list[ToolError]
            ) -> tuple[str, str]:
    """(status, reason): failed on the first error, incomplete without rows or without the
    summary a finished run writes, else ok."""
    complete = "end_time" in doc or "average_bus_bandwidth" in doc
    if errors:
        return FAILED, errors[0].message
    if not rows:
        return INCOMPLETE, "no results in the JSON report"
    if not complete:
        return INCOMPLETE, "JSON report without its summary"
    return OK, ""


def _row(r: dict[str, Any]) -> NcclRow | None:
    size, count = _int(r.get("size")), _int(r.get("count"))
    if size is None or size < 0:
        return None
    oop, inp = _d(r.get("out_of_place")), _d(r.get("in_place"))
    root = r.get("root")
    root_i = _int(root.strip()) if isinstance(root, str) and root.strip().lstrip("-").isdigit() \
        else _int(root)
    return NcclRow(
        size_bytes=size, count=count, dtype=_s(r.get("type")), redop=_s(r.get("redop")),
        root=root_i, time_us=_num(oop.get("time", oop.get("cpu_time"))),
        algbw_gbps=_num(oop.get("alg_bw")), busbw_gbps=_num(oop.get("bus_bw")),
        wrong=_int(oop.get("nwrong")), time_inplace_us=_num(inp.get("time", inp.get("cpu_time"))),
        algbw_inplace_gbps=_num(inp.get("alg_bw")), busbw_inplace_gbps=_num(inp.get("bus_bw")),
        wrong_inplace=_int(inp.get("nwrong")),
    )  # fmt: skip


def _d(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _l(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _s(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _false(v: Any) -> bool:
    return v is False or v == "false"


def _num(v: Any) -> float | None:
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _int(v: Any) -> int | None:
    f = _num(v)
    return int(f) if f is not None else None
