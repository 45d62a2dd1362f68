"""SimExecutor end to end: its text goes through the REAL parsers and gives back the model."""

from __future__ import annotations

import statistics

import pytest

from fabriccheck.executors.base import Executor
from fabriccheck.executors.sim.model import Router
from fabriccheck.models import Test
from fabriccheck.probes.detect import parse_raw
from fabriccheck.probes.iperf3 import parse_iperf3
from fabriccheck.probes.nccl_tests import parse_nccl_tests
from fabriccheck.probes.perftest import parse_perftest
from tests.executors.sim.simfab import h100_spec, nccl, pair, rail_fabric, sim


@pytest.fixture(scope="module")
def ib():
    return rail_fabric("infiniband")


@pytest.fixture(scope="module")
def roce():
    return rail_fabric("roce")


def busbw(raw) -> float:
    res = parse_nccl_tests(raw.stdout)
    assert res.status == "ok", (res.reason, raw.stdout[-500:])
    return res.max_busbw_gbps


def gbits(raw) -> float:
    res = parse_perftest(raw.stdout)
    assert res.status == "ok", res.reason
    return res.bw_at()


def test_is_an_executor(ib):
    assert isinstance(sim(ib), Executor)


def test_healthy_two_node_ring_over_8_rails_is_376(ib):
    ex = sim(ib)
    [raw] = ex.run_round([nccl(ib, "t1", ["node-001", "node-003"], min_bytes=1 << 30)])
    res = parse_nccl_tests(raw.stdout)
    assert res.status == "ok" and raw.exit_code == 0
    assert res.hosts == ("node-001", "node-003")
    assert res.ranks == 16
    assert [r.size_bytes for r in res.rows] == [1 << 30, 2 << 30, 4 << 30, 8 << 30]
    bws = [r.busbw_gbps for r in res.rows]
    assert bws == sorted(bws)  # grows with size toward the asymptote
    assert res.max_busbw_gbps == pytest.approx(8 * 50 * 0.94, rel=0.01)
    [cmd] = raw.commands
    assert cmd.startswith("node-001: ")
    assert "mpirun" in cmd and "-np 16" in cmd and "-H node-001:8,node-003:8" in cmd
    assert "all_reduce_perf -b 1073741824 -e 8589934592 -f 2 -g 1" in cmd
    assert "NCCL_ALGO=Ring" in cmd
    # duration: launch + (warmup+iters) × row times, out-of-place and in-place
    rows_s = sum(2 * 21 * r.time_us for r in res.rows) / 1e6
    assert raw.duration_s == pytest.approx(2.0 + rows_s, rel=0.02)


def test_nic_at_quarter_speed_gives_a_quarter(ib):
    healthy = busbw(sim(ib).run_round([nccl(ib, "t", ["node-001", "node-003"])])[0])
    ex = sim(ib, {"faults": [{"kind": "nic_degraded", "nic": "node-003/mlx5_5", "factor": 0.25}]})
    bad = busbw(ex.run_round([nccl(ib, "t", ["node-001", "node-003"])])[0])
    assert bad / healthy == pytest.approx(0.25, abs=0.01)
    # the same NIC in ib_write_bw, and only on its rail
    r5, r4 = ex.run_round([pair(ib, "p5", "node-003", "node-005", rail=5),
                           pair(ib, "p4", "node-003", "node-005", rail=4)])
    assert gbits(r5) == pytest.approx(0.25 * 392, rel=0.01)
    assert gbits(r4) == pytest.approx(392, rel=0.01)


def test_two_flows_on_one_link_get_half_each():
    # 2 nodes per leaf, one spine: node-001 and node-002 reach leaf-1-0 over one uplink
    topo = rail_fabric("infiniband", nodes=4, rails=1, spines=1)
    ex = sim(topo)
    a, b = ex.run_round([pair(topo, "a", "node-001", "node-003"),
                         pair(topo, "b", "node-002", "node-004")])
    assert gbits(a) == pytest.approx(196, rel=0.01)
    assert gbits(b) == pytest.approx(196, rel=0.01)
    # alone, or in opposite directions (links are full duplex), each gets the full rate
    [alone] = ex.run_round([pair(topo, "a", "node-001", "node-003")])
    c, d = ex.run_round([pair(topo, "c", "node-001", "node-003"),
                         pair(topo, "d", "node-004", "node-002")])
    assert gbits(alone) == gbits(c) == gbits(d) == pytest.approx(392, rel=0.01)


def test_max_min_gives_a_slow_tests_leftover_to_the_other():
    topo = rail_fabric("infiniband", nodes=4, rails=1, spines=1)
    ex = sim(topo, {"faults": [{"kind": "nic_degraded", "nic": "node-001/mlx5_0",
                                "factor": 0.25}]})
    slow, fast = ex.run_round([pair(topo, "a", "node-001", "node-003"),
                               pair(topo, "b", "node-002", "node-004")])
    assert gbits(slow) == pytest.approx(0.98 * 100, rel=0.01)
    assert gbits(fast) == pytest.approx(0.98 * 300, rel=0.01)


def test_node_hang_times_out_with_no_output(ib):
    ex = sim(ib, {"faults": [{"kind": "node_hang", "node": "node-004"}]})
    test = nccl(ib, "h", ["node-002", "node-004"])
    test = Test(test.test_id, test.probe, test.nodes, test.flows, timeout_s=90.0,
                params=test.params)
    [raw] = ex.run_round([test])
    assert raw.timed_out and raw.exit_code is None and raw.stdout == ""
    assert raw.duration_s == 90.0
    assert parse_raw(test, raw).status == "incomplete"


def test_unreachable_node(ib):
    ex = sim(ib, {"faults": [{"kind": "node_unreachable", "node": "node-006"}]})
    test = pair(ib, "u", "node-005", "node-006")
    [raw] = ex.run_round([test])
    assert raw.unreachable == ("node-006",) and raw.exit_code is None
    assert "ssh: connect to host node-006 port 22" in raw.stderr
    res = parse_raw(test, raw)
    assert res.status == "incomplete" and res.errors[0].host == "node-006"


def test_nic_down_names_host_and_hca(ib):
    ex = sim(ib, {"faults": [{"kind": "nic_down", "nic": "node-002/mlx5_6"}]})
    t_nccl = nccl(ib, "n", ["node-002", "node-007"])
    t_ib = pair(ib, "p", "node-002", "node-007", rail=6)
    t_ok = pair(ib, "q", "node-002", "node-007", rail=1)
    r_nccl, r_ib, r_ok = ex.run_round([t_nccl, t_ib, t_ok])
    assert r_nccl.exit_code == 3 and "Exit code:    3" in r_nccl.stderr
    res = parse_raw(t_nccl, r_nccl)
    assert res.status == "failed"
    named = {(e.host, e.hca) for e in res.errors if e.kind == "ib_completion"}
    assert ("node-002", "mlx5_6") in named
    assert all(hca == "mlx5_6" for _, hca in named)
    assert r_ib.exit_code == 1
    res_ib = parse_raw(t_ib, r_ib)
    assert res_ib.status == "failed" and res_ib.device == "mlx5_6"
    assert any(e.status == "12" for e in res_ib.errors)
    assert r_ok.exit_code == 0 and gbits(r_ok) == pytest.approx(392, rel=0.01)


def test_link_down_breaks_iperf3_over_it(ib):
    t = pair(ib, "i", "node-001", "node-003", probe="iperf3")
    route = ib.route(ib.nic("node-001", 0), ib.nic("node-003", 0))
    uplink = next(k for k in route if k[0].startswith("leaf") and k[1].startswith("spine"))
    ex = sim(ib, {"faults": [{"kind": "link_down", "link": list(uplink)}]})
    [raw] = ex.run_round([t])
    assert raw.exit_code == 1
    res = parse_raw(t, raw)
    assert res.status == "failed" and res.errors
    [ok] = sim(ib).run_round([t])
    got = parse_iperf3(ok.stdout)
    assert got.status == "ok" and got.received_gbps == pytest.approx(0.94 * 400, rel=0.01)
    assert got.duration_s == pytest.approx(5, abs=0.1)
    assert ok.commands[0].startswith("node-003: iperf3 -s")
    assert ok.commands[1].startswith("node-001: iperf3 -J -c ")


def test_ib_follows_route_exactly(ib):
    src, dst = ib.nic("node-001", 2), ib.nic("node-005", 2)
    route = ib.route(src, dst)
    assert Router(ib, seed=7).path(pair(ib, "x", "node-001", "node-005", 2).flows[0], "x") == route
    on_route = next(k for k in route if k[1].startswith("spine"))
    off_route = next(k for p in ib.paths(src, dst) for k in p
                     if k[1].startswith("spine") and k not in route)
    t = pair(ib, "x", "node-001", "node-005", rail=2)
    [bad] = sim(ib, {"faults": [{"kind": "link_down", "link": list(on_route)}]}).run_round([t])
    [fine] = sim(ib, {"faults": [{"kind": "link_down", "link": list(off_route)}]}).run_round([t])
    assert bad.exit_code == 1 and fine.exit_code == 0


def test_roce_hashes_flows_over_the_ecmp_set(roce):
    src, dst = roce.nic("node-001", 0), roce.nic("node-005", 0)
    ecmp = roce.paths(src, dst)
    assert len(ecmp) == 4
    tests = [pair(roce, f"t{i:03d}", "node-001", "node-005") for i in range(64)]
    router = Router(roce, seed=3)
    chosen = [router.path(t.flows[0], t.test_id) for t in tests]
    assert set(chosen) == set(ecmp)  # every path is used by some test
    assert max(chosen.count(p) for p in ecmp) < 32  # and none takes most of them
    assert Router(roce, seed=4).path(tests[0].flows[0], "t000") in ecmp
    # through the executor: a down uplink fails exactly the tests hashed onto it
    uplink = next(k for k in ecmp[1] if k[0].startswith("leaf") and k[1].startswith("spine"))
    ex = sim(roce, {"faults": [{"kind": "link_down", "link": list(uplink)}]}, seed=3)
    failed = {r.test_id for t in tests for r in ex.run_round([t]) if r.exit_code != 0}
    expect = {t.test_id for t, p in zip(tests, chosen, strict=True) if uplink in p}
    assert failed == expect and 0 < len(failed) < len(tests)


def test_deterministic_and_order_independent(ib):
    faults = {"noise": {"jitter": 0.03, "glitch_rate": 0.1},
              "faults": [{"kind": "link_flapping", "link": ["leaf-0-0", "spine-0"],
                          "probability": 0.5}]}
    tests = [nccl(ib, "a", ["node-001", "node-003"]), pair(ib, "b", "node-002", "node-004"),
             pair(ib, "c", "node-005", "node-007", probe="iperf3"),
             nccl(ib, "d", ["node-006", "node-008"], rails=[1, 2])]
    one = sim(ib, faults, seed=11).run_round(tests)
    two = sim(ib, faults, seed=11).run_round(tests)
    assert one == two
    rev = sim(ib, faults, seed=11).run_round(tests[::-1])
    assert one == rev[::-1]
    other = sim(ib, faults, seed=12).run_round(tests)
    assert [r.stdout for r in other] != [r.stdout for r in one]


def test_node_slow_slows_every_test_of_the_node(ib):
    spec = h100_spec()
    ex = sim(ib, {"faults": [{"kind": "node_slow", "node": "node-004", "factor": 0.5}]},
             spec=spec)
    single, paired, other = ex.run_round([
        nccl(ib, "s", ["node-004"]), pair(ib, "p", "node-004", "node-006"),
        nccl(ib, "o", ["node-005"])])
    assert busbw(single) == pytest.approx(0.5 * spec.intra_node_busbw_gbps, rel=0.01)
    assert busbw(other) == pytest.approx(spec.intra_node_busbw_gbps, rel=0.01)
    assert gbits(paired) == pytest.approx(0.5 * 392, rel=0.01)


def test_flapping_link_fails_about_its_probability(ib):
    src, dst = ib.nic("node-001", 0), ib.nic("node-003", 0)
    uplink = next(k for k in ib.route(src, dst) if k[1].startswith("spine"))
    ex = sim(ib, {"faults": [{"kind": "link_flapping", "link": list(uplink),
                              "probability": 0.5}]}, seed=5)
    outcomes = [ex.run_round([pair(ib, f"f{i}", "node-001", "node-003")])[0].exit_code
                for i in range(60)]
    fails = sum(1 for c in outcomes if c != 0)
    assert 15 <= fails <= 45
    # the same test id retried in a later round draws again (transient)
    again = [ex.run_round([pair(ib, "same", "node-001", "node-003")])[0].exit_code
             for _ in range(30)]
    assert 0 in again and 1 in again


def test_jitter_and_glitches(ib):
    ex = sim(ib, {"noise": {"jitter": 0.03}}, seed=1)
    vals = [gbits(ex.run_round([pair(ib, f"j{i}", "node-001", "node-003")])[0])
            for i in range(80)]
    assert statistics.mean(vals) == pytest.approx(392, rel=0.01)
    assert 0.02 < statistics.stdev(vals) / 392 < 0.04
    ex = sim(ib, {"noise": {"glitch_rate": 1.0}}, seed=1)
    low = [gbits(ex.run_round([pair(ib, f"g{i}", "node-001", "node-003")])[0])
           for i in range(20)]
    assert all(0.3 * 392 - 1 <= v <= 0.7 * 392 + 1 for v in low)


def test_a_very_slow_link_runs_into_the_timeout(ib):
    ex = sim(ib, {"faults": [{"kind": "nic_degraded", "nic": "node-001/mlx5_0",
                              "factor": 0.001}]})
    t = nccl(ib, "slow", ["node-001", "node-003"], min_bytes=1 << 30)
    t = Test(t.test_id, t.probe, t.nodes, t.flows, timeout_s=30.0, params=t.params)
    [raw] = ex.run_round([t])
    assert raw.timed_out and raw.exit_code is None and raw.duration_s == 30.0
    res = parse_raw(t, raw)
    assert res.status == "incomplete"


def test_allreduce_cpu_prints_a_table_the_nccl_parser_reads():
    lab = rail_fabric("roce", nodes=4, rails=1, spines=1)
    ex = sim(lab)
    t = Test("c", "allreduce-cpu", ("node-001", "node-003"),
             nccl(lab, "x", ["node-001", "node-003"], rails=[0]).flows,
             params={"size_bytes": 1 << 30})
    [raw] = ex.run_round([t])
    res = parse_raw(t, raw)
    assert res.status == "ok" and res.ranks == 2
    assert res.max_busbw_gbps == pytest.approx(0.9 * 400 / 8, rel=0.02)
    assert "fabriccheck.probes.allreduce_cpu" in raw.commands[0]


def test_spec_gives_sizes_and_host_caps(ib):
    spec = h100_spec()
    ex = sim(ib, spec=spec)
    t_ib = Test("w", "ib_write_bw", ("node-001", "node-003"))  # no flows, no params
    t_ip = Test("i", "iperf3", ("node-002", "node-004"))
    r_ib, r_ip = ex.run_round([t_ib, t_ip])
    res = parse_perftest(r_ib.stdout)
    assert res.rows[0].size_bytes == spec.lookup("ib_write_bw", 2).size_bytes
    assert res.bw_at() == pytest.approx(392, rel=0.01)
    assert parse_iperf3(r_ip.stdout).received_gbps == pytest.approx(
        spec.lookup("iperf3", 2).expected, rel=0.01)


def test_a_failure_slower_than_the_timeout_is_a_timeout(ib):
    # iperf3 waits ~30 s for a connection over a dead link; a 10 s timeout kills it first
    t = pair(ib, "i", "node-001", "node-003", probe="iperf3")
    t = Test(t.test_id, t.probe, t.nodes, t.flows, timeout_s=10.0, params=t.params)
    ex = sim(ib, {"faults": [{"kind": "nic_down", "nic": "node-003/mlx5_0"}]})
    [raw] = ex.run_round([t])
    assert raw.timed_out and raw.exit_code is None and raw.stdout == ""
    assert raw.duration_s == 10.0


def test_bigger_rings_lose_a_little(ib):
    ex = sim(ib)
    [two] = ex.run_round([nccl(ib, "2", ["node-001", "node-003"])])
    [four] = ex.run_round([nccl(ib, "4", ["node-002", "node-004", "node-005", "node-007"])])
    [eight] = ex.run_round([nccl(ib, "8", [f"node-{i:03d}" for i in range(1, 9)])])
    assert busbw(two) == pytest.approx(376, rel=0.01)
    assert busbw(four) == pytest.approx(376 * 0.987, rel=0.01)
    assert busbw(eight) == pytest.approx(376 * 0.974, rel=0.01)


def test_gpu_link_degraded_slows_its_1x_fully_and_its_collectives_a_little(ib):
    spec = h100_spec()
    ex = sim(ib, {"faults": [{"kind": "gpu_link_degraded", "node": "node-004", "factor": 0.5}]},
             spec=spec)
    healthy = sim(ib, spec=spec)
    tests = [nccl(ib, "s", ["node-004"]), pair(ib, "p", "node-004", "node-006"),
             nccl(ib, "o", ["node-005"]), nccl(ib, "g", ["node-004", "node-007"])]
    single, paired, other, group = ex.run_round(tests)
    _, paired0, _, group0 = healthy.run_round(tests)
    assert busbw(single) == pytest.approx(0.5 * spec.intra_node_busbw_gbps, rel=0.01)
    assert busbw(other) == pytest.approx(spec.intra_node_busbw_gbps, rel=0.01)
    assert gbits(paired) == pytest.approx(gbits(paired0), rel=0.001)  # NIC to NIC: untouched
    # a collective over two nodes: 10% of its step is exposed to the slow path (5% slower)
    assert busbw(group) == pytest.approx(0.95 * busbw(group0), rel=0.01)
