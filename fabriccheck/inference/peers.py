"""Peers first: every measurement is judged against the same kind of measurements of the run.

A kind is probe x level (group size) x path class (:func:`fabriccheck.inference.table.path_class`)
x floor (floors follow each path's line rate: :mod:`fabriccheck.inference.line_rate`).
Its reference comes from the run's unbiased tests (sweep and scale rounds, every round so far):
the median, a robust spread (1.4826 x MAD, at least 1% of the median) and the 75th percentile.
Then, for every test of the round — confirmations, retests and bisection steps included:

- a value far below its peers fails even above the floor (``z`` robust deviations *and*
  ``min_drop`` below the median): a **peer outlier**;
- when three quarters of the kind sit below the floor (its 75th percentile is below it) and
  the median node has most of its tests there too, and the same holds for the probe x level
  pool across path classes (slowness on one class of path only is about those paths), the
  fabric is **uniformly slow**: a fabric
  warning, and a test below the floor but in line with its peers passes. The spec floor alone
  never convicts anyone when everybody is slow; a few slow nodes that drag a small class of
  tests down do not make a slow fabric.

A kind with fewer than ``min_peers`` measurements falls back to the probe x level pool, and
below that to the floor alone (few tests, nothing to compare).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from fabriccheck.inference.table import observation_frame
from fabriccheck.models import FAIL, PASS, Observation, Purpose

#: purposes whose tests are an unbiased sample of the fabric (follow-ups aim at suspects)
SAMPLE_PURPOSES = (str(Purpose.SWEEP), str(Purpose.SCALE))
POOLED = "*"
#: the reason of a test below its floor that passed because its peers are as slow
LIKE_PEERS = "below floor like its peers (fabric-wide)"


@dataclass(frozen=True)
class PeerRef:
    """What the run's peers of one kind measured."""

    median: float
    spread: float
    p75: float
    count: int
    #: the median node of the kind has most of its tests below the floor (a few slow nodes in
    #: a small class can drag three quarters of it down; that is not a slow fabric)
    typical_node_slow: bool = False

    def cut(self, z: float, min_drop: float) -> float:
        """Below this a value is a peer outlier."""
        return min(self.median - z * self.spread, self.median * (1 - min_drop))


def peer_references(observations: Sequence[Observation], attachment: Mapping[str, str],
                    min_peers: int = 16) -> dict[tuple, PeerRef]:
    """Kind -> reference, from the unbiased numeric tests among ``observations`` (pooled per
    probe x level under path ``"*"``). A kind also keys on the floor, which follows the
    path's line rate: a 100G flow is no peer of a 400G one."""
    return _references(observation_frame(observations, attachment), min_peers)


def _references(frame: pd.DataFrame, min_peers: int) -> dict[tuple, PeerRef]:
    sample = frame[frame["purpose"].isin(SAMPLE_PURPOSES) & frame["value"].notna()
                   & (frame["unit"] != "us")
                   & ((frame["status"] == str(PASS)) | frame["below_floor"])]
    out: dict[tuple, PeerRef] = {}
    for part in (sample, sample.assign(path=POOLED)):
        for key, rows in part.groupby(["probe", "level", "path", "floor"], dropna=False):
            if len(rows) >= min_peers:
                out[key] = _reference(rows)  # type: ignore[index]
    return out


def _reference(rows: pd.DataFrame) -> PeerRef:
    values = rows["value"]
    med = float(values.median())
    mad = float((values - med).abs().median()) * 1.4826
    per_node = rows.explode("nodes").groupby("nodes")["under_floor"].mean()
    return PeerRef(med, max(mad, 0.01 * med), float(values.quantile(0.75)), len(values),
                   bool(per_node.median() > 0.5))


def judge_against_peers(
    round_obs: Sequence[Observation], earlier: Sequence[Observation],
    attachment: Mapping[str, str], *, z: float = 4.0, min_drop: float = 0.10,
    min_peers: int = 16,
) -> tuple[list[Observation], list[str]]:
    """The round's observations re-judged against their peers, and the fabric warnings."""
    frame = observation_frame([*earlier, *round_obs], attachment)  # one table: peers + round
    refs = _references(frame, min_peers)
    frame = frame.iloc[len(earlier):]
    out = list(round_obs)
    slow_kinds: dict[tuple[str, int, str], tuple[PeerRef, float]] = {}
    for i, row in enumerate(frame.itertuples(index=False)):
        o = out[i]
        if o.value is None or o.unit == "us" or o.status not in (PASS, FAIL):
            continue
        key = (row.probe, row.level, row.path, row.floor)
        ref = refs.get(key) or refs.get((row.probe, row.level, POOLED, row.floor))
        if ref is None:
            continue
        cut = ref.cut(z, min_drop)
        pooled = refs.get((row.probe, row.level, POOLED, row.floor), ref)
        slow = o.floor is not None and all(r.p75 < o.floor and r.typical_node_slow
                                           for r in (ref, pooled))
        if slow:
            slow_kinds[(row.probe, row.level, row.path)] = (ref, o.floor)  # type: ignore[assignment]
        out[i] = _rejudge(o, ref, cut, slow, bool(row.below_floor))
    return out, [_warning(k, ref, floor) for k, (ref, floor) in sorted(slow_kinds.items())]


def _rejudge(o: Observation, ref: PeerRef, cut: float, slow: bool,
             below_floor: bool) -> Observation:
    value = o.value or 0.0
    if o.status == PASS and value < cut:
        return replace(o, status=FAIL, reason=(
            f"{value:.1f} {o.unit}: peer outlier (run median {ref.median:.1f}, "
            f"{100 * (1 - value / ref.median):.0f}% below)"))
    if o.status == FAIL and below_floor and slow and value >= cut:
        return replace(o, status=PASS, reason=(
            f"{value:.1f} {o.unit}: {LIKE_PEERS}"))
    return o


def passed_like_peers(o: Observation) -> bool:
    """A pass below the floor, in line with its peers (a uniformly slow kind of test)."""
    return o.status == PASS and o.reason.endswith(LIKE_PEERS)


def _warning(kind: tuple[str, int, str], ref: PeerRef, floor: float) -> str:
    probe, level, path = kind
    where = "" if path == POOLED else f" {path}"
    return (f"{probe} {level}x{where}: 3/4 of {ref.count} tests below the floor {floor:g} "
            f"(median {ref.median:.1f}): the fabric is uniformly slow, not individual nodes")
