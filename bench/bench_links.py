"""Link benchmark: planning time and switch-link coverage per tier, and single-link faults on IB.

Table 1 (``--plan``): the sweep's two carvings planned (no simulator) on 2-tier, 3-tier and
rail-optimized InfiniBand fabrics of 128 to 4,096 nodes: plan seconds (CPU and wall: the
machine may be shared) and the share of switch links crossed, per tier.

Table 2 (``--faults``): for each fabric and held-out seed one switch link is degraded
(factor 0.5) or taken down, with 3% jitter and 1% glitches, and a default sweep runs on the
simulator: the run's coverage per tier (every test that finished, follow-ups included), how
often the exact link was named (``bad_links`` is exactly the injected link), wrong links (a
healthy link called bad, summed), healthy nodes drained, the round of the link verdict
(median / max), rounds, links left untested. A last table kills a whole spine.

Run: ``python bench/bench_links.py [--plan] [--faults] [--sizes 128,1024,4096] [--seeds N]
[--first-seed S] [--dead-spine]`` (default: both tables, sizes 128,1024,4096, 4 seeds from 100).
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fabriccheck.executors.sim import SimExecutor  # noqa: E402
from fabriccheck.faults import FaultSet  # noqa: E402
from fabriccheck.inference.wording import link_name  # noqa: E402
from fabriccheck.models import link_key  # noqa: E402
from fabriccheck.orchestrator import run  # noqa: E402
from fabriccheck.policy import SweepPolicy  # noqa: E402
from fabriccheck.specs import resolve_spec  # noqa: E402
from fabriccheck.topology import generate, load_topology  # noqa: E402
from fabriccheck.topology.view import FabricView  # noqa: E402
from tests.planning.fabrics import two_carvings  # noqa: E402


def fattree3_4096():
    """4,096 nodes on a 3-tier fat-tree (32 pods x 16 leaves x 8 nodes, 16 spines per pod)."""
    gen = {"kind": "fat-tree", "tiers": 3, "nodes": 4096, "gpus_per_node": 8, "rails": 8,
           "pods": 32, "leaves_per_pod": 16, "nodes_per_leaf": 8, "spines_per_pod": 16,
           "cores": 256, "nic_gbps": 400, "uplink_gbps": 400}
    return generate(gen, name="ib-fattree3-4096", fabric="infiniband")


def shape(kind: str, nodes: int):
    """An 8-rail H100 fabric of ``nodes`` nodes: ``ft2`` (2-tier fat-tree, 4 nodes per leaf,
    32 spines), ``ft3`` (3-tier: 16 leaves of 2 nodes per pod, 16 spines per pod, 256 cores;
    4,096 nodes: :func:`fattree3_4096`) or ``rail`` (rail-optimized, 32 nodes per leaf)."""
    base = {"gpus_per_node": 8, "rails": 8, "nic_gbps": 400, "uplink_gbps": 400}
    if kind == "ft2":
        gen = {"kind": "fat-tree", "tiers": 2, "nodes": nodes, "nodes_per_leaf": 4,
               "spines": 32, **base}
    elif kind == "ft3" and nodes == 4096:
        return fattree3_4096()
    elif kind == "ft3":
        gen = {"kind": "fat-tree", "tiers": 3, "nodes": nodes, "pods": nodes // 32,
               "leaves_per_pod": 16, "nodes_per_leaf": 2, "spines_per_pod": 16, "cores": 256,
               **base}
    else:
        gen = {"kind": "rail-optimized", "nodes": nodes, "nodes_per_leaf": 32, "spines": 32,
               **base}
    return generate(gen, name=f"ib-{kind}-{nodes}", fabric="infiniband")


def carvings(topo, seed: int) -> tuple[dict, float, float]:
    """Switch-link coverage of sweep rounds 1 and 2 as planned (no simulator), CPU and wall
    seconds."""
    t0, c0 = time.monotonic(), time.process_time()
    _view, _plans, cov = two_carvings(topo, seed)
    return cov, time.process_time() - c0, time.monotonic() - t0


def plan_table(sizes: list[int], seeds: range) -> None:
    """Table 1: plan seconds and coverage per tier of the two carvings."""
    print("Two carvings planned (no simulator): plan seconds (CPU / wall), switch links "
          "crossed, per tier (mean over seeds; min share in brackets)")
    head = (f"{'fabric':<18} {'nodes':>5} {'links':>6} {'plan s cpu':>10} {'wall':>6} "
            f"{'crossed':>8} {'leaf-spine':>16} {'spine-core':>16}")
    print(head)
    print("-" * len(head))
    for kind in ("ft2", "ft3", "rail"):
        for n in sizes:
            topo = shape(kind, n)
            runs = [carvings(topo, s) for s in seeds]
            cpu = statistics.mean(r[1] for r in runs)
            wall = statistics.mean(r[2] for r in runs)
            share = statistics.mean(r[0]["share"] for r in runs)

            def tier(name: str, runs=runs) -> str:
                got = [r[0]["tiers"][name]["share"] for r in runs if name in r[0]["tiers"]]
                if not got:
                    return "-"
                return f"{100 * statistics.mean(got):.2f}% ({100 * min(got):.2f})"

            print(f"{kind:<18} {n:>5} {runs[0][0]['total']:>6} {cpu:>10.2f} {wall:>6.1f} "
                  f"{100 * share:>7.2f}% {tier('leaf-spine'):>16} {tier('spine-core'):>16}",
                  flush=True)


def one_case(topo, seed: int, kind: str) -> dict:
    view = FabricView(topo)
    rng = random.Random(f"bench-links:{topo.name}:{seed}")
    lk = rng.choice(sorted(view.switch_links))
    fault = {"kind": kind, "link": list(lk)}
    if kind == "link_degraded":
        fault["factor"] = 0.5
    fs = FaultSet.from_dict({"noise": {"jitter": 0.03, "glitch_rate": 0.01}, "faults": [fault]})
    spec = resolve_spec(None, topo)
    t0 = time.monotonic()
    res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed),
              SweepPolicy(mode="sweep", seed=seed))
    found = {link_key(*x) for x in res.bad_links}
    truth = link_key(*lk)
    return {
        "cov": res.extra["link_coverage"],
        "exact": found == {truth},
        "wrong": len(found - {truth}),
        "drained": len(res.drain),
        "round": res.extra["verdict_rounds"].get(link_name(truth)),
        "rounds": res.rounds,
        "untested": len(res.extra["link_coverage"].get("untested_links", [])),
        "s": time.monotonic() - t0,
    }


def tier_share(cov: dict, tier: str) -> float | None:
    t = cov.get("tiers", {}).get(tier)
    return None if t is None else t["share"]


HEAD = (f"{'topology':<20} {'fault':<13} {'runs':>4} {'cov':>7} {'leaf-sp':>8} "
        f"{'sp-core':>8} {'exact':>7} {'wrong':>5} {'drain':>5} {'rnd med/max':>11} "
        f"{'rounds':>6} {'untst':>5} {'s/run':>6}")


def row(name: str, kind: str, cases: list[dict]) -> None:
    cov = statistics.mean(c["cov"]["share"] for c in cases)
    lu = [tier_share(c["cov"], "leaf-spine") for c in cases]
    su = [tier_share(c["cov"], "spine-core") for c in cases]
    lu_s = f"{100 * statistics.mean(lu):.2f}%" if None not in lu else "-"
    su_s = f"{100 * statistics.mean(su):.2f}%" if None not in su else "-"
    rnd = [c["round"] for c in cases if c["round"] is not None]
    rnd_s = f"{statistics.median(rnd):.0f}/{max(rnd)}" if rnd else "-"
    exact = sum(c["exact"] for c in cases)
    print(f"{name:<20} {kind:<13} {len(cases):>4} {100 * cov:>6.2f}% {lu_s:>8} {su_s:>8} "
          f"{exact:>3}/{len(cases):<3} {sum(c['wrong'] for c in cases):>5} "
          f"{sum(c['drained'] for c in cases):>5} {rnd_s:>11} "
          f"{max(c['rounds'] for c in cases):>6} {sum(c['untested'] for c in cases):>5} "
          f"{statistics.mean(c['s'] for c in cases):>6.1f}", flush=True)


def dead_switch(topo, seed: int) -> tuple[bool, int, int]:
    """Every link of one spine down: (one switch verdict naming it, other bad links, drained)."""
    view = FabricView(topo)
    spines = sorted(s for s, sw in topo.switches.items() if sw.tier == "spine")
    sw = random.Random(f"dead:{seed}").choice(spines)
    faults = [{"kind": "link_down", "link": list(lk)} for lk in sorted(view.switch_links)
              if sw in lk]
    fs = FaultSet.from_dict({"noise": {"jitter": 0.03, "glitch_rate": 0.01}, "faults": faults})
    spec = resolve_spec(None, topo)
    res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed),
              SweepPolicy(mode="sweep", seed=seed))
    switches = res.extra.get("bad_switches", [])
    outside = [lk for lk in res.bad_links if sw not in lk]
    return switches == [sw], len(outside), len(res.drain)


def _arg(argv: list[str], flag: str, default: str) -> str:
    return argv[argv.index(flag) + 1] if flag in argv else default


def fault_table(sizes: list[int], seeds: range) -> None:
    """Table 2: held-out single switch-link faults, simulated default sweeps."""
    print("Single switch-link faults (3% jitter, 1% glitches), held-out seeds "
          f"{seeds.start}-{seeds.stop - 1}: coverage of the run's tests per tier, exact link "
          "named, wrong links, drained nodes, round of the link verdict, links left untested")
    print(HEAD)
    print("-" * len(HEAD))
    fabrics = {128: [("ft2", 128), ("ft3", 128)], 1024: [("ft3", 1024), ("rail", 1024)],
               4096: [("ft3", 4096)]}
    for size in sizes:
        few = seeds if size <= 128 else range(seeds.start, seeds.start + (
            max(1, len(seeds) // 2) if size <= 1024 else 1))
        for kind, n in fabrics.get(size, [("ft3", size)]):
            topo = shape(kind, n)
            for fault in ("link_degraded", "link_down"):
                if size >= 4096 and fault == "link_down":
                    continue
                row(topo.name, fault, [one_case(topo, s, fault) for s in few])


def main(argv: list[str]) -> int:
    sizes = [int(x) for x in _arg(argv, "--sizes", "128,1024,4096").split(",")]
    first = int(_arg(argv, "--first-seed", "100"))
    seeds = range(first, first + int(_arg(argv, "--seeds", "4")))
    both = "--plan" not in argv and "--faults" not in argv
    if "--plan" in argv or both:
        plan_table(sorted(set(sizes) | {512}) if both else sizes, range(3))
        print()
    if "--faults" in argv or both:
        fault_table(sizes, seeds)
    if "--dead-spine" in argv:
        print("\nA dead spine (every link down): one switch verdict", flush=True)
        for name in ("ib-fattree-128", "ib-fattree3-512"):
            topo = load_topology(name)
            res = [dead_switch(topo, s) for s in seeds]
            print(f"{name:<20} switch verdict {sum(r[0] for r in res)}/{len(res)}  "
                  f"links outside it {sum(r[1] for r in res)}  drained "
                  f"{sum(r[2] for r in res)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
