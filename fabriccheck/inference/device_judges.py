"""The verdict on one node or NIC: bad on enough independent evidence, else a suspect.

A node is bad on failures with two partners or more on two rails and against partners whose
NICs passed elsewhere, unless a switch explains its failures as well (:func:`rival_switch`),
or on a failed confirmation pinned to it (:func:`judge_node`). A NIC is bad on a failed
confirmation, on confirmations against two or more proven-good parts, or as the centre of a
star of failures, unless an un-cleared link lies on its failing paths (:func:`judge_nic`).
A NIC found bad whose failures something else explains is judged again on the rest
(:func:`rejudge`). The thresholds are :func:`~fabriccheck.inference.attribute.infer`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from fabriccheck.inference.alone import alone_reason
from fabriccheck.inference.nic_rivals import Comp, most_on_one_link, partners_of
from fabriccheck.inference.state import Inference
from fabriccheck.inference.wording import listing, observed_values
from fabriccheck.models import BAD, SUSPECT, Observation, Verdict, nic_node


def rival_switch(node: str, obs: list[Observation], live: list[Observation],
                 switch_of: dict[str, frozenset[str]]) -> str | None:
    """A switch that explains ``node``'s failures as well as the node does: every failure of
    the node (those with another blamed device aside) crosses an un-cleared link of it, and
    another node's failures (tests without ``node``) do too. Then the node is not convicted on
    pattern alone (a leaf with every uplink at half speed makes all its nodes fail every
    cross-leaf test); a confirmation that crosses no such link still can."""
    common = frozenset.intersection(*(switch_of.get(o.test.test_id, frozenset()) for o in obs))
    for sw in sorted(common):
        if any(node not in o.test.nodes and sw in switch_of.get(o.test.test_id, ())
               for o in live):
            return sw
    return None


def judge_node(node: str, obs: list[Observation], inf: Inference, min_fails: int,
               confirmed_min: int, pinned: dict[str, str],
               shared: set[str] | frozenset[str] = frozenset(), rival: str | None = None,
               passers: frozenset[str] = frozenset()) -> None:
    """``node`` bad or a suspect on its failures ``obs`` (``min_fails`` without a
    confirmation, ``confirmed_min`` with one; ``rival``: a switch that explains them too;
    ``passers``: nodes that passed a test alone, :mod:`fabriccheck.inference.alone`)."""
    partners = partners_of(node, obs)
    # without confirmation only failures against partners whose NICs passed elsewhere count
    # (a node paired with faulty partners on every rail in round 1 is no culprit), and none
    # that may be ECMP contention
    clean = [o for o in obs if o.test.test_id not in shared
             and all(x in inf.good_nics for x in o.test.nics if nic_node(x) != node)]
    rails = {f.src.split("/", 1)[1] for o in obs for f in o.test.flows
             if nic_node(f.src) == node} | {f.dst.split("/", 1)[1] for o in obs
                                             for f in o.test.flows if nic_node(f.dst) == node}
    # a confirmation convicts only when nothing else on its path is left to blame
    confirmed = any(o.test.purpose in ("confirm", "bisect") and pinned.get(o.test.test_id) == node
                    for o in obs)
    strong = (len(clean) >= min_fails and (len(rails) >= 2 or len(clean) >= 2 * min_fails)
              and rival is None)
    ids = tuple(o.test.test_id for o in obs)
    reason = (f"failed {len(obs)} test(s) with {len(partners)} partner(s) "
              f"({listing(sorted(partners))}) and passed none; failed: {observed_values(obs)}")
    if len(partners) >= 2 and (strong or (confirmed and len(obs) >= confirmed_min)):
        inf.bad_nodes[node] = Verdict("node", node, BAD, reason, ids)
    elif rival is None and (alone := alone_reason(node, obs, pinned, passers)):
        inf.bad_nodes[node] = Verdict("node", node, BAD, reason + alone, ids)
    else:
        why = (f"; switch {rival} explains these failures too (other nodes fail across it): "
               "needs a confirmation that avoids it") if rival else "; needs confirmation"
        inf.node_suspects[node] = Verdict("node", node, SUSPECT, reason + why, ids)


def judge_nic(nic: str, obs: list[Observation], inf: Inference, confirmed_min: int,
              pinned: dict[str, str], node_passes: Sequence[Observation] = (),
              star: str = "", cands_of: Mapping[str, list[Comp]] | None = None) -> None:
    """``nic`` bad or a suspect on its failures ``obs`` (``node_passes``: its node's passing
    tests; ``star``: why it is the centre of a star of failures, or "")."""
    node = nic_node(nic)
    partners = partners_of(node, obs)
    confirmed = any(o.test.purpose == "confirm" and pinned.get(o.test.test_id) == node
                    for o in obs)
    # an un-cleared link on all its failing paths but one: that one alone (a glitch on the
    # test that avoided the link?) convicts nothing; a second failure off the link does
    most = most_on_one_link(obs, cands_of) if cands_of is not None else 0
    rival = most >= 2 and len(obs) - most < 2
    ids = tuple(o.test.test_id for o in obs)
    others = [o for o in node_passes if nic not in o.test.nics]
    other = (f"its node's other rails pass: {observed_values(others, 3)}" if others
             else "no other rail of its node passed a test")
    reason = (f"failed {len(obs)} test(s) with {len(partners)} partner(s) "
              f"({listing(sorted(partners))}), never passed; failed: {observed_values(obs)}; "
              f"{other}")
    # a job too small for two partner nodes: confirmations pinned to it against two or more
    # different proven-good NICs (other rails of its partner, its own node's other NICs
    # through the switch, HCA loopback) say its only partner is not what fails
    pinned_obs = [o for o in obs if o.test.purpose == "confirm"
                  and pinned.get(o.test.test_id) == node]
    against = {x for o in pinned_obs for x in o.test.nics if x != nic} | {
        nic for o in pinned_obs if o.test.nics == (nic,)}
    pinned_rounds = {o.test.round for o in pinned_obs}
    if rival:
        inf.nic_suspects[nic] = Verdict(
            "nic", nic, SUSPECT, f"{reason}; an un-cleared link lies on {most} of its "
            f"{len(obs)} failing paths and explains them as well: needs another failure off "
            f"that link", ids)
    elif len(partners) >= 2 and confirmed and len(obs) >= confirmed_min:
        inf.bad_nics[nic] = Verdict("nic", nic, BAD, reason, ids)
    elif len(against) >= 2 and len(obs) >= confirmed_min and others:
        why = (f"; failed against {len(against)} proven-good parts with nothing else left to "
               f"blame ({', '.join(o.test.test_id for o in pinned_obs)})")
        inf.bad_nics[nic] = Verdict("nic", nic, BAD, reason + why, ids)
    elif len(pinned_rounds) >= 2 and len(obs) >= confirmed_min and others:
        # a job of two nodes: one partner NIC on its rail, proven good by its passes with
        # this node's other NICs; confirmations pinned to this NIC failed in two rounds
        why = (f"; confirmations against proven-good {listing(sorted(against))} failed in "
               f"{len(pinned_rounds)} rounds with nothing else left to "
               f"blame ({', '.join(o.test.test_id for o in pinned_obs)})")
        inf.bad_nics[nic] = Verdict("nic", nic, BAD, reason + why, ids)
    elif star:
        inf.bad_nics[nic] = Verdict("nic", nic, BAD, f"{reason}; {star}", ids)
    else:
        inf.nic_suspects[nic] = Verdict("nic", nic, SUSPECT, reason + "; needs confirmation", ids)


def rejudge(nic: str, own: list[Observation], inf: Inference,
            judge: Callable[[str, list[Observation]], None], why: str) -> None:
    """A NIC found bad judged again on ``own``, its failures that nothing else explains
    (``why`` says what explains the rest); a suspect when they do not convict it alone."""
    v = inf.bad_nics.pop(nic)
    if own:
        judge(nic, own)
    if nic not in inf.bad_nics:
        inf.nic_suspects[nic] = Verdict(
            "nic", nic, SUSPECT,
            f"{v.reason}; {why}, and the rest do not convict it alone: needs confirmation",
            v.evidence)
