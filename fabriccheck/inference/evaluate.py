"""Judging tests: one parsed result against the spec floor, then against its peers in the round.

``evaluate`` turns a parsed tool result into an :class:`~fabriccheck.models.Observation`
(pass / fail / hang / unreachable / error, the judged number, the floor). ``evaluate_peers``
compares a round's numbers with each other (median and MAD, robust to outliers): when most of a
round sits below the floor the *fabric* is slow — a fabric warning, and only outliers fail — and
one test far below its peers fails even above the floor.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

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
    common = {"unit": ps.unit, "floor": ps.floor, "expected": ps.expected or ps.warn, "raw": raw}
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


def evaluate_peers(
    observations: Sequence[Observation],
    *,
    z: float = 4.0,
    min_drop: float = 0.10,
    slow_fraction: float = 0.5,
    min_peers: int = 16,
) -> tuple[list[Observation], list[str]]:
    """Compare a round's measurements with their peers (same probe and group size).

    Only ``sweep`` tests are compared: confirmations, retests and bisection steps are aimed at
    suspects on purpose, so they are no unbiased sample of the fabric (the floor judges them).

    Returns the re-judged observations (same order) and fabric-level warnings. A value counts as
    an outlier when it is both ``z`` robust standard deviations (1.4826 x MAD) and ``min_drop``
    (relative) below the peers' median. When ``slow_fraction`` or more of the peers are below the
    floor, the whole fabric is slow: a warning, and only outliers keep failing.

    >>> from fabriccheck.models import Test
    >>> obs = [Observation(Test(f"t{i}", "ib_write_bw", ("a", "b")), "pass", value=390.0 + i % 3,
    ...                    floor=335.0) for i in range(19)]
    >>> obs.append(Observation(Test("slow", "ib_write_bw", ("c", "d")), "pass", value=340.0,
    ...                        floor=335.0))
    >>> judged, warnings = evaluate_peers(obs)
    >>> judged[-1].status, warnings
    ('fail', [])
    """
    out = list(observations)
    warnings: list[str] = []
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, o in enumerate(out):
        if (o.status in (PASS, FAIL) and o.value is not None and o.unit != "us"
                and o.test.purpose in ("sweep", "scale", "gate")):
            groups[(o.test.probe, o.test.group_size)].append(i)
    for (probe, size), idx in sorted(groups.items()):
        if len(idx) < min_peers:
            continue
        vals = [out[i].value for i in idx]  # type: ignore[misc]
        med = statistics.median(vals)
        mad = statistics.median(abs(v - med) for v in vals) * 1.4826
        scale = max(mad, 0.01 * med)
        cut = min(med - z * scale, med * (1 - min_drop))
        floor = out[idx[0]].floor
        below = sum(1 for i in idx if out[i].status == FAIL and _plain(out[i]))
        fabric_slow = floor is not None and below >= slow_fraction * len(idx)
        if fabric_slow and not _most_nodes_always_fail(out, idx, slow_fraction):
            fabric_slow = False
        if fabric_slow:
            warnings.append(
                f"{probe} {size}x: {below}/{len(idx)} tests below the floor {floor:g} "
                f"(median {med:.1f}): the fabric is uniformly slow, not individual nodes"
            )
        for i in idx:
            o = out[i]
            if o.status == PASS and o.value < cut:  # type: ignore[operator]
                out[i] = replace(o, status=FAIL, reason=(
                    f"{o.value:.1f} {o.unit}: peer outlier (round median {med:.1f}, "
                    f"{100 * (1 - o.value / med):.0f}% below)"))  # type: ignore[operator]
            elif fabric_slow and o.status == FAIL and _plain(o) and o.value >= cut:  # type: ignore[operator]
                out[i] = replace(o, status=PASS, reason=(
                    f"{o.value:.1f} {o.unit}: below floor like its peers (fabric-wide)"))
    return out, warnings


def _plain(o: Observation) -> bool:
    """A fail only for being below the floor (not a tool error)."""
    return o.reason.endswith(f"below floor {o.floor:g}") if o.floor is not None else False


def _most_nodes_always_fail(out: list[Observation], idx: list[int], slow_fraction: float) -> bool:
    """True when the typical node is slow: the median node failed more than ``slow_fraction``
    of its tests of the group (a uniformly slow fabric). A few slow nodes, NICs or ECMP
    collisions that drag many tests below the floor in a small cluster leave the median node
    with no failure."""
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # node -> [failed, tests]
    for i in idx:
        failed = out[i].status == FAIL and _plain(out[i])
        for n in out[i].test.nodes:
            tally[n][1] += 1
            tally[n][0] += failed
    return statistics.median(f / t for f, t in tally.values()) > slow_fraction
