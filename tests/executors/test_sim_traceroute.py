"""The simulator's ECMP honours pinned 5-tuples and answers traceroute with real text."""

from __future__ import annotations

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.models import Flow, Test
from fabriccheck.probes.traceroute import parse_traceroute, path_links
from fabriccheck.topology import load_topology


@pytest.fixture(scope="module")
def roce():
    return load_topology("roce-rail-64")


FLOW = Flow("node-001/mlx5_0", "node-064/mlx5_0")


def trace(tid: str, sport: int, dport: int = 4791) -> Test:
    return Test(tid, "traceroute", ("node-001", "node-064"), (FLOW,),
                params={"sport": sport, "dport": dport})


def bw(tid: str, sport: int | None) -> Test:
    params = {"sport": sport, "dport": 4791} if sport is not None else {}
    return Test(tid, "ib_write_bw", ("node-001", "node-064"), (FLOW,), params=params)


def test_a_pinned_flow_keeps_its_path_across_tests_and_the_trace_shows_it(roce) -> None:
    ex = SimExecutor(roce, seed=7)
    names = ex.hop_names()
    spines = set()
    for sport in range(49152, 49152 + 24):
        a = ex.router.path(FLOW, f"a{sport}", (sport, 4791))
        b = ex.router.path(FLOW, f"b{sport}", (sport, 4791))
        assert a == b  # the 5-tuple, not the test, sets the path
        (raw,) = ex.run_round([trace(f"tr{sport}", sport)])
        assert raw.exit_code == 0 and raw.commands[0].startswith("node-001: traceroute -n")
        t = parse_traceroute(raw.stdout)
        assert t.reached and t.destination == ex.nic_ip(FLOW.dst)
        sw = roce.switches
        assert set(path_links(t, names)) == {lk for lk in a if lk[0] in sw and lk[1] in sw}
        spines |= {x for lk in a for x in lk if x.startswith("spine")}
    assert len(spines) >= 6  # varied source ports spread over the 8 equal-cost spines


def test_unpinned_flows_still_hash_per_test(roce) -> None:
    ex = SimExecutor(roce, seed=7)
    paths = {ex.router.path(FLOW, f"t{i}") for i in range(40)}
    assert len(paths) > 1


def test_a_down_link_stops_the_trace_there(roce) -> None:
    ex0 = SimExecutor(roce, seed=3)
    sport = 50000
    path = ex0.router.path(FLOW, "x", (sport, 4791))
    spine_link = next(lk for lk in path if lk[0].startswith("leaf") and lk[1].startswith("spine")
                      and "leaf-1" in lk[0])
    fs = FaultSet.from_dict({"faults": [{"kind": "link_down", "link": list(spine_link)}]})
    ex = SimExecutor(roce, faults=fs, seed=3)
    (raw,) = ex.run_round([trace("t", sport)])
    t = parse_traceroute(raw.stdout)
    assert not t.reached and path_links(t, ex.hop_names()) is None
    answered = [a for a in t.answered if a is not None]
    spine = spine_link[1]
    assert ex.hop_names()[answered[-1]] == spine  # the far leaf never answers
    (res,) = ex.run_round([bw("m", sport)])
    assert res.exit_code != 0 or "error" in (res.stdout + res.stderr).lower()


def test_trace_batches_do_not_move_the_round_counter(roce) -> None:
    ex = SimExecutor(roce, seed=1)
    ex.run_round([bw("a", 50001)])
    before = ex.round_no
    ex.run_round([trace("t", 50001)])
    assert ex.round_no == before


def test_a_trace_needs_a_pinned_tuple(roce) -> None:
    from fabriccheck.errors import ConfigError

    with pytest.raises(ConfigError, match="sport"):
        SimExecutor(roce).run_round([Test("t", "traceroute", ("node-001", "node-064"), (FLOW,))])
