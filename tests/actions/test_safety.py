"""Safety rules: confirmation before blaming, the drain budget, who may be resumed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.actions.safety import ActionPolicy, plan_actions
from fabriccheck.errors import ConfigError
from fabriccheck.models import Flow, Observation, RunResult, Test, Verdict
from tests.runfactory import build_run, nodes


def _bw(tid, a, b, nic, value, status="fail"):
    t = Test(tid, "ib_write_bw", (a, b), (Flow(f"{a}/{nic}", f"{b}/{nic}"),))
    return Observation(t, status, value, "Gb/s", floor=380.0, expected=392.0)


def test_bad_nic_with_two_partners_is_drained_with_a_reason_naming_it():
    obs = [
        _bw("r0-1", "node-017", "node-002", "mlx5_3", 96.4),
        _bw("r1-1", "node-017", "node-040", "mlx5_3", 101.0),
        _bw("r0-2", "node-017", "node-002", "mlx5_0", 391.0, "pass"),
    ]
    result = RunResult(
        mode="sweep", nodes=["node-017", "node-002", "node-040"], bad_nics=["node-017/mlx5_3"],
        drain=["node-017"], observations=obs,
        verdicts=[Verdict("nic", "node-017/mlx5_3", "bad", "fails with 2 partners",
                          ("r0-1", "r1-1"))],
    )  # fmt: skip
    plan = plan_actions(result, ActionPolicy(max_drain=0.5))
    assert [a.node for a in plan.drain] == ["node-017"] and not plan.withheld
    assert plan.drain[0].reason == "fabriccheck: mlx5_3 ib_write_bw 96 Gb/s < 380 (2 tests)"
    assert plan.drain[0].evidence == ("r0-1", "r1-1")


def test_one_failing_observation_is_never_acted_on():
    obs = [_bw("r0-1", "n1", "n2", "mlx5_0", 50.0), _bw("r1-1", "n1", "n3", "mlx5_0", 390, "pass")]
    result = RunResult(
        mode="sweep", nodes=["n1", "n2", "n3"], bad_nodes=["n1"], drain=["n1", "n9"],
        observations=obs,
        # the verdict cites a passing test too: only failing evidence counts
        verdicts=[Verdict("node", "n1", "bad", "slow", ("r0-1", "r1-1"))],
    )  # fmt: skip
    plan = plan_actions(result, ActionPolicy(max_drain=1.0))
    assert plan.drain == []
    assert plan.unconfirmed["n1"].startswith("only 1 failing test(s) (r0-1)")
    assert plan.unconfirmed["n9"] == "no bad verdict backs it"


def test_fabric_wide_fault_acts_on_none_and_says_why():
    names = nodes(32)
    slow = {n: 120.0 for n in names[:20]}  # a spine gone bad: 20 of 32 nodes look broken
    result = build_run(names, node_gbps=slow, seed=4)
    assert len(result.drain) >= 10
    plan = plan_actions(result, ActionPolicy(max_drain=0.1))
    assert plan.withheld and plan.budget == 3 and plan.tested == 32
    assert plan.reason.startswith(f"fabric-wide problem: {len(plan.drain)} of 32 tested nodes")
    assert "drain budget of 10% (3 nodes)" in plan.reason
    assert plan.to_json()["withheld"] is True


def test_resume_only_for_held_nodes_that_passed_now():
    result = build_run(nodes(8), seed=5)
    plan = plan_actions(result, held=["node-002", "node-099"])
    assert [(a.node, a.action) for a in plan.resume] == [("node-002", "resume")]
    assert len(plan.resume[0].evidence) == 2 and plan.resume[0].reason.startswith("fabriccheck:")
    assert set(plan.recovered) == set(nodes(8))


def test_policy_rejects_nonsense():
    with pytest.raises(ConfigError, match="--max-drain"):
        ActionPolicy(max_drain=1.5)
    with pytest.raises(ConfigError, match="fewer than 2"):
        ActionPolicy(min_evidence=1)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(4, 24).map(lambda k: 2 * k),
    bad_share=st.floats(0, 1),
    max_drain=st.floats(0, 1),
    seed=st.integers(0, 10_000),
)
def test_property_budget_and_two_failing_tests(n, bad_share, max_drain, seed):
    names = nodes(n)
    slow = {x: 100.0 for x in names[: int(bad_share * n)]}
    result = build_run(names, node_gbps=slow, seed=seed, glitch_tests=[(0, names[-1])])
    plan = plan_actions(result, ActionPolicy(max_drain=max_drain))
    acted = [] if plan.withheld else plan.drain
    assert len(acted) <= max_drain * n + 1e-9
    failing = {o.test.test_id for o in result.observations if o.status == "fail"}
    for a in acted:
        assert len(set(a.evidence) & failing) >= 2
    confirmed = [v.name for v in result.verdicts if v.state == "bad" and len(v.evidence) >= 2]
    assert {a.node for a in plan.drain} == set(confirmed)
