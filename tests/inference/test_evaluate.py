"""Judging one test against the spec floor, and a round against its peers."""

from __future__ import annotations

from fabriccheck.inference.evaluate import evaluate
from fabriccheck.inference.peers import judge_against_peers
from fabriccheck.models import Flow, Observation, RawResult, Test
from fabriccheck.probes.results import (
    FAILED,
    INCOMPLETE,
    OK,
    NcclRow,
    NcclTestsResult,
    PerftestResult,
    PerftestRow,
    ToolError,
)
from fabriccheck.specs import load_spec

SPEC = load_spec("h100-ndr400-ib")  # ib_write_bw floor 335 Gb/s, nccl 2x floor 315 GB/s
T = Test("r1-00001", "ib_write_bw", ("a", "b"), (Flow("a/mlx5_0", "b/mlx5_0"),),
         params={"size_bytes": 8 << 20})


def perf(bw):
    return PerftestResult(OK, rows=(PerftestRow(8 << 20, 5000, bw + 2, bw),))


def test_pass_and_fail_against_the_floor():
    ok = evaluate(T, RawResult(T.test_id), perf(391.0), SPEC)
    assert ok.status == "pass" and ok.value == 391.0 and ok.floor == 335.0
    low = evaluate(T, RawResult(T.test_id), perf(196.0), SPEC)
    assert low.status == "fail" and "below floor 335" in low.reason


def test_hang_unreachable_tool_failure_and_garbage():
    hang = evaluate(T, RawResult(T.test_id, exit_code=None, timed_out=True),
                    PerftestResult(INCOMPLETE), SPEC)
    assert hang.status == "hang"
    unr = evaluate(T, RawResult(T.test_id, exit_code=None, unreachable=("b",)),
                   PerftestResult(INCOMPLETE), SPEC)
    assert unr.status == "unreachable"
    err = ToolError("ib_completion", "status 12 transport retry", host="a", hca="mlx5_0")
    failed = evaluate(T, RawResult(T.test_id, exit_code=1),
                      PerftestResult(FAILED, errors=(err,)), SPEC)
    assert failed.status == "fail" and "ib_completion on a/mlx5_0" in failed.reason
    garbage = evaluate(T, RawResult(T.test_id), PerftestResult("unparseable", reason="x"), SPEC)
    assert garbage.status == "error"


def test_nccl_wrong_results_fail_even_when_fast():
    t = Test("r1-2", "nccl", ("a", "b"), params={"size_bytes": 1 << 30})
    row = NcclRow(1 << 30, 1, "float", "sum", -1, 1.0, 200.0, 370.0, 3)
    obs = evaluate(t, RawResult("r1-2"), NcclTestsResult(OK, rows=(row,)), SPEC)
    assert obs.status == "fail" and obs.value == 370.0


def _round(values):
    out = []
    for i, v in enumerate(values):
        t = Test(f"t{i}", "ib_write_bw", (f"n{i}", f"m{i}"))
        status = "pass" if v >= 335 else "fail"
        reason = "" if status == "pass" else f"{v:.1f} Gb/s below floor 335"
        out.append(Observation(t, status, value=v, unit="Gb/s", floor=335.0, reason=reason))
    return out


def test_uniformly_slow_fabric_is_a_warning_not_every_node_bad():
    vals = [320.0 + (i % 5) for i in range(40)] + [150.0]
    judged, warnings = judge_against_peers(_round(vals), (), {})
    assert warnings and "uniformly slow" in warnings[0]
    assert [o.status for o in judged[:-1]] == ["pass"] * 40
    assert judged[-1].status == "fail"


def test_one_slow_test_among_peers_fails_above_the_floor():
    vals = [390.0 + (i % 7) * 0.5 for i in range(30)] + [336.0]
    judged, warnings = judge_against_peers(_round(vals), (), {})
    assert not warnings
    assert judged[-1].status == "fail" and "peer outlier" in judged[-1].reason
    assert all(o.status == "pass" for o in judged[:-1])


def test_few_peers_no_comparison():
    judged, warnings = judge_against_peers(_round([390.0, 340.0]), (), {})
    assert [o.status for o in judged] == ["pass", "pass"] and not warnings
