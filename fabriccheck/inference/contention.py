"""RoCE contention: failing cross-leaf flows that ECMP hashing onto one link may explain.

RoCE flows are not pinned, so two flows leaving (or entering) one leaf in one round may hash
onto one uplink and both fail on a healthy fabric. Attribution sets such failures aside: a
failure contention explains by its numbers says nothing about links
(:func:`roce_collisions`), and any failure beside another at a leaf end convicts no node or
NIC without confirmation (:func:`shared_leaf_end`). A leaf end where every flow of the run
failed is not unlucky but slow (:func:`all_failed_ends`), and two flows whose learned paths
share no hop cannot have collided.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from fabriccheck.models import FAIL, PASS, Observation
from fabriccheck.topology.view import FabricView


def _leaf_ends(o: Observation, att: dict[str, str]) -> list[tuple[str, str]]:
    """``(leaf, "out")`` and ``(leaf, "in")`` of every cross-leaf flow of a test."""
    out = []
    for f in o.test.flows:
        s, d = att.get(f.src), att.get(f.dst)
        if s is not None and d is not None and s != d:
            out += [(s, "out"), (d, "in")]
    return out


def all_failed_ends(observations: Sequence[Observation], view: FabricView,
                    min_flows: int = 3) -> set[tuple[int, str, str]]:
    """RoCE: ``(round, leaf, out|in)`` ends of leaves where every one of ``min_flows`` or more
    cross-leaf flows of the run failed at that end. Contention is the luck of one round's
    hashing; a leaf end where every flow of every round failed is not unlucky, its uplinks are
    slow (a whole leaf at half speed makes each flow fail at half, and each pair of them "fits
    one link")."""
    att = view.topology.attachment
    tally: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])  # [fails, flows]
    rounds: dict[tuple[str, str], set[int]] = defaultdict(set)
    for o in observations:
        if o.status not in (PASS, FAIL):
            continue
        for end in _leaf_ends(o, att):
            tally[end][1] += 1
            tally[end][0] += o.status == FAIL
            rounds[end].add(o.test.round)
    return {(r, *end) for end, (k, n) in tally.items() if n >= min_flows and k == n
            for r in rounds[end]}


def roce_collisions(fails: list[Observation], view: FabricView, tol: float = 0.08,
                    skip: set[tuple[int, str, str]] = frozenset(),  # type: ignore[assignment]
                    ) -> set[str]:
    """RoCE: failing cross-leaf tests of one round that contention can explain.

    Flows hashed onto one link share it and fail together; what they get adds up to at most
    the link's rate. So a failure is set aside as possible contention only when another
    cross-leaf flow failed at the same leaf end (out of its source leaf or into its destination
    leaf) in that round and the two values together fit in one link (``v + w <= (1 + tol) x
    expected``). A flow failing alone at both ends, one too fast to have shared a link with
    any other failure there (a slow node at 0.6 beside a collided pair), or a tool failure (no
    number) is evidence. Two flows on a half-speed link (a quarter each) still fit and are set
    aside here; another round or a localization batch settles them.
    """
    att = view.topology.attachment
    ends: dict[tuple[int, str, str], list[Observation]] = defaultdict(list)
    for o in fails:
        if o.value is None or not o.expected:
            continue  # no number: the tool failed, contention does not do that
        for leaf, way in _leaf_ends(o, att):
            ends[(o.test.round, leaf, way)].append(o)
    out: set[str] = set()
    slow_end = {o.test.test_id for end in skip for o in ends.get(end, ())}
    for group in ends.values():
        for o in group:
            cap = (1 + tol) * o.expected  # type: ignore[operator]
            if o.test.test_id not in slow_end and any(
                    p is not o and o.value + p.value <= cap  # type: ignore[operator]
                    and _may_share(o, p, view) for p in group):
                out.add(o.test.test_id)
    return out


def _may_share(o: Observation, p: Observation, view: FabricView) -> bool:
    """Two tests may have shared a link: unless both flows' paths were learned (pinned RoCE
    flows, a traceroute on their 5-tuple) and share no directed switch hop."""
    ho = [view.learned_hops(f) for f in o.test.flows]
    hp = [view.learned_hops(f) for f in p.test.flows]
    if any(h is None for h in ho + hp):
        return True
    return bool(frozenset().union(*ho) & frozenset().union(*hp))


def shared_leaf_end(fails: list[Observation], view: FabricView) -> set[str]:
    """RoCE: failing cross-leaf tests that share a leaf end (out of one leaf or into one) with
    another failing test of their round: they may have hashed onto one link. A tool failure
    (no number) is not contention: it is never in the set and does not put others in it."""
    att = view.topology.attachment
    ends: dict[tuple[int, str, str], list[Observation]] = defaultdict(list)
    for o in fails:
        if o.value is None:
            continue
        for leaf, way in _leaf_ends(o, att):
            ends[(o.test.round, leaf, way)].append(o)
    return {o.test.test_id for group in ends.values() if len(group) >= 2 for o in group
            if any(p is not o and _may_share(o, p, view) for p in group)}
