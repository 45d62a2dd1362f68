"""RoCE link localization: flows between two leaves pinned (by their learned paths) onto each
candidate uplink in turn, batches per leaf pair, and sampling of links no test has crossed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from fabriccheck.models import Flow, LinkKey, Test, nic_node
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.topology.view import FabricView


def roce_leaf_probes(flows, b: RoundBuilder, good_nics: set[str], seed: int,
                      per_way: int = 4) -> int:
    """RoCE: a batch of fresh known-good flows between the leaves of the failing flows.

    The path of a flow is a hash nobody knows, so one probe samples one of the equal-cost
    paths; a batch of ``per_way`` flows each way (different node pairs: different hashes)
    samples many at once. Flows of a batch may collide on an uplink and halve each other; the
    attribution tells fair-share contention from a fault (``inference.contention``).
    """
    made = 0
    att = b.view.topology.attachment
    done: set[tuple[str, str]] = set()
    for _, src, dst in flows[:2]:
        pair = tuple(sorted((att[src], att[dst])))
        if pair[0] == pair[1] or pair in done:
            continue
        done.add(pair)  # type: ignore[arg-type]
        made += plan_roce_batch(pair[0], pair[1], b.view.topology.nics[src].rail, b, good_nics,
                                seed=seed, per_way=per_way)
    return made


def plan_roce_batch(leaf_a: str, leaf_b: str, rail: int, b: RoundBuilder, good_nics: set[str],
                    *, seed: int, per_way: int = 4) -> int:
    """``per_way`` flows ``leaf_a -> leaf_b`` and as many back, between known-good NICs that are
    free this round (each NIC sends or receives once). Returns the number of tests planned."""
    att = b.view.topology.attachment
    rng = random.Random(f"roce-batch:{seed}:{b.round_no}:{leaf_a}:{leaf_b}")
    made = 0
    # leaf ends where other cross-leaf tests of this round run (confirmations): a batch there
    # could collide with them, so it stays away
    taken: set[tuple[str, str]] = set()
    for t in b.tests:
        if t.params.batch is not None:
            continue
        for f in t.flows:
            if att.get(f.src) != att.get(f.dst):
                taken.update({(att.get(f.src), "out"), (att.get(f.dst), "in")})
    for s_leaf, d_leaf in ((leaf_a, leaf_b), (leaf_b, leaf_a)):
        if (s_leaf, "out") in taken or (d_leaf, "in") in taken:
            continue
        srcs = sorted(n for n in good_nics if att.get(n) == s_leaf and b.nic_free(n, "tx"))
        dsts = sorted(n for n in good_nics if att.get(n) == d_leaf and b.nic_free(n, "rx"))
        rng.shuffle(srcs)
        rng.shuffle(dsts)
        # never more flows one way than there are uplinks to spread over: with one path
        # between the leaves, two flows surely halve each other (contention, not a sample)
        width = _uplinks_between(b.view, srcs[0], dsts[0], s_leaf) if srcs and dsts else 0
        for s_nic, d_nic in list(zip(srcs, dsts, strict=False))[:min(per_way, width)]:
            if b.view.topology.nics[s_nic].rail != rail or nic_node(s_nic) == nic_node(d_nic):
                continue
            t = b.add_flow(nic_node(s_nic), nic_node(d_nic), rail, "localize", check_links=False,
                           batch=f"{s_leaf}>{d_leaf}")
            if t is not None:
                b.budget.fits_flows([(s_nic, d_nic)], force=True)  # keep other tests off
                made += 1
    return made


def _uplinks_between(view: FabricView, src: str, dst: str, leaf: str) -> int:
    """How many of ``leaf``'s links the equal-cost paths ``src -> dst`` may leave it by.

    >>> from fabriccheck.topology import generate
    >>> v = FabricView(generate({"kind": "rail-optimized", "nodes": 8, "rails": 1,
    ...     "gpus_per_node": 0, "nodes_per_leaf": 4, "spines": 2}, name="t", fabric="roce"))
    >>> src, dst = "node-001/mlx5_0", "node-005/mlx5_0"
    >>> _uplinks_between(v, src, dst, v.topology.attachment[src])
    2
    """
    return sum(1 for lk in view.flow_links(Flow(src, dst))[1] if leaf in lk)


def plan_roce_link_probes(candidates: Sequence[LinkKey], b: RoundBuilder, good_nics: set[str],
                          *, seed: int, per_link: int = 3, search: int = 64) -> int:
    """RoCE with learned paths: ``per_link`` flows per candidate link that may cross it.

    Each flow runs between known-good NICs, one end under the link (on its leaf, or on a leaf
    of its spine for a spine-core link; down the link, up, down again) and the other on a leaf
    whose equal-cost paths include the link but none of the set's other candidates, tagged
    ``probe_of`` with the link: the path learner (:mod:`fabriccheck.learn_paths`) then pins a
    source port whose path crosses exactly that link (the switches' hash decides; the learner
    draws ports until one does). A partner on
    the same rail comes first; where every same-rail path also crosses another candidate (two
    leaves per rail: ``leaf-0 - spine - leaf-1`` crosses both of a failing flow's links), a
    NIC of another rail, whose leaf reaches the spine too. The probe's leaf ends are closed to
    the round's other cross-leaf flows (:meth:`CrossBudget.close`): a collective ring, whose
    path nobody knows, must not share its link. Returns the number of tests planned.

    Why down twice: a down link drops the traces of the flows crossing it, so only a flow
    *down* it learns that much (its trace dies just after the link's upper end: the partial
    path is the link); one up it dies at its own leaf, among all the uplinks. The second flow
    down shares the first one's hop, so on a healthy or degraded link the learner moves it off
    (a free path), and only where the traces die at the link do both count.
    """
    view = b.view
    att = view.topology.attachment
    nics = view.topology.nics
    rng = random.Random(f"roce-link:{seed}:{b.round_no}")
    good = sorted(n for n in good_nics if n in att)
    made = 0
    for link in candidates[:8]:
        rivals = set(candidates) - {link}
        under = nics_under(link, view)  # NICs of its leaf, or of the leaves under its spine
        near = [n for n in good if n in under]
        rng.shuffle(near)
        got = 0
        for a in near:
            if got >= per_link:
                break
            same = [o for o in good if nics[o].rail == nics[a].rail]
            other = [o for o in good if nics[o].rail != nics[a].rail]
            rng.shuffle(same)
            rng.shuffle(other)
            t = _aimed_flow(a, link, rivals, same[:search] + other[:search], b, got % 2 == 1)
            if t is not None:
                got += 1
                made += 1
    return made


def _aimed_flow(a: str, link: LinkKey, rivals: set[LinkKey], partners: Sequence[str],
                b: RoundBuilder, send: bool) -> Test | None:
    """One flow between ``a`` and the first partner (``send``: ``a`` sends) whose equal-cost
    paths include ``link`` and, if any partner allows, no link of ``rivals``."""
    view = b.view
    att = view.topology.attachment
    fits = []
    for o in partners:
        s, d = (a, o) if send else (o, a)
        if att[o] == att[a] or nic_node(o) == nic_node(a):
            continue
        if not (b.nic_free(s, "tx") and b.nic_free(d, "rx")):
            continue
        possible = view.route_links(s, d)
        if link in possible:
            fits.append((bool(possible & rivals), s, d))
    for _, s, d in sorted(fits, key=lambda x: x[0])[:1]:
        tag = f"{link[0]} -- {link[1]}"
        rail_s, rail_d = view.topology.nics[s].rail, view.topology.nics[d].rail
        t = (b.add_flow(nic_node(s), nic_node(d), rail_s, "localize", check_links=False,
                        probe_of=tag) if rail_s == rail_d
             else b.add_nic_flow(s, d, "localize", check_links=False, probe_of=tag))
        if t is not None:
            b.budget.close(s, d)  # rings of the round stay off its leaf ends
        return t
    return None


def plan_roce_sampling(b: RoundBuilder, good_nics: set[str], *, seed: int,
                       per_way: int = 2) -> int:
    """RoCE: one sampling batch per leaf pair of a leaf matching, on every rail.

    The sweep sends few cross-leaf flows per leaf (each may hash onto any of the equal-cost
    paths), so a degraded spine link can go unsampled; this batch adds ``per_way`` fresh flows
    each way between matched leaves of each rail (every leaf in one pair), in the first
    follow-up round, beside the confirmations.
    """
    from fabriccheck.planning.pairing import circle_matching

    att = b.view.topology.attachment
    leaves: dict[int, set[str]] = {}
    for nic in good_nics:
        if nic in att:
            leaves.setdefault(b.view.topology.nics[nic].rail, set()).add(att[nic])
    made = 0
    for rail, group in sorted(leaves.items()):
        order = sorted(group)
        random.Random(f"roce-sample:{seed}:{rail}").shuffle(order)
        for la, lb in circle_matching(order, b.round_no + rail):
            made += plan_roce_batch(la, lb, rail, b, good_nics, seed=seed, per_way=per_way)
    return made

def nics_under(link: LinkKey, view: FabricView) -> set[str]:
    """NICs under the lower-tier end of ``link``: attached to it, or (a spine or core) to a
    leaf it is cabled to."""
    rank = {"leaf": 0, "spine": 1, "core": 2}
    sw = view.topology.switches
    lower = min(link, key=lambda x: rank.get(sw[x].tier, 3) if x in sw else -1)
    if sw[lower].tier == "leaf":
        leaves = {lower}
    else:
        leaves = {x for k in view.switch_links if lower in k for x in k
                  if x != lower and sw[x].tier == "leaf"}
    on = view.nics_on
    return {n for leaf in leaves for n in on.get(leaf, ())}
