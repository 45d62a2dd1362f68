"""RoCE link benchmark: held-out single-link faults on a rail-optimized RoCE fabric (simulator).

Each seed degrades one switch link chosen at random (factor 0.5 or down, 3% jitter, 1% glitches)
and runs a default sweep (the 1x/2x/4x/8x ladder, 8 rounds, then follow-ups). A run *names* the
link when ``bad_links`` is exactly it, *sets* it when a reported candidate set of <= 2 links holds
it (and nothing else is bad), and is *wrong* when a healthy link is called bad; *drained* counts
runs that drained any node (every node is healthy). ``link_round_mean``/``max``: the round of
the link verdict (``verdict_rounds``) over the runs that named it. ``coverage``: the share of
switch links a pinned flow with a learned path crossed (``link_coverage``). "learned" is the
share of pinned RoCE flows whose path a same-5-tuple traceroute revealed (``path_learning`` in
the run result); "traces" the traceroute tests per run; ``cpu_s`` the CPU seconds per run.

Run: ``python bench/bench_roce_links.py [--seeds N] [--first-seed S] [--topology NAME]
[--nodes 128,256]`` (default: ``roce-rail-64``, 20 seeds, both fault kinds).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fabriccheck.executors.sim import SimExecutor  # noqa: E402
from fabriccheck.faults import FaultSet  # noqa: E402
from fabriccheck.models import link_key  # noqa: E402
from fabriccheck.orchestrator import run  # noqa: E402
from fabriccheck.policy import SweepPolicy  # noqa: E402
from fabriccheck.specs import resolve_spec  # noqa: E402
from fabriccheck.topology import generate, load_topology  # noqa: E402


def switch_links(topo) -> list:
    return sorted(lk for lk in topo.links if lk[0] in topo.switches and lk[1] in topo.switches)


def one_case(topo, seed: int, kind: str) -> dict:
    """Sweep with one random switch link faulty; score what the run said about it."""
    rng = random.Random(f"roce-link:{seed}")
    link = rng.choice(switch_links(topo))
    fault = {"kind": kind, "link": list(link)}
    if kind == "link_degraded":
        fault["factor"] = 0.5
    fs = FaultSet.from_dict({"noise": {"jitter": 0.03, "glitch_rate": 0.01}, "faults": [fault]})
    spec = resolve_spec(None, topo)
    c0 = time.process_time()
    res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed),
              SweepPolicy(mode="sweep", seed=seed))
    cpu = time.process_time() - c0
    truth = link_key(*link)
    bad = {link_key(*lk) for lk in res.bad_links}
    sets = [{link_key(*c) for c in s["candidates"]} for s in res.link_suspects]
    small = any(truth in s and len(s) <= 2 for s in sets)
    anywhere = truth in bad or any(truth in s for s in sets)
    pl = res.extra.get("path_learning", {})
    # the round of the link verdict: the link named bad, else the last round (a set is what
    # the run ends with)
    when = res.extra.get("verdict_rounds", {}).get(f"{truth[0]} -- {truth[1]}") or \
        res.extra.get("verdict_rounds", {}).get(f"{truth[1]} -- {truth[0]}")
    return {"named": bad == {truth}, "set2": small and not (bad - {truth}),
            "any": anywhere, "wrong": bool(bad - {truth}), "drained": bool(res.drain),
            "link_round": when if bad == {truth} else None,
            "coverage": res.extra.get("link_coverage", {}).get("share", 0.0),
            "rounds": res.rounds, "cpu": cpu, "pinned": pl.get("pinned_flows", 0),
            "learned": pl.get("learned", 0), "traces": pl.get("traces", 0),
            "min_set": min((len(s) for s in sets if truth in s), default=0)}


def table(topo, seeds: int, kind: str, first: int = 0) -> dict:
    rows = [one_case(topo, s, kind) for s in range(first, first + seeds)]
    n = len(rows)
    named = sum(r["named"] for r in rows)
    hit = sum(r["named"] or r["set2"] for r in rows)
    pinned = sum(r["pinned"] for r in rows)
    when = [r["link_round"] for r in rows if r["link_round"]]
    return {"topology": topo.name, "fault": kind, "runs": n, "named": named,
            "named_or_set<=2": hit, "hit_rate": hit / n, "in_any_set": sum(r["any"] for r in rows),
            "wrong": sum(r["wrong"] for r in rows), "drained": sum(r["drained"] for r in rows),
            "link_round_mean": sum(when) / len(when) if when else float("nan"),
            "link_round_max": max(when, default=0),
            "coverage": sum(r["coverage"] for r in rows) / n,
            "rounds": sum(r["rounds"] for r in rows) / n,
            "learned": (sum(r["learned"] for r in rows) / pinned) if pinned else 0.0,
            "traces": sum(r["traces"] for r in rows) / n, "cpu_s": sum(r["cpu"] for r in rows) / n}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--topology", default="roce-rail-64")
    ap.add_argument("--kinds", default="link_degraded,link_down")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--nodes", default="", help="also generated rail-optimized RoCE fabrics "
                    "of these sizes (comma-separated; 32 nodes per leaf, 32 spines, 8 rails)")
    args = ap.parse_args(argv)
    topos = [load_topology(args.topology)] + [_generated(int(n)) for n in args.nodes.split(",")
                                              if n]
    cols = ("topology", "fault", "runs", "named", "named_or_set<=2", "hit_rate", "in_any_set",
            "wrong", "drained", "link_round_mean", "link_round_max", "rounds", "coverage",
            "learned", "traces", "cpu_s")
    print(" | ".join(cols))
    for topo in topos:
        for kind in args.kinds.split(","):
            row = table(topo, args.seeds, kind, args.first_seed)
            print(" | ".join(f"{row[c]:.2f}" if isinstance(row[c], float) else str(row[c])
                             for c in cols), flush=True)
    return 0


def _generated(nodes: int):
    per_leaf = min(32, max(4, nodes // 4))
    gen = {"kind": "rail-optimized", "nodes": nodes, "rails": 8, "gpus_per_node": 8,
           "nodes_per_leaf": per_leaf, "spines": max(2, min(32, per_leaf))}
    return generate(gen, name=f"roce-rail-{nodes}", fabric="roce")


if __name__ == "__main__":
    raise SystemExit(main())
