"""Follow-up tests after the sweep rounds: confirmations, link localization probes, bisection.

- **Confirm** a suspect NIC against known-good partners on the *same leaf* (no uplinks on the
  path, so only the suspect can fail the test): once as client, once as server (links are full
  duplex, so both run at once). A suspect node does the same on every rail; a hang suspect runs
  one test against a known-good node.
- **Localize** a link candidate set: retest the failing flows (same route on InfiniBand) and, per
  candidate, send a known-good flow whose route crosses that candidate and no other.
- **Bisect** a failing group: halves padded with known-good nodes back to the group size, both
  halves in the same round, until single culprits remain: at most ``ceil(log2(k))`` rounds.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fabriccheck.models import LinkKey, nic_node
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.view import FabricView


@dataclass(frozen=True)
class BisectTask:
    """A culprit set still to narrow, inside groups of ``size`` nodes (``origin``: a test id)."""

    suspects: tuple[str, ...]
    size: int
    origin: str
    depth: int = 0


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


class GoodPool:
    """Known-good nodes to borrow as partners or padding, nearest (same leaf) first."""

    def __init__(self, good: Iterable[str], view: FabricView, seed: int, round_no: int) -> None:
        self.view = view
        self.free = sorted(good)
        random.Random(f"pool:{seed}:{round_no}").shuffle(self.free)

    def take_nic_partner(self, nic: str, rail: int, b: RoundBuilder, good_nics: set[str],
                         exclude: set[str], way: str | None = None) -> str | None:
        """A known-good node whose rail-``rail`` NIC is free, on ``nic``'s leaf if possible."""
        att = self.view.topology.attachment
        leaf = att.get(nic)
        best = None
        for node in self.free:
            other = self.view.rails_of[node].get(rail)
            if (node in exclude or other is None or other not in good_nics
                    or not b.nic_free(other, way)):
                continue
            if att.get(other) == leaf:
                return node
            if best is None:
                best = node
        return best

    def take_nodes(self, k: int, b: RoundBuilder, near: Sequence[str] = ()) -> list[str]:
        """``k`` free known-good nodes (same pod as ``near`` first); fewer if not enough."""
        pods = {self.view.pod(n) for n in near}
        free = [n for n in self.free if b.node_free(n)]
        free.sort(key=lambda n: self.view.pod(n) not in pods)
        got = free[:k]
        taken = set(got)
        self.free = [n for n in self.free if n not in taken]
        return got


def plan_nic_confirm(nic: str, b: RoundBuilder, pool: GoodPool, good_nics: set[str]) -> int:
    """Client and server tests of a suspect NIC against known-good same-leaf partners."""
    node = nic_node(nic)
    rail = b.view.topology.nics[nic].rail
    made = 0
    used: set[str] = {node}
    for direction in ("client", "server"):
        way = "rx" if direction == "client" else "tx"  # what the partner's NIC does
        partner = pool.take_nic_partner(nic, rail, b, good_nics, used, way)
        if partner is None:
            break
        used.add(partner)
        client, server = (node, partner) if direction == "client" else (partner, node)
        if b.add_flow(client, server, rail, "confirm") is not None:
            made += 1
    return made


def plan_node_confirm(node: str, b: RoundBuilder, pool: GoodPool, good_nics: set[str],
                      *, hang: bool = False) -> int:
    """Confirmation of a suspect node: every rail both ways (one test for a hang suspect)."""
    rails = sorted(b.view.rails_of[node])
    if hang:
        rails = rails[:1]
    made = 0
    if not b.policy.per_rail:
        partner = pool.take_nodes(1, b, near=[node])
        if partner and b.add_group((node, partner[0]), "confirm", probe=b.policy.pair_probe):
            made += 1
        return made
    for direction in ("client",) if hang else ("client", "server"):
        for r in rails:
            nic = b.view.rails_of[node][r]
            way = "rx" if direction == "client" else "tx"
            partner = pool.take_nic_partner(nic, r, b, good_nics, {node}, way)
            if partner is None:
                continue
            client, server = (node, partner) if direction == "client" else (partner, node)
            if b.add_flow(client, server, r, "confirm") is not None:
                made += 1
    return made


def plan_link_probes(
    flows: Sequence[tuple[str, str, str]],
    candidates: Sequence[LinkKey],
    b: RoundBuilder,
    good_nics: set[str],
    *,
    seed: int,
    search_limit: int = 400,
) -> int:
    """Localization tests for one candidate set of links.

    InfiniBand, one candidate: retest the failing flows ``(test_id, src_nic, dst_nic)`` on the
    same route (a pass means the first failure was a glitch). Several candidates: per candidate,
    a flow between known-good NICs whose route crosses it and no other candidate. RoCE: fresh
    flows between the two leaves (see :func:`_roce_leaf_probes`).
    """
    made = 0
    view = b.view
    ib = view.fabric == "infiniband"
    if not ib:
        return _roce_leaf_probes(flows, b, good_nics, seed)
    if len(candidates) < 2:  # one candidate: the question is only "glitch or real?"
        for test_id, src, dst in flows[:2]:
            t = b.add_flow(nic_node(src), nic_node(dst), view.topology.nics[src].rail,
                           "localize", retest_of=test_id)
            made += t is not None
        return made
    cand = set(candidates)
    rng = random.Random(f"probe:{seed}:{b.round_no}")
    att = view.topology.attachment
    for link in candidates[:8]:
        leaf_nics = [n for n, sw in att.items() if sw in link and n in good_nics and b.nic_free(n)]
        others = [n for n in good_nics if b.nic_free(n)]
        rng.shuffle(leaf_nics)
        rng.shuffle(others)
        tries = 0
        done = False
        for s in leaf_nics:
            for d in others:
                tries += 1
                if tries > search_limit or done:
                    break
                if s == d or view.topology.nics[s].rail != view.topology.nics[d].rail:
                    continue
                route = view.route_links(s, d) if ib else set()
                if link in route and not (route & (cand - {link})):
                    if b.add_flow(nic_node(s), nic_node(d), view.topology.nics[s].rail,
                                  "localize", probe_of=f"{link[0]} -- {link[1]}"):
                        made += 1
                        done = True
            if done or tries > search_limit:
                break
    return made


def _roce_leaf_probes(flows, b: RoundBuilder, good_nics: set[str], seed: int) -> int:
    """RoCE: fresh known-good flows between the leaves of a failing flow, one each way.

    One flow leaving and one entering a leaf cannot share a link direction, so a failure is not
    contention; each probe hashes onto a random equal-cost path, so repeated rounds sample them.
    """
    view = b.view
    att = view.topology.attachment
    rng = random.Random(f"roce-probe:{seed}:{b.round_no}")
    made = 0
    for _, src, dst in flows[:2]:
        leaves = (att[src], att[dst])
        rail = view.topology.nics[src].rail
        for s_leaf, d_leaf in (leaves, leaves[::-1]):
            if s_leaf == d_leaf:
                continue
            srcs = sorted(n for n in good_nics if att.get(n) == s_leaf and b.nic_free(n, "tx"))
            dsts = sorted(n for n in good_nics if att.get(n) == d_leaf and b.nic_free(n, "rx"))
            if not srcs or not dsts:
                continue
            s_nic, d_nic = rng.choice(srcs), rng.choice(dsts)
            if b.add_flow(nic_node(s_nic), nic_node(d_nic), rail, "localize") is not None:
                made += 1
    return made


def plan_bisect(task: BisectTask, b: RoundBuilder, pool: GoodPool) -> list[tuple[str, tuple]]:
    """One bisection step: both halves of ``task``, padded back to ``task.size`` nodes.

    Returns ``(test_id, half)`` for every test planned (a half that could not be placed is
    skipped and retried next round).
    """
    out = []
    for half in split_halves(task.suspects):
        if not half:
            continue
        pad = pool.take_nodes(max(0, task.size - len(half)), b, near=half)
        group = tuple(half) + tuple(pad)
        if len(group) < 2:
            continue
        t = b.add_group(group, "bisect", bisect_of=task.origin)
        if t is not None:
            out.append((t.test_id, half))
    return out
