"""Benchmark: how long the simulator takes for one round of pair tests (nccl over 8 rails).

Prints a table for 16 / 128 / 1,024 / 4,096 nodes (IB and RoCE): round 1 (every flow routed for
the first time), round 2 (new partners, so new routes too), round 3 (round 1 again: routes
cached), as wall and CPU seconds (CPU time is what one core spends; the machine may be shared),
plus flows and output size.
Run: ``.venv/bin/python bench/bench_sim.py [--sizes 16,128] [--fabric infiniband]
[--probe ib_write_bw]`` (ib_write_bw: one test per rail and pair, N × 4 tests a round).
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
    args = ap.parse_args()
    faults = FaultSet.from_dict({"noise": {"jitter": 0.03, "glitch_rate": 0.01}})
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

if __name__ == "__main__":
    main()
