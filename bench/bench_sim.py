"""Benchmark: how long the simulator takes for one round of pair tests (nccl over 8 rails).

Prints a table for 16 / 128 / 1,024 / 4,096 nodes (IB and RoCE): round 1 (every flow routed for
the first time), round 2 (new partners, so new routes too), round 3 (round 1 again: routes
cached), as wall and CPU seconds (CPU time is what one core spends; the machine may be shared),
plus flows and output size.
Run: ``.venv/bin/python bench/bench_sim.py [--sizes 16,128] [--fabric infiniband]
[--probe ib_write_bw]`` (ib_write_bw: one test per rail and pair, N × 4 tests a round).

With ``--parts ib-rail-1024,ib-rail-4096`` (bundled topologies) also a per-part table
(``--parts-only``: that table alone, on those two by default): the simulator's CPU seconds for
the sweep's preflight round (every built-in level-1 signal on every node and NIC, as the
planner writes them), its closing counter re-read (``port-errors`` again), an ib_write_bw pair
round (N × 4 tests, every route new), the same round again (routes cached) and an nccl pair
round over 8 rails (N/2 tests, 16 flows each), plus µs per test.
"""

from __future__ import annotations

import argparse
import time

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.models import Flow, Test
from fabriccheck.topology.generators import generate

RAILS = 8


def fabric(nodes: int, kind: str):
    return generate({"kind": "rail-optimized", "nodes": nodes, "gpus_per_node": 8,
                     "rails": RAILS, "nodes_per_leaf": min(nodes, 32), "spines": 32,
                     "nic_gbps": 400, "uplink_gbps": 400}, name=f"bench-{nodes}", fabric=kind)


def pair_round(topo, shift: int, round_no: int, probe: str = "nccl") -> list[Test]:
    """Every node with the node ``shift`` places away (cross-leaf when shift >= 32): N/2 nccl
    tests over 8 rails, or with ``probe="ib_write_bw"`` one test per rail (N × 4 tests)."""
    names = sorted(topo.nodes)
    n = len(names)
    tests, used = [], set()
    for i, a in enumerate(names):
        b = names[(i + shift) % n]
        if a in used or b in used:
            continue
        used |= {a, b}
        if probe == "ib_write_bw":
            tests += [Test(f"r{round_no}-{a}-{b}-{r}", probe, (a, b),
                           (Flow(topo.nic(a, r), topo.nic(b, r)),), round=round_no,
                           params={"size_bytes": 8 << 20, "duration_s": 5})
                      for r in range(RAILS)]
            continue
        flows = tuple(f for r in range(RAILS) for f in (
            Flow(topo.nic(a, r), topo.nic(b, r)), Flow(topo.nic(b, r), topo.nic(a, r))))
        tests.append(Test(f"r{round_no}-{a}-{b}", "nccl", (a, b), flows, round=round_no,
                          params={"size_bytes": 8 << 30, "min_bytes": 1 << 30}))
    return tests


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,128,1024,4096")
    ap.add_argument("--fabric", default="infiniband,roce")
    ap.add_argument("--probe", default="nccl", choices=("nccl", "ib_write_bw"))
    ap.add_argument("--parts", default="",
                    help="bundled topologies of a per-part table, e.g. ib-rail-1024,ib-rail-4096")
    ap.add_argument("--parts-only", action="store_true", help="only the per-part table")
    args = ap.parse_args()
    faults = FaultSet.from_dict({"noise": {"jitter": 0.03, "glitch_rate": 0.01}})
    if not args.parts_only:
        round_table(args, faults)
    parts = args.parts or ("ib-rail-1024,ib-rail-4096" if args.parts_only else "")
    if parts:
        parts_table([t for t in parts.split(",") if t], faults)


def round_table(args, faults: FaultSet) -> None:
    print(f"{'fabric':<11} {'nodes':>6} {'tests':>6} {'flows':>7} {'r1_wall':>8} {'r1_cpu':>7} "
          f"{'r2_cpu':>7} {'r3_cpu':>7} {'MB_text':>8}")
    for kind in args.fabric.split(","):
        for n in (int(s) for s in args.sizes.split(",")):
            topo = fabric(n, kind)
            ex = SimExecutor(topo, None, faults, seed=1)
            r1 = pair_round(topo, n // 2, 1, args.probe)
            r2 = pair_round(topo, max(1, n // 4), 2, args.probe)
            w0, c0 = time.perf_counter(), time.process_time()
            out = ex.run_round(r1)
            w1, c1 = time.perf_counter(), time.process_time()
            ex.run_round(r2)
            c2 = time.process_time()
            ex.run_round(r1)
            c3 = time.process_time()
            mb = sum(len(r.stdout) for r in out) / 1e6
            flows = sum(len(t.flows) for t in r1)
            print(f"{kind:<11} {n:>6} {len(r1):>6} {flows:>7} {w1 - w0:>8.3f} {c1 - c0:>7.3f} "
                  f"{c2 - c1:>7.3f} {c3 - c2:>7.3f} {mb:>8.2f}")


def preflight_tests(topo, spec, round_no: int, only: str | None = None) -> list[Test]:
    """The sweep's preflight round as the planner writes it (built-in level-1 signals)."""
    from fabriccheck.planning.preflight import run_signals
    from fabriccheck.planning.signal_rounds import plan_signal_tests
    from fabriccheck.policy import SweepPolicy
    from fabriccheck.topology.view import FabricView

    nodes = sorted(topo.nodes)
    signals, _ = run_signals(spec, topo, nodes, SweepPolicy(mode="sweep"))
    level1 = [s for s in signals if s.level == 1 and (only is None or s.name == only)]
    return plan_signal_tests(level1, nodes, FabricView(topo), round_no, spec.gpus_per_node or 8)


def parts_table(names: list[str], faults: FaultSet) -> None:
    """CPU seconds of the simulator per part of a sweep, on bundled topologies."""
    from fabriccheck.specs import resolve_spec
    from fabriccheck.topology import load_topology

    print()
    print(f"{'topology':<14} {'part':<22} {'tests':>7} {'cpu_s':>7} {'us/test':>8} {'MB_text':>8}")
    for name in names:
        topo = load_topology(name)
        spec = resolve_spec(None, topo)
        ex = SimExecutor(topo, spec, faults, seed=1)
        n = len(topo.nodes)
        rails = max(1, topo.rails)
        parts = [("preflight", preflight_tests(topo, spec, 1)),
                 ("port-errors re-read", preflight_tests(topo, spec, 2, "port-errors"))]
        ib = pair_round(topo, n // 2, 3, "ib_write_bw")
        parts += [("ib_write_bw pairs", ib), ("ib_write_bw (cached)", ib)]
        parts += [(f"nccl pairs x{rails} rails", pair_round(topo, max(1, n // 4), 4, "nccl"))]
        for part, tests in parts:
            c0 = time.process_time()
            out = ex.run_round(tests)
            cpu = time.process_time() - c0
            mb = sum(len(r.stdout) + len(r.stderr) for r in out) / 1e6
            print(f"{name:<14} {part:<22} {len(tests):>7} {cpu:>7.2f} "
                  f"{cpu / max(1, len(tests)) * 1e6:>8.1f} {mb:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
