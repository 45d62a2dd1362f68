"""NVL72 racks: the domain level's verdicts on a simulated ``gb200-nvl72-8`` (docs/nvl72.md).

Default sweeps (3% jitter, 1% glitches) through the public API: fault-free, each of the five
NVLink fault kinds, a scale-out ``nic_degraded`` on a tray, and an NVLink fault beside a NIC
fault on another tray. Each fault's target (tray, GPU, port, rack, switch tray) is drawn from the
run's seed. A run is **found** when the right component is named (the port ``node/gpuG/nvlP``,
the switch tray ``rack-R-nvsw-T``, the tray with its cause, the GPU ``node/gpuG``, the NIC) and
the drain list is exactly the trays at fault (none for a switch tray). ``nvl-as-nic`` counts
NVLink faults reported as a NIC, ``nic-as-nvl`` NIC faults named by the domain level.

    python bench/bench_nvl72.py                  # 10 fault-free seeds, 5 per fault kind
    python bench/bench_nvl72.py --seeds 2 --clean 2
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fabriccheck.executors.sim import SimExecutor  # noqa: E402
from fabriccheck.faults import FaultSet  # noqa: E402
from fabriccheck.orchestrator import run  # noqa: E402
from fabriccheck.policy import SweepPolicy  # noqa: E402
from fabriccheck.specs import load_spec  # noqa: E402
from fabriccheck.topology import load_topology  # noqa: E402

NOISE = {"jitter": 0.03, "glitch_rate": 0.01}
KINDS = ("clean", "nvlink_port_down", "nvswitch_down", "imex_missing", "clique_mismatch",
         "nvlink_degraded", "fabric_unregistered", "nic_degraded", "nvl+nic")


def draw(kind: str, seed: int, topo) -> tuple[list[dict], dict]:
    """The faults of one run and what must be found: ``drain``, ``names`` (components the run
    must name), ``nics`` (bad NICs), ``nvl_trays`` (trays the domain level may name)."""
    rng = random.Random(f"nvl72/{kind}/{seed}")
    trays = sorted(topo.nodes)
    a, b = rng.sample(trays, 2)
    g, p = rng.randrange(4), rng.randrange(18)
    rack, st = rng.choice(sorted(topo.domains)), rng.randrange(9)
    nic = f"{a}/mlx5_{rng.randrange(4)}"
    table = {
        "clean": ([], {"drain": [], "names": []}),
        "nvlink_port_down": ([{"kind": kind, "node": a, "gpu": g, "port": p}],
                             {"drain": [a], "names": [f"{a}/gpu{g}/nvl{p}"]}),
        "nvswitch_down": ([{"kind": kind, "rack": rack, "tray": st}],
                          {"drain": [], "names": [f"{rack}-nvsw-{st}"]}),
        "imex_missing": ([{"kind": kind, "node": a}], {"drain": [a], "names": [a]}),
        "clique_mismatch": ([{"kind": kind, "node": a}], {"drain": [a], "names": [a]}),
        "fabric_unregistered": ([{"kind": kind, "node": a}], {"drain": [a], "names": [a]}),
        "nvlink_degraded": ([{"kind": kind, "node": a, "gpu": g, "factor": 0.5}],
                            {"drain": [a], "names": [f"{a}/gpu{g}"]}),
        "nic_degraded": ([{"kind": kind, "nic": nic, "factor": 0.25}],
                         {"drain": [a], "names": [], "nics": [nic]}),
        "nvl+nic": ([{"kind": "nvlink_degraded", "node": b, "gpu": g, "factor": 0.5},
                     {"kind": "nic_degraded", "nic": nic, "factor": 0.25}],
                    {"drain": sorted([a, b]), "names": [f"{b}/gpu{g}"], "nics": [nic],
                     "nvl_trays": [b]}),
    }
    faults, want = table[kind]
    want.setdefault("nics", [])
    want.setdefault("nvl_trays", [n.split("/")[0] for n in want["names"]
                                  if not n.startswith("rack-")])
    return faults, want


def one(kind: str, seed: int, topo, spec) -> dict:
    faults, want = draw(kind, seed, topo)
    fs = FaultSet.from_dict({"noise": NOISE, "faults": faults}).validate(topo)
    t0 = time.monotonic()
    res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed),
              SweepPolicy(seed=seed))
    nvl = res.extra.get("nvlink", {})
    comps = set(nvl.get("components", []))
    named = comps | set(res.extra.get("bad_switches", []))
    nvl_trays = {c.split("/")[0] for c in comps if not c.startswith("rack-")}
    nic_trays = {n.split("/")[0] for n in want["nics"]}
    found = (set(want["names"]) <= named and res.drain == want["drain"]
             and sorted(res.bad_nics) == sorted(want["nics"])
             and (kind != "clean" or res.exit_code == 0))
    return {"found": found, "extra": sorted(set(res.drain) - set(want["drain"])),
            "nvl_as_nic": bool(set(want["nvl_trays"]) & {n.split("/")[0] for n in res.bad_nics}),
            "nic_as_nvl": bool(nic_trays & nvl_trays - set(want["nvl_trays"])),
            "exit": res.exit_code, "rounds": res.rounds, "test_s": res.test_seconds,
            "wall_s": time.monotonic() - t0, "drain": res.drain, "named": sorted(named)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5, help="seeds per fault kind")
    ap.add_argument("--clean", type=int, default=10, help="fault-free seeds")
    ap.add_argument("--first-seed", type=int, default=7100)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per run")
    args = ap.parse_args(argv)
    topo, spec = load_topology("gb200-nvl72-8"), load_spec("gb200-ndr400-ib")
    print(f"{'scenario':18s} {'runs':>4s} {'found':>5s} {'extra drained':>13s} "
          f"{'nvl-as-nic':>10s} {'nic-as-nvl':>10s} {'exit':>6s} {'rounds':>6s} "
          f"{'test s':>7s} {'wall s':>6s}")
    missed = 0
    for kind in args.kinds.split(","):
        n = args.clean if kind == "clean" else args.seeds
        rows = [one(kind, args.first_seed + i, topo, spec) for i in range(n)]
        for i, r in enumerate(rows):
            if args.verbose or not r["found"]:
                print(f"  {kind} seed {args.first_seed + i}: {r}", file=sys.stderr)
        missed += sum(not r["found"] for r in rows)
        exits = "/".join(str(e) for e in sorted({r["exit"] for r in rows}))
        print(f"{kind:18s} {n:4d} {sum(r['found'] for r in rows):5d} "
              f"{sum(len(r['extra']) for r in rows):13d} {sum(r['nvl_as_nic'] for r in rows):10d}"
              f" {sum(r['nic_as_nvl'] for r in rows):10d} {exits:>6s} "
              f"{statistics.mean(r['rounds'] for r in rows):6.1f} "
              f"{statistics.mean(r['test_s'] for r in rows):7.0f} "
              f"{statistics.mean(r['wall_s'] for r in rows):6.1f}")
    print(f"seeds {args.first_seed}..{args.first_seed + max(args.seeds, args.clean) - 1}; "
          f"missed {missed}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
