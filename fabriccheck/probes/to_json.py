"""The ``fabriccheck parse --json`` contract (docs/design.md "Parse"): parser results as plain
dicts."""

from __future__ import annotations

from typing import Any

from fabriccheck.probes.nccl_transport import transport_summary
from fabriccheck.probes.results import (
    Iperf3Result,
    NcclLogScan,
    NcclRow,
    NcclTestsResult,
    PerftestLatencyRow,
    PerftestResult,
    PerftestRow,
)


def result_to_json(result: Any) -> dict[str, Any]:
    """The contract dict of any parser result; keys ``tool``, ``status``, ``reason`` first.

    Examples
    --------
    >>> from fabriccheck.probes.results import NcclTestsResult
    >>> list(result_to_json(NcclTestsResult("incomplete", reason="no output")))[:3]
    ['tool', 'status', 'reason']
    """
    if isinstance(result, NcclTestsResult):
        return nccl_tests_json(result)
    if isinstance(result, PerftestResult):
        return perftest_json(result)
    if isinstance(result, Iperf3Result):
        return iperf3_json(result)
    if isinstance(result, NcclLogScan):
        return nccl_log_json(result)
    raise TypeError(f"not a parser result: {type(result).__name__}")


def _nccl_row(r: NcclRow) -> dict[str, Any]:
    return {
        "size_bytes": r.size_bytes, "count": r.count, "type": r.dtype, "redop": r.redop,
        "root": r.root, "time_us": r.time_us, "algbw_gbps": r.algbw_gbps,
        "busbw_gbps": r.busbw_gbps, "wrong": r.wrong, "time_inplace_us": r.time_inplace_us,
        "algbw_inplace_gbps": r.algbw_inplace_gbps, "busbw_inplace_gbps": r.busbw_inplace_gbps,
        "wrong_inplace": r.wrong_inplace, "max_rel_error": r.max_rel_error,
        "max_rel_error_inplace": r.max_rel_error_inplace,
    }  # fmt: skip


def nccl_tests_json(r: NcclTestsResult) -> dict[str, Any]:
    """nccl-tests: ``rows[]`` (``size_bytes``, ``busbw_gbps``, ``busbw_inplace_gbps``,
    ``wrong``, ...), ``max_busbw_gbps``, ``hosts``, ``errors[]``, ``transport[]`` (per rank:
    ``host``, ``rank``, ``net``, ``gdr``, ``hcas``) and ``transport_summary`` (``net``:
    ``socket`` when any rank used sockets; ``socket_hosts``, ``no_gdr_hosts``)."""
    return {
        "tool": "nccl-tests", "status": r.status, "reason": r.reason,
        "collective": r.collective, "rows": [_nccl_row(x) for x in r.rows],
        "max_busbw_gbps": r.max_busbw_gbps, "avg_busbw_gbps": r.avg_busbw_gbps,
        "hosts": list(r.hosts), "ranks": r.ranks, "min_bytes": r.min_bytes,
        "max_bytes": r.max_bytes, "validation": r.validation, "out_of_bounds": r.out_of_bounds,
        "errors": [e.to_json() for e in r.errors], "warnings": [e.to_json() for e in r.warnings],
        "transport": [t.to_json() for t in r.transport],
        "transport_summary": transport_summary(r.transport),
    }  # fmt: skip


def _bw_row(r: PerftestRow) -> dict[str, Any]:
    return {"size_bytes": r.size_bytes, "iterations": r.iterations,
            "bw_peak_gbps": r.bw_peak_gbps, "bw_avg_gbps": r.bw_avg_gbps,
            "msg_rate_mpps": r.msg_rate_mpps}


def _lat_row(r: PerftestLatencyRow) -> dict[str, Any]:
    return {"size_bytes": r.size_bytes, "iterations": r.iterations, "t_min_us": r.t_min_us,
            "t_max_us": r.t_max_us, "t_typical_us": r.t_typical_us, "t_avg_us": r.t_avg_us,
            "t_stdev_us": r.t_stdev_us, "t_p99_us": r.t_p99_us, "t_p999_us": r.t_p999_us}


def perftest_json(r: PerftestResult) -> dict[str, Any]:
    """perftest: ``test``, ``device``, ``link_type``, ``rows[]`` in Gb/s, ``latency_rows[]``,
    ``errors[]``, ``warnings[]``."""
    return {
        "tool": "perftest", "status": r.status, "reason": r.reason, "test": r.test,
        "device": r.device, "link_type": r.link_type, "side": r.side, "program": r.program,
        "unit_printed": r.unit, "loopback": r.loopback, "rows": [_bw_row(x) for x in r.rows],
        "latency_rows": [_lat_row(x) for x in r.latency_rows], "bw_avg_gbps": r.bw_at(),
        "errors": [e.to_json() for e in r.errors], "warnings": [e.to_json() for e in r.warnings],
    }  # fmt: skip


def iperf3_json(r: Iperf3Result) -> dict[str, Any]:
    """iperf3: ``sent_gbps``, ``received_gbps``, ``retransmits``, ``errors[]``."""
    return {
        "tool": "iperf3", "status": r.status, "reason": r.reason, "sent_gbps": r.sent_gbps,
        "received_gbps": r.received_gbps, "retransmits": r.retransmits,
        "duration_s": r.duration_s, "streams": r.streams, "protocol": r.protocol,
        "lost_percent": r.lost_percent, "errors": [e.to_json() for e in r.errors],
    }  # fmt: skip


def nccl_log_json(r: NcclLogScan) -> dict[str, Any]:
    """nccl-log: ``hosts``, ``ranks`` (rank -> host), ``hcas`` ([host, hca]), ``peers``,
    ``suspects``, ``errors[]``, ``job_log`` (the timeout's triage, see probes.job_triage)."""
    return {
        "tool": "nccl-log", "status": r.status, "reason": r.reason, "hosts": list(r.hosts),
        "ranks": {str(k): v for k, v in (r.ranks or {}).items()},
        "hcas": [list(p) for p in r.hcas], "peers": list(r.peers),
        "suspects": list(r.suspects), "errors": [e.to_json() for e in r.errors],
        "job_log": r.job_log.to_json() if r.job_log is not None else None,
    }  # fmt: skip
