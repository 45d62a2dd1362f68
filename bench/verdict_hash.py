"""Verdicts kept through an optimisation: hash the JSON of a fixed set of scenario runs.

Every scenario family of ``tests/scenarios.py`` on every topology kind, two seeds each, plus a
default ``ib-fattree-128`` and ``roce-rail-64`` sweep with the simulator's background and a node
fault mix, runs through the public API (``orchestrator.run`` on a ``SimExecutor``). Each run's
JSON (``serialize.run_result_to_dict``) is hashed without what may differ between two identical
runs: wall-clock seconds, the run id, paths. Write the hashes before a change, check after:

    python bench/verdict_hash.py --write /tmp/before.json
    python bench/verdict_hash.py --check /tmp/before.json   # exit 1 on any difference

``--quick`` runs one seed and skips the 256-node rows (about a minute on 2 cores).
``--verdicts`` hashes the verdicts only (exit code, drained parts, links, switches, suspects,
flaky, untested), for a change that is meant to alter the tests run but not what they find;
``--dump FILE`` writes those verdicts per case, so two dumps can be diffed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fabriccheck.executors.sim import SimExecutor  # noqa: E402
from fabriccheck.faults import FaultSet  # noqa: E402
from fabriccheck.orchestrator import run  # noqa: E402
from fabriccheck.policy import BisectPolicy, GatePolicy, SweepPolicy  # noqa: E402
from fabriccheck.serialize import run_result_to_dict  # noqa: E402
from fabriccheck.specs import resolve_spec  # noqa: E402
from fabriccheck.topology import load_topology  # noqa: E402
from tests.scenarios import FAMILIES, TOPOLOGY_KINDS, scenario  # noqa: E402

POLICIES = {"sweep": SweepPolicy, "gate": GatePolicy, "bisect": BisectPolicy}
# Keys whose values are clocks or names of this run, not verdicts.
VOLATILE = {"wall_seconds", "run_id", "report", "started", "finished", "elapsed_s", "cpu_s",
            "wall_s", "duration_wall_s"}

NODE_FAULTS = [
    {"kind": "xid", "node": "node-005", "xid": 79},
    {"kind": "gpu_throttle", "node": "node-017", "reason": "hw_slowdown"},
    {"kind": "nic_degraded", "nic": "node-033/mlx5_1", "factor": 0.5},
    {"kind": "port_flap", "nic": "node-040/mlx5_0", "per_hour": 6},
    {"kind": "transport_fallback", "node": "node-051", "to": "socket"},
]


def _strip(obj):
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


#: what an operator acts on; a change of test plan must keep these (``--verdicts``)
VERDICT_KEYS = ("exit_code", "bad_nodes", "bad_nics", "bad_links", "bad_switches", "drain",
                "link_suspects", "suspects", "hung", "unreachable", "untested", "flaky")


def verdicts(result) -> dict:
    data = run_result_to_dict(result)
    return {k: data.get(k) for k in VERDICT_KEYS}


def digest(result, *, only_verdicts: bool = False) -> str:
    data = verdicts(result) if only_verdicts else _strip(run_result_to_dict(result))
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def cases(quick: bool):
    seeds = (901,) if quick else (901, 902)
    for family in FAMILIES:
        for kind in TOPOLOGY_KINDS:
            for seed in seeds:
                yield f"{family}/{kind}/{seed}", ("scenario", family, kind, seed)
    for topo in ("ib-fattree-128", "roce-rail-64"):
        for seed in seeds:
            yield f"bundled/{topo}/{seed}", ("bundled", topo, seed)


def run_case(case):
    if case[0] == "scenario":
        _, family, kind, seed = case
        sc = scenario(family, kind, seed)
        topo, faults, nodes, mode = sc
        spec = resolve_spec(None, topo)
        fs = FaultSet.from_dict(faults)
        return run(mode, nodes, topo, spec, SimExecutor(topo, spec, fs, seed=seed),
                   POLICIES[mode](mode=mode, seed=seed), log_suspects=sc.log_suspects)
    _, name, seed = case
    topo = load_topology(name)
    spec = resolve_spec(None, topo)
    faults = [f for f in NODE_FAULTS if "nic" not in f or f["nic"] in topo.nics]
    fs = FaultSet.from_dict({"faults": faults})
    nodes = sorted(topo.nodes)
    return run("sweep", nodes, topo, spec, SimExecutor(topo, spec, fs, seed=seed),
               SweepPolicy(mode="sweep", seed=seed))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", help="write the hashes to this JSON file")
    ap.add_argument("--check", help="compare with the hashes in this JSON file (exit 1 if not)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", help="run the cases whose name contains this")
    ap.add_argument("--verdicts", action="store_true", help="hash the verdicts only")
    ap.add_argument("--dump", help="write each case's verdicts to this JSON file")
    args = ap.parse_args(argv)
    hashes: dict[str, str] = {}
    dumped: dict[str, dict] = {}
    t_all = time.process_time()
    for name, case in cases(args.quick):
        if args.only and args.only not in name:
            continue
        t0 = time.process_time()
        try:
            result = run_case(case)
            hashes[name] = digest(result, only_verdicts=args.verdicts)
            dumped[name] = verdicts(result)
        except Exception as exc:  # noqa: BLE001 - a crash is a (different) outcome
            hashes[name] = f"crash: {type(exc).__name__}: {exc}"[:120]
        print(f"{name:45s} {hashes[name]:20s} {time.process_time() - t0:6.1f} s", flush=True)
    print(f"{len(hashes)} runs, {time.process_time() - t_all:.0f} s CPU")
    if args.dump:
        Path(args.dump).write_text(json.dumps(dumped, indent=1, sort_keys=True, default=str))
    if args.write:
        Path(args.write).write_text(json.dumps(hashes, indent=1, sort_keys=True))
    if args.check:
        before = json.loads(Path(args.check).read_text())
        diff = [n for n in hashes if n in before and before[n] != hashes[n]]
        for n in diff:
            print(f"DIFFERENT {n}: {before[n]} -> {hashes[n]}")
        print(f"{len(hashes) - len(diff)}/{len(hashes)} identical")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
