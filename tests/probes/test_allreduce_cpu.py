"""allreduce-cpu: its table is read by the nccl-tests parser; a real 2-rank gloo run on loopback."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys

import pytest

from fabriccheck.probes.allreduce_cpu import bus_factor, format_row, header_lines, sizes
from fabriccheck.probes.nccl_tests import parse_nccl_tests


def test_table_is_read_by_the_nccl_tests_parser() -> None:
    args = argparse.Namespace(collective="all_reduce", min_bytes=1024, max_bytes=4096, warmup=1,
                              iters=2)
    lines = header_lines(args, [(0, 11, "host1"), (1, 12, "host2")], "eth0")
    lines += [format_row(s, s // 4, "all_reduce", [(1000.0, s / 1e6, s / 1e6, 0)] * 2)
              for s in sizes(1024, 4096)]
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0.002 ", "#"]
    result = parse_nccl_tests("\n".join(lines) + "\n")
    assert result.status == "ok", result.reason
    assert [r.size_bytes for r in result.rows] == [1024, 2048, 4096]
    assert result.hosts == ("host1", "host2") and result.ranks == 2
    assert result.rows[-1].busbw_gbps == pytest.approx(0.0041, abs=1e-4)  # 4 decimals kept
    assert result.rows[0].wrong == 0 and result.rows[0].count == 256


@pytest.mark.parametrize(("collective", "n", "factor"),
                         [("all_reduce", 2, 1.0), ("all_reduce", 8, 1.75),
                          ("all_gather", 4, 0.75), ("all_reduce", 1, 0.0)])
def test_bus_factor_matches_nccl_tests(collective: str, n: int, factor: float) -> None:
    assert bus_factor(collective, n) == pytest.approx(factor)


def test_two_real_ranks_on_loopback() -> None:
    pytest.importorskip("torch")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "fabriccheck.probes.allreduce_cpu", "--world-size", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(port), "--min-bytes", "65536",
           "--max-bytes", "262144", "--iters", "2", "--warmup", "1", "--timeout-s", "60"]
    procs = [subprocess.Popen([*cmd, "--rank", str(r)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[0][1][-500:]
    assert outs[1][0] == ""  # only rank 0 prints the table
    result = parse_nccl_tests(outs[0][0])
    assert result.status == "ok", result.reason
    assert [r.size_bytes for r in result.rows] == [65536, 131072, 262144]
    assert result.ranks == 2 and all(r.wrong == 0 and r.busbw_gbps > 0 for r in result.rows)


def test_bad_arguments_exit_2_with_usage() -> None:
    proc = subprocess.run([sys.executable, "-m", "fabriccheck.probes.allreduce_cpu", "--rank",
                           "3", "--world-size", "2", "--master-addr", "x", "--master-port", "1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--rank must be in" in proc.stderr
