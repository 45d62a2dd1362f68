"""Benchmark: topology generation/loading and routing time for 64 … 16,384-node fabrics.

Run: ``.venv/bin/python bench/bench_topology.py [--pairs N] [--max-nodes N]``.
Prints a table; no asserts.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabriccheck.topology import generate, load_topology  # noqa: E402
from fabriccheck.topology.load import check_structure  # noqa: E402

#: nodes -> (nodes_per_leaf, spines) of a non-blocking-ish 2-tier rail-optimized fabric
SIZES = {64: (32, 8), 256: (32, 16), 1024: (32, 32), 4096: (32, 32), 16384: (32, 64)}


def gen_dict(nodes: int) -> dict:
    per_leaf, spines = SIZES[nodes]
    return {"kind": "rail-optimized", "nodes": nodes, "gpus_per_node": 8, "rails": 8,
            "nodes_per_leaf": per_leaf, "spines": spines, "nic_gbps": 400, "uplink_gbps": 400}


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pairs", type=int, default=10000, help="NIC pairs to route per size")
    ap.add_argument("--max-nodes", type=int, default=16384)
    args = ap.parse_args()
    header = (f"{'nodes':>6} {'NICs':>7} {'switches':>8} {'links':>7} | {'generate':>9} "
              f"{'validate':>9} {'load file':>9} | {'IB route':>9} {'us/pair':>7} | "
              f"{'RoCE ECMP':>9} {'us/pair':>7} {'width':>5}")
    print(f"routing: {args.pairs} random same-rail NIC pairs per size (first call, cold caches)")
    print(header)
    print("-" * len(header))
    tmp = Path(tempfile.mkdtemp(prefix="fc-bench-topo-"))
    for nodes in SIZES:
        if nodes > args.max_nodes:
            continue
        gen = gen_dict(nodes)
        ib, t_gen = timed(lambda gen=gen: generate(gen, name="b", fabric="infiniband"))
        _, t_val = timed(lambda ib=ib: check_structure(ib, source="bench"))
        path = tmp / f"rail-{nodes}.yaml"
        flow = ", ".join(f"{k}: {v}" for k, v in gen.items())
        path.write_text(f"name: rail-{nodes}\nfabric: infiniband\ngenerator: {{{flow}}}\n")
        ib, t_load = timed(lambda path=path: load_topology(path))
        roce = generate(gen, name="b", fabric="roce")
        rng = random.Random(7)
        nics = sorted(ib.nics)
        by_rail: dict[int, list[str]] = {}
        for n in nics:
            by_rail.setdefault(ib.nics[n].rail, []).append(n)
        pairs = []
        for _ in range(args.pairs):
            rail = rng.randrange(8)
            pairs.append((rng.choice(by_rail[rail]), rng.choice(by_rail[rail])))
        _, t_route = timed(lambda ib=ib, pairs=pairs: [ib.route(a, b) for a, b in pairs])
        sets, t_ecmp = timed(lambda roce=roce, pairs=pairs: [roce.paths(a, b) for a, b in pairs])
        width = max(len(s) for s in sets)
        print(f"{nodes:>6} {len(ib.nics):>7} {len(ib.switches):>8} {len(ib.links):>7} | "
              f"{t_gen:>8.3f}s {t_val:>8.3f}s {t_load:>8.3f}s | {t_route:>8.3f}s "
              f"{t_route / len(pairs) * 1e6:>7.1f} | {t_ecmp:>8.3f}s "
              f"{t_ecmp / len(pairs) * 1e6:>7.1f} {width:>5}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
