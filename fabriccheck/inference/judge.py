"""Judge one executed round: parse each test's raw text, judge it against the spec, then
against its peers of the run (a uniformly slow fabric is a warning, not a list of faults)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fabriccheck.costs import NO_METER, CostMeter
from fabriccheck.inference.evaluate import evaluate
from fabriccheck.inference.line_rate import at_line_rate
from fabriccheck.inference.peers import judge_against_peers
from fabriccheck.models import Observation, RawResult, Test
from fabriccheck.policy import SweepPolicy
from fabriccheck.probes.detect import parse_raw
from fabriccheck.specs import TestSpec
from fabriccheck.topology.view import FabricView


def judge_round(tests: Sequence[Test], raws: Sequence[RawResult], spec: TestSpec,
                policy: SweepPolicy, earlier: Sequence[Observation] = (),
                view: FabricView | None = None, meter: CostMeter = NO_METER,
                ) -> tuple[list[Observation], list[str]]:
    """The round's observations and its fabric warnings; ``earlier`` are the run's
    observations so far (the peers), ``view`` the fabric (floors follow each path's line
    rate; peers are grouped by path class); ``meter`` is charged parse and judge time."""
    with meter.timed("parse"):
        parsed = [parse_raw(t, r) for t, r in zip(tests, raws, strict=True)]
    with meter.timed("judge"):
        obs = [evaluate(t, r, p, spec) for t, r, p in zip(tests, raws, parsed, strict=True)]
        if view is not None:
            obs = [at_line_rate(o, view, spec.nic_gbps, spec.gpus_per_node) for o in obs]
        attachment: Mapping[str, str] = view.topology.attachment if view is not None else {}
        return judge_against_peers(obs, earlier, attachment, z=policy.peer_z,
                                   min_drop=policy.peer_min_drop)
