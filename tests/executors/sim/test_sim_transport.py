"""The simulator's NCCL transport: every collective prints the NCCL INFO lines of its ranks'
network (IB with GDRDMA normally, RoCE as NET/IB too), and the misconfigurations change what
they should and nothing else: sockets, host-memory staging, ACS, NUMA and RoCE without PFC."""

from __future__ import annotations

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.executors.sim.executor import (
    ACS_FACTOR,
    HOST_MEMORY_FACTOR,
    INCAST_FACTOR,
    NUMA_FACTOR,
    SOCKET_BUSBW_GBPS,
)
from fabriccheck.faults import FaultSet
from fabriccheck.probes.detect import parse_raw
from fabriccheck.probes.perftest import parse_perftest
from tests.executors.sim.simfab import nccl, pair, rail_fabric, sim

SMALL = 64 << 20  # a size a socket fallback finishes within the timeout


def _busbw(topo, faults, nodes, **params):
    params.setdefault("size_bytes", 8 << 30)  # large: the busbw, not the latency
    [raw] = sim(topo, {"faults": faults}).run_round([nccl(topo, "t", nodes, **params)])
    t = nccl(topo, "t", nodes, **params)
    parsed = parse_raw(t, raw)
    return parsed, parsed.busbw_at(params["size_bytes"])


@pytest.mark.parametrize("fabric,link", [("infiniband", "IB"), ("roce", "RoCE")])
def test_healthy_collective_prints_ib_with_gdrdma_on_both_fabrics(fabric, link):
    topo = rail_fabric(fabric)
    [raw] = sim(topo).run_round([nccl(topo, "t", ["node-001", "node-003"])])
    assert f"[0]mlx5_0:1/{link} [1]mlx5_1:1/{link}" in raw.stdout  # RoCE: NCCL still says NET/IB
    assert "NCCL version 2.21.5+cuda12.4" in raw.stdout
    parsed = parse_raw(nccl(topo, "t", ["node-001", "node-003"]), raw)
    assert parsed.status == "ok" and len(parsed.transport) == 16
    assert all(t.net == "ib" and t.gdr is True for t in parsed.transport)
    assert [t.hcas for t in parsed.transport[:3]] == [("mlx5_0",), ("mlx5_1",), ("mlx5_2",)]
    assert {t.host for t in parsed.transport[8:]} == {"node-003"}


def test_one_node_collective_has_no_net_channel():
    topo = rail_fabric()
    [raw] = sim(topo).run_round([nccl(topo, "t", ["node-002"])])
    parsed = parse_raw(nccl(topo, "t", ["node-002"]), raw)
    assert "via P2P/CUMEM/read" in raw.stdout and "via NET/" not in raw.stdout
    assert len(parsed.transport) == 8 and all(t.net is None for t in parsed.transport)


def test_socket_fallback_prints_net_socket_and_runs_at_socket_speed():
    topo = rail_fabric()
    faults = [{"kind": "transport_fallback", "node": "node-003", "to": "socket"}]
    parsed, bw = _busbw(topo, faults, ["node-001", "node-003"], size_bytes=SMALL)
    nets = {t.host: t.net for t in parsed.transport}
    assert nets == {"node-001": "ib", "node-003": "socket"}
    assert [t.hcas for t in parsed.transport if t.host == "node-003"][0] == ("eth0",)
    assert bw <= SOCKET_BUSBW_GBPS * 1.05
    # its 1x test is unchanged: NVLink only
    solo, solo_bw = _busbw(topo, faults, ["node-003"])
    healthy, healthy_bw = _busbw(topo, [], ["node-003"])
    assert solo_bw == pytest.approx(healthy_bw) and all(t.net is None for t in solo.transport)


def test_socket_fallback_of_a_large_collective_times_out_with_its_lines_read():
    topo = rail_fabric()
    faults = [{"kind": "transport_fallback", "node": "node-003", "to": "socket"}]
    t = nccl(topo, "t", ["node-001", "node-003"], size_bytes=8 << 30)
    [raw] = sim(topo, {"faults": faults}).run_round([t])
    assert raw.timed_out
    assert {x.net for x in parse_raw(t, raw).transport if x.host == "node-003"} == {"socket"}


def test_host_memory_drops_gdrdma_and_a_third_of_the_busbw():
    topo = rail_fabric()
    faults = [{"kind": "transport_fallback", "node": "node-003", "to": "host_memory"}]
    parsed, bw = _busbw(topo, faults, ["node-001", "node-003"])
    _, healthy = _busbw(topo, [], ["node-001", "node-003"])
    gdr = {t.host: t.gdr for t in parsed.transport}
    assert gdr == {"node-001": True, "node-003": False}
    assert bw == pytest.approx(healthy * HOST_MEMORY_FACTOR, rel=0.02)
    [raw] = sim(topo, {"faults": faults}).run_round([nccl(topo, "t", ["node-001", "node-003"])])
    assert "node-003" in raw.stdout.split("GPU Direct RDMA Disabled for HCA 0 'mlx5_0'")[0][-60:]


@pytest.mark.parametrize("kind,factor", [("acs_enabled", ACS_FACTOR),
                                         ("numa_misaligned", NUMA_FACTOR)])
def test_gpu_path_faults_slow_inter_node_nccl_only(kind, factor):
    topo = rail_fabric()
    faults = [{"kind": kind, "node": "node-003"}]
    parsed, bw = _busbw(topo, faults, ["node-001", "node-003"])
    _, healthy = _busbw(topo, [], ["node-001", "node-003"])
    assert bw == pytest.approx(healthy * factor, rel=0.02)
    assert all(t.net == "ib" and t.gdr is True for t in parsed.transport)  # NCCL says nothing
    _, solo = _busbw(topo, faults, ["node-003"])
    _, solo_healthy = _busbw(topo, [], ["node-003"])
    assert solo == pytest.approx(solo_healthy)


def _write_bw(topo, faults, use_cuda):
    ex = SimExecutor(topo, None, FaultSet.from_dict({"faults": faults}), 0, use_cuda=use_cuda)
    t = pair(topo, "p", "node-001", "node-003", rail=2)
    [raw] = ex.run_round([t])
    assert ("--use_cuda=0" in raw.commands[-1]) is (use_cuda is not None)
    return parse_perftest(raw.stdout).bw_at()


def test_acs_halves_gpu_memory_ib_write_bw_while_host_memory_is_fine():
    topo = rail_fabric()
    acs = [{"kind": "acs_enabled", "node": "node-003"}]
    assert _write_bw(topo, acs, None) == pytest.approx(_write_bw(topo, [], None))
    assert _write_bw(topo, acs, 0) == pytest.approx(_write_bw(topo, [], 0) * ACS_FACTOR)
    numa = [{"kind": "numa_misaligned", "node": "node-003"}]
    assert _write_bw(topo, numa, 0) == pytest.approx(_write_bw(topo, [], 0))


def test_pfc_off_collapses_incast_only():
    """RoCE without PFC on node-003/mlx5_2: its pairs pass, collectives of 4+ nodes through
    that NIC collapse; the same 4 nodes on other rails, or 4 other nodes, do not."""
    topo = rail_fabric("roce")
    pfc = [{"kind": "pfc_disabled", "nic": "node-003/mlx5_2"}]
    four = ["node-001", "node-003", "node-005", "node-007"]
    _, bw = _busbw(topo, pfc, four)
    _, healthy = _busbw(topo, [], four)
    assert bw == pytest.approx(healthy * INCAST_FACTOR, rel=0.02)
    _, pair_bw = _busbw(topo, pfc, ["node-001", "node-003"])
    _, pair_healthy = _busbw(topo, [], ["node-001", "node-003"])
    assert pair_bw == pytest.approx(pair_healthy)
    _, other_rails = _busbw(topo, pfc, four, rails=[0, 1])
    _, other_healthy = _busbw(topo, [], four, rails=[0, 1])
    assert other_rails == pytest.approx(other_healthy)
    # on InfiniBand (credit-based flow control) the fault has nothing to turn off
    ib = rail_fabric()
    assert _busbw(ib, pfc, four)[1] == pytest.approx(_busbw(ib, [], four)[1])


@pytest.mark.parametrize("kind,extra", [("gid_mismatch", {}), ("mtu_mismatch", {"mtu": 1500}),
                                        ("firmware_drift", {"version": "28.39.1002"})])
def test_nic_config_faults_change_no_traffic(kind, extra):
    topo = rail_fabric("roce")
    fault = [{"kind": kind, "nic": "node-003/mlx5_2", **extra}]
    four = ["node-001", "node-003", "node-005", "node-007"]
    assert _busbw(topo, fault, four)[1] == pytest.approx(_busbw(topo, [], four)[1])
