"""Judge one executed round: parse each test's raw text, judge it against the spec, then
against its peers of the round (a uniformly slow fabric is a warning, not a list of faults)."""

from __future__ import annotations

from collections.abc import Sequence

from fabriccheck.inference.evaluate import evaluate, evaluate_peers
from fabriccheck.models import Observation, RawResult, Test
from fabriccheck.policy import SweepPolicy
from fabriccheck.probes.detect import parse_raw
from fabriccheck.specs import TestSpec


def judge_round(tests: Sequence[Test], raws: Sequence[RawResult], spec: TestSpec,
                policy: SweepPolicy) -> tuple[list[Observation], list[str]]:
    """The round's observations and its fabric warnings."""
    obs = [evaluate(t, r, parse_raw(t, r), spec) for t, r in zip(tests, raws, strict=True)]
    return evaluate_peers(obs, z=policy.peer_z, min_drop=policy.peer_min_drop,
                          slow_fraction=policy.fabric_slow_fraction)
