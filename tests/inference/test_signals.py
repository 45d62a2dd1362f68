"""Signal readings judged: bound, noise margin and retest, peers (never drain), groups."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.inference.signals import (
    NOISE_MARGIN,
    evaluate_signals,
    judge_signal,
)
from fabriccheck.models import ERROR, FAIL, PASS, RawResult, Test
from fabriccheck.specs import SignalSpec


def spec(name="rate", per="nic", lo=400.0, hi=None, level=1):
    return SignalSpec(name=name, level=level, per=per, command="x",
                      value=r"(?P<value>\d+(?:\.\d+)?) Gb/sec", parser=None, unit="Gb/s",
                      pass_min=lo, pass_max=hi, timeout_s=10.0)


def reading(sig, node, value, rnd=1, nic="mlx5_0", nodes=None, text=None):
    params = {"signal": sig.name, "command": "x"}
    if sig.per == "nic":
        params["nic"] = nic
    t = Test(f"r{rnd}-sig-{sig.name}-{node}-{nic}", "signal", tuple(nodes or (node,)), round=rnd,
             params=params)
    raw = RawResult(t.test_id, stdout=text if text is not None else f"{value} Gb/sec (4X NDR)\n")
    return judge_signal(t, raw, sig)


def test_far_below_the_bound_is_bad_at_once_per_nic():
    s = spec()
    obs = [reading(s, f"n{i}", 400) for i in range(6)] + [reading(s, "n9", 200)]
    st_ = evaluate_signals(obs, [s])
    assert list(st_.bad_nics) == ["n9/mlx5_0"] and not st_.bad_nodes
    assert "signal rate: 200 Gb/s fails >= 400 Gb/s" in st_.bad_nics["n9/mlx5_0"].reason
    assert not st_.retest


def test_within_noise_is_retested_then_bad_or_a_glitch():
    s = spec()
    first = reading(s, "n1", 380)  # 5% short of 400: inside the 10% margin
    st1 = evaluate_signals([first], [s])
    assert st1.retest == [first] and not st1.bad_nics
    again = reading(s, "n1", 385, rnd=2)
    assert list(evaluate_signals([first, again], [s]).bad_nics) == ["n1/mlx5_0"]
    ok = reading(s, "n1", 401, rnd=2)
    st3 = evaluate_signals([first, ok], [s])
    assert not st3.bad_nics and not st3.retest
    assert st3.by_signal["rate"].status["n1/mlx5_0"] == "glitch"


def test_far_from_peers_is_a_suspect_never_bad():
    s = spec(lo=100.0)
    obs = [reading(s, f"n{i}", 400) for i in range(8)] + [reading(s, "n9", 200)]
    st_ = evaluate_signals(obs, [s])
    assert not st_.bad_nics and not st_.bad_nodes
    assert list(st_.suspects) == ["n9/mlx5_0"] and st_.suspects["n9/mlx5_0"].state == "suspect"
    assert "far from its peers" in st_.suspects["n9/mlx5_0"].reason


def test_peers_only_look_the_bad_way():
    s = spec(lo=100.0)  # a min-bound signal: a value far *above* its peers is not suspect
    obs = [reading(s, f"n{i}", 200) for i in range(8)] + [reading(s, "n9", 400)]
    assert not evaluate_signals(obs, [s]).suspects


def test_no_reading_is_untested_not_a_verdict():
    s = spec()
    t = Test("t1", "signal", ("n1",), params={"signal": "rate", "command": "x", "nic": "mlx5_0"})
    failed = judge_signal(t, RawResult("t1", stdout="400 Gb/sec", stderr="sh: x: not found",
                                       exit_code=127), s)
    assert failed.status == ERROR and "exited 127" in failed.reason
    garbled = judge_signal(t, RawResult("t1", stdout="rate unknown"), s)
    assert garbled.status == ERROR
    st_ = evaluate_signals([failed], [s])
    assert st_.untested == [("rate", "n1/mlx5_0")] and not st_.bad_nics


def test_group_readings_make_suspects_never_bad():
    s = spec(level=2, per="node")
    obs = [reading(s, "a", 100, nodes=("a", "b"))]
    st_ = evaluate_signals(obs, [s])
    assert not st_.bad_nodes and set(st_.suspects) == {"a", "b"}


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.floats(min_value=0, max_value=1000, allow_nan=False), min_size=1,
                       max_size=30),
       lo=st.floats(min_value=1, max_value=1000))
def test_invariants_bad_only_below_bound_beyond_noise_and_every_target_judged(values, lo):
    s = spec(lo=lo)
    values = [round(v, 3) for v in values]
    obs = [reading(s, f"n{i}", v, text=f"{v:.3f} Gb/sec") for i, v in enumerate(values)]
    assert all(o.status in (PASS, FAIL) for o in obs)
    st_ = evaluate_signals(obs, [s])
    r = st_.by_signal["rate"]
    assert len(r.status) == len(values)
    for i, v in enumerate(values):
        target = f"n{i}/mlx5_0"
        if target in st_.bad_nics:
            assert v < lo * (1 - NOISE_MARGIN) + 1e-9
        if v >= lo:
            assert target not in st_.bad_nics and r.status[target] in ("pass", "suspect")
        if lo * (1 - NOISE_MARGIN) < v < lo:
            assert r.status[target] == "retest"


def test_a_pending_retest_is_a_suspect_until_it_runs():
    s = spec()
    st_ = evaluate_signals([reading(s, "n1", 380)], [s])
    assert st_.suspects["n1/mlx5_0"].state == "suspect" and not st_.bad_nics


def test_a_few_stray_counts_near_the_peers_are_not_suspect():
    s = spec(name="errs", lo=None, hi=10.0)
    obs = [reading(s, f"n{i}", 0) for i in range(8)] + [reading(s, "n8", 3),
                                                        reading(s, "n9", 8)]
    st_ = evaluate_signals(obs, [s])
    assert list(st_.suspects) == ["n9/mlx5_0"]  # 8 of 10 allowed is suspect; 3 is not
