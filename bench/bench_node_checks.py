"""Node-local checks on the simulator (docs/node-checks.md): default sweeps with real-world
background must drain nobody, and each node-local fault kind must be found on its own node or
NIC with nothing else drained; plus how fast a large kernel log is judged.

Prints three tables:

1. background: per topology, over seeds, runs that exit 0, nodes drained, warnings listed;
2. faults, then misconfigurations (docs/config-checks.md): per kind, over seeds, runs where the
   fault's node/NIC got the expected severity
   (``fault`` drained, ``warn`` listed, ``info`` neither, ``found`` either of the first two),
   other nodes drained (beyond the target's), exit codes;
3. parse: judging kernel logs of 10k / 100k / 300k lines (seconds).

Run: ``python bench/bench_node_checks.py [--seeds N] [--first S]`` (defaults: 10 seeds from 300
for the background, 5 for each fault kind).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fabriccheck.executors.sim import SimExecutor  # noqa: E402
from fabriccheck.faults import FaultSet  # noqa: E402
from fabriccheck.orchestrator import run  # noqa: E402
from fabriccheck.policy import SweepPolicy  # noqa: E402
from fabriccheck.probes.node.catalogue import builtin_catalogue  # noqa: E402
from fabriccheck.probes.node.judge import judge_node_text  # noqa: E402
from fabriccheck.specs import resolve_spec  # noqa: E402
from fabriccheck.topology.load import load_topology  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
NOISE = {"jitter": 0.03, "glitch_rate": 0.01}


def sweep(topo_name: str, faults: list[dict], seed: int):
    topo = load_topology(str(REPO / "topologies" / f"{topo_name}.yaml"))
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict({"noise": NOISE, "faults": faults})
    res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed),
              SweepPolicy(seed=seed))
    return res, topo


def xid_severity(n: int) -> str:
    cat = builtin_catalogue()
    return cat.entry(f"xid-{n}" if f"xid-{n}" in cat else "xid-default").severity


def fault_cases(topo) -> list[tuple[str, dict, str, str]]:
    """(label, fault, target, expected severity) on a node/NIC picked from the topology."""
    nodes = sorted(topo.nodes)
    node = nodes[len(nodes) // 3]
    other = nodes[len(nodes) // 2]
    nic = f"{other}/{sorted(n.name for n in topo.nodes[other].nics)[-1]}"
    cases = [(f"xid {n}", {"kind": "xid", "node": node, "xid": n}, node, xid_severity(n))
             for n in (79, 48, 119, 13, 31, 43, 45, 63, 94)]
    cases += [(f"gpu_throttle {r}", {"kind": "gpu_throttle", "node": node, "reason": r}, node,
               "fault") for r in ("hw_power_brake", "hw_slowdown", "thermal")]
    cases += [("row_remap_pending", {"kind": "row_remap_pending", "node": node}, node, "fault"),
              ("nvlink_down", {"kind": "nvlink_down", "node": node, "links": 2}, node, "fault"),
              ("port_flap 6/h", {"kind": "port_flap", "nic": nic, "per_hour": 6}, nic, "found")]
    return cases


def config_cases(topo) -> list[tuple[str, dict, str, str]]:
    """Misconfigurations (docs/config-checks.md): (label, fault, target, expected severity)."""
    nodes = sorted(topo.nodes)
    node = nodes[len(nodes) // 4]
    other = nodes[(3 * len(nodes)) // 4]
    nic = f"{other}/{sorted(n.name for n in topo.nodes[other].nics)[1]}"
    cases = [("transport socket", {"kind": "transport_fallback", "node": node, "to": "socket"},
              node, "fault"),
             ("transport host_memory", {"kind": "transport_fallback", "node": node,
                                        "to": "host_memory"}, node, "fault"),
             ("acs_enabled", {"kind": "acs_enabled", "node": node}, node, "fault"),
             ("numa_misaligned", {"kind": "numa_misaligned", "node": node}, node, "fault"),
             ("mtu_mismatch 2048", {"kind": "mtu_mismatch", "nic": nic, "mtu": 2048}, nic,
              "fault"),
             ("firmware_drift", {"kind": "firmware_drift", "nic": nic, "version": "28.39.1002"},
              nic, "warn")]
    if topo.fabric == "roce":
        cases += [("pfc_disabled", {"kind": "pfc_disabled", "nic": nic}, nic, "fault"),
                  ("gid_mismatch", {"kind": "gid_mismatch", "nic": nic}, nic, "fault")]
    return cases


def outcome(res, target: str) -> str:
    node = target.split("/", 1)[0]
    if target in res.bad_nics or node in res.bad_nodes or node in res.drain:
        return "fault"
    warns = res.extra.get("warnings") or []
    if any(w["target"] in (target, node) for w in warns):
        return "warn"
    return "none"


def background_table(seeds: list[int]) -> None:
    print(f"\nbackground on (default), noise {NOISE}, seeds {seeds[0]}-{seeds[-1]}")
    print(f"{'topology':<18}{'runs':>5}{'exit 0':>8}{'drained':>9}{'warnings':>10}  warning kinds")
    for name in ("ib-fattree-128", "roce-rail-64"):
        exit0 = drained = warns = 0
        kinds: Counter[str] = Counter()
        for s in seeds:
            res, _ = sweep(name, [], s)
            exit0 += res.exit_code == 0
            drained += len(res.drain)
            w = res.extra.get("warnings") or []
            warns += len(w)
            kinds.update(x["check"] for x in w)
        top = ", ".join(f"{k} x{v}" for k, v in kinds.most_common(4)) or "-"
        print(f"{name:<18}{len(seeds):>5}{exit0:>8}{drained:>9}{warns:>10}  {top}")


def faults_table(seeds: list[int], cases=None, title: str = "node-local faults") -> None:
    cases = cases or fault_cases
    print(f"\n{title}, {len(seeds)} seeds each ({seeds[0]}-{seeds[-1]}), background on, "
          "full sweeps")
    print(f"{'topology':<16}{'fault':<24}{'want':>6}{'right':>7}{'others drained':>16}"
          f"{'exit codes':>14}")
    for name in ("ib-fattree-128", "roce-rail-64"):
        topo = load_topology(str(REPO / "topologies" / f"{name}.yaml"))
        for label, fault, target, want in cases(topo):
            right = others = 0
            codes: Counter[int] = Counter()
            for s in seeds:
                res, _ = sweep(name, [fault], s)
                got = outcome(res, target)
                right += (got in ("fault", "warn") if want == "found" else
                          got == (want if want != "info" else "none"))
                others += len([n for n in res.drain if n != target.split("/", 1)[0]])
                codes[res.exit_code] += 1
            code_s = " ".join(f"{c}:{n}" for c, n in sorted(codes.items()))
            print(f"{name:<16}{label:<24}{want:>6}{right:>5}/{len(seeds):<1}{others:>16}"
                  f"{code_s:>14}")


def parse_table() -> None:
    print("\njudging a kernel log (dmesg --time-format iso), seconds")
    line = ("2026-11-28T03:41:55,402117+00:00 mlx5_core 0000:1a:00.0: mlx5_cmd_out_err:838:"
            "(pid 48211): ACCESS_REG(0x805) op_mod(0x1) failed, status bad parameter(0x3), "
            "syndrome (0x6c4d4c), err(-22)")
    filler = "2026-11-28T03:41:55,402117+00:00 systemd[1]: Started session-4.scope."
    xid = ("2026-11-28T06:12:40,113950+00:00 NVRM: Xid (PCI:0000:db:00): 79, pid=2764, "
           "name=python3, GPU has fallen off the bus.")
    print(f"{'lines':>8}{'seconds':>10}{'verdict':>10}")
    for n in (10_000, 100_000, 300_000):
        text = "\n".join(line if i % 10 == 0 else filler for i in range(n - 1)) + "\n" + xid
        t0 = time.perf_counter()
        rep = judge_node_text(text, "kernel-log")
        print(f"{n:>8}{time.perf_counter() - t0:>10.3f}{rep.node_verdict:>10}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first", type=int, default=300)
    ap.add_argument("--fault-seeds", type=int, default=5)
    args = ap.parse_args(argv)
    parse_table()
    background_table(list(range(args.first, args.first + args.seeds)))
    faults_table(list(range(args.first + 50, args.first + 50 + args.fault_seeds)))
    faults_table(list(range(args.first + 70, args.first + 70 + args.fault_seeds)), config_cases,
                 "misconfigurations")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
