"""Ladder benchmark: the default sweep (1x, 2x, 4x, 8x; two carvings per level >= 2) on the
simulator at 16 .. 4,096 nodes, InfiniBand rail-optimized, 3% jitter and 1% glitches.

Faults: about 1% of nodes, a mix of ``gpu_link_degraded`` (1x only), ``node_slow``,
``nic_degraded`` and ``node_hang``. Prints per size: rounds (ladder + follow-up), tests,
simulated test seconds per level (the longest test of each of the level's rounds, summed; the
1x runs beside the first rail-pair round, so "2x ib" includes it) and in total, precision and
recall of the drain list against the injected node/NIC faults, the round by which every node,
NIC and hang verdict was reached ("n/NIC"), and CPU seconds of the whole run.

Run: ``python bench/bench_ladder.py [--quick]`` (``--quick``: up to 1,024 nodes).
"""

from __future__ import annotations

import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fabriccheck.executors.sim import SimExecutor  # noqa: E402
from fabriccheck.faults import FaultSet  # noqa: E402
from fabriccheck.orchestrator import run  # noqa: E402
from fabriccheck.policy import SweepPolicy  # noqa: E402
from fabriccheck.specs import resolve_spec  # noqa: E402
from fabriccheck.topology import generate  # noqa: E402

SIZES = (16, 128, 1024, 4096)


def cluster(n: int):
    per_leaf = 32 if n >= 128 else 8
    spines = 32 if n >= 1024 else 8
    return generate({"kind": "rail-optimized", "nodes": n, "rails": 8, "gpus_per_node": 8,
                     "nodes_per_leaf": per_leaf, "spines": spines}, name=f"ib-{n}",
                    fabric="infiniband")


def fault_mix(topo, seed: int) -> FaultSet:
    rng = random.Random(seed)
    nodes = sorted(topo.nodes)
    k = max(1, len(nodes) // 400)
    faults = []
    for i, n in enumerate(rng.sample(nodes, 4 * k)):
        kind = ("gpu_link_degraded", "node_slow", "nic", "node_hang")[i % 4]
        if kind == "nic":
            nic = rng.choice(topo.nodes[n].nics).endpoint
            faults.append({"kind": "nic_degraded", "nic": nic, "factor": 0.5})
        elif kind == "node_hang":
            faults.append({"kind": kind, "node": n})
        else:
            faults.append({"kind": kind, "node": n, "factor": 0.5})
    return FaultSet.from_dict({"noise": {"jitter": 0.03, "glitch_rate": 0.01},
                               "faults": faults})


def level_of(o) -> str:
    k = len(o.test.nodes)
    if o.test.purpose not in ("sweep", "scale"):
        return "follow-up"
    if o.test.probe in ("ib_write_bw", "iperf3") or k == 1:
        return "2x ib (+1x)"
    return f"{k}x nccl" if k in (2, 4, 8) else "follow-up"


def one(n: int, seed: int = 1) -> dict:
    topo = cluster(n)
    spec = resolve_spec("h100-ndr400-ib", topo)
    fs = fault_mix(topo, seed)
    t0 = time.process_time()
    res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed=seed),
              SweepPolicy(seed=seed))
    cpu = time.process_time() - t0
    kinds: dict[int, Counter] = defaultdict(Counter)
    longest: dict[int, float] = defaultdict(float)
    for o in res.observations:
        kinds[o.test.round][level_of(o)] += 1
        d = o.raw.duration_s if o.raw is not None else 0.0
        longest[o.test.round] = max(longest[o.test.round], d)
    per_level: dict[str, float] = defaultdict(float)
    for rnd, d in longest.items():  # a round counts for the level most of its tests are
        per_level[kinds[rnd].most_common(1)[0][0]] += d
    truth = set(fs.drain_nodes())
    drained = set(res.drain)
    tp = len(truth & drained)
    vr = res.extra.get("verdict_rounds", {})
    dev = max((r for k, r in vr.items() if " -- " not in k), default=0)
    return {"nodes": n, "rounds": res.rounds, "verdict": dev, "tests": res.tests,
            "levels": dict(per_level), "total": res.test_seconds,
            "precision": tp / len(drained) if drained else 1.0,
            "recall": tp / len(truth) if truth else 1.0, "cpu": cpu,
            "false": sorted(drained - truth), "missed": sorted(truth - drained)}


def main(argv: list[str]) -> int:
    sizes = [s for s in SIZES if s <= 1024] if "--quick" in argv else list(SIZES)
    cols = ("2x ib (+1x)", "2x nccl", "4x nccl", "8x nccl", "follow-up")
    print("| nodes | rounds | n/NIC | tests | " + " | ".join(f"{c} s" for c in cols)
          + " | total s | precision | recall | CPU s |")
    print("|" + "---|" * (len(cols) + 8))
    for n in sizes:
        r = one(n)
        lv = " | ".join(f"{r['levels'].get(c, 0.0):.0f}" for c in cols)
        print(f"| {n} | {r['rounds']} | {r['verdict']} | {r['tests']} | {lv} | {r['total']:.0f} | "
              f"{r['precision']:.2f} | {r['recall']:.2f} | {r['cpu']:.1f} |", flush=True)
        if r["false"] or r["missed"]:
            print(f"  false drains {r['false']}, missed {r['missed']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
