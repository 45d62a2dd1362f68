"""Link benchmark: switch-link coverage per tier and single-link faults found exactly on IB.

For each InfiniBand topology and seed one switch link is degraded (factor 0.5) or taken down,
with 3% jitter and 1% glitches, and a default sweep runs on the simulator. The table prints the
sweep's switch-link coverage per tier (two carvings), how often the exact link was named
(``bad_links`` is exactly the injected link), wrong links (a healthy link called bad, summed),
healthy nodes drained, and the round of the link verdict (median / max). A last table kills a
whole spine (every link down) and counts switch verdicts.

Run: ``python bench/bench_links.py [--quick]`` (``--quick``: 128 and 512 nodes, 4 seeds).
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
from fabriccheck.inference.attribute import link_name  # noqa: E402
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


def carvings(topo, seed: int) -> tuple[dict, float]:
    """Switch-link coverage of sweep rounds 1 and 2 as planned (no simulator), and seconds."""
    t0 = time.monotonic()
    _view, _plans, cov = two_carvings(topo, seed)
    return cov, time.monotonic() - t0


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
        "s": time.monotonic() - t0,
    }


def tier_share(cov: dict, tier: str) -> float | None:
    t = cov.get("tiers", {}).get(tier)
    return None if t is None else t["share"]


HEAD = (f"{'topology':<20} {'fault':<13} {'runs':>4} {'cov':>6} {'leaf-up':>8} "
        f"{'spine-up':>8} {'exact':>7} {'wrong':>5} {'drain':>5} {'rnd med/max':>11} "
        f"{'rounds':>6} {'s/run':>6}")


def row(name: str, kind: str, cases: list[dict]) -> None:
    cov = statistics.mean(c["cov"]["share"] for c in cases)
    lu = [tier_share(c["cov"], "leaf-spine") for c in cases]
    su = [tier_share(c["cov"], "spine-core") for c in cases]
    lu_s = f"{100 * statistics.mean(lu):.0f}%" if None not in lu else "-"
    su_s = f"{100 * statistics.mean(su):.0f}%" if None not in su else "-"
    rnd = [c["round"] for c in cases if c["round"] is not None]
    rnd_s = f"{statistics.median(rnd):.0f}/{max(rnd)}" if rnd else "-"
    exact = sum(c["exact"] for c in cases)
    print(f"{name:<20} {kind:<13} {len(cases):>4} {100 * cov:>5.1f}% {lu_s:>8} {su_s:>8} "
          f"{exact:>3}/{len(cases):<3} {sum(c['wrong'] for c in cases):>5} "
          f"{sum(c['drained'] for c in cases):>5} {rnd_s:>11} "
          f"{max(c['rounds'] for c in cases):>6} "
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


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    seeds = range(4) if quick else range(10)
    shapes = [("ib-fattree-128", load_topology("ib-fattree-128")),
              ("ib-fattree3-512", load_topology("ib-fattree3-512"))]
    if not quick:
        shapes.append(("ib-rail-1024", load_topology("ib-rail-1024")))
    print("Coverage of the sweep's two carvings (planning only), per tier; plan seconds")
    for name, topo in shapes:
        for seed in seeds[:3]:
            cov, secs = carvings(topo, seed)
            tiers = ", ".join(f"{t} {100 * c['share']:.1f}%" for t, c in cov["tiers"].items())
            print(f"{name:<20} seed {seed}  {cov['exercised']:>5}/{cov['total']:<5} "
                  f"{100 * cov['share']:5.1f}%  ({tiers})  {secs:.1f} s", flush=True)
    print()
    print("Single switch-link faults (3% jitter, 1% glitches): coverage of the run's tests, "
          "exact link named, wrong links, drained nodes, round of the link verdict")
    print(HEAD)
    print("-" * len(HEAD))
    for name, topo in shapes:
        for kind in ("link_degraded", "link_down"):
            row(name, kind, [one_case(topo, s, kind) for s in seeds])
    print("\nA dead spine (every link down): one switch verdict", flush=True)
    for name, topo in shapes[:2]:
        res = [dead_switch(topo, s) for s in range(2 if quick else 4)]
        print(f"{name:<20} switch verdict {sum(r[0] for r in res)}/{len(res)}  "
              f"links outside it {sum(r[1] for r in res)}  drained {sum(r[2] for r in res)}",
              flush=True)
    if not quick:
        print("\n4,096 nodes, once", flush=True)
        print(HEAD)
        row("ib-rail-4096", "link_degraded",
            [one_case(load_topology("ib-rail-4096"), 0, "link_degraded")])
        row("ib-fattree3-4096", "link_degraded", [one_case(fattree3_4096(), 0, "link_degraded")])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
