"""The simulator's text has the real tools' shape: compared line by line with real fixtures."""

from __future__ import annotations

import doctest
import json
import re

from fabriccheck.executors.sim import model, render, tools
from tests.conftest import read_fixture
from tests.executors.sim.simfab import nccl, pair, rail_fabric, sim

A3MEGA = "nccl-tests/nccl_allreduce_h100_2node_16gpu_gcp_a3mega_ok.txt"
CX7 = "perftest/ib_write_bw_ndr400_cx7_gbits_client_ok.txt"
IPERF3 = "iperf3/iperf3_J_tcp_1stream_v3.9_omit3_cross_cloud_client.txt"


def test_doctests_of_the_simulator_modules():
    for mod in (model, render, tools):
        failed, _ = doctest.testmod(mod)
        assert failed == 0, mod.__name__


def test_nccl_table_lines_match_the_real_layout():
    real = read_fixture(A3MEGA).splitlines()
    topo = rail_fabric()
    [raw] = sim(topo).run_round([nccl(topo, "t", ["node-001", "node-003"], min_bytes=1 << 30)])
    ours = raw.stdout.splitlines()
    # the column header: same words, same place for every word up to busbw (2025-10 widened
    # #wrong by one column, which is the only difference)
    real_hdr = next(line for line in real if "redop" in line)
    our_hdr = next(line for line in ours if "redop" in line)
    assert real_hdr.split() == our_hdr.split()
    assert our_hdr.index("busbw") == real_hdr.index("busbw")
    assert next(line for line in ours if "out-of-place" in line).rstrip() == next(
        line for line in real if "out-of-place" in line).rstrip()
    # rank lines: the real regex reads them, hostname right-aligned in 10 characters
    rank_re = re.compile(r"^#  Rank +\d+ Group +0 Pid +\d+ on +(\S+) device +\d+ "
                         r"\[0000:[0-9a-f]{2}:00\] NVIDIA H100 80GB HBM3$")
    assert all(rank_re.match(line) for line in real if "Rank" in line)
    ranks = [line for line in ours if " Rank " in line]
    assert len(ranks) == 16 and all(rank_re.match(line) for line in ranks)
    assert ranks[0].split(" on ")[1].startswith("  node-001 ")
    # data rows: 118 characters (current format), 13 fields like the real ones
    rows = [line for line in ours if line and not line.startswith("#") and "NCCL" not in line]
    real_rows = [line for line in real if line and not line.startswith("#")]
    assert len(rows) == 4
    assert all(len(r) == 118 for r in rows)
    assert all(len(r.split()) == len(real_rows[0].split()) == 13 for r in rows)
    # header and footer lines
    assert re.match(r"# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 8589934592 step: "
                    r"2\(factor\) warmup iters: \d+ iters: 20 agg iters: 1 validation: 1 graph: 0$",
                    next(line for line in ours if "nThread" in line))
    assert "# Out of bounds values : 0 OK" in ours
    avg = next(line for line in ours if "Avg bus bandwidth" in line)
    assert re.match(r"^# Avg bus bandwidth    : [\d.]+ $", avg)
    assert "# Collective test concluded: all_reduce_perf" in ours


def test_float_str_shrinks_like_nccl_tests():
    assert render.float_str(0.004, 6) == "  0.00"
    assert render.float_str(43046.1, 6) == " 43046"
    assert render.float_str(158070.2, 7) == " 158070"
    assert render.float_str(1.2e7, 7) == "1.2e+07"


def test_perftest_box_has_the_real_keys():
    real = read_fixture(CX7).splitlines()
    topo = rail_fabric()
    [raw] = sim(topo).run_round([pair(topo, "p", "node-001", "node-003", rail=3)])
    ours = raw.stdout.splitlines()

    def keys(lines):
        out = []
        for line in lines:
            for part in line.split("\t\t"):
                if ":" in part and "address" not in part:
                    out.append(part.split(":")[0].strip())
        return out

    start = real.index("-" * 87)
    real_keys = keys(real[start:real.index(" #bytes     #iterations    BW peak[Gb/sec]    "
                                           "BW average[Gb/sec]   MsgRate[Mpps]")])
    our_keys = keys(ours[ours.index("-" * 87):])
    assert [k for k in our_keys if k in real_keys] == real_keys
    assert ours[3] == " Dual-port       : OFF\t\tDevice         : mlx5_3"
    assert any(line.startswith(" #bytes     #iterations    BW peak[Gb/sec]") for line in ours)
    row = ours[ours.index(next(line for line in ours if "#bytes" in line)) + 1]
    assert "\t\t" in row and row.split()[0] == "65536"
    assert raw.commands == (
        f"node-003: ib_write_bw -d mlx5_3 -p {raw.commands[0].split('-p ')[1].split()[0]} -F "
        "--report_gbits -s 65536 -D 5",
        f"node-001: ib_write_bw -d mlx5_3 -p {raw.commands[0].split('-p ')[1].split()[0]} -F "
        "--report_gbits -s 65536 -D 5 10.4.0.3",
    )


def test_roce_perftest_prints_gids_and_lid_zero():
    topo = rail_fabric("roce")
    [raw] = sim(topo).run_round([pair(topo, "p", "node-001", "node-003")])
    assert " Link type       : Ethernet" in raw.stdout
    assert " GID index       : 3" in raw.stdout
    assert " local address: LID 0000 QPN" in raw.stdout
    assert " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:01:00:01" in raw.stdout
    assert "-x 3" in raw.commands[1]


def test_iperf3_json_has_the_real_structure():
    real = json.loads(read_fixture(IPERF3))
    topo = rail_fabric()
    [raw] = sim(topo).run_round([pair(topo, "i", "node-001", "node-003", probe="iperf3")])
    ours = json.loads(raw.stdout)
    assert set(ours) == set(real) == {"start", "intervals", "end"}
    assert set(real["start"]) - {"tcp_mss_default"} <= set(ours["start"]) | {"tcp_mss_default"}
    assert set(ours["end"]) == set(real["end"])
    assert set(ours["end"]["sum_received"]) == set(real["end"]["sum_received"])
    assert len(ours["intervals"]) == 5
    assert raw.stdout.startswith('{\n\t"start":\t{')  # cJSON's tab style


def test_bench_script_runs(monkeypatch, capsys):
    """bench/bench_sim.py still runs (a smoke run at 16 nodes; timings are not asserted)."""
    import runpy
    import sys

    from tests.conftest import REPO

    monkeypatch.setattr(sys, "argv", ["bench_sim.py", "--sizes", "16"])
    runpy.run_path(str(REPO / "bench" / "bench_sim.py"), run_name="__main__")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["fabric", "nodes", "tests", "flows"]
    assert [line.split()[:4] for line in lines[1:]] == [
        ["infiniband", "16", "8", "128"], ["roce", "16", "8", "128"]]
