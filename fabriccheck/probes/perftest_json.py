"""perftest ``--out_json`` reports (``perftest_out.json``): test info and one result.

What perftest writes (``src/perftest_parameters.c``, ``write_test_info_to_file`` and
``write_*_report_to_file``): ``{"test_info": {"test": "RDMA_Write_BW_Test", "Device": ...,
"Link_type": ...}, "results": {"MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate"}}``
for BW tests, ``t_min ... percentile_99.9`` (usec) for latency tests, ``t_avg``/``tps_average``
in duration mode. Quirks read here: ``--raw_qos`` writes an unquoted ``sl:`` key; the file is
rewritten for every size, so ``-a`` keeps only the last one; and **the BW unit is not written**:
MiB/s by default, Gb/s with ``--report_gbits``. So BW numbers are given only when the unit is
known (the caller says it, or the table header of the text output in the same input does);
otherwise the result is ``incomplete`` and says why, never a guessed number.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fabriccheck.probes._text import json_number
from fabriccheck.probes.results import (
    INCOMPLETE,
    OK,
    UNPARSEABLE,
    PerftestLatencyRow,
    PerftestResult,
    PerftestRow,
    ToolError,
)

#: MiB/s -> Gb/s: x 2^20 bytes x 8 bits / 1e9
MIBPS_TO_GBPS = 2**20 * 8 / 1e9
_SIGN_RE = re.compile(r'^\s*\{\s*"test_info"\s*:', re.S)
_UNQUOTED_KEY_RE = re.compile(r"^(\s*)(sl)(\s*:)", re.M)
_UNIT_RE = re.compile(r"BW average\[([^\]]+)\]")


def looks_like_perftest_json(text: str) -> bool:
    """True when ``text`` starts with a perftest ``--out_json`` report.

    >>> looks_like_perftest_json('{\\n"test_info": {\\n"test": "RDMA_Write_BW_Test"')
    True
    """
    return bool(_SIGN_RE.match(text[:200]))


def parse_perftest_json(text: str, unit: str | None = None) -> PerftestResult:
    """Parse a perftest ``--out_json`` report.

    Parameters
    ----------
    text
        The report (optionally followed by the text output, whose table header names the unit).
    unit
        The BW unit the run printed (``Gb/sec`` with ``--report_gbits``, ``MiB/sec`` or
        ``MB/sec`` otherwise) when the caller knows it.

    Returns
    -------
    PerftestResult
        One row (BW or latency); ``incomplete`` when the BW unit is unknown or the report is
        cut, ``unparseable`` when it is not a perftest report.

    Examples
    --------
    >>> r = parse_perftest_json('{"test_info": {"test": "RDMA_Write_BW_Test", "Device": '
    ...     '"mlx5_0", "Link_type": "IB"}, "results": {"MsgSize": 65536, "n_iterations": 5000, '
    ...     '"BW_peak": 390.1, "BW_average": 389.9, "MsgRate": 0.74}}', unit="Gb/sec")
    >>> r.status, r.test, r.rows[0].bw_avg_gbps
    ('ok', 'RDMA_Write BW Test', 389.9)
    """
    text = _UNQUOTED_KEY_RE.sub(r'\1"\2"\3', text)
    try:
        doc, end = json.JSONDecoder().raw_decode(text, text.find("{"))
    except (json.JSONDecodeError, RecursionError, ValueError):
        return PerftestResult(INCOMPLETE, reason="perftest JSON report cut short")
    if not isinstance(doc, dict) or not isinstance(doc.get("test_info"), dict):
        return PerftestResult(UNPARSEABLE, reason="JSON that is not a perftest --out_json report")
    info, res = doc["test_info"], doc.get("results")
    m = _UNIT_RE.search(text, end) if unit is None else None
    unit = unit or (m.group(1) if m else None)
    base = {
        "test": _test_name(info.get("test")), "device": _str(info.get("Device")),
        "link_type": _str(info.get("Link_type")), "unit": unit,
        "side": "server" if "RX_depth" in info and "TX_depth" not in info else "client",
    }
    if not isinstance(res, dict):
        return PerftestResult(INCOMPLETE, reason="no results in the report", **base)
    if "t_avg" in res or "t_min" in res or "avg_lat" in res:
        return _latency(res, base)
    return _bandwidth(res, base, unit)


def _latency(res: dict[str, Any], base: dict) -> PerftestResult:
    size = _int(res.get("MsgSize"))
    row = PerftestLatencyRow(
        size_bytes=size or 0, iterations=_int(res.get("n_iterations")),
        t_min_us=_num(res.get("t_min")), t_max_us=_num(res.get("t_max")),
        t_typical_us=_num(res.get("t_typical")),
        t_avg_us=_num(res.get("t_avg", res.get("avg_lat"))), t_stdev_us=_num(res.get("t_stdev")),
        t_p99_us=_num(res.get("percentile_99")), t_p999_us=_num(res.get("percentile_99.9")),
    )  # fmt: skip
    if size is None:
        return PerftestResult(INCOMPLETE, reason="latency report without MsgSize", **base)
    return PerftestResult(OK, latency_rows=(row,), **base)


def _bandwidth(res: dict[str, Any], base: dict, unit: str | None) -> PerftestResult:
    size = _int(res.get("MsgSize"))
    avg = _num(res.get("BW_average", res.get("bw_avg")))
    if size is None or avg is None:
        return PerftestResult(INCOMPLETE, reason="BW report without MsgSize or BW_average",
                              **base)
    if unit is None:
        warn = ToolError("unit_unknown", "perftest --out_json does not record its BW unit "
                         "(MiB/s by default, Gb/s with --report_gbits)")
        return PerftestResult(INCOMPLETE, warnings=(warn,), reason=warn.message + ": parse the "
                              "text output, or the report followed by it", **base)
    factor = 1.0 if unit.startswith("Gb") else MIBPS_TO_GBPS
    peak = _num(res.get("BW_peak"))
    row = PerftestRow(size_bytes=size, iterations=_int(res.get("n_iterations")),
                      bw_peak_gbps=None if peak is None else peak * factor,
                      bw_avg_gbps=avg * factor, msg_rate_mpps=_num(res.get("MsgRate")))
    return PerftestResult(OK, rows=(row,), **base)


def _test_name(value: Any) -> str | None:
    """``RDMA_Write_BW_Test`` -> ``RDMA_Write BW Test`` (the text header's spelling)."""
    if not isinstance(value, str):
        return None
    name = re.sub(r"_(?=(?:Bidirectional|Post_List|BW|Latency|Multicast|forwarding|Test)(?:_|$))",
                  " ", value)
    return name.replace("Post_List", "Post List")


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


_num = json_number


def _int(value: Any) -> int | None:
    v = _num(value)
    return int(v) if v is not None and v >= 0 else None
