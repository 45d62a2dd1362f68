"""Judging one test against the spec floor (peers come next: :mod:`fabriccheck.inference.peers`).

``evaluate`` turns a parsed tool result into an :class:`~fabriccheck.models.Observation`
(pass / fail / hang / unreachable / error, the judged number, the floor). An nccl test's
observation keeps, whatever its status, the transport its NCCL INFO lines show per host
(``facts["transport"]``, :func:`fabriccheck.inference.transport.transport_facts`).
"""

from __future__ import annotations

from fabriccheck.inference.transport import transport_facts
from fabriccheck.models import ERROR, FAIL, HANG, PASS, UNREACHABLE, Observation, RawResult, Test
from fabriccheck.probes.results import (
    FAILED,
    OK,
    Iperf3Result,
    NcclTestsResult,
    PerftestResult,
)
from fabriccheck.specs import ProbeSpec, TestSpec


def measured_value(test: Test, parsed: object, size_bytes: int) -> float | None:
    """The judged number of a parsed result: busbw (GB/s) at ``size_bytes`` for collectives
    (algbw for a single rank, whose busbw is 0 by definition), average Gb/s for ib_write_bw,
    received Gb/s for iperf3."""
    if isinstance(parsed, NcclTestsResult):
        if parsed.ranks == 1:  # one rank: busbw is 0 by definition, algbw is what moved
            rows = [r for r in parsed.rows if r.algbw_gbps is not None]
            below = [r for r in rows if r.size_bytes <= size_bytes] or rows
            return max(below, key=lambda r: r.size_bytes).algbw_gbps if below else None
        v = parsed.busbw_at(size_bytes)
        return v if v is not None else parsed.max_busbw_gbps
    if isinstance(parsed, PerftestResult):
        return parsed.bw_at(size_bytes)
    if isinstance(parsed, Iperf3Result):
        return parsed.received_gbps if parsed.received_gbps is not None else parsed.sent_gbps
    return None


def _errors_text(parsed: object) -> str:
    errs = getattr(parsed, "errors", ()) or ()
    parts = []
    for e in errs[:2]:
        where = "/".join(x for x in (e.host, e.hca) if x)
        parts.append(f"{e.kind}{' on ' + where if where else ''}: {e.message}"[:160])
    return "; ".join(parts)


def evaluate(test: Test, raw: RawResult, parsed: object, spec: TestSpec) -> Observation:
    """Judge one executed test.

    Parameters
    ----------
    test, raw
        The planned test and what the executor returned.
    parsed
        ``probes.detect.parse_raw(test, raw)``.
    spec
        The test spec; ``spec.lookup(test.probe, test.group_size)`` gives floor and warn.

    Returns
    -------
    Observation
        ``hang`` when the test timed out, ``unreachable`` when a host could not be reached,
        ``fail`` when the tool reported a failure or the value is below the floor (above it for
        latency), ``error`` when the output could not be read (not evidence either way).
    """
    ps: ProbeSpec = spec.lookup(test.probe, test.group_size)
    size = int(test.params.get("size_bytes", ps.size_bytes))
    common = {"unit": ps.unit, "floor": ps.floor, "expected": ps.expected or ps.warn, "raw": raw,
              "facts": transport_facts(parsed, test)}
    if raw.unreachable:
        return Observation(test, UNREACHABLE, reason=f"unreachable: {', '.join(raw.unreachable)}",
                           **common)
    if raw.timed_out:
        return Observation(test, HANG, reason=f"no result within {test.timeout_s:g} s (killed)",
                           **common)
    status = getattr(parsed, "status", None)
    value = measured_value(test, parsed, size)
    if status == FAILED or (isinstance(parsed, NcclTestsResult) and _wrong(parsed)):
        why = _errors_text(parsed) or getattr(parsed, "reason", "") or "tool reported failure"
        return Observation(test, FAIL, value=value, reason=f"tool failed: {why}", **common)
    if raw.error and status != OK:
        return Observation(test, ERROR, reason=f"executor: {raw.error}", **common)
    if value is None:
        why = getattr(parsed, "reason", "") or "no number in the output"
        return Observation(test, ERROR, reason=f"unreadable output: {why}", **common)
    below = value > ps.floor if ps.lower_is_better else value < ps.floor
    if below:
        return Observation(test, FAIL, value=value,
                           reason=f"{value:.1f} {ps.unit} below floor {ps.floor:g}", **common)
    return Observation(test, PASS, value=value, **common)


def _wrong(parsed: NcclTestsResult) -> bool:
    return any((r.wrong or 0) > 0 or (r.wrong_inplace or 0) > 0 for r in parsed.rows)


