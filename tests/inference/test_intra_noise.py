"""Node-internal (1x) verdicts follow the run's own 1x noise (issue 31: under 8% jitter a
healthy node failed its 1x test four times in a row and was drained)."""

from __future__ import annotations

from fabriccheck.inference.intra import fails_needed, judge_intra, noise_rate
from fabriccheck.models import FAIL, PASS, Observation, RawResult, Test


def solo(node: str, rnd: int, ok: bool) -> Observation:
    t = Test(f"r{rnd}-{node}", "all_reduce_perf", (node,), (), round=rnd, purpose="sweep")
    return Observation(t, PASS if ok else FAIL, value=450.0 if ok else 380.0, unit="GB/s",
                       floor=410.0, expected=450.0, raw=RawResult(t.test_id))


def run(first_fail_share: float, nodes: int = 128) -> list[Observation]:
    """Round 1: every node's first 1x, ``first_fail_share`` of them failing; node-000 then
    fails three retests (four in all)."""
    bad = round(first_fail_share * nodes)
    obs = [solo(f"node-{i:03d}", 1, i >= bad) for i in range(nodes)]
    obs += [solo("node-000", r, False) for r in (2, 3, 4)]
    obs += [solo(f"node-{i:03d}", 2, True) for i in range(1, bad)]  # the others' retests pass
    return obs


def test_four_failures_convict_on_a_quiet_run_but_not_on_a_busy_one():
    quiet, busy = run(0.01), run(0.08)
    assert noise_rate(quiet)[0] < 0.02 and noise_rate(busy)[0] > 0.07
    bad, _, needed = judge_intra(quiet, set())
    assert "node-000" in bad and needed == 3
    bad, suspects, needed = judge_intra(busy, set())
    assert needed == 5 and not bad and "node-000" in suspects


def test_nodes_blamed_elsewhere_do_not_raise_the_noise():
    obs = run(0.08)
    settled = {f"node-{i:03d}" for i in range(10)}  # a slow node's 1x fails for its fault
    assert noise_rate(obs, settled)[0] < noise_rate(obs)[0]


def test_noise_too_high_convicts_nobody_on_1x_alone():
    assert fails_needed(0.3, 128) == 7
    bad, suspects, _ = judge_intra(run(0.3), set())
    assert not bad and "failures alone" in suspects["node-000"].reason
