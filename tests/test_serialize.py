"""Run results survive a round trip through the JSON contract."""

from __future__ import annotations

import json

from fabriccheck.models import BAD, FAIL, Flow, Observation, RawResult, RunResult, Test, Verdict
from fabriccheck.serialize import run_result_from_dict, run_result_to_dict

CONTRACT_KEYS = [
    "rounds", "tests", "test_seconds", "bad_nodes", "bad_nics", "bad_links", "link_suspects",
    "unreachable", "drain",
]  # fmt: skip


def _result() -> RunResult:
    t = Test("r1-t0", "ib_write_bw", ("n1", "n2"), (Flow("n1/mlx5_0", "n2/mlx5_0"),), round=1,
             params={"size_bytes": 65536})
    raw = RawResult("r1-t0", stdout="text", exit_code=0, duration_s=3.5, commands=("ib_write_bw",))
    obs = Observation(t, FAIL, value=96.0, unit="Gb/s", floor=380.0, reason="low", raw=raw)
    v = Verdict("nic", "n1/mlx5_0", BAD, "slow with 2 partners", ("r1-t0",))
    lv = Verdict("link", "leaf -- spine", "suspect", link=("leaf", "spine"))
    return RunResult("sweep", ["n1", "n2"], rounds=2, tests=1, test_seconds=3.5,
                     bad_nics=["n1/mlx5_0"], bad_links=[("leaf", "spine")], drain=["n1"],
                     verdicts=[v, lv], observations=[obs], extra={"seed": 7})


def test_contract_keys_come_first_and_round_trip():
    d = run_result_to_dict(_result(), observations=True)
    assert list(d)[: len(CONTRACT_KEYS)] == CONTRACT_KEYS
    assert d["bad_links"] == [["leaf", "spine"]] and d["seed"] == 7
    back = run_result_from_dict(json.loads(json.dumps(d)))
    assert back.bad_links == [("leaf", "spine")]
    assert back.observations[0].raw.commands == ("ib_write_bw",)
    assert back.observations[0].test.flows == (Flow("n1/mlx5_0", "n2/mlx5_0"),)
    assert back.verdicts[1].link == ("leaf", "spine")
    assert back.extra == {"seed": 7}


def test_without_observations_only_non_healthy_verdicts():
    d = run_result_to_dict(_result())
    assert "observations" not in d
    assert {v["name"] for v in d["verdicts"]} == {"n1/mlx5_0", "leaf -- spine"}


def test_a_learned_path_survives_the_round_trip():
    from fabriccheck.models import Flow, Test, link_key
    from fabriccheck.serialize import test_from_dict, test_to_dict

    path = (link_key("leaf-0-0", "spine-3"), link_key("leaf-1-0", "spine-3"))
    t = Test("r1-1", "ib_write_bw", ("a", "b"), (Flow("a/m0", "b/m0", path),),
             params={"sport": 50000, "dport": 4791})
    d = test_to_dict(t)
    assert d["flows"] == [["a/m0", "b/m0", [["leaf-0-0", "spine-3"], ["leaf-1-0", "spine-3"]]]]
    back = test_from_dict(d)
    assert back.flows[0].path == path and back.params.sport == 50000
    assert test_from_dict(test_to_dict(Test("x", "iperf3", ("a", "b"), (Flow("a/e", "b/e"),)))
                          ).flows[0].path is None
