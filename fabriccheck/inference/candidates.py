"""Each failure's candidates: the parts it touched that no passing test cleared.

A failing observation is explained by the nodes, NICs and links it touched that are not
exonerated (:func:`failure_candidates`; none for a failure a same-route retest passed, and no
links for one that RoCE contention explains), and a greedy minimum hitting set picks the fewest
explanations (:func:`hitting_set`: nodes first, then NICs, then links). What is left on a
failure's path also says which node alone it can come from (:func:`pinned_nodes`) and which
switches no passing test cleared (:func:`uncleared_switches`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from fabriccheck.inference.contention import roce_collisions, shared_leaf_end
from fabriccheck.inference.nic_rivals import Comp
from fabriccheck.inference.state import Inference
from fabriccheck.models import LinkKey, Observation
from fabriccheck.topology.view import FabricView

_PRIORITY = {"node": 0, "nic": 1, "link": 2}


@dataclass
class Failures:
    """The failing observations left to explain, each with its un-cleared candidates."""

    live: list[Observation] = field(default_factory=list)
    cands: list[list[Comp]] = field(default_factory=list)
    #: RoCE: possible ECMP contention (says nothing about links)
    ambiguous: set[str] = field(default_factory=set)
    #: RoCE: shares a leaf end with another failure of its round
    shared: set[str] = field(default_factory=set)


def failure_candidates(fails: list[Observation], view: FabricView, inf: Inference,
                       good_links: set[LinkKey], retested_ok: set[str],
                       all_failed: set[tuple[int, str, str]] = frozenset(),  # type: ignore[assignment]
                       ) -> Failures:
    """Each failure's candidates: its un-cleared nodes, NICs and links (none for a failure a
    same-route retest passed: a glitch)."""
    roce = view.fabric == "roce"
    ambiguous = roce_collisions(fails, view, skip=all_failed) if roce else set()
    inf.ambiguous = sorted(ambiguous)
    # devices: any failure that shares a leaf end with another failure of its round may be
    # contention (whatever its value), so it never convicts a node or NIC without confirmation
    shared = shared_leaf_end(fails, view) if roce else set()
    live: list[Observation] = []
    for o in fails:
        if o.test.test_id in retested_ok:
            inf.glitches.append(o.test.test_id)
        else:
            live.append(o)
    cands: list[list[Comp]] = []
    for o in live:
        c: list[Comp] = [("node", n) for n in o.test.nodes if n not in inf.good_nodes]
        c += [("nic", x) for x in o.test.nics if x not in inf.good_nics]
        # a possible ECMP collision says nothing about links; its devices must still be
        # cleared (a half-speed NIC beside a collision looks the same), by confirmation only
        links = set().union(*(view.flow_links(f)[1] for f in o.test.flows)) \
            if o.test.flows and o.test.test_id not in ambiguous else set()
        c += [("link", lk) for lk in sorted(links - good_links)]
        cands.append(c)
    return Failures(live, cands, ambiguous, shared)


def hitting_set(cands: list[list[Comp]], partners: list[set[str]]) -> dict[int, Comp]:
    """Greedy minimum hitting set: observation index -> the component chosen to explain it.

    Devices first: a node or NIC that failed with at least two different partners and never
    passed explains its failures before any link does (a node failing everywhere is the node,
    even when all its flows happen to share an uplink). Then the fewest components, preferring
    nodes to NICs to links on ties.
    """
    covers: dict[Comp, set[int]] = defaultdict(set)
    for i, c in enumerate(cands):
        for comp in c:
            covers[comp].add(i)
    strong = {
        comp for comp, idx in covers.items() if comp[0] != "link"
        and len(set().union(*(partners[i] for i in idx)) - {comp[1].split("/", 1)[0]}) >= 2
    }
    left = {i for i, c in enumerate(cands) if c}
    out: dict[int, Comp] = {}
    for pool in (strong, set(covers)):
        while left and pool:
            best = max(pool, key=lambda k: (len(covers[k] & left), -_PRIORITY[k[0]], k[1]))
            got = covers[best] & left
            if not got:
                break
            for i in got:
                out[i] = best
            left -= got
    return out


def pinned_nodes(live: list[Observation], cands: list[list[Comp]]) -> dict[str, str]:
    """Failing test id -> the one node its failure can only come from (every un-cleared
    candidate is that node or one of its NICs: no link, no other node is left to blame)."""
    out: dict[str, str] = {}
    for o, c in zip(live, cands, strict=True):
        owners = {name.split("/", 1)[0] if kind != "link" else "" for kind, name in c}
        if len(owners) == 1 and "" not in owners:
            out[o.test.test_id] = owners.pop()
    return out


def uncleared_switches(fx: Failures, view: FabricView, good_links: set[LinkKey]
                       ) -> dict[str, frozenset[str]]:
    """Failing test id -> the switches of the links on its path(s) no passing test cleared."""
    out = {}
    for o in fx.live:
        links = set().union(*(view.flow_links(f)[1] for f in o.test.flows)) - good_links
        out[o.test.test_id] = frozenset(sw for lk in links for sw in lk)
    return out
