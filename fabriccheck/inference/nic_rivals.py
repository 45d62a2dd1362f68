"""Rival explanations of a suspect NIC's failures: the links and switches on its failing paths.

A NIC is the one part common to its failures only when no un-cleared link lies on all its
failing paths, the failures off the link on most of them are beyond noise on their own, and no
switch that nothing crossed cleanly (a dead spine) explains them (:func:`star_reason`). The
links on all its failing paths but one are what a confirmation should avoid
(:func:`rival_links`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from fabriccheck.inference.chance import chance
from fabriccheck.inference.state import Inference
from fabriccheck.models import Observation, nic_node
from fabriccheck.topology.view import FabricView

Comp = tuple[str, Any]  # ("node", name) | ("nic", endpoint) | ("link", Link)


def partners_of(node: str, obs: Sequence[Observation]) -> set[str]:
    """The nodes ``node`` met in ``obs``."""
    return {n for o in obs for n in o.test.nodes if n != node}


def star_reason(nic: str, obs: list[Observation], cands_of: Mapping[str, list[Comp]],
                inf: Inference, view: FabricView, n_nics: int, glitch_rate: float = 0.02,
                alpha: float = 0.01, unsure: set[str] | frozenset[str] = frozenset(),
                switch_of: Mapping[str, frozenset[str]] | None = None,
                dark: Mapping[str, set[frozenset[str]]] | None = None) -> str:
    """Why ``nic`` is the only part that explains its failures, or "" when it is not.

    For jobs too small for a proven-good partner on the NIC's rail (every same-rail NIC in
    scope met only the suspect): the failures form a star around it. It never passed; it
    failed with at least two partners in at least two rounds; every partner's node passed
    other tests; at least three failures; its own node's other rails passed (so not the
    node); no single un-cleared
    link lies on all its failing paths (no link explains them as well) and no other device
    does (the partners differ); and noise cannot make that many failures in a row on any NIC
    of the run: ``glitch_rate ** k * n_nics < alpha`` (Bonferroni over the NICs tested, at
    a glitch rate of 2 %, the noise the checks here allow), nor the failures off the link on
    most failing paths alone (that link explains the others). Failures whose path crosses an
    un-cleared link of a ``dark`` switch (no test across it passed, and it failed for two
    node pairs without this NIC's node: a dead spine, whose links differ path by path;
    ``dark`` maps such a switch to its failing node pairs, ``switch_of`` a test to the
    switches of its un-cleared links) are the switch's to explain and are not counted.
    """
    node = nic_node(nic)
    # a switch no test across has passed, failing for other node pairs too (a dead spine),
    # explains what crossed it
    rivals = {sw for sw, pairs in (dark or {}).items()
              if sum(1 for p in pairs if node not in p) >= 2}
    if rivals and switch_of is not None:
        obs = [o for o in obs if not switch_of.get(o.test.test_id, frozenset()) & rivals]
    partners = partners_of(node, obs)
    rounds = {o.test.round for o in obs}
    if (len(obs) < 3 or len(partners) < 2 or len(rounds) < 2 or node not in inf.good_nodes
            or not partners <= inf.good_nodes
            or chance(len(obs), glitch_rate, max(1, n_nics)) >= alpha):
        return ""
    if common_link(obs, cands_of, view, unsure):
        return ""
    # the link on most failing paths explains those: the rest must be beyond noise alone
    # (a half-speed uplink and one glitch on the one test that avoided it are not a NIC)
    off = len(obs) - most_on_one_link(obs, cands_of)
    if chance(off, glitch_rate, max(1, n_nics)) >= alpha:
        return ""
    return (f"the only part common to {len(obs)} failures with {len(partners)} partners whose "
            f"nodes passed other tests, in {len(rounds)} rounds; no link lies on all its "
            f"failing paths, and {off} avoided the link on most of them")


def link_counts(obs: Sequence[Observation], cands_of: Mapping[str, list[Comp]]
                 ) -> dict[Any, int]:
    """Un-cleared link -> how many of ``obs`` it lies on."""
    count: dict[Any, int] = defaultdict(int)
    for o in obs:
        for kind, name in cands_of.get(o.test.test_id, ()):
            if kind == "link":
                count[name] += 1
    return count


def most_on_one_link(obs: Sequence[Observation], cands_of: Mapping[str, list[Comp]]) -> int:
    """How many of ``obs`` the un-cleared link on most of their paths lies on."""
    return max(link_counts(obs, cands_of).values(), default=0)


def rival_links(obs: Sequence[Observation], cands_of: Mapping[str, list[Comp]]
                 ) -> frozenset:
    """The un-cleared links on all of a suspect's failing paths but one at most (two or
    more of them): they explain its failures as well, and a test off them separates."""
    count = link_counts(obs, cands_of)
    return frozenset(lk for lk, k in count.items() if k >= 2 and len(obs) - k < 2)


def common_link(obs: list[Observation], cands_of: Mapping[str, list[Comp]],
                 view: FabricView, unsure: set[str] | frozenset[str] = frozenset()) -> bool:
    """Whether one un-cleared link may lie on every failing path of ``obs`` (on RoCE any link
    of a flow's ECMP set may be the one it took: a link on every set could explain them
    all, so it blocks). A failure that may be ECMP contention (``unsure``: its links were
    set aside) blocks too: a link may well explain it."""
    if any(o.test.test_id in unsure for o in obs):
        return True
    return bool(common_links(obs, cands_of))


def common_links(obs: Sequence[Observation], cands_of: Mapping[str, list[Comp]]) -> set:
    """The un-cleared links on every failing path of ``obs`` (none for no failure)."""
    links = [{name for kind, name in cands_of.get(o.test.test_id, ()) if kind == "link"}
             for o in obs]
    return set.intersection(*links) if links else set()
