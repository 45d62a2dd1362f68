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
