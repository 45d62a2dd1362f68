"""The intermittence recheck: enough samples of a part to tell an intermittent part from noise,
in ONE round.

A sweep gives a NIC two to four tests, too few to tell a part that fails one test in three from
1-2 % measurement glitches. A part with a failure nothing else explains ("lonely", see
:mod:`fabriccheck.inference.flaky`) gets its first recheck tests like a confirmation (client
against one proven-good partner, server against another, at once: links are full duplex),
and then the same tests again in later **waves** of the same round (``params.wave``: each wave
starts when the one before has ended, on the same NICs, so the round count does not grow),
``policy.recheck_samples`` samples in all, each ``policy.recheck_duration_s`` long. Every
sample carries ``params.recheck_of`` (the part), which is what the second-stage test in
``inference.flaky`` counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from fabriccheck.models import Link, Test
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.followup import GoodPool, plan_link_probes, plan_nic_confirm


def _tag_and_repeat(b: RoundBuilder, start: int, part: str) -> int:
    """Tag the tests planned since ``start`` as samples of ``part`` and repeat them in later
    waves up to ``policy.recheck_samples`` samples. Returns the samples planned."""
    first = b.tests[start:]
    if not first:
        return 0
    dur = b.policy.recheck_duration_s
    for i, t in enumerate(first):
        b.tests[start + i] = _sample(t, t.test_id, part, 0, dur)
    waves = max(1, -(-b.policy.recheck_samples // len(first)))  # ceil
    for w in range(1, waves):
        for t in first:
            b.tests.append(_sample(t, b._id(), part, w, dur))
    return len(first) * waves


def _sample(t: Test, test_id: str, part: str, wave: int, duration_s: float) -> Test:
    p = {**dict(t.params), "recheck_of": part, "duration_s": duration_s}
    if wave:
        p["wave"] = wave
    return replace(t, test_id=test_id, params=p)


def plan_nic_recheck(nic: str, b: RoundBuilder, pool: GoodPool, good_nics: set[str],
                     local: Sequence[str] = (), met: frozenset[str] = frozenset()) -> int:
    """Samples of ``nic`` against proven-good partners (two at once, repeated in waves).

    Returns the number of samples planned (0 when no partner is free this round)."""
    start = len(b.tests)
    plan_nic_confirm(nic, b, pool, good_nics, local, met=met)
    return _tag_and_repeat(b, start, nic)


def plan_link_recheck(link: Link, b: RoundBuilder, good_nics: set[str], *, seed: int) -> int:
    """Samples of an IB link: fresh known-good flows across it and no other suspect link,
    repeated in waves like a NIC's."""
    start = len(b.tests)
    plan_link_probes((), (link,), b, good_nics, seed=seed, retest=False)
    return _tag_and_repeat(b, start, str(Link.of(*link)))
