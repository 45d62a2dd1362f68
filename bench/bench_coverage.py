"""Ladder coverage benchmark: how many different groups each node met at each level >= 2.

The ladder promises two carvings per level, every node with different partners over different
paths (docs/design.md "How faults are found", step 2). This runs a default, fault-free sweep
(3% jitter, 1% glitches) of every bundled topology on the simulator and counts, per level,
the nodes that met two different groups or more, one, none (nodes out of play excluded). The
measure is the one of :mod:`fabriccheck.planning.ladder_cover`, computed here from the
observations alone (so it runs on older trees too): a level's groups are the distinct member
sets of its rounds' ``sweep``/``scale`` tests of two nodes or more; at 2x both probes count
(rail pairs and 2-node collectives; a node's 2x groups are its partners in either), and the
2-node collectives alone are shown too (``2x coll``).

Run: ``python bench/bench_coverage.py [--quick] [--seeds 1,2,3] [--root TREE] [--out FILE]``
(``--quick``: topologies under 1,000 nodes; ``--root``: the source tree to import, e.g. a copy
of an older commit, for a before/after table: ``--table BEFORE.jsonl AFTER.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
TOPOLOGIES = ("lab-4", "lab-ecmp-4", "lab-8", "roce-rail-64", "ib-fattree-128",
              "gb200-nvl72-8", "ib-fattree3-512", "ib-rail-1024", "ib-rail-4096")
PAIR_PROBES = ("ib_write_bw", "iperf3")


def coverage(res) -> dict[str, list[int]]:
    """``{"2x": [twice, once, never], "2x coll": [...], "4x": [...], ...}`` of one run."""
    steps = (res.extra.get("ladder") or {}).get("steps", [])
    level = {i + 1: int(s.split("x")[0]) for i, s in enumerate(steps) if s[:1].isdigit()}
    out = set(res.bad_nodes) | set(res.hung) | set(res.unreachable)
    groups: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for o in res.observations:
        t = o.test
        k = level.get(t.round, 0)
        if k < 2 or t.purpose not in ("sweep", "scale") or len(t.nodes) < 2:
            continue
        for n in t.nodes:
            groups[f"{k}x"][n].add(frozenset(t.nodes))
            if k == 2 and t.probe not in PAIR_PROBES:
                groups["2x coll"][n].add(frozenset(t.nodes))
    rows = {}
    for lv in sorted(groups, key=lambda s: (int(s.split("x")[0]), s)):
        met = [len(groups[lv].get(n, ())) for n in res.nodes if n not in out]
        rows[lv] = [sum(m >= 2 for m in met), sum(m == 1 for m in met), sum(m == 0 for m in met)]
    return rows


def one(name: str, seed: int) -> dict:
    from fabriccheck.executors.sim import SimExecutor
    from fabriccheck.faults import FaultSet
    from fabriccheck.orchestrator import run
    from fabriccheck.policy import SweepPolicy, spec_probes
    from fabriccheck.specs import resolve_spec
    from fabriccheck.topology import load_topology

    topo = load_topology(str(HERE / "topologies" / f"{name}.yaml"))
    spec = resolve_spec(topo.spec, topo)
    fs = FaultSet.from_dict({"noise": {"jitter": 0.03, "glitch_rate": 0.01}})
    t0 = time.process_time()
    res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed=seed),
              SweepPolicy(mode="sweep", seed=seed, **spec_probes(spec)))
    return {"topology": name, "seed": seed, "nodes": len(topo.nodes), "exit": res.exit_code,
            "drain": res.drain, "coverage": coverage(res),
            "cpu_s": round(time.process_time() - t0, 1)}


def table(before: list[dict], after: list[dict]) -> str:
    """Markdown: per topology and level, twice/once/never summed over seeds, before -> after."""
    def total(rows: list[dict]) -> dict:
        acc: dict = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
        for r in rows:
            cell = acc[(r["topology"], r["nodes"])]
            for lv, c in r["coverage"].items():
                cell[lv] = [a + b for a, b in zip(cell[lv], c, strict=True)]
        return acc
    ran = {(r["topology"], r["seed"]) for r in after}  # the same runs on both sides
    b, a = total([r for r in before if (r["topology"], r["seed"]) in ran]), total(after)
    seeds = sorted({r["seed"] for r in after})
    lines = [f"seeds {', '.join(map(str, seeds))} (node counts summed over the seeds run)", "",
             "| topology | level | before: twice / once / never | after: twice / once / never |",
             "|---|---|---|---|"]
    for key in sorted(a, key=lambda t: (t[1], t[0])):
        for lv in a[key]:
            was = "/".join(map(str, b[key][lv])) if lv in b.get(key, {}) else "-"
            n = sum(1 for r in after if r["topology"] == key[0])
            some = f", {n} seed{'s' * (n > 1)}" if n < len(seeds) else ""
            lines.append(f"| {key[0]} ({key[1]}{some}) | {lv} | {was} | "
                         f"{'/'.join(map(str, a[key][lv]))} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", default="7301,7302,7303")
    ap.add_argument("--topologies", default="")
    ap.add_argument("--root", default=str(HERE))
    ap.add_argument("--out", default="")
    ap.add_argument("--table", nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args(argv)
    if args.table:
        rows = [[json.loads(x) for x in Path(p).read_text().splitlines() if x.strip()]
                for p in args.table]
        print(table(*rows))
        return 0
    sys.path.insert(0, args.root)
    names = args.topologies.split(",") if args.topologies else [
        t for t in TOPOLOGIES if not (args.quick and ("1024" in t or "4096" in t))]
    for name in names:
        for seed in (int(s) for s in args.seeds.split(",")):
            row = one(name, seed)
            line = json.dumps(row)
            print(line, flush=True)
            if args.out:
                with open(args.out, "a") as fh:
                    fh.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
