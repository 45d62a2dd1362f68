"""Convictions noise could explain (issue 31): a NIC found bad on failures that the run's own
noise rate makes likely among the NICs it tested is a suspect, not drained."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from fabriccheck.inference.attribute import infer
from fabriccheck.inference.chance import (
    ALPHA,
    PRIOR_RATE,
    PRIOR_TESTS,
    chance,
    fails_needed,
    noise_rate,
)
from tests.inference.test_attribute import VIEW, flow_obs

NIC = "node-001/mlx5_1"


def _background(fail_share: float, seed: int) -> list:
    """Three rounds of pair tests among node-010..063 on 4 rails, each NIC with a different
    partner per round; ``fail_share`` of them fail (noise: each failing NIC passed twice)."""
    rng = random.Random(seed)
    nodes = [f"node-{i:03d}" for i in range(10, 64)]
    out = []
    for rnd, shift in ((1, 1), (2, 7), (3, 19)):
        for rail in range(4):
            for i in range(0, len(nodes), 2):
                a, b = nodes[i], nodes[(i + shift) % len(nodes)]
                if a == b or (shift != 1 and (i + shift) % 2 == 0):
                    b = nodes[(i + shift + 1) % len(nodes)]
                status = "fail" if rng.random() < fail_share else "pass"
                out.append(flow_obs(a, b, rail, status, rnd=rnd, value=300.0 if status == "fail"
                                    else None))
    return out


def _nic_failing_four() -> list:
    """node-001's rail-1 NIC fails with two partners and two confirmations; its other rails
    pass (as in test_attribute's confirmation test)."""
    obs = [flow_obs("node-001", "node-002", 1, "fail"),
           flow_obs("node-003", "node-001", 1, "fail", rnd=2)]
    obs += [flow_obs("node-001", "node-004", r) for r in (0, 2, 3)]
    obs += [flow_obs("node-002", "node-005", 1, rnd=2), flow_obs("node-003", "node-006", 1)]
    obs += [flow_obs("node-007", "node-009", 1, rnd=2), flow_obs("node-010", "node-008", 1)]
    obs += [flow_obs("node-001", "node-007", 1, "fail", rnd=3, purpose="confirm"),
            flow_obs("node-008", "node-001", 1, "fail", rnd=3, purpose="confirm")]
    return obs


def test_a_quiet_run_convicts_the_nic_on_four_failures():
    inf = infer(_nic_failing_four() + _background(0.0, 1), VIEW)
    assert NIC in inf.bad_nics and NIC not in inf.nic_suspects


def test_a_busy_run_holds_the_same_nic_a_suspect_and_says_why():
    """A run where one test in ten fails with nothing to blame: 4 failures in a row happen to
    one of its ~200 healthy NICs far more often than the bar allows."""
    inf = infer(_nic_failing_four() + _background(0.1, 2), VIEW)
    assert NIC not in inf.bad_nics
    v = inf.nic_suspects[NIC]
    assert v.state == "suspect" and len(v.evidence) == 4
    assert "noise could explain it" in v.reason and "needs confirmation" in v.reason


def test_noise_rate_counts_only_tests_without_blamed_devices_and_is_smoothed():
    obs = _background(0.0, 3)
    bad = [flow_obs("node-001", "node-002", 1, "fail") for _ in range(50)]
    q = noise_rate(obs + bad, {"node-001"}, set())
    assert q == (PRIOR_RATE * PRIOR_TESTS) / (len(obs) + PRIOR_TESTS)
    q_nic = noise_rate(obs + bad, set(), {"node-002/mlx5_1"})
    assert q_nic == q, "a blamed NIC's tests are left out like a blamed node's"
    assert noise_rate([], set(), set()) == PRIOR_RATE, "no tests: the prior"


@given(st.floats(0.001, 0.3), st.integers(1, 200_000))
def test_fails_needed_is_the_fewest_failures_under_the_bar(rate, devices):
    n = fails_needed(rate, devices)
    assert chance(n, rate, devices) < ALPHA
    assert n == 1 or chance(n - 1, rate, devices) >= ALPHA


def test_the_documented_numbers():
    assert fails_needed(0.02, 4096) == 4 and fails_needed(0.02, 131_072) == 5
    assert fails_needed(0.065, 4096) == 6 and fails_needed(0.01, 16) == 3
