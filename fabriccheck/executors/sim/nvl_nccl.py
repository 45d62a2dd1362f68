"""A simulated NVLink-domain nccl-tests run (purpose ``domain``; docs/nvl72.md): the table and
the NCCL INFO/WARN lines a GB200 rack prints with ``NCCL_MNNVL_ENABLE=1`` and the network off.

Model: the collective moves at its slowest GPU (:func:`fabriccheck.faults_nvl.nvlink_bandwidth`:
a down port or switch tray takes its share of the GPU's 18 ports, ``nvlink_degraded`` its
factor) times the slowest host (``node_slow``), from the spec's ``intra_node_busbw_gbps`` (the
same NVLink 5 per GPU). A tray without IMEX (``imex_missing``) cannot export fabric memory: its
ranks print NCCL's ``MNNVL ... is available but not working`` WARN and the test fails (exit 3).
A tray in another clique (``clique_mismatch``) forms its own clique: the ring's hops to and from
it leave NVLink for the network (``via NET/Socket``, the IB transport being off) and the test
crawls at socket speed. A tray the rack's fabric manager never configured
(``fabric_unregistered``) cannot start CUDA: its ranks stop at nccl-tests' first CUDA call
(``Test CUDA failure common.cu:... 'system not yet initialized'``, CUDA's
``cudaErrorSystemNotReady``) before NCCL prints anything, and the test fails (exit 3). NIC
faults change nothing here: no byte of a domain test crosses a NIC.

Lines per rank (NCCL 2.21's wordings): ``NCCL_IB_DISABLE set by environment to 1.``, ``NET/Socket
: Using [0]eth0:<ip><0>``, ``Using network Socket``, ``MNNVL busId ... fabric UUID ... cliqueId
0x7ffe state 3 healthMask 0x0``, ``MNNVL 1 cliqueId 7ffe cliqueSize 72 cliqueRank 5``, ``NVLS
multicast support is available on dev 0 (NVLS_NCHANNELS 16)`` and one channel line to the
next rank of the ring (``via P2P/MNNVL`` across trays, ``via P2P/CUMEM/read`` inside one).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fabriccheck.executors.sim import render
from fabriccheck.executors.sim.model import stable_hash
from fabriccheck.executors.sim.nvl_world import DEFAULT_CLIQUE, OTHER_CLIQUE, cluster_uuid
from fabriccheck.executors.sim.tools import NCCL_LAUNCH_S, ToolContext, ToolRun
from fabriccheck.models import Test

__all__ = ["DomainModel", "run_domain"]

#: a ring hop over NCCL's socket transport (the IB transport disabled): GB/s busbw
SOCKET_BUSBW_GBPS = 3.0
#: NCCL init to the IMEX failure (cuMem export/import tried once per rank)
IMEX_FAIL_S = 6.0
#: CUDA's text for cudaErrorSystemNotReady (the fabric manager has not configured the GPU)
NOT_READY = "system not yet initialized"


@dataclass(frozen=True)
class DomainModel:
    """What the simulator knows for a domain test: per (tray, GPU) its NVLink share, the trays
    without IMEX, the trays in another clique, per tray its host factor, the healthy busbw, the
    trays the fabric manager never configured."""

    share: Mapping[tuple[str, int], float]
    no_imex: frozenset[str]
    odd_clique: frozenset[str]
    host_factor: Mapping[str, float]
    busbw_gbps: float
    unregistered: frozenset[str] = frozenset()


def _ranks(test: Test, ctx: ToolContext) -> list[tuple[render.NcclRank, int]]:
    """(rank, its GPU index) per tray and GPU: all of a tray's GPUs, or the one GPU of a
    per-GPU test (``CUDA_VISIBLE_DEVICES``: device 0 in the process, the GPU's bus id)."""
    p = test.params
    gpus = [int(p.gpu)] if p.gpu is not None else list(range(int(p.get("gpus_per_node", 4))))
    base = render.GPU_BUS_IDS
    out = []
    for k, host in enumerate(test.nodes):
        for j, g in enumerate(gpus):
            pid = 2000 + (stable_hash(ctx.seed, ctx.round_no, test.test_id) + 104_729 *
                          (64 * k + j)) % 900_000
            out.append((render.NcclRank(host, pid, 0 if p.gpu is not None else g,
                                        base[g % len(base)], ctx.gpu_name), g))
    return out


def _busbw(test: Test, ranks: Sequence[tuple[render.NcclRank, int]], m: DomainModel) -> float:
    share = min((m.share.get((r.host, g), 1.0) for r, g in ranks), default=1.0)
    host = min((m.host_factor.get(n, 1.0) for n in test.nodes), default=1.0)
    bw = m.busbw_gbps * share * host
    if set(test.nodes) & m.odd_clique and not set(test.nodes) <= m.odd_clique:
        bw = min(bw, SOCKET_BUSBW_GBPS)
    return bw


def _info(test: Test, ctx: ToolContext, ranks: Sequence[tuple[render.NcclRank, int]],
          m: DomainModel) -> list[str]:
    lines = [f"NCCL version {render.NCCL_LIB_VERSION}"]
    uuid = cluster_uuid(str(test.params.domain or "")).replace("-", "")
    clique = {h: OTHER_CLIQUE if h in m.odd_clique else DEFAULT_CLIQUE for h in test.nodes}
    size = {c: sum(1 for r, _ in ranks if clique[r.host] == c) for c in set(clique.values())}
    seen: dict[int, int] = {}
    n = len(ranks)
    for i, (r, g) in enumerate(ranks):
        if r.host in m.unregistered:  # stopped at its first CUDA call: NCCL never started
            continue
        pfx = render.nccl_prefix(r.host, r.pid, r.pid + 31, r.device)
        c = clique[r.host]
        seen[c] = seen.get(c, -1) + 1
        lines += [f"{pfx} NCCL_IB_DISABLE set by environment to 1.",
                  f"{pfx} NET/Socket : Using [0]eth0:{ctx.mgmt_ip(r.host)}<0>",
                  f"{pfx} Using network Socket",
                  f"{pfx} MNNVL busId 0x{render.GPU_BUS_IDS[g % 8]}000 fabric UUID "
                  f"{uuid[:16]}.{uuid[16:]} cliqueId 0x{c:x} state 3 healthMask 0x0"]
        if r.host in m.no_imex:
            continue
        lines += [f"{pfx} MNNVL 1 cliqueId {c:x} cliqueSize {size[c]} cliqueRank {seen[c]}",
                  f"{pfx} NVLS multicast support is available on dev {r.device} "
                  "(NVLS_NCHANNELS 16)"]
        j = (i + 1) % n
        nxt, gn = ranks[j]
        proxy = render.nccl_prefix(r.host, r.pid, r.pid + 47, r.device)
        if clique[nxt.host] != c:
            lines.append(render.render_net_channel(proxy, 0, (i, g), (j, gn), "send", "Socket",
                                                   0, False))
        else:
            via = "P2P/CUMEM/read" if nxt.host == r.host else "P2P/MNNVL"
            lines.append(f"{proxy} Channel 00/0 : {i}[{g}] -> {j}[{gn}] via {via}")
    return lines


def _imex_failure(test: Test, ctx: ToolContext, ranks, m: DomainModel, head: list[str]
                  ) -> ToolRun:
    lines = list(head)
    n = len(ranks)
    bad = [(i, r) for i, (r, _) in enumerate(ranks) if r.host in m.no_imex]
    for _, r in bad:
        lines.append(f"{r.host}:{r.pid}:{r.pid + 31} [{r.device}] mnnvl.cc:71 NCCL WARN MNNVL "
                     f"(cliqueSize {n}) is available but not working on this system. Check the "
                     "IMEX configuration (nvidia-imex-ctl -N). Set NCCL_MNNVL_ENABLE=0 to "
                     "ignore this issue.")
    for host in dict.fromkeys(r.host for _, r in bad):
        pid = next(r.pid for _, r in bad if r.host == host)
        lines += [f"{host}: Test NCCL failure common.cu:1005 'unhandled system error (run with "
                  f"NCCL_DEBUG=INFO for details) / MNNVL (cliqueSize {n}) is available but not "
                  "working on this system.'", f" .. {host} pid {pid}: Test failure common.cu:891"]
    return ToolRun("\n".join(lines) + "\n", stderr=render.render_mpirun_abort(bad[0][0], 3),
                   exit_code=3, duration_s=min(NCCL_LAUNCH_S + IMEX_FAIL_S, test.timeout_s))


def _cuda_failure(test: Test, ranks, m: DomainModel, head: list[str]) -> ToolRun:
    """The ranks of a tray the fabric manager never configured stop at CUDA's first call."""
    lines = list(head)
    bad = [(i, r) for i, (r, _) in enumerate(ranks) if r.host in m.unregistered]
    for host in dict.fromkeys(r.host for _, r in bad):
        pid = next(r.pid for _, r in bad if r.host == host)
        lines += [f"{host}: Test CUDA failure common.cu:1001 '{NOT_READY}'",
                  f" .. {host} pid {pid}: Test failure common.cu:891"]
    return ToolRun("\n".join(lines) + "\n", stderr=render.render_mpirun_abort(bad[0][0], 3),
                   exit_code=3, duration_s=min(NCCL_LAUNCH_S, test.timeout_s))


def run_domain(test: Test, ctx: ToolContext, m: DomainModel, *, noise: float,
               rng: random.Random, jitter: float) -> ToolRun:
    """The whole output of one domain test (a table, or the CUDA or IMEX failure)."""
    ranks = _ranks(test, ctx)
    p = test.params
    size, iters = int(p["size_bytes"]), int(p.iters if p.iters is not None else 20)
    head = render.render_nccl_header("all_reduce", [r for r, _ in ranks], n_gpus=1,
                                     min_bytes=size, max_bytes=size, warmup=1, iters=iters,
                                     info=_info(test, ctx, ranks, m))
    if set(test.nodes) & m.unregistered:
        return _cuda_failure(test, ranks, m, head)
    if set(test.nodes) & m.no_imex:
        return _imex_failure(test, ctx, ranks, m, head)
    n = len(ranks)
    factor = render.BUSBW_FACTOR["all_reduce"](n) if n > 1 else 1.0
    busbw = _busbw(test, ranks, m) * noise
    halves = []
    for _ in range(2):
        wobble = max(0.05, 1.0 + rng.gauss(0.0, jitter / 4)) if jitter else 1.0
        t_us = 30.0 + size / (busbw / factor * 1e3 * wobble)
        alg = size / t_us / 1e3
        halves.append((t_us, alg, alg * factor))
    elapsed = NCCL_LAUNCH_S + (1 + iters) * (halves[0][0] + halves[1][0]) / 1e6
    if elapsed > test.timeout_s:
        return ToolRun("\n".join(head) + "\n", exit_code=None, duration_s=test.timeout_s,
                       timed_out=True)
    row = render.NcclRow(size, size // 4, *halves[0], *halves[1])
    lines = [*head, render.render_nccl_row("all_reduce", row),
             *render.render_nccl_footer("all_reduce", [row])]
    return ToolRun("\n".join(lines), exit_code=0, duration_s=round(elapsed, 3))
