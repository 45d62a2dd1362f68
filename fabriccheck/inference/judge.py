"""Judge one executed round: parse each test's raw text, judge it against the spec, then
against its peers of the run (a uniformly slow fabric is a warning, not a list of faults)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fabriccheck.inference.evaluate import evaluate
from fabriccheck.inference.peers import judge_against_peers
from fabriccheck.models import Observation, RawResult, Test
from fabriccheck.policy import SweepPolicy
from fabriccheck.probes.detect import parse_raw
from fabriccheck.specs import TestSpec


def judge_round(tests: Sequence[Test], raws: Sequence[RawResult], spec: TestSpec,
                policy: SweepPolicy, earlier: Sequence[Observation] = (),
                attachment: Mapping[str, str] | None = None,
                ) -> tuple[list[Observation], list[str]]:
    """The round's observations and its fabric warnings; ``earlier`` are the run's
    observations so far (the peers), ``attachment`` the topology's NIC -> leaf map."""
    obs = [evaluate(t, r, parse_raw(t, r), spec) for t, r in zip(tests, raws, strict=True)]
    return judge_against_peers(obs, earlier, attachment or {}, z=policy.peer_z,
                               min_drop=policy.peer_min_drop)
