"""SSH executor dispatch overhead on the namespace lab (root): what a round costs besides the tests.

Builds lab-8 (8 hosts, real sshd per host), then times rounds of
  - no-op tests (``true`` on both nodes of each pair): first round (connects) and reused;
  - iperf3 pairs (server + port wait + client): wall time minus the iperf3 duration;
and prints a table. Usage: ``sudo .venv/bin/python bench/bench_ssh_dispatch.py [--reps N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from fabriccheck import lab
from fabriccheck.executors.launch_runner import run_tests
from fabriccheck.executors.ssh import SSHExecutor
from fabriccheck.models import Flow, Test
from fabriccheck.probes.launch import HostCommand, ProbeLaunch


def pairs(hosts: list[str], k: int) -> list[tuple[str, str]]:
    return [(hosts[i], hosts[i + 1]) for i in range(0, 2 * k, 2)]


def noop(test: Test, index: int) -> ProbeLaunch:
    return ProbeLaunch(tuple(HostCommand(host=n, argv=("true",)) for n in test.nodes), 0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration-s", type=float, default=2.0)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (namespace lab)", file=sys.stderr)
        return 2
    name = "bench"
    info = lab.up("lab-8", name=name)
    rows = []
    try:
        hosts = sorted(info.hosts)
        for n_pairs in (1, 2, 4):
            ps = pairs(hosts, n_pairs)
            tests = [Test(f"n{i}", "iperf3", p, timeout_s=30) for i, p in enumerate(ps)]
            real = [Test(f"r{i}", "iperf3", p, (Flow(f"{p[0]}/eth0", f"{p[1]}/eth0"),),
                         timeout_s=60, params={"duration_s": args.duration_s})
                    for i, p in enumerate(ps)]
            ex = SSHExecutor(info.inventory)
            t0 = time.monotonic()
            run_tests(ex.runner, tests, noop)
            first = time.monotonic() - t0
            reused = []
            for _ in range(args.reps):
                t0 = time.monotonic()
                res = run_tests(ex.runner, tests, noop)
                reused.append(time.monotonic() - t0)
                assert all(r.exit_code == 0 for r in res)
            over = []
            for _ in range(max(1, args.reps // 2)):
                t0 = time.monotonic()
                res = ex.run_round(real)
                over.append(time.monotonic() - t0 - args.duration_s)
                assert all(r.exit_code == 0 for r in res), [r.error for r in res]
            ex.close()
            rows.append((2 * n_pairs, n_pairs, first, statistics.median(reused),
                         statistics.median(over)))
    finally:
        lab.down(name)
    print(f"{'hosts':>5} {'tests':>5} {'no-op 1st round s':>18} {'no-op reused s':>15} "
          f"{'iperf3 round - duration s':>26}")
    for hosts_n, tests_n, first, reused_s, over_s in rows:
        print(f"{hosts_n:5d} {tests_n:5d} {first:18.3f} {reused_s:15.3f} {over_s:26.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
