"""Build realistic `RunResult`s for history/actions tests: two ib_write_bw pairing rounds.

A seeded shuffle orders the nodes; round 0 pairs neighbours, round 1 pairs at distance 3
(another partner). A test's value is the
slower node's bandwidth times a seeded jitter; below the floor it fails. A node failing with both
partners is ``bad`` (two pieces of evidence), failing once is ``suspect``; the rest ``healthy``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

from fabriccheck.models import Flow, Observation, RawResult, RunResult, Test, Verdict

NOMINAL_GBPS = 392.0
FLOOR_GBPS = 380.0 * 0.9  # 342


def nodes(n: int) -> list[str]:
    return [f"node-{i:03d}" for i in range(n)]


def build_run(
    names: Sequence[str],
    *,
    node_gbps: Mapping[str, float] | None = None,
    glitch_tests: Sequence[tuple[int, str]] = (),
    seed: int = 0,
    jitter: float = 0.02,
    mode: str = "sweep",
    nic_of: Callable[[str], str] | None = None,
) -> RunResult:
    """A two-round sweep over ``names`` (even count). ``node_gbps`` overrides a node's speed;
    ``glitch_tests`` makes the test of ``(round, node)`` spuriously low once; ``nic_of`` names
    the NIC endpoint a node tests with (default ``node/mlx5_0``)."""
    nic_of = nic_of or (lambda n: f"{n}/mlx5_0")
    rng = random.Random(seed)
    speeds = {n: NOMINAL_GBPS for n in names}
    speeds.update(node_gbps or {})
    k = len(names)
    order = list(names)
    rng.shuffle(order)  # different partners every sweep, as the planner would pick
    obs: list[Observation] = []
    failed: dict[str, list[str]] = {n: [] for n in names}
    for rnd, shift in ((0, 1), (1, 3)):
        used: set[str] = set()
        for i, a in enumerate(order):
            if a in used:
                continue
            b = next(
                order[(i + shift + j) % k]
                for j in range(k)
                if order[(i + shift + j) % k] not in used and order[(i + shift + j) % k] != a
            )
            used |= {a, b}
            tid = f"r{rnd}-{a}-{b}"
            value = min(speeds[a], speeds[b]) * (1 + rng.gauss(0, jitter))
            if (rnd, a) in glitch_tests or (rnd, b) in glitch_tests:
                value *= 0.3
            status = "pass" if value >= FLOOR_GBPS else "fail"
            test = Test(
                tid, "ib_write_bw", (a, b), (Flow(nic_of(a), nic_of(b)),), round=rnd,
                params={"size_bytes": 1 << 20},
            )  # fmt: skip
            raw = RawResult(tid, stdout=f" 1048576 5000 {value:.2f} {value:.2f} 0.04\n")
            obs.append(
                Observation(test, status, round(value, 2), "Gb/s", FLOOR_GBPS, NOMINAL_GBPS,
                            "" if status == "pass" else f"{value:.0f} Gb/s < {FLOOR_GBPS:g}", raw)
            )  # fmt: skip
            if status == "fail":
                failed[a].append(tid)
                failed[b].append(tid)
    verdicts, bad, suspects = [], [], []
    for n in names:
        ev = tuple(failed[n])
        if len(ev) >= 2:
            verdicts.append(Verdict("node", n, "bad", "fails with 2 partners", ev))
            bad.append(n)
        elif ev:
            verdicts.append(Verdict("node", n, "suspect", "fails with 1 partner", ev))
            suspects.append(n)
        else:
            verdicts.append(Verdict("node", n, "healthy"))
    return RunResult(
        mode=mode, nodes=list(names), rounds=2, tests=len(obs),
        test_seconds=sum(5.0 for _ in obs), wall_seconds=12.0, bad_nodes=bad, suspects=suspects,
        drain=list(bad), verdicts=verdicts, observations=obs,
    )  # fmt: skip
