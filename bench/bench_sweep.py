"""Sweep benchmark: fabriccheck vs two baselines on the simulator, 16 .. 4,096 nodes (+16,384 plan).

Prints one table per fabric: rounds, tests, simulated test seconds (sum over rounds of the
longest test), precision and recall of the drain list against the injected node/NIC/hang faults,
link faults found exactly + inside a reported candidate set ("links x+s"), link precision /
recall of the exact ``bad_links`` ("link P/R"), switch-link coverage, and CPU seconds spent
outside the simulator (planning, parsing, inference); "n/NIC" is the round by which every
node/NIC/hang/unreachable verdict was reached (the rest of the rounds localize links). A last
table plans two rounds for 16,384 nodes and localizes from synthetic observations (no
simulator): the planner and localizer at that scale. The RoCE table measures how often the demo
cluster's degraded spine link lands in a reported candidate set over 30 seeds.

Run: ``python bench/bench_sweep.py [--quick]`` (``--quick``: up to 1,024 nodes).
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.baselines import recursive_halving, round_robin  # noqa: E402
from fabriccheck.executors.sim import SimExecutor  # noqa: E402
from fabriccheck.faults import FaultSet, load_faults  # noqa: E402
from fabriccheck.inference.attribute import infer  # noqa: E402
from fabriccheck.models import FAIL, PASS, Observation, link_key  # noqa: E402
from fabriccheck.orchestrator import run  # noqa: E402
from fabriccheck.planning.build import RoundBuilder  # noqa: E402
from fabriccheck.planning.pairing import pair_key, plan_rail_pairs  # noqa: E402
from fabriccheck.policy import SweepPolicy  # noqa: E402
from fabriccheck.specs import resolve_spec  # noqa: E402
from fabriccheck.topology import generate, load_topology  # noqa: E402
from fabriccheck.topology.view import FabricView  # noqa: E402

SIZES = (16, 128, 1024, 4096)


class TimedExecutor:
    """Wraps the simulator to count the CPU it uses (so it can be left out)."""

    def __init__(self, inner) -> None:
        self.inner, self.cpu_s, self.name = inner, 0.0, inner.name

    def run_round(self, tests):
        t0 = time.process_time()
        out = self.inner.run_round(tests)
        self.cpu_s += time.process_time() - t0
        return out

    def close(self) -> None:
        self.inner.close()


def cluster(n: int, fabric: str):
    per_leaf = 32 if n >= 128 else 8
    spines = 32 if n >= 1024 else 8
    return generate({"kind": "rail-optimized", "nodes": n, "rails": 8, "gpus_per_node": 8,
                     "nodes_per_leaf": per_leaf, "spines": spines}, name=f"{fabric}-{n}",
                    fabric=fabric)


def fault_mix(topo, seed: int) -> FaultSet:
    """About 1% of nodes faulty (at least one of each kind), two switch links, noise."""
    rng = random.Random(seed)
    nodes = sorted(topo.nodes)
    k = max(1, len(nodes) // 400)
    picks = rng.sample(nodes, 5 * k)
    faults = []
    for i, n in enumerate(picks):
        kind = ("node_slow", "nic", "nic", "node_hang", "node_unreachable")[i % 5]
        if kind == "nic":
            nic = rng.choice(topo.nodes[n].nics).endpoint
            faults.append({"kind": "nic_degraded", "nic": nic, "factor": rng.choice([0.25, 0.5])})
        elif kind == "node_slow":
            faults.append({"kind": kind, "node": n, "factor": 0.5})
        else:
            faults.append({"kind": kind, "node": n})
    sw = sorted(lk for lk in topo.links if lk[0] in topo.switches and lk[1] in topo.switches)
    for lk in rng.sample(sw, 2):
        faults.append({"kind": "link_degraded", "link": list(lk), "factor": 0.5})
    return FaultSet.from_dict({"noise": {"jitter": 0.03, "glitch_rate": 0.01},
                               "faults": faults})


def score(drain: set[str], fs: FaultSet) -> tuple[float, float]:
    truth = set(fs.drain_nodes())
    tp = len(drain & truth)
    precision = tp / len(drain) if drain else 1.0
    recall = tp / len(truth) if truth else 1.0
    return precision, recall


def row(name, n, rounds, tests, secs, prec, rec, links, cpu, est=False, vr="-",
        lpr="-", cov="-") -> str:
    mark = " (est)" if est else ""
    return (f"| {name:<28} | {n:>6} | {rounds:>6}{mark:<6} | {vr:>5} | {tests:>9} | "
            f"{secs:>9.0f} | {prec:>9.3f} | {rec:>6.3f} | {links:>9} | {lpr:>11} | {cov:>6} | "
            f"{cpu:>7.2f} |")


def link_pr(res, fs) -> str:
    """Link precision / recall of ``bad_links`` (exact verdicts) against the injected links."""
    truth = {link_key(*lk) for lk in fs.bad_links()}
    found = {link_key(*lk) for lk in res.bad_links}
    prec = len(found & truth) / len(found) if found else 1.0
    rec = len(found & truth) / len(truth) if truth else 1.0
    return f"{prec:.2f}/{rec:.2f}"


def bench_fabric(fabric: str, sizes) -> None:
    print(f"\n### {fabric}: ~1% faulty nodes (slow, NIC, hang, unreachable) + 2 degraded "
          "switch links, jitter 3%, glitches 1%\n")
    print("| method                       |  nodes | rounds       | n/NIC |     tests | test s    "
          "| precision | recall | links x+s | link P/R    | cover  | CPU s   |")
    print("|" + "|".join("-" * w for w in (30, 8, 14, 7, 11, 11, 11, 8, 11, 13, 8, 9)) + "|")
    for n in sizes:
        topo = cluster(n, fabric)
        spec = resolve_spec(None, topo)
        fs = fault_mix(topo, seed=n)
        ex = TimedExecutor(SimExecutor(topo, spec, fs, seed=1))
        c0 = time.process_time()
        res = run("sweep", sorted(topo.nodes), topo, spec, ex, SweepPolicy(seed=1))
        cpu = time.process_time() - c0 - ex.cpu_s
        prec, rec = score(set(res.drain), fs)
        truth_links = {link_key(*lk) for lk in fs.bad_links()}
        exact = len({link_key(*lk) for lk in res.bad_links} & truth_links)
        in_set = sum(any(lk in {link_key(*c) for c in s["candidates"]} for s in res.link_suspects)
                     for lk in truth_links)
        links = f"{exact}+{in_set}/{len(truth_links)}"
        devices = set(fs.drain_nodes()) | set(fs.bad_nics()) | set(fs.unreachable_nodes())
        vr = max((r for k, r in res.extra["verdict_rounds"].items() if k in devices), default=0)
        cov = f"{100 * res.extra['link_coverage']['share']:.0f}%"
        print(row("fabriccheck sweep", n, res.rounds, res.tests, res.test_seconds, prec, rec,
                  links, cpu, vr=str(vr), lpr=link_pr(res, fs), cov=cov), flush=True)
        for name, fn in (("round-robin (n-1 rounds)", round_robin),
                         ("recursive halving", recursive_halving)):
            ex = SimExecutor(topo, spec, fs, seed=1)
            kw = {"max_rounds": 15} if fn is round_robin and n > 128 else {}
            b = fn(sorted(topo.nodes), topo, spec, ex, **kw)
            prec, rec = score(b.drain, fs)
            print(row(name, n, b.rounds, b.tests, b.test_seconds, prec, rec, "-", b.cpu_s,
                      b.estimated), flush=True)


def plan_and_localize(n: int = 16384) -> None:
    """Plan two rounds for ``n`` nodes and localize from synthetic observations (no simulator)."""
    t0 = time.process_time()
    topo = cluster(n, "infiniband")
    gen_s = time.process_time() - t0
    view = FabricView(topo)
    spec = resolve_spec(None, topo)
    rng = random.Random(3)
    bad_nics = {rng.choice(topo.nodes[x].nics).endpoint for x in rng.sample(sorted(topo.nodes), 20)}
    sw = sorted(lk for lk in topo.links if lk[0] in topo.switches and lk[1] in topo.switches)
    bad_links = set(rng.sample(sw, 4))
    t1 = time.process_time()
    tests, avoid, cross = [], {}, {}
    for k in (1, 2):
        plans = plan_rail_pairs(topo.nodes, view, round_no=k, seed=1, avoid=avoid,
                                prev_cross=cross)
        b = RoundBuilder(k, view, spec, SweepPolicy())
        for rail, plan in plans.items():
            for c, s in plan.pairs:
                b.add_flow(c, s, rail, check_links=False)
            avoid.setdefault(rail, set()).update(pair_key(*p) for p in plan.pairs)
            cross[rail] = plan.cross
        tests += b.tests
    plan_s = time.process_time() - t1
    obs = []
    for t in tests:
        f = t.flows[0]
        broken = f.src in bad_nics or f.dst in bad_nics or (
            view.flow_links(f)[0] & bad_links)
        obs.append(Observation(t, FAIL if broken else PASS, value=196.0 if broken else 392.0,
                               unit="Gb/s", floor=335.0))
    t2 = time.process_time()
    inf = infer(obs, view)
    infer_s = time.process_time() - t2
    found_links = {g.candidates[0] for g in inf.links if len(g.candidates) == 1}
    print(f"\n### planning + localization only, {n:,} nodes (IB rail-optimized, "
          f"{len(topo.switches):,} switches, {len(topo.links):,} links)\n")
    print("| nodes | tests planned (2 rounds) | plan CPU s | infer CPU s | NIC suspects found "
          "| links pinned to one | topology gen s |")
    print("|---|---|---|---|---|---|---|")
    found_nics = set(inf.nic_suspects) | set(inf.bad_nics)
    print(f"| {n:,} | {len(tests):,} | {plan_s:.1f} | {infer_s:.1f} | "
          f"{len(found_nics & bad_nics)}/{len(bad_nics)} | "
          f"{len(found_links & bad_links)}/{len(bad_links)} | {gen_s:.1f} |")


def roce_link_hit_rate(seeds: int = 30) -> None:
    """How often a degraded RoCE spine link ends up in a reported candidate set, over seeds.

    The demo cluster (roce-rail-64: 2 leaves per rail, 8 spines) with its faults file: an ECMP
    flow takes one of 8 paths by a hash, so the link is sampled, never known; the candidate
    set is the 16 links between the two leaves (their equal-cost paths)."""
    topo = load_topology("roce-rail-64")
    spec = resolve_spec(None, topo)
    fs = load_faults(str(Path(__file__).resolve().parent.parent / "topologies" / "faults"
                         / "demo-roce-64.yaml"))
    truth = {link_key(*lk) for lk in fs.bad_links()}
    hits = false_sets = drained = 0
    rounds = []
    c0 = time.process_time()
    for seed in range(seeds):
        res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed=seed),
                  SweepPolicy(seed=seed))
        sets = [{link_key(*c) for c in s["candidates"]} for s in res.link_suspects]
        sets += [{link_key(*lk)} for lk in res.bad_links]
        hits += any(truth <= x for x in sets)
        false_sets += sum(1 for x in sets if not truth & x)
        drained += bool(set(res.drain) - set(fs.drain_nodes()))
        rounds.append(res.rounds)
    print(f"\n### RoCE link hit rate: demo cluster, {seeds} seeds (0..{seeds - 1})\n")
    print("| seeds | link in a candidate set | false candidate sets | runs draining a healthy "
          "node | rounds (mean / max) | CPU s |")
    print("|---|---|---|---|---|---|")
    print(f"| {seeds} | {hits}/{seeds} ({100 * hits / seeds:.0f}%) | {false_sets} | {drained} | "
          f"{sum(rounds) / len(rounds):.1f} / {max(rounds)} | "
          f"{time.process_time() - c0:.1f} |")


def main(argv: list[str]) -> None:
    sizes = SIZES[:3] if "--quick" in argv else SIZES
    bench_fabric("infiniband", sizes)
    bench_fabric("roce", sizes)
    roce_link_hit_rate(30)
    plan_and_localize(4096 if "--quick" in argv else 16384)


if __name__ == "__main__":
    main(sys.argv[1:])
