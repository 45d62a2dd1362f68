"""Port counters over the run's span: a closing read compared with the preflight's (pure).

The preflight reads each port's counters twice, 5 s apart, after ``/proc/uptime``; the first
round after the ladder reads them again (``params.span_of`` names the preflight reading). The
two texts joined are one series of reads whose window is the uptime between them plus the
closing read's own: the counters' growth over the ladder's traffic, judged as a rate per hour
like any window (docs/node-checks.md). A node that rebooted in between (its uptime went down)
has no span: its closing read is judged alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from fabriccheck.models import Observation, RawResult, Test
from fabriccheck.probes.node.counters import split_uptime


def span_raw(test: Test, raw: RawResult, earlier: Mapping[str, Observation],
             window_s: float | None) -> tuple[RawResult, float] | None:
    """The closing read ``raw`` joined after its preflight reading's text, and the seconds
    from the first read to the last; None when ``test`` is no closing read, the preflight
    reading is missing or has no uptime, or the node rebooted in between.

    >>> from fabriccheck.models import Test
    >>> t0 = Test("r1-sig-port-errors-n1-mlx5_0", "signal", ("n1",), 1)
    >>> t1 = Test("r9-span-sig", "signal", ("n1",), 9, params={"span_of": t0.test_id})
    >>> pre = Observation(t0, "pass", raw=RawResult(t0.test_id, "100.0 1.0\\nA\\n"))
    >>> got, span = span_raw(t1, RawResult(t1.test_id, "400.0 2.0\\nB\\n"), {t0.test_id: pre}, 5)
    >>> got.stdout, span
    ('100.0 1.0\\nA\\nB\\n', 305.0)
    """
    first = earlier.get(str(test.params.get("span_of") or ""))
    if first is None or first.raw is None:
        return None
    up_a = split_uptime(first.raw.stdout)[0]
    up_b, rest = split_uptime(raw.stdout)
    if up_a is None or up_b is None:
        return None
    span = up_b - up_a + (window_s or 0.0)
    if up_b < up_a or span <= 0:
        return None  # rebooted in between: the counters restarted
    return replace(raw, stdout=first.raw.stdout + rest), span
