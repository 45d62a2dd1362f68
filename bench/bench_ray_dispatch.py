"""Ray executor dispatch overhead: what a round costs besides the tests themselves.

Two parts (``--part sim``, ``--part lab``, default both; the lab part needs root):

**1,024 simulated tests per round** (``--sim-tests``, no root): a real local Ray cluster of
``--raylets`` raylets on loopback addresses (``tests/raycluster.py``). A round of ``ib_write_bw``
pair tests over 2,048 simulated hosts of a generated RoCE fabric is first run *inline*: the
simulator computes every test's output in this process (``SimExecutor.run_round``). The same
round then goes through the Ray executor, every test dispatched as it would be on a cluster
(one placement group per test pinning its two hosts' nodes, the host agents start a command on
each host, wait, collect): the test's command on its first host prints the simulator's output
for it, on its second host ``true``. Simulated host ``i`` stands on Ray node ``i % raylets``
(one agent per node, made before the clock runs). Printed: the inline round, the Ray round
(first, then the median), its reservation part (reserve + release of the 1,024 placement
groups), and the per-round and per-test overhead (Ray round - inline round). The same launches
run through the shared launch runner with local processes (no Ray) give the cost of the
processes alone.

**Lab** (root): ``lab.up(..., ray=True)`` (what ``fabriccheck lab up --ray`` runs: a head on the
management gateway, a raylet inside each host), then rounds of no-op tests (``true`` on both
nodes of each pair; the first creates the agents), tiny iperf3 pairs (1 KiB) and real iperf3
pairs minus their duration, holding the nodes' CPUs (default) and pinning only.

Usage: ``[sudo] .venv/bin/python bench/bench_ray_dispatch.py [--part sim|lab]
[--sim-tests 1024] [--raylets 4] [--topology lab-4] [--reps N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabriccheck.executors.launch_runner import StepOutput, run_tests  # noqa: E402
from fabriccheck.executors.ray.executor import RayExecutor  # noqa: E402
from fabriccheck.inventory.ray import RayNode  # noqa: E402
from fabriccheck.inventory.ray_session import connect, disconnect  # noqa: E402
from fabriccheck.models import Flow, RawResult, Test  # noqa: E402
from fabriccheck.probes.commands import build_launch  # noqa: E402
from fabriccheck.probes.launch import HostCommand, ProbeLaunch  # noqa: E402
from tests.raycluster import RAY_TEST_ENV, loopback_cluster, unavailable_reason  # noqa: E402


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
        raise SystemExit(f"round failed: {bad[:5]} ({len(bad)} of {len(res)})")
    return wall


# -- 1,024 simulated tests ---------------------------------------------------------------------
class SimHostsExecutor(RayExecutor):
    """The Ray executor with simulated host ``i`` standing on Ray node ``i % len(nodes)``."""

    def __init__(self, address: str, sim_hosts: list[str], real: list[str], **kw: Any) -> None:
        self.sim_hosts = sim_hosts
        self.real = real  # the raylets' own host names, in order
        self.stands_on = {h: real[i % len(real)] for i, h in enumerate(sim_hosts)}
        super().__init__(address, None, **kw)

    def refresh_nodes(self) -> dict[str, RayNode]:
        mapping = super().refresh_nodes()
        nodes = [mapping[r] for r in self.real]
        self._nodes.update({h: nodes[i % len(nodes)] for i, h in enumerate(self.sim_hosts)})
        return dict(self._nodes)

    def agent(self, host: str, timeout_s: float | None = None) -> Any:
        """One agent per Ray node: a simulated host uses its node's."""
        return super().agent(self.stands_on.get(host, host), timeout_s)


class LocalRunner:
    """HostRunner that runs every step as a local process (the launch runner without Ray)."""

    def start(self, step: HostCommand, tag: str) -> subprocess.Popen:
        return subprocess.Popen(list(step.argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)

    def wait(self, handle: subprocess.Popen, timeout_s: float) -> StepOutput:
        if not hasattr(handle, "fc_out"):
            try:
                handle.fc_out = handle.communicate(timeout=timeout_s)  # type: ignore[attr-defined]
            except subprocess.TimeoutExpired:
                return StepOutput()
        out, err = handle.fc_out  # type: ignore[attr-defined]
        return StepOutput(out, err, handle.returncode, True)

    def kill(self, handle: subprocess.Popen) -> StepOutput:
        handle.kill()
        return self.wait(handle, 5.0)


def sim_round(n_tests: int) -> tuple[list[Test], list[str], float, dict[str, RawResult]]:
    """``n_tests`` ib_write_bw pairs over 2n simulated hosts, run inline by the simulator."""
    from fabriccheck.executors.sim import SimExecutor
    from fabriccheck.faults import FaultSet
    from fabriccheck.specs import resolve_spec
    from fabriccheck.topology.generators import generate

    topo = generate({"kind": "rail-optimized", "nodes": 2 * n_tests, "rails": 1,
                     "gpus_per_node": 1, "nodes_per_leaf": 32, "spines": 8},
                    name=f"bench-{2 * n_tests}", fabric="roce")  # fmt: skip
    hosts = sorted(topo.nodes)
    tests = [Test(f"s{i:04d}", "ib_write_bw", (a, b), (Flow(f"{a}/mlx5_0", f"{b}/mlx5_0"),),
                  timeout_s=120, params={"duration_s": 5})
             for i, (a, b) in enumerate(zip(hosts[0::2], hosts[1::2], strict=True))]
    sim = SimExecutor(topo, resolve_spec(None, topo), FaultSet(), 0)
    t0 = time.monotonic()
    raws = sim.run_round(tests)
    inline_s = time.monotonic() - t0
    return tests, hosts, inline_s, {r.test_id: r for r in raws}


def bench_sim(n_tests: int, n_raylets: int, reps: int) -> int:
    reason = unavailable_reason()
    if reason:
        print(f"sim part skipped: {reason}", file=sys.stderr)
        return 0
    tests, hosts, inline_s, raws = sim_round(n_tests)

    def printed(test: Test, nic_ips: Mapping[str, str], port: int) -> ProbeLaunch:
        a, b = test.nodes
        return ProbeLaunch((HostCommand(a, ("printf", "%s", raws[test.test_id].stdout)),
                            HostCommand(b, ("true",))), 0)

    t0 = time.monotonic()
    local = run_tests(LocalRunner(), tests, lambda t, i: printed(t, {}, i), max_parallel=64)
    local_s = time.monotonic() - t0
    assert all(r.exit_code == 0 for r in local)
    os.environ.update(RAY_TEST_ENV)
    real = [f"b{i}" for i in range(n_raylets)]
    cluster = loopback_cluster(real)
    t0 = time.monotonic()
    cluster.start()
    start_s = time.monotonic() - t0
    try:
        connect(cluster.address, timeout_s=60)
        ex = SimHostsExecutor(cluster.address, hosts, real, launch_builder=printed,
                              reserve_resources=())
        t0 = time.monotonic()
        for r in real:  # one agent per node, made before the clock runs
            ex.agent(r)
        agents_s = time.monotonic() - t0
        first = timed(ex, tests)
        walls, reserve = [], []
        for _ in range(reps):
            walls.append(timed(ex, tests))
            t0 = time.monotonic()
            problems = ex.reserve(tests)
            ex.release()
            reserve.append(time.monotonic() - t0)
            assert not problems, list(problems.items())[:3]
        same = [r.stdout for r in ex.run_round(tests[:8])] == [raws[t.test_id].stdout
                                                                  for t in tests[:8]]
        ex.close()
        disconnect()
    finally:
        cluster.stop()
    wall = statistics.median(walls)
    over = wall - inline_s
    print(f"{n_tests} simulated ib_write_bw tests per round, 2 commands each, on "
          f"{n_raylets} loopback raylets (cluster start {start_s:.1f} s); output as the "
          f"simulator's: {same}")
    print(f"{'round':>48} {'wall s':>8} {'per test ms':>12}")
    rows = [("inline (simulator, this process)", inline_s),
            ("local processes, launch runner (no Ray)", local_s),
            (f"Ray: start {n_raylets} agents (once per executor)", agents_s),
            ("Ray executor, first round", first),
            (f"Ray executor, median of {reps}", wall),
            ("  of which reserve + release (placement groups)", statistics.median(reserve)),
            ("Ray per-round overhead (Ray - inline)", over)]
    for label, s in rows:
        print(f"{label:>48} {s:8.2f} {1000 * s / n_tests:12.2f}")
    return 0


# -- the lab (root) ----------------------------------------------------------------------------
def bench_lab(topology: str, reps: int, duration_s: float) -> int:
    from fabriccheck import lab

    if os.geteuid() != 0:
        print("lab part skipped: needs root (namespace lab)", file=sys.stderr)
        return 0
    name = "rbench"
    t0 = time.monotonic()
    info = lab.up(topology, name=name, ray=True)
    up_s = time.monotonic() - t0
    rows = []
    try:
        t0 = time.monotonic()
        connect(info.ray["address"], timeout_s=60, node_ip_address=info.gateway)
        init_s = time.monotonic() - t0
        hosts = sorted(info.hosts)
        for mode, n_pairs in [(m, n) for m in ("hold CPUs", "pin only")
                              for n in sorted({1, len(hosts) // 2})]:
            ex = RayExecutor(None, info.inventory,
                             reserve_resources=() if mode == "pin only" else None)
            ps = [(hosts[i], hosts[i + 1]) for i in range(0, 2 * n_pairs, 2)]
            flows = [(Flow(f"{a}/eth0", f"{b}/eth0"),) for a, b in ps]
            tests = [Test(f"n{i}", "iperf3", p, f, timeout_s=30, params={"duration_s": 1})
                     for i, (p, f) in enumerate(zip(ps, flows, strict=True))]
            real = [Test(f"r{i}", "iperf3", p, f, timeout_s=60,
                         params={"duration_s": duration_s})
                    for i, (p, f) in enumerate(zip(ps, flows, strict=True))]
            ex.build = noop
            first = timed(ex, tests)  # creates this executor's agents
            later = [timed(ex, tests) for _ in range(reps)]
            ex.build = tiny_iperf3
            tiny = [timed(ex, tests) for _ in range(reps)]
            ex.build = lambda t, ips, port: build_launch(t, ips, port=port)
            over = [timed(ex, real) - duration_s for _ in range(max(1, reps // 2))]
            rows.append((mode, 2 * n_pairs, n_pairs, first, statistics.median(later),
                         statistics.median(tiny), statistics.median(over)))
            ex.close()
        disconnect()
    finally:
        t0 = time.monotonic()
        lab.down(name)
        down_s = time.monotonic() - t0
    print(f"lab {topology}: lab up --ray {up_s:.1f} s (Ray cluster {info.ray['start_s']:.1f} s, "
          f"{len(info.ray['raylets']) + 1} raylets), connect + node map {init_s:.2f} s, "
          f"lab down {down_s:.1f} s")
    print(f"{'reservation':>11} {'hosts':>5} {'tests':>5} {'no-op 1st round s':>18} "
          f"{'no-op round s':>14} {'iperf3 1KiB round s':>20} {'iperf3 round - duration s':>26}")
    for mode, h, n, first, later_s, tiny_s, over_s in rows:
        print(f"{mode:>11} {h:5d} {n:5d} {first:18.3f} {later_s:14.3f} {tiny_s:20.3f} "
              f"{over_s:26.3f}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("sim", "lab", "both"), default="both")
    ap.add_argument("--sim-tests", type=int, default=1024)
    ap.add_argument("--raylets", type=int, default=4)
    ap.add_argument("--topology", default="lab-4")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration-s", type=float, default=2.0)
    args = ap.parse_args()
    rc = 0
    if args.part in ("sim", "both"):
        rc |= bench_sim(args.sim_tests, args.raylets, args.reps)
    if args.part in ("lab", "both"):
        rc |= bench_lab(args.topology, args.reps, args.duration_s)
    return rc


if __name__ == "__main__":
    sys.exit(main())
