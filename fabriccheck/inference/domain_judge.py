"""Judge one round of NVLink-domain tests (docs/nvl72.md "The domain level"): the nccl-tests
table, the bar, and NCCL's own lines that prove nothing rode the network.

A domain test's bar is the spec's 1x nccl bar (the same NVLink 5 per GPU, through the same
NVSwitch trays: a tray's own four GPUs and the rack's 72 meet the same switch chips), or the
spec's ``intra_node_busbw_gbps`` with the floors the 1x bars use. A test fails when NCCL failed
(an IMEX tray's ``MNNVL ... not working`` WARN), when its INFO lines show a channel over the
network (``via NET/...``: a **configuration** fault of the domain, whatever its bandwidth),
or when its busbw is under the floor or far under its peers (the run's other domain tests of
the same shape; a slow fabric as a whole is not a list of slow trays).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import NamedTuple

from fabriccheck.errors import ConfigError
from fabriccheck.models import FAIL, HANG, PASS, UNREACHABLE, Observation, RawResult, Test
from fabriccheck.probes.detect import parse_raw
from fabriccheck.probes.nccl_mnnvl import read_mnnvl
from fabriccheck.probes.results import OK
from fabriccheck.specs import TestSpec

__all__ = ["DomainBar", "domain_bar", "judge_domain_round"]

#: a passing test further than this under the median of its peers is slow (3% jitter: ~5 sigma)
PEER_DROP = 0.15
#: peers needed before the median judges
MIN_PEERS = 4


class DomainBar(NamedTuple):
    """A domain test's bar, GB/s busbw (0: none)."""

    expected: float
    warn: float
    floor: float


def domain_bar(spec: TestSpec) -> DomainBar:
    """The domain tests' bar: the spec's 1x nccl bar, else ``intra_node_busbw_gbps`` with the
    1x floors' usual margins (8% warn, 14% floor), else no floor (peers only)."""
    try:
        ps = spec.lookup("nccl", 1, "all_reduce")
        if ps.group_size == 1:
            return DomainBar(ps.expected or ps.warn, ps.warn, ps.floor)
    except ConfigError:
        pass
    x = spec.intra_node_busbw_gbps
    return DomainBar(x, 0.92 * x, 0.86 * x) if x else DomainBar(0.0, 0.0, 0.0)


def judge_domain_round(tests: Sequence[Test], raws: Sequence[RawResult], spec: TestSpec,
                       earlier: Sequence[Observation] = ()) -> list[Observation]:
    """One observation per domain test, in order (``earlier``: the run's domain observations
    so far, the peers); ``facts`` hold the test's shape and what NCCL's lines said."""
    bar = domain_bar(spec)
    first = [_judge_one(t, r, bar) for t, r in zip(tests, raws, strict=True)]
    return [_against_peers(o, [*earlier, *first]) for o in first]


def _judge_one(test: Test, raw: RawResult, bar: DomainBar) -> Observation:
    p = test.params
    parsed = parse_raw(test, raw)
    reading = read_mnnvl(raw.stdout + ("\n" + raw.stderr if raw.stderr else ""))
    facts = {"rack": p.domain, "carve": p.carve, "carving": p.carving, "gpu": p.gpu,
             "transport": reading.to_json()}
    value = parsed.max_busbw_gbps if parsed.rows else None
    common = {"value": value, "unit": "GB/s", "floor": bar.floor or None,
              "expected": bar.expected or None, "raw": raw, "facts": facts}
    if raw.unreachable:
        return Observation(test, UNREACHABLE, reason="unreachable: " + ", ".join(raw.unreachable),
                           **common)
    if reading.network:
        hosts = ", ".join(sorted(reading.net_hosts)) or "?"
        via = ", ".join(k for k in sorted(reading.channels) if k.startswith(("NET", "COLL")))
        bw = f"; {value:.1f} GB/s" if value is not None else ""
        return Observation(test, FAIL, reason=f"config: the domain test rode the network "
                           f"({via} on {hosts}), not NVLink{bw}", **common)
    if raw.timed_out:
        return Observation(test, HANG, reason=f"no result within {test.timeout_s:g} s", **common)
    if parsed.status != OK or value is None:
        why = "; ".join(e.message for e in parsed.errors[:2]) or parsed.reason or parsed.status
        if reading.imex_hosts:
            why = (f"multi-node NVLink not working on {', '.join(sorted(reading.imex_hosts))} "
                   f"(NCCL WARN: check IMEX): {why}")
        return Observation(test, FAIL, reason=f"NCCL failed: {why}"[:400], **common)
    if bar.floor and value < bar.floor:
        return Observation(test, FAIL, reason=f"{value:.1f} GB/s < floor {bar.floor:g}",
                           **common)
    return Observation(test, PASS, **common)


def _against_peers(o: Observation, peers: Sequence[Observation]) -> Observation:
    """A passing test far under the median of the passing domain tests of its shape."""
    if o.status != PASS or o.value is None:
        return o
    shape = (o.facts.get("carve") == "gpu")
    vals = [x.value for x in peers if x.status == PASS and x.value is not None
            and (x.facts.get("carve") == "gpu") == shape]
    if len(vals) < MIN_PEERS:
        return o
    med = statistics.median(vals)
    if o.value < (1 - PEER_DROP) * med:
        return Observation(o.test, FAIL, o.value, o.unit, o.floor, o.expected,
                           f"{o.value:.1f} GB/s, {100 * (1 - o.value / med):.0f}% under the "
                           f"median {med:.1f} of its peers", o.raw, facts=o.facts)
    return o


def is_domain_test(test: Test) -> bool:
    """A test of the domain level (purpose ``domain``)."""
    return test.purpose == "domain"
