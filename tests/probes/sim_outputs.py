"""Outputs the simulator renders, for the parsers' equivalence test and bench/bench_parse.py.

:func:`sim_outputs` runs small rounds of nccl, allreduce-cpu and ib_write_bw tests on a
rail-optimized fabric (InfiniBand and RoCE) under several seeds and fault sets, and returns the
text each parser is given (``stdout`` then ``stderr``, as :func:`probes.detect.parse_raw` joins
them) with the tool that printed it. Clean runs, failed runs (broken links, down NICs), socket
and host-memory fallbacks, timed-out runs (a table or header cut short) and every message size
from 8 B to 8 GiB are among them.
"""

from __future__ import annotations

import functools
import itertools

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.models import Flow, Test
from fabriccheck.probes.detect import PROBE_TOOLS
from fabriccheck.topology.generators import generate

#: fault sets the outputs are rendered under (node-003 / node-005 carry the faults)
FAULTS: dict[str, list[dict]] = {
    "none": [],
    "nic_down": [{"kind": "nic_down", "nic": "node-003/mlx5_2"}],
    "socket": [{"kind": "transport_fallback", "node": "node-003", "to": "socket"}],
    "host_memory": [{"kind": "transport_fallback", "node": "node-005", "to": "host_memory"}],
    "degraded": [{"kind": "nic_degraded", "nic": "node-005/mlx5_1", "factor": 0.01}],
}
#: (min_bytes, max_bytes) of the nccl tests: one size, a short sweep, the full 8 B - 8 GiB one
NCCL_SIZES = ((8 << 30, 8 << 30), (1 << 20, 64 << 20), (8, 8 << 30), (8, 1 << 16))
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
PERFTEST_SIZES = (2, 4096, 65536, 1 << 20, 8 << 20)


def _fabric(kind: str):
    return generate({"kind": "rail-optimized", "nodes": 8, "gpus_per_node": 8, "rails": 8,
                     "nodes_per_leaf": 2, "spines": 4, "nic_gbps": 400, "uplink_gbps": 400},
                    name=f"{kind}-8", fabric=kind)


def _ring(topo, nodes: tuple[str, ...], rails) -> tuple[Flow, ...]:
    k = len(nodes)
    if k == 1:
        return ()
    return tuple(Flow(topo.nic(nodes[i], r), topo.nic(nodes[(i + 1) % k], r))
                 for r in rails for i in range(k))


def _tests(topo, seed: int) -> list[Test]:
    """One round: nccl over 1, 2 and 4 nodes (every collective and size range), allreduce-cpu,
    and ib_write_bw pairs (iterations and ``-D`` runs), some with a short timeout."""
    names = sorted(topo.nodes)
    groups = [tuple(names[i:i + k]) for k in (1, 2, 4) for i in range(0, 8, k)][seed % 3::3]
    tests = []
    for n, (nodes, coll, (lo, hi)) in enumerate(itertools.product(groups, COLLECTIVES,
                                                                   NCCL_SIZES)):
        probe = "allreduce-cpu" if n % 7 == 3 else "nccl"
        timeout = 3.0 if n % 11 == 5 else 120.0
        tests.append(Test(f"s{seed}-n{n}", probe, nodes, _ring(topo, nodes, range(8)),
                          timeout_s=timeout,
                          params={"collective": coll if probe == "nccl" else "all_reduce",
                                  "min_bytes": lo, "size_bytes": hi}))
    for n, (i, size, rail) in enumerate(itertools.product(range(8), PERFTEST_SIZES, (0, 2))):
        a, b = names[i], names[(i + 1 + seed) % 8]
        params = {"size_bytes": size}
        if n % 2:
            params["duration_s"] = 5
        tests.append(Test(f"s{seed}-p{n}", "ib_write_bw", (a, b),
                          (Flow(topo.nic(a, rail), topo.nic(b, rail)),),
                          timeout_s=2.0 if n % 13 == 4 else 120.0, params=params))
    return tests


@functools.lru_cache(maxsize=4)
def sim_outputs(seeds: tuple[int, ...] = (0, 1, 2)) -> tuple[tuple[str, str], ...]:
    """(tool, text) of every test of one round per fabric, fault set and seed."""
    out = []
    for kind, faults, seed in itertools.product(
            ("infiniband", "roce"), FAULTS.values(), seeds):
        topo = _fabric(kind)
        noise = {"jitter": 0.03, "glitch_rate": 0.05} if seed % 2 else {}
        ex = SimExecutor(topo, None, FaultSet.from_dict({"faults": faults, "noise": noise}),
                         seed)
        tests = _tests(topo, seed)
        for test, raw in zip(tests, ex.run_round(tests), strict=True):
            if raw.unreachable:
                continue
            text = raw.stdout + ("\n" + raw.stderr if raw.stderr else "")
            out.append((PROBE_TOOLS[test.probe], text))
    return tuple(out)
