"""Cost model (issue 30): what the orchestrator's own work costs per round, beside the round's
test time, at several cluster sizes.

A full default sweep (the 1x/2x/4x/8x ladder, preflight included) of a generated rail-optimized
cluster (8 rails, 32 nodes a leaf) runs on the simulator, InfiniBand and RoCE, fault-free and
with about 1% of nodes faulty (``bench_sweep.fault_mix``). Each round prints CPU seconds per
phase (:mod:`fabriccheck.costs`):

- **plan**: the planner (next round, absorbing the last);
- **sim**: the executor, here the simulator rendering every tool's output (on a real cluster
  this is the nodes' time, not the orchestrator's);
- **parse**: reading the traffic tests' outputs (nccl-tests, perftest) — the part that may run
  where the output is produced (a Ray task) with the same parser;
- **judge**: spec floors, line rates, peers;
- **signals**: parsing and judging the preflight's node-local readings (nvidia-smi, perfquery,
  dmesg, config facts: also runnable where produced);
- **infer**: inference over the history;
- **orch**: plan + parse + judge + signals + infer; **orch/test**: that over the round's test
  time (the issue's bar: <= 25% at 16,384 nodes); **orch-local**: orch without parse and
  signals (what stays on the orchestrator when outputs are parsed where they are produced).

Run: ``python bench/bench_cost.py [--sizes 1024,4096] [--fabrics infiniband,roce]
[--faults none,mix] [--seed N]``. Sizes of 16,384 and 32,768 take long on 2 cores (the
simulator renders every output): give them explicitly.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sweep import cluster, fault_mix  # noqa: E402

from fabriccheck.costs import CostMeter  # noqa: E402
from fabriccheck.executors.sim import SimExecutor  # noqa: E402
from fabriccheck.faults import FaultSet  # noqa: E402
from fabriccheck.orchestrator import run  # noqa: E402
from fabriccheck.policy import SweepPolicy  # noqa: E402
from fabriccheck.specs import resolve_spec  # noqa: E402

COLS = ("plan", "execute", "parse", "judge", "signals", "infer")


def one(n: int, fabric: str, faults: str, seed: int) -> None:
    topo = cluster(n, fabric)
    spec = resolve_spec(None, topo)
    fs = fault_mix(topo, seed) if faults == "mix" else FaultSet.from_dict({"faults": []})
    meter = CostMeter()
    t0, c0 = time.monotonic(), time.process_time()
    res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed=seed),
              SweepPolicy(mode="sweep", seed=seed), meter=meter)
    wall, cpu = time.monotonic() - t0, time.process_time() - c0
    print(f"\n### {n:,} nodes, {fabric}, faults: {faults} (seed {seed}): {res.rounds} rounds, "
          f"{res.tests:,} tests, test time {res.test_seconds:.0f} s, wall {wall:.1f} s, "
          f"CPU {cpu:.1f} s, exit {res.exit_code}\n")
    print("| round | tests | test s | plan | sim | parse | judge | signals | infer | orch "
          "| orch/test | orch-local |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = [*meter.rounds, meter.tail]
    total = dict.fromkeys(COLS, 0.0)
    for r in rows:
        c = r.cpu
        for k in COLS:
            total[k] += c.get(k, 0.0)
        orch = r.orchestrator_s
        local = orch - c["parse"] - c["signals"]
        share = f"{orch / r.test_seconds:.0%}" if r.test_seconds else "-"
        label = str(r.number) if r is not meter.tail else "end"
        print(f"| {label} | {r.tests:,} | {r.test_seconds:.1f} | " + " | ".join(
            f"{c[k]:.2f}" for k in COLS) + f" | {orch:.2f} | {share} | {local:.2f} |")
    orch = sum(v for k, v in total.items() if k != "execute")
    print(f"| all | {res.tests:,} | {res.test_seconds:.1f} | " + " | ".join(
        f"{total[k]:.2f}" for k in COLS) + f" | {orch:.2f} | "
        f"{orch / max(res.test_seconds, 1e-9):.0%} | "
        f"{orch - total['parse'] - total['signals']:.2f} |", flush=True)


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024,4096")
    ap.add_argument("--fabrics", default="infiniband,roce")
    ap.add_argument("--faults", default="none,mix")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    print("## Cost per round: CPU seconds of the orchestrator's host per phase "
          "(bench/bench_cost.py)")
    for n in (int(x) for x in args.sizes.split(",")):
        for fabric in args.fabrics.split(","):
            for faults in args.faults.split(","):
                one(n, fabric, faults, args.seed)


if __name__ == "__main__":
    main(sys.argv[1:])
