"""Intermittence benchmark (issue 31): links and host cables failing 20-30 % of their tests, and
fault-free sweeps of a busy fabric, on seeds chosen by the caller.

Scenarios (one ``sweep`` each, through the public API: ``orchestrator.run`` on a
``SimExecutor``; the faulty part and its probability are drawn from the seed):

- ``ib128-flap``: ``ib-fattree-128``, one leaf-spine link ``link_flapping`` at 0.20-0.30,
  default noise (3 % jitter, 1 % glitches);
- ``ib512-flap``: ``ib-fattree3-512``, one leaf-spine link, the same;
- ``roce64-cable``: ``roce-rail-64``, one host cable (NIC-leaf link) at 0.20-0.30;
- ``busy128``, ``busy512``: fault-free, a busy fabric (8 % jitter, 3 % glitches);
- ``quiet128``: fault-free, default noise.

Columns: **exit** counts of exit codes 0/1/3; **named** runs whose faulty part is named (a
link: flaky, a suspect, in ``bad_links`` or a reported candidate set; a host cable: its NIC or
node flaky, a suspect or drained) over runs with a fault; **right** runs that exit 1 with the
fault named and no false drain (a fault-free busy run: no drain; a fault-free quiet run: exit
0); **false drains** healthy nodes drained (summed); **suspects** open suspects other than the
faulty part (summed); **false flaky** parts called flaky that are not the injected one;
**rounds**, **tests**, **test s** (simulated test time) means; **CPU s** summed.

Run: ``python bench/bench_intermittent.py [--seeds N] [--first-seed K] [--jsonl FILE]
[SCENARIO ...]``; ``--table FILE`` prints the table of the runs recorded in a JSONL file (each
run appends one line as it finishes, so a long bench can be read part-way).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fabriccheck.executors.sim import SimExecutor  # noqa: E402
from fabriccheck.faults import FaultSet  # noqa: E402
from fabriccheck.models import Link, nic_node  # noqa: E402
from fabriccheck.orchestrator import run  # noqa: E402
from fabriccheck.policy import SweepPolicy  # noqa: E402
from fabriccheck.specs import resolve_spec  # noqa: E402
from fabriccheck.topology import load_topology  # noqa: E402

QUIET = {"jitter": 0.03, "glitch_rate": 0.01}
BUSY = {"jitter": 0.08, "glitch_rate": 0.03}
#: scenario -> (topology, what flaps: "uplink" | "cable" | None, noise)
SCENARIOS = {
    "ib128-flap": ("ib-fattree-128", "uplink", QUIET),
    "ib512-flap": ("ib-fattree3-512", "uplink", QUIET),
    "roce64-cable": ("roce-rail-64", "cable", QUIET),
    "busy128": ("ib-fattree-128", None, BUSY),
    "busy512": ("ib-fattree3-512", None, BUSY),
    "quiet128": ("ib-fattree-128", None, QUIET),
}


def _fault(topo, what: str | None, rng: random.Random) -> tuple[list[dict], str]:
    """The faults of one run and the name the result must carry ("" when fault-free)."""
    if what is None:
        return [], ""
    p = round(rng.uniform(0.2, 0.3), 2)
    if what == "cable":
        node = rng.choice(sorted(topo.nodes))
        nic = rng.choice(topo.nodes[node].nics).endpoint
        return [{"kind": "link_flapping", "link": [nic, topo.attachment[nic]],
                 "probability": p}], nic
    sw = topo.switches
    ups = sorted(Link.of(*lk) for lk in topo.links
                 if lk[0] in sw and lk[1] in sw
                 and {sw[lk[0]].tier, sw[lk[1]].tier} == {"leaf", "spine"})
    lk = rng.choice(ups)
    return [{"kind": "link_flapping", "link": list(lk), "probability": p}], str(lk)


def run_one(name: str, seed: int) -> dict:
    """One run of a scenario, judged (a JSON-able row)."""
    topo_name, what, noise = SCENARIOS[name]
    topo = load_topology(topo_name)
    faults, target = _fault(topo, what, random.Random(f"{name}:{seed}"))
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict({"faults": faults, "noise": noise})
    t0 = time.process_time()
    res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed=seed),
              SweepPolicy(mode="sweep", seed=seed))
    cpu = time.process_time() - t0
    flaky = list(res.extra.get("flaky", []))
    named_parts = set(flaky) | set(res.suspects) | {str(Link.of(*lk)) for lk in res.bad_links}
    named_parts |= {str(Link.of(*c)) for g in res.link_suspects for c in g["candidates"]}
    host = nic_node(target) if what == "cable" else ""
    named = bool(target) and (target in named_parts or (bool(host) and (
        host in named_parts or host in res.drain)))
    why = {v.name: v.reason[:300] for v in res.verdicts if v.name in res.drain and v.name != host}
    return {"scenario": name, "seed": seed, "target": target, "drain_why": why,
            "probability": faults[0]["probability"] if faults else 0.0, "exit": res.exit_code,
            "named": named, "false_drains": [n for n in res.drain if n != host],
            "suspects": [s for s in res.suspects if s != target],
            "false_flaky": [f for f in flaky if f != target and (not host or nic_node(f) != host)],
            "rounds": res.rounds, "tests": res.tests, "test_seconds": round(res.test_seconds, 1),
            "cpu_s": round(cpu, 1)}


def _right(r: dict) -> bool:
    if r["target"]:
        return r["exit"] == 1 and bool(r["named"]) and not r["false_drains"]
    if SCENARIOS[r["scenario"]][2] is BUSY:
        return not r["false_drains"]
    return r["exit"] == 0


def table(rows: list[dict]) -> str:
    """The benchmark's table, one line per scenario."""
    head = (f"{'scenario':13s} {'seeds':>14s} {'exit 0/1/3':>10s} {'named':>6s} {'right':>6s} "
            f"{'false drains':>12s} {'suspects':>8s} {'false flaky':>11s} {'rounds':>6s} "
            f"{'tests':>7s} {'test s':>7s} {'CPU s':>6s}")
    out = [head, "-" * len(head)]
    for name in SCENARIOS:
        rs = [r for r in rows if r["scenario"] == name]
        if not rs:
            continue
        seeds = sorted(r["seed"] for r in rs)
        ex = Counter(r["exit"] for r in rs)
        faulty = [r for r in rs if r["target"]]
        named = f"{sum(bool(r['named']) for r in faulty)}/{len(faulty)}" if faulty else "-"
        out.append(
            f"{name:13s} {f'{seeds[0]}-{seeds[-1]} ({len(rs)})':>14s} "
            f"{f'{ex[0]}/{ex[1]}/{ex[3]}':>10s} {named:>6s} "
            f"{f'{sum(_right(r) for r in rs)}/{len(rs)}':>6s} "
            f"{sum(len(r['false_drains']) for r in rs):>12d} "
            f"{sum(len(r['suspects']) for r in rs):>8d} "
            f"{sum(len(r['false_flaky']) for r in rs):>11d} "
            f"{sum(r['rounds'] for r in rs) / len(rs):>6.1f} "
            f"{sum(r['tests'] for r in rs) / len(rs):>7.0f} "
            f"{sum(r['test_seconds'] for r in rs) / len(rs):>7.0f} "
            f"{sum(r['cpu_s'] for r in rs):>6.0f}")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", help=f"default: all of {', '.join(SCENARIOS)}")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=7001)
    ap.add_argument("--jsonl", help="append each run's row to this file")
    ap.add_argument("--table", help="print the table of the runs recorded in this JSONL file")
    args = ap.parse_args(argv)
    if args.table:
        rows = [json.loads(line) for line in Path(args.table).read_text().splitlines() if line]
        print(table(rows))
        return 0
    names = args.scenarios or list(SCENARIOS)
    unknown = set(names) - set(SCENARIOS)
    if unknown:
        ap.error(f"unknown scenario(s) {sorted(unknown)}: one of {', '.join(SCENARIOS)}")
    rows = []
    for name in names:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            r = run_one(name, seed)
            rows.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as fh:
                    fh.write(json.dumps(r) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
