"""allreduce-cpu: a real collective on CPUs (torch.distributed, gloo) printing an nccl-tests table.

Run once per host::

    python -m fabriccheck.probes.allreduce_cpu --rank R --world-size N \\
        --master-addr IP --master-port P --min-bytes 16777216 --max-bytes 16777216

Rank 0 prints the same header, rank lines, column header, rows and footer as ``all_reduce_perf``
(tool-formats.md §1.1), so :func:`fabriccheck.probes.nccl_tests.parse_nccl_tests` and the
evaluation read it unchanged: time in µs averaged over ranks, algbw and busbw in GB/s (1e9),
busbw = algbw × 2(n−1)/n for all_reduce and (n−1)/n for all_gather, ``#wrong`` = wrong elements
summed over ranks (each rank contributes ``rank + 1``; the check is exact). gloo picks the
interfaces from ``GLOO_SOCKET_IFNAME`` (set by the command builder to the rails under test).
Needs ``torch`` (``pip install 'fabriccheck[lab]'``); imported only when this program runs.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

COLLECTIVES = ("all_reduce", "all_gather")


def bus_factor(collective: str, world: int) -> float:
    """nccl-tests' busbw factor (tool-formats.md §1.2).

    >>> bus_factor("all_reduce", 4)
    1.5
    >>> bus_factor("all_gather", 1)
    0.0
    """
    if collective == "all_reduce":
        return 2.0 * (world - 1) / world
    return (world - 1) / world


def sizes(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    """The swept sizes, nccl-tests style (``-b``, ``-e``, ``-f``), multiples of 4 bytes.

    >>> sizes(8, 64)
    [8, 16, 32, 64]
    """
    out, s = [], max(4, min_bytes - min_bytes % 4)
    while s <= max_bytes:
        out.append(s)
        s *= factor
    return out or [max(4, max_bytes - max_bytes % 4)]


def _num(value: float, width: int, decimals: Sequence[int] = (2, 1, 0)) -> str:
    """nccl-tests' getFloatStr: the most decimals that fit ``width``, then %.1e.

    >>> _num(0.11378, 6, (4, 3, 2)), _num(158070.0, 7)
    ('0.1138', ' 158070')
    """
    for digits in decimals:
        text = f"{value:.{digits}f}"
        if len(text) <= width:
            return text.rjust(width)
    return f"{value:.1e}".rjust(width)


def format_row(
    size: int, count: int, collective: str, halves: Sequence[tuple[float, float, float, int]]
) -> str:
    """One table row: size, count, type, redop, root, then (time, algbw, busbw, #wrong) × 2."""
    redop = "sum" if collective == "all_reduce" else "none"
    row = f"{size:12d}  {count:12d}  {'float':>8s}  {redop:>6s}  {-1:6d}"
    for t_us, algbw, busbw, wrong in halves:
        bw = (4, 3, 2, 1, 0)  # more digits than nccl-tests: CPU links run well below 1 GB/s
        row += f"  {_num(t_us, 7)}  {_num(algbw, 6, bw)}  {_num(busbw, 6, bw)}  {wrong:6d}"
    return row


def header_lines(args: argparse.Namespace, ranks: Sequence[tuple[int, int, str]],
                 iface: str) -> list[str]:
    prog = f"{args.collective}_perf"
    return [
        "# fabriccheck allreduce-cpu (torch.distributed gloo), nccl-tests table format",
        f"# Collective test starting: {prog}",
        f"# nThread 1 nGpus 1 minBytes {args.min_bytes} maxBytes {args.max_bytes} "
        f"step: 2(factor) warmup iters: {args.warmup} iters: {args.iters} agg iters: 1 "
        "validation: 1 graph: 0",
        "#",
        "# Using devices",
        *(f"#  Rank {r:2d} Group  0 Pid {pid:6d} on {host:>10s} device  0 [0000:00:00] CPU gloo "
          f"{iface}" for r, pid, host in ranks),
        "#",
        "#                                                              out-of-place"
        "                       in-place",
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
        "     time   algbw   busbw  #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        "
        "     (us)  (GB/s)  (GB/s)",
    ]


def _run(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    world, rank = args.world_size, args.rank
    dist.init_process_group(
        "gloo", init_method=f"tcp://{args.master_addr}:{args.master_port}",
        rank=rank, world_size=world, timeout=timedelta(seconds=args.timeout_s),
    )
    try:
        me = (rank, os.getpid(), socket.gethostname().split(".")[0])
        ranks: list[Any] = [None] * world
        dist.all_gather_object(ranks, me)
        lines = header_lines(args, ranks, os.environ.get("GLOO_SOCKET_IFNAME", "default"))
        factor = bus_factor(args.collective, world)
        bw_sum, bw_n, oob = 0.0, 0, 0
        rows = []
        for size in sizes(args.min_bytes, args.max_bytes):
            count = size // 4
            halves = []
            for in_place in (False, True):
                t_s, wrong = _measure(torch, dist, args, count, world, rank, in_place)
                t_avg = torch.tensor([t_s], dtype=torch.float64)
                dist.all_reduce(t_avg)
                t_us = float(t_avg[0]) / world * 1e6
                algbw = size / 1e9 / (t_us / 1e6) if t_us > 0 else 0.0
                busbw = algbw * factor
                halves.append((t_us, algbw, busbw, wrong))
                bw_sum, bw_n = bw_sum + busbw, bw_n + 1
                oob += 1 if wrong else 0
            rows.append(format_row(size, count, args.collective, halves))
        if rank == 0:
            out = lines + rows + [
                f"# {'Out of bounds values':<20s} : {oob} {'OK' if oob == 0 else 'FAILED'}",
                f"# {'Avg bus bandwidth':<20s} : {bw_sum / max(bw_n, 1):g} ",
                "#",
                f"# Collective test concluded: {args.collective}_perf",
                "",
            ]
            sys.stdout.write("\n".join(out) + "\n")
            sys.stdout.flush()
        return 0 if oob == 0 else 1
    finally:
        dist.destroy_process_group()


def _measure(torch: Any, dist: Any, args: argparse.Namespace, count: int, world: int,
             rank: int, in_place: bool) -> tuple[float, int]:
    """Seconds per iteration (this rank) and wrong elements summed over ranks."""
    if args.collective == "all_reduce":
        src = torch.full((count,), float(rank + 1), dtype=torch.float32)
        buf = src.clone()

        def op() -> None:
            if not in_place:
                buf.copy_(src)
            dist.all_reduce(buf if not in_place else src)
    else:
        per = max(1, count // world)
        src = torch.full((per,), float(rank + 1), dtype=torch.float32)
        outs = [torch.empty(per, dtype=torch.float32) for _ in range(world)]

        def op() -> None:
            dist.all_gather(outs, src)
    for _ in range(args.warmup):
        op()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.iters):
        op()
    elapsed = (time.perf_counter() - t0) / max(args.iters, 1)
    # validation: one clean run
    if args.collective == "all_reduce":
        check = torch.full((count,), float(rank + 1), dtype=torch.float32)
        dist.all_reduce(check)
        expected = world * (world + 1) / 2.0
        wrong = int((check != expected).sum())
    else:
        dist.all_gather(outs, torch.full((per,), float(rank + 1), dtype=torch.float32))
        wrong = sum(int((o != float(r + 1)).sum()) for r, o in enumerate(outs))
    w = torch.tensor([wrong], dtype=torch.int64)
    dist.all_reduce(w)
    return elapsed, int(w[0])


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m fabriccheck.probes.allreduce_cpu",
                                description="CPU collective (gloo) printing an nccl-tests table")
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--master-addr", required=True)
    p.add_argument("--master-port", type=int, required=True)
    p.add_argument("--min-bytes", type=int, default=1 << 20)
    p.add_argument("--max-bytes", type=int, default=1 << 24)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--collective", choices=COLLECTIVES, default="all_reduce")
    p.add_argument("--timeout-s", type=float, default=60.0)
    args = p.parse_args(argv)
    if not 0 <= args.rank < args.world_size:
        p.error("--rank must be in [0, world-size)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return _run(args)
    except ImportError:
        sys.stderr.write("allreduce-cpu: torch is not installed (pip install 'fabriccheck[lab]')\n")
        return 2
    except RuntimeError as exc:  # gloo/store failures: print like a tool failure, exit non-zero
        host = socket.gethostname().split(".")[0]
        sys.stdout.write(f"{host}: Test failure allreduce_cpu.py '{str(exc).splitlines()[0]}'\n")
        sys.stdout.flush()
        return 3


if __name__ == "__main__":
    sys.exit(main())
