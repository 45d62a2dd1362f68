"""Bisection's judge (inference/bisection.py): scale failures worth bisecting, the ladder's
at-scale suspects, and what each bisection part shows, from a hand-made history."""

from __future__ import annotations

import pytest

from fabriccheck.inference.bisection import (
    BisectPart,
    BisectVerdicts,
    PartOutcome,
    at_scale_suspects,
    judge_bisection,
    pod_local,
    unexplained_failures,
)
from fabriccheck.models import FAIL, HANG, PASS, Observation, RoundKind, Test
from fabriccheck.run_history import RoundRecord, RunHistory
from fabriccheck.topology import generate
from fabriccheck.topology.view import FabricView


@pytest.fixture(scope="module")
def view():
    # 16 nodes per leaf: node-001..016 on one set of leaves, node-017..032 on another
    return FabricView(generate({"kind": "rail-optimized", "nodes": 32, "rails": 8,
                                "gpus_per_node": 8, "nodes_per_leaf": 16, "spines": 4},
                               name="c32", fabric="infiniband"))


def n(*ids: int) -> tuple[str, ...]:
    return tuple(f"node-{i:03d}" for i in ids)


def obs(test_id: str, nodes: tuple[str, ...], status: str, purpose: str = "scale"):
    return Observation(Test(test_id, "nccl", nodes, purpose=purpose), status)


def history(*rounds: tuple[RoundKind, list[Observation]]) -> RunHistory:
    return RunHistory(tuple(RoundRecord(i, kind, tuple(o))
                            for i, (kind, o) in enumerate(rounds, 1)))


def test_pod_local(view):
    assert pod_local(n(1, 5, 16), view) and not pod_local(n(1, 17), view)


def test_a_failing_group_a_blamed_node_explains_is_not_bisected():
    got = unexplained_failures([obs("r1-1", n(0, 1), FAIL), obs("r1-2", n(2, 3), HANG),
                                obs("r1-3", n(4, 5), PASS), obs("r1-4", n(6, 7), FAIL)],
                               {"node-007"})
    assert [t.test_id for t in got] == ["r1-1", "r1-2"]


def test_at_scale_suspects_failed_every_group_they_were_in(view):
    h = history((RoundKind.SCALE, [obs("r1-1", n(0, 1, 16, 17), FAIL),
                                   obs("r1-2", n(2, 3, 18, 19), PASS)]),
                (RoundKind.SCALE, [obs("r2-1", n(0, 2, 17, 18), FAIL),
                                   obs("r2-2", n(1, 3, 16, 19), PASS)]),
                (RoundKind.SCALE, [obs("r3-1", n(1, 3, 16, 19), FAIL)]))
    assert at_scale_suspects(h, [1, 2], view, set()) == (list(n(0, 17)), "r1-1")
    assert at_scale_suspects(h, [1, 2], view, {"node-000"}) == (list(n(17)), "r1-1")
    assert at_scale_suspects(h, [1], view, set()) == ([], "")  # one group is not enough


def test_without_a_ladder_a_lone_failing_part_convicts(view):
    h = history((RoundKind.FOLLOW_UP, [obs("r5-1", n(0, 1, 20, 21), FAIL, "bisect"),
                                       obs("r5-2", n(2, 3, 22, 23), PASS, "bisect"),
                                       obs("r5-3", n(4, 24), FAIL, "bisect"),
                                       obs("r5-4", n(5, 25), FAIL, "bisect")]))
    parts = {"r5-1": BisectPart(n(0, 1), "r1-1"), "r5-2": BisectPart(n(2, 3), "r1-1"),
             "r5-3": BisectPart(n(4), "r2-7"), "r5-4": BisectPart(n(5), "r2-7")}
    v = judge_bisection(h, {"node-005"}, view, parts, ladder=False)
    assert dict(v.outcomes) == {"r5-1": PartOutcome.SPLIT, "r5-2": PartOutcome.CLEARED,
                                "r5-3": PartOutcome.CULPRIT, "r5-4": PartOutcome.EXPLAINED}
    assert dict(v.culprits) == {"node-004": ("r2-7", "r5-3")} and v.open_suspects() == []
    assert judge_bisection(h, set(), view, {}, ladder=False, last=v) is v


def test_after_a_ladder_a_lone_suspect_fails_twice_on_its_leaves(view):
    first = history((RoundKind.FOLLOW_UP, [obs("r9-1", n(4, 5, 6, 7), FAIL, "bisect"),
                                           obs("r9-2", n(20, 1, 2, 3), FAIL, "bisect")]))
    v = judge_bisection(first, set(), view, {"r9-1": BisectPart(n(4), "r8-3"),
                                             "r9-2": BisectPart(n(20), "r8-3")}, ladder=True)
    assert dict(v.outcomes) == {"r9-1": PartOutcome.CONFIRM, "r9-2": PartOutcome.UNSETTLED}
    assert dict(v.lone_fail) == {"node-004": "r9-1"} and not v.culprits
    assert v.open_suspects() == ["node-020"]
    second = RunHistory((*first.rounds, RoundRecord(
        10, RoundKind.FOLLOW_UP, (obs("r10-1", n(4, 8, 9, 10), FAIL, "bisect"),))))
    v2 = judge_bisection(second, set(), view, {"r10-1": BisectPart(n(4), "r9-1")},
                         ladder=True, last=v)
    assert v2.outcomes["r10-1"] is PartOutcome.CULPRIT
    assert dict(v2.culprits) == {"node-004": ("r9-1", "r9-1", "r10-1")}
    assert v2.open_suspects() == ["node-020"] and v.culprits == {}  # v is left as it was


def test_no_parts_no_verdicts(view):
    assert judge_bisection(RunHistory(), set(), view, {}, ladder=True) == BisectVerdicts()
