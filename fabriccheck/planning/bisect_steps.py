"""Bisection of a failing group: halves padded with known-good nodes back to the group size,
both halves in the same round, until single culprits remain: at most ``ceil(log2(k))`` rounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.confirm import GoodPool


@dataclass(frozen=True)
class BisectTask:
    """A culprit set still to narrow, inside groups of ``size`` nodes (``origin``: a test id)."""

    suspects: tuple[str, ...]
    size: int
    origin: str
    depth: int = 0
    split: bool = True  # False: test the suspects as one part (a part that found no room)


def bisect_round_bound(n: int) -> int:
    """The quality bar for a post-timeout bisection at scale: ``2 + ceil(log2(n / 8))``.

    >>> bisect_round_bound(8), bisect_round_bound(1024)
    (2, 9)
    """
    return 2 + max(0, math.ceil(math.log2(max(n, 1) / 8)))


def split_halves(suspects: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split a culprit set in two halves (first half the larger).

    >>> split_halves(["a", "b", "c"])
    (('a', 'b'), ('c',))
    """
    mid = (len(suspects) + 1) // 2
    return tuple(suspects[:mid]), tuple(suspects[mid:])


def plan_bisect(task: BisectTask, b: RoundBuilder, pool: GoodPool
                ) -> tuple[list[tuple[str, tuple]], list[tuple[str, ...]]]:
    """One bisection step: ``task``'s suspects split into as many parts as the free known-good
    nodes can pad back to ``task.size`` nodes (at least halves), all parts in this round.

    With enough padding every suspect gets its own group (the culprit in one step); with less,
    quarters or halves (``log_p(k)`` steps). A small job has few spare nodes: 8 suspects of a
    16-node job can only be halved (8 -> 4 -> 2 -> 1), so there the bisection takes
    ``2 + log2(8)`` rounds, above the ``2 + ceil(log2(N / 8))`` bar (groups in one round are
    disjoint, so no round can test a suspect twice).
    Returns ``(test_id, part)`` for every test planned, and the parts that found no room this
    round (no free padding, or their ring would share a link): plan them again next round.
    """
    out = []
    left: list[tuple[str, ...]] = []
    parts: Sequence[tuple[str, ...]] = (split_halves(task.suspects) if task.split
                                        else [tuple(task.suspects)])
    if task.split and len(task.suspects) > 2:
        k, free = len(task.suspects), pool.available(b)
        for p in range(k, 2, -1):  # the most parts whose padding fits
            chunks = [tuple(task.suspects[i::p]) for i in range(p)]
            if sum(max(0, task.size - len(c)) for c in chunks) <= free:
                parts = chunks
                break
    for half in parts:
        if not half:
            continue
        pad = pool.take_nodes(max(0, task.size - len(half)), b, near=half)
        group = tuple(half) + tuple(pad)
        t = b.add_group(group, "bisect", bisect_of=task.origin) if len(group) >= 2 else None
        if t is None:
            pool.give_back(pad)
            left.append(tuple(half))
        else:
            out.append((t.test_id, half))
    return out, left
