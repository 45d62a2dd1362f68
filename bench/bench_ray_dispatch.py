"""Ray executor dispatch overhead on the namespace lab (root): what a round costs besides the tests.

Builds a lab (default lab-4), starts a real Ray cluster over it (head on the management gateway,
one raylet per host inside its namespace), then times rounds of
  - no-op tests (``true`` on both nodes of each pair): the first round (creates the per-node
    agents) and later rounds (reserve + start + wait + kill + release only);
  - iperf3 "no-op" pairs (server, port wait, client sending 1 KiB): the launch machinery;
  - real iperf3 pairs of ``--duration-s``: wall time minus the duration;
once with the default reservation (each group's placement group holds its nodes' CPUs) and once
pinning only (``reserve_resources=()``), and prints a table (no asserts).
Usage: ``sudo .venv/bin/python bench/bench_ray_dispatch.py [--topology lab-4] [--reps N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabriccheck import lab  # noqa: E402
from fabriccheck.executors.ray.executor import RayExecutor  # noqa: E402
from fabriccheck.inventory.ray_session import connect, disconnect  # noqa: E402
from fabriccheck.models import Flow, Test  # noqa: E402
from fabriccheck.probes.commands import build_launch  # noqa: E402
from fabriccheck.probes.launch import HostCommand, ProbeLaunch  # noqa: E402
from tests.raycluster import RAY_TEST_ENV, lab_cluster  # noqa: E402


def noop(test: Test, nic_ips, port: int) -> ProbeLaunch:
    return ProbeLaunch(tuple(HostCommand(host=n, argv=("true",)) for n in test.nodes), 0)


def tiny_iperf3(test: Test, nic_ips, port: int) -> ProbeLaunch:
    launch = build_launch(test, nic_ips, port=port)
    server, client = launch.steps
    argv = tuple(a for a in client.argv if a not in ("-t", test.params.get("duration_s")))
    argv = tuple(x for i, x in enumerate(argv) if not (i > 0 and argv[i - 1] == "-t"))
    tiny = HostCommand(client.host, (*argv, "-n", "1K"), env=client.env)
    return ProbeLaunch((server, tiny), 1)


def timed(ex: RayExecutor, tests: list[Test]) -> float:
    t0 = time.monotonic()
    res = ex.run_round(tests)
    wall = time.monotonic() - t0
    bad = [(r.test_id, r.exit_code, r.error) for r in res if r.exit_code != 0]
    if bad:
        raise SystemExit(f"round failed: {bad}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--topology", default="lab-4")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration-s", type=float, default=2.0)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (namespace lab)", file=sys.stderr)
        return 2
    os.environ.update(RAY_TEST_ENV)
    name = "rbench"
    info = lab.up(args.topology, name=name)
    rows = []
    cluster = lab_cluster(info.inventory)
    try:
        t0 = time.monotonic()
        cluster.start()
        start_s = time.monotonic() - t0
        t0 = time.monotonic()
        connect(cluster.address, timeout_s=60)
        init_s = time.monotonic() - t0
        hosts = sorted(info.hosts)
        for mode, n_pairs in [(m, n) for m in ("hold CPUs", "pin only")
                              for n in sorted({1, len(hosts) // 2})]:
            ex = RayExecutor(cluster.address, info.inventory,
                             reserve_resources=() if mode == "pin only" else None)
            ps = [(hosts[i], hosts[i + 1]) for i in range(0, 2 * n_pairs, 2)]
            flows = [(Flow(f"{a}/eth0", f"{b}/eth0"),) for a, b in ps]
            tests = [Test(f"n{i}", "iperf3", p, f, timeout_s=30, params={"duration_s": 1})
                     for i, (p, f) in enumerate(zip(ps, flows, strict=True))]
            real = [Test(f"r{i}", "iperf3", p, f, timeout_s=60,
                         params={"duration_s": args.duration_s})
                    for i, (p, f) in enumerate(zip(ps, flows, strict=True))]
            ex.build = noop
            first = timed(ex, tests)  # creates this executor's agents
            later = [timed(ex, tests) for _ in range(args.reps)]
            ex.build = tiny_iperf3
            tiny = [timed(ex, tests) for _ in range(args.reps)]
            ex.build = lambda t, ips, port: build_launch(t, ips, port=port)
            over = [timed(ex, real) - args.duration_s for _ in range(max(1, args.reps // 2))]
            rows.append((mode, 2 * n_pairs, n_pairs, first, statistics.median(later),
                         statistics.median(tiny), statistics.median(over)))
            ex.close()
        disconnect()
    finally:
        cluster.stop()
        lab.down(name)
    print(f"lab {args.topology}: Ray cluster start {start_s:.1f} s "
          f"({len(cluster.nodes)} raylets), connect + node map {init_s:.2f} s")
    print(f"{'reservation':>11} {'hosts':>5} {'tests':>5} {'no-op 1st round s':>18} "
          f"{'no-op round s':>14} {'iperf3 1KiB round s':>20} {'iperf3 round - duration s':>26}")
    for mode, h, n, first, later_s, tiny_s, over_s in rows:
        print(f"{mode:>11} {h:5d} {n:5d} {first:18.3f} {later_s:14.3f} {tiny_s:20.3f} "
              f"{over_s:26.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
