"""Configuration against peers (inference/config_peers.py): one outlier in a fleet is flagged
and nobody else; an even split flags nobody and says so; classes are never mixed; settings the
spec judged are counted but not judged again; and through evaluate_signals, a fault outlier is
drained and a warn one listed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.inference.config_peers import MIN_PEERS, judge_peers, majority
from fabriccheck.inference.signals import evaluate_signals
from fabriccheck.models import FAIL, PASS, Observation, Test
from fabriccheck.specs import SignalSpec

VALUES = st.one_of(st.integers(0, 9000), st.sampled_from(["28.41.1000", "28.39.1002", "dscp",
                                                          "pcp", "PIX", "SYS", "none"]))


def _fleet(n: int, value, nics: bool = True) -> dict[str, dict]:
    return {(f"n{i:03d}/mlx5_0" if nics else f"n{i:03d}"): {"setting": value} for i in range(n)}


@settings(max_examples=150, deadline=None)
@given(n=st.integers(MIN_PEERS + 1, 200), common=VALUES, odd=VALUES, where=st.data())
def test_one_outlier_in_a_fleet_is_flagged_and_nobody_else(n, common, odd, where):
    if odd == common:
        odd = f"not {common}"
    fleet = _fleet(n, common)
    target = sorted(fleet)[where.draw(st.integers(0, n - 1))]
    fleet[target] = {"setting": odd}
    out = judge_peers(fleet, severities={"setting": "fault"})
    assert [(o.target, o.value, o.majority, o.peers) for o in out.outliers] == \
        [(target, odd, common, n - 1)]
    assert out.outliers[0].severity == "fault" and not out.splits
    assert out.summary["setting"] == {"majority": common, "parts": n,
                                      "outliers": {target: odd}}


@settings(max_examples=100, deadline=None)
@given(half=st.integers(1, 100), a=VALUES, b=VALUES)
def test_an_even_split_flags_nobody_and_says_so(half, a, b):
    if a == b:
        b = f"not {a}"
    fleet = {**{f"a{i}": {"setting": a} for i in range(half)},
             **{f"b{i}": {"setting": b} for i in range(half)}}
    out = judge_peers(fleet)
    assert out.outliers == []
    assert len(out.splits) == 1 and out.summary["setting"]["majority"] is None
    assert "no clear majority" in out.splits[0].what


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 60), k=st.integers(0, 30))
def test_outliers_need_enough_agreeing_peers_and_a_three_in_four_majority(n, k):
    k = min(k, n)
    fleet = {**_fleet(n - k, "x", nics=False), **{f"odd{i}": {"setting": f"y{i % 2}"}
                                                  for i in range(k)}}
    out = judge_peers(fleet)
    agree = n - k
    clear = agree >= MIN_PEERS and agree >= 0.75 * n and (k == 0 or agree > (k + 1) // 2)
    assert bool(out.outliers) == (clear and k > 0)
    assert {o.target for o in out.outliers} <= {f"odd{i}" for i in range(k)}


def test_parts_of_another_class_are_not_peers():
    fleet = {**{f"n{i}/mlx5_0": {"firmware": "28.41.1000"} for i in range(6)},
             **{f"n{i}/mlx5_8": {"firmware": "22.38.1002"} for i in range(6)}}
    classes = {t: ("ConnectX-7" if t.endswith("_0") else "ConnectX-6 Dx") for t in fleet}
    assert judge_peers(fleet, classes).outliers == []
    assert len(judge_peers(fleet).splits) == 1  # without classes: a split, still nobody judged
    out = judge_peers(fleet, classes, labels={"ConnectX-7": "CX-7", "ConnectX-6 Dx": "CX-6"})
    assert set(out.summary) == {"firmware[CX-7]", "firmware[CX-6]"}


def test_a_setting_the_spec_judged_counts_for_the_majority_but_is_not_judged_again():
    fleet = _fleet(8, 9000)
    fleet["n003/mlx5_0"] = {"setting": 4200}
    out = judge_peers(fleet, skip={"n003/mlx5_0": {"setting"}})
    assert out.outliers == [] and out.summary["setting"]["outliers"] == {"n003/mlx5_0": 4200}


def test_an_ordered_setting_judges_only_worse_values():
    fleet = {f"n{i}": {"gpu_nic": "PXB", "gpudirect": "off"} for i in range(8)}
    fleet["n0"] = {"gpu_nic": "PIX", "gpudirect": "on"}  # better than its peers: fine
    fleet["n1"] = {"gpu_nic": "SYS", "gpudirect": "off"}
    out = judge_peers(fleet, severities={"gpu_nic": "fault"})
    assert [(o.target, o.setting) for o in out.outliers] == [("n1", "gpu_nic")]
    assert out.summary["gpu_nic"]["outliers"] == {"n0": "PIX", "n1": "SYS"}


def test_majority_needs_a_unique_top_value():
    assert majority({"a": 1, "b": 1, "c": 1, "d": 1}) == (1, True)
    assert majority({"a": 1, "b": 1, "c": 1}) == (1, False)  # 3 agree: fewer than MIN_PEERS
    assert majority({}) == (None, False)


# ---- through evaluate_signals --------------------------------------------------------------------
SIG = SignalSpec("nic-config", 1, "nic", "x", None, "nic-config", "faults", None, 0.0, 30.0)


def _reading(node: str, config: dict, judged=(), status=PASS, value=0.0) -> Observation:
    test = Test(f"t-{node}", "signal", (node,), params={"signal": "nic-config", "nic": "mlx5_0"})
    facts = {"config": config, "config_judged": list(judged), "config_class": "MT_0000000838",
             "config_severity": {"mtu": "fault", "firmware": "warn"}}
    why = "signal nic-config: nic mlx5_0: a finding of its own" if status == FAIL else ""
    return Observation(test, status, value, "faults", reason=why, facts=facts)


def test_evaluate_signals_drains_a_fault_outlier_and_lists_a_warn_one():
    obs = [_reading(f"n{i}", {"mtu": 9000, "firmware": "28.41.1000"}) for i in range(7)]
    obs.append(_reading("n7", {"mtu": 1500, "firmware": "28.39.1002"}))
    state = evaluate_signals(obs, [SIG], lambda t: 400.0)
    assert set(state.bad_nics) == {"n7/mlx5_0"}
    assert "mtu 1500 on n7/mlx5_0; 7 peers have 9000" in state.bad_nics["n7/mlx5_0"].reason
    assert [(w["target"], w["check"]) for w in state.warnings] == [("n7/mlx5_0",
                                                                      "cfg-nic-firmware")]
    assert state.by_signal["nic-config"].status["n7/mlx5_0"] == "fail"
    assert state.config["mtu"] == {"majority": 9000, "parts": 8, "outliers": {"n7/mlx5_0": 1500}}


@pytest.mark.parametrize("split", [4, 3])
def test_evaluate_signals_without_a_clear_majority_drains_nobody(split):
    obs = [_reading(f"n{i}", {"mtu": 9000 if i < split else 4200}) for i in range(8)]
    state = evaluate_signals(obs, [SIG])
    assert not state.bad_nics and not state.warnings
    assert [i["check"] for i in state.info] == ["cfg-peers-split"]


def test_a_reading_already_failing_keeps_its_reason_and_gains_the_peers():
    obs = [_reading(f"n{i}", {"mtu": 9000, "firmware": "28.41.1000"}) for i in range(6)]
    obs.append(_reading("n6", {"mtu": 1500}, judged=("firmware",), status=FAIL, value=1.0))
    state = evaluate_signals(obs, [SIG])
    reason = state.bad_nics["n6/mlx5_0"].reason
    assert reason.startswith("signal nic-config: nic mlx5_0: a finding of its own")
    assert "mtu 1500 on n6/mlx5_0; 6 peers have 9000" in reason
