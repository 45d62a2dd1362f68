"""Hand-built runs for report tests: a topology, three rounds of tests and the verdicts they imply.

No orchestrator is involved: the faults are applied to the numbers directly (a bad NIC's flows,
a slow node's tests, a bad link's routed flows are slow; a hung node's tests hang; an unreachable
node's tests cannot start) and the verdicts are written the way the inference layer states them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from fabriccheck.models import (
    BAD,
    FAIL,
    HANG,
    HEALTHY,
    PASS,
    SUSPECT,
    UNREACHABLE,
    Flow,
    Observation,
    RawResult,
    RunResult,
    Test,
    Verdict,
    link_key,
)
from fabriccheck.topology.generators import generate
from fabriccheck.topology.model import Topology

NCCL_EXPECTED, NCCL_FLOOR = 360.0, 300.0  # GB/s busbw, 2 nodes x 8 GPUs
IB_EXPECTED, IB_FLOOR = 390.0, 340.0  # Gb/s per NIC


@dataclass
class Faults:
    bad_nic: str | None = None  # node/nic
    slow_node: str | None = None
    hung_node: str | None = None
    unreachable: str | None = None
    bad_link: tuple[str, str] | None = None
    suspect_node: str | None = None  # fails once, not confirmed
    names: dict[str, str] = field(default_factory=dict)


def rail_topology(nodes: int, rails: int = 8, per_leaf: int = 4, spines: int = 4) -> Topology:
    return generate(
        {"kind": "rail-optimized", "nodes": nodes, "gpus_per_node": 8, "rails": rails,
         "nodes_per_leaf": per_leaf, "spines": spines, "nic_gbps": 400, "uplink_gbps": 400},
        name=f"rail-{nodes}", fabric="infiniband",
    )  # fmt: skip


def _factor(topo: Topology, test: Test, f: Faults) -> float:
    factor = 1.0
    for flow in test.flows:
        if f.bad_nic in (flow.src, flow.dst):
            factor = min(factor, 0.25)
        if f.bad_link is not None:
            route = topo.route(flow.src, flow.dst) or ()
            if link_key(*f.bad_link) in route:
                factor = min(factor, 0.5)
    if f.slow_node in test.nodes:
        factor = min(factor, 0.5)
    return factor


def _observe(topo: Topology, test: Test, f: Faults, rng: random.Random) -> Observation:
    single = test.probe == "ib_write_bw"
    expected, floor, unit = (IB_EXPECTED, IB_FLOOR, "Gb/s") if single else (
        NCCL_EXPECTED, NCCL_FLOOR, "GB/s")  # fmt: skip
    tool = "ib_write_bw -d mlx5_0 --report_gbits" if single else "all_reduce_perf -b 8 -e 8G -g 8"
    cmds = tuple(f"{n}: {tool}" for n in test.nodes)
    if f.unreachable in test.nodes:
        raw = RawResult(test.test_id, exit_code=None, unreachable=(f.unreachable,), commands=cmds,
                        error=f"{f.unreachable}: connection refused")  # fmt: skip
        return Observation(test, UNREACHABLE, None, unit, floor, expected,
                           f"{f.unreachable} unreachable", raw)  # fmt: skip
    if f.hung_node in test.nodes:
        raw = RawResult(test.test_id, stdout="# nccl-tests: Rank 0 Group 0 ...\n", exit_code=None,
                        duration_s=test.timeout_s, timed_out=True, commands=cmds)  # fmt: skip
        return Observation(test, HANG, None, unit, floor, expected,
                           f"hung: killed after {test.timeout_s:.0f} s", raw)  # fmt: skip
    factor = _factor(topo, test, f)
    if f.suspect_node in test.nodes and test.round == 1:
        factor = min(factor, 0.6)
    value = expected * factor * (1 + rng.gauss(0, 0.01))
    status = PASS if value >= floor else FAIL
    reason = "" if status == PASS else f"{value:.1f} {unit} < floor {floor:.0f} {unit}"
    out = f"#  out-of-place busbw {value:.2f}\n# Avg bus bandwidth    : {value:.2f}\n"
    raw = RawResult(test.test_id, stdout=out, duration_s=8.0 if single else 21.0, commands=cmds)
    return Observation(test, status, round(value, 2), unit, floor, expected, reason, raw)


def build_run(topo: Topology, faults: Faults, seed: int = 0) -> RunResult:
    """Round 1 and 2: nccl pairs with different partners; round 3: ib_write_bw confirmations."""
    rng = random.Random(seed)
    nodes = sorted(topo.nodes)
    rails = range(topo.rails)
    half = len(nodes) // 2
    obs: list[Observation] = []
    k = 0
    for rnd, shift in ((1, 0), (2, 1)):
        for i in range(half):
            a, b = nodes[i], nodes[half + (i + shift) % half]
            flows = tuple(
                fl for r in rails
                for fl in (Flow(topo.nic(a, r), topo.nic(b, r)),
                           Flow(topo.nic(b, r), topo.nic(a, r)))
            )  # fmt: skip
            k += 1
            t = Test(f"t{k:05d}", "nccl", (a, b), flows, rnd, "sweep", 120.0,
                     {"size_bytes": 8 << 30})  # fmt: skip
            obs.append(_observe(topo, t, faults, rng))
    failing = sorted({n for o in obs if not o.passed for n in o.test.nodes})
    good = [n for n in nodes if n not in failing][:4]
    for j, n in enumerate(failing):
        partner = good[j % len(good)] if good else nodes[0]
        for r in rails:
            k += 1
            t = Test(f"t{k:05d}", "ib_write_bw", (n, partner),
                     (Flow(topo.nic(n, r), topo.nic(partner, r)),), 3, "confirm", 60.0,
                     {"duration_s": 5})  # fmt: skip
            obs.append(_observe(topo, t, faults, rng))
    return _verdicts(topo, nodes, obs, faults)


def _verdicts(_topo: Topology, nodes: list[str], obs: list[Observation], f: Faults) -> RunResult:
    res = RunResult(mode="sweep", nodes=list(nodes), rounds=3, tests=len(obs), test_seconds=149.0,
                    wall_seconds=151.0, observations=obs)  # fmt: skip
    verdicts: list[Verdict] = []
    blamed = set()

    def blame(kind: str, name: str, state: str, reason: str, pred, link=None) -> None:
        evidence = tuple(o.test.test_id for o in obs if pred(o))[:6]
        verdicts.append(Verdict(kind, name, state, reason, evidence, link))
        if kind != "link":
            blamed.add(name.split("/")[0])

    if f.bad_nic:
        nic = f.bad_nic
        blame("nic", nic, BAD, "fails with 2 partners, other rails pass",
              lambda o: nic in o.test.nics and not o.passed)  # fmt: skip
        res.bad_nics.append(nic)
        res.drain.append(nic.split("/")[0])
    if f.slow_node:
        slow = f.slow_node
        blame("node", slow, BAD, "every rail slow with 2 partners",
              lambda o: slow in o.test.nodes and not o.passed)  # fmt: skip
        res.bad_nodes.append(slow)
        res.drain.append(slow)
    if f.hung_node:
        hung = f.hung_node
        blame("node", hung, BAD, "tests hang (killed at timeout)", lambda o: hung in o.test.nodes)
        res.hung.append(hung)
        res.drain.append(hung)
    if f.unreachable:
        blame("node", f.unreachable, UNREACHABLE, "connection refused", lambda o: False)
        res.unreachable.append(f.unreachable)
    if f.suspect_node:
        sus = f.suspect_node
        blame("node", sus, SUSPECT, "failed once, passed the confirmation",
              lambda o: sus in o.test.nodes)  # fmt: skip
        res.suspects.append(sus)
    if f.bad_link:
        key = link_key(*f.bad_link)
        blame("link", f"{key[0]} -- {key[1]}", BAD,
              "on the route of every failing flow, of no passing one",
              lambda o: not o.passed, link=key)  # fmt: skip
        res.bad_links.append(key)
    for n in nodes:
        if n not in blamed:
            blame("node", n, HEALTHY, "", lambda o, n=n: n in o.test.nodes)
    res.verdicts = verdicts
    return res
