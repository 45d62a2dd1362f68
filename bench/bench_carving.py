"""Carving benchmark: how many idle nodes the InfiniBand 4x/8x carving leaves out of its groups.

A sweep takes the idle nodes, so their count is rarely a multiple of the group size k. For each
topology and seed this draws a random idle subset (the whole fabric less 1-19 nodes, or one past a
multiple of k, alternately), carves it twice at 4x and at 8x as the ladder does (carving 2 avoiding
who met in carving 1) and counts the nodes no group took, with the CPU seconds of the carving.
``--root`` imports another source tree (a worktree of an older commit) for a before/after table.

Run: ``python bench/bench_carving.py [--topologies ib-fattree-128,...] [--seeds 200-239]
[--root TREE]``
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
TOPOLOGIES = "ib-fattree-128,gb200-nvl72-8,ib-fattree3-512"


def bench(names: list[str], seeds: range) -> list[tuple[str, int, int, int, int, float]]:
    """Rows (topology, k, carving, carvings, nodes left out, CPU seconds)."""
    from fabriccheck.planning.ib_groups import carve_ib_groups
    from fabriccheck.topology import load_topology
    from fabriccheck.topology.view import FabricView

    rows = []
    for name in names:
        topo = load_topology(name)
        view, every = FabricView(topo), sorted(topo.nodes)
        tally: dict[tuple[int, int], list[float]] = defaultdict(lambda: [0, 0, 0.0])
        for seed in seeds:
            rng = random.Random(seed)
            for k in (4, 8):
                n = (len(every) // k * k - k + 1 if seed % 2
                     else len(every) - rng.randrange(1, 20))
                nodes = sorted(rng.sample(every, n))
                met: dict[str, set[str]] = defaultdict(set)
                for carving in (1, 2):
                    t0 = time.process_time()
                    groups = carve_ib_groups(nodes, k, view, carving, met, seed, every)
                    row = tally[(k, carving)]
                    row[2] += time.process_time() - t0
                    row[0] += 1
                    row[1] += n - sum(map(len, groups))
                    for g in groups:
                        for m in g:
                            met[m] |= set(g) - {m}
        rows += [(name, k, c, int(v[0]), int(v[1]), v[2]) for (k, c), v in sorted(tally.items())]
    return rows


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topologies", default=TOPOLOGIES)
    ap.add_argument("--seeds", default="200-239", help="a range FIRST-LAST")
    ap.add_argument("--root", default=str(HERE), help="the source tree to import")
    args = ap.parse_args(argv)
    sys.path.insert(0, args.root)
    first, last = (int(x) for x in args.seeds.split("-"))
    rows = bench(args.topologies.split(","), range(first, last + 1))
    print(f"## Idle nodes left out of the carving (seeds {args.seeds}, tree {args.root})\n")
    print("| topology | k | carving | carvings | nodes left out | CPU s |")
    print("|---|---|---|---|---|---|")
    for name, k, c, runs, left, cpu in rows:
        print(f"| {name} | {k}x | {c} | {runs} | {left} | {cpu:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
