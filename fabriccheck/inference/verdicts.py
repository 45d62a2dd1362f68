"""From an :class:`Inference` to the run result: verdicts per node, NIC and link, drain list."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from fabriccheck.inference.cables import cables
from fabriccheck.inference.link_cover import ladder_tests_links, untested_links
from fabriccheck.inference.link_screen import noise_warning, screen_summary
from fabriccheck.inference.localize import LinkGroup
from fabriccheck.inference.state import Inference
from fabriccheck.inference.wording import link_name
from fabriccheck.models import (
    BAD,
    FAIL,
    HEALTHY,
    PASS,
    SUSPECT,
    UNTESTED,
    LinkKey,
    RunResult,
    Test,
    Verdict,
    nic_node,
)
from fabriccheck.policy import SweepPolicy
from fabriccheck.run_history import RunHistory
from fabriccheck.topology.model import Topology
from fabriccheck.topology.view import FabricView


@dataclass(frozen=True)
class RunEnd:
    """How the loop ended, and what only the loop knows: when each verdict was reached and
    which nodes bisection convicted (node -> the chain of test ids)."""

    stop_reason: str = ""
    budget_hit: bool = False
    verdict_rounds: Mapping[str, int] = field(default_factory=dict)
    scale_culprits: Mapping[str, list[str]] = field(default_factory=dict)
    #: nodes that failed every 4x/8x group they were in, not settled by bisection (their
    #: lone failing part crossed spines): open suspects
    scale_suspects: tuple[str, ...] = ()


def build_result(
    mode: str, nodes: list[str], history: RunHistory, inf: Inference, view: FabricView,
    policy: SweepPolicy, end: RunEnd,
) -> RunResult:
    """Assemble the :class:`RunResult` (the ``--json`` contract) of a finished run: whom it
    blames (:func:`_blame`), every part's verdict (:func:`_verdicts`), what was left untested,
    and the rest of ``extra`` (:func:`_extra`, :func:`_verdict_extra`)."""
    b = _blame(history, inf, view, end)
    by_kind = _partnerless_only(history)
    untested_nics = _untested_nics(nodes, view, inf, b.bad_nics, b.out_of_play)
    switches = _switch_verdicts([g for g in inf.links if g.bad], topology=view.topology,
                                fabric_links=view.switch_links)
    in_switch = {lk for v in switches for lk in v.evidence_links}
    verdicts = _verdicts(nodes, inf, view, b, by_kind, untested_nics, switches, in_switch)
    untested = [v.name for v in verdicts if v.kind == "node" and v.state == UNTESTED]
    untested += untested_nics
    links_left = (untested_links(view, history.observations, [n for n in nodes
                                 if n not in b.out_of_play], seed=policy.seed)
                  if mode == "sweep" and ladder_tests_links(policy.levels) else [])
    untested += [f"link {link_name(k)}" for k in links_left]
    extra = _extra(history, inf, view, policy, end, untested)
    extra["link_coverage"]["untested_links"] = [list(k) for k in links_left]
    extra.update(_verdict_extra(inf, end, b, by_kind, verdicts, switches, in_switch,
                                view.topology))
    return RunResult(
        mode=mode,
        nodes=list(nodes),
        rounds=history.round_count,
        tests=history.tests,
        test_seconds=history.test_seconds,
        bad_nodes=sorted(b.bad_nodes),
        bad_nics=sorted(b.bad_nics),
        bad_links=[g.candidates[0] for g in inf.links if g.bad],
        link_suspects=[g.to_json() for g in inf.links if _reported(g) and not g.bad],
        unreachable=sorted(inf.unreachable),
        hung=sorted(inf.hung),
        suspects=b.suspects,
        drain=sorted(b.drain),
        fabric_warnings=list(dict.fromkeys([*history.warnings, *noise_warning(
            inf.flakiness.links, inf.flakiness.link_rate)])),
        verdicts=verdicts,
        observations=list(history.observations),
        extra=extra,
    )


@dataclass(frozen=True)
class _Blame:
    """Whom a finished run blames: what it drains and what stays open."""

    bad_nodes: dict[str, Verdict]  # the inference's, and bisection's at-scale culprits
    bad_nics: dict[str, Verdict]
    drain: set[str]
    out_of_play: set[str]  # drained or unreachable
    #: at-scale culprits not convicted (a uniformly slow fabric) and open at-scale suspects
    scale_open: dict[str, Verdict]
    undecided: dict[str, Verdict]  # intermittence rechecks without a verdict
    suspects: list[str]


def _blame(history: RunHistory, inf: Inference, view: FabricView, end: RunEnd) -> _Blame:
    """The run's bad parts, drain list and open suspects: the inference's, bisection's culprits
    (suspects only on a uniformly slow fabric) and at-scale suspects, undecided rechecks."""
    slow_fabric = bool(history.warnings)  # uniformly slow: at-scale tests sit at the floor
    scale_bad = _scale_bad(end, inf)
    scale_open = {} if not slow_fabric else {
        n: replace(v, state=SUSPECT, reason=v.reason + "; not convicted: the fabric is "
                   "uniformly slow (see fabric_warnings), so its groups' tests sit at the floor "
                   "and a bisection half passing or failing is noise")
        for n, v in scale_bad.items()}
    bad_nodes = {**inf.bad_nodes, **({} if slow_fabric else scale_bad)}
    bad_nics = _bad_nics(bad_nodes, inf, view)
    drain = set(bad_nodes) | {nic_node(n) for n in bad_nics} | set(inf.hung)
    scale_open.update({n: Verdict("node", n, SUSPECT, "failed every 4x/8x group it was in; "
                                  "its bisection part crossed spines, so a link explains it as "
                                  "well: needs a test that stays on its leaves")
                       for n in end.scale_suspects
                       if n not in drain and n not in inf.blamed_nodes and n not in scale_open})
    undecided = {k: v for k, v in inf.flakiness.unresolved().items()
                 if v.kind == "link" or nic_node(k) not in drain}
    suspects = sorted(
        (set(inf.node_suspects) | set(inf.hang_suspects) | set(inf.nic_suspects)
         | set(inf.intra_suspects) | set(scale_open))
        - drain - {n for n in inf.nic_suspects if nic_node(n) in drain}
        | set(undecided)
    )
    return _Blame(bad_nodes, bad_nics, drain, drain | set(inf.unreachable), scale_open,
                  undecided, suspects)


def _verdicts(nodes: list[str], inf: Inference, view: FabricView, b: _Blame,
              by_kind: Mapping[str, str], untested_nics: list[str], switches: list[_Switch],
              in_switch: set[LinkKey]) -> list[Verdict]:
    """Every verdict, in the result's order: each node, the bad NICs, the suspect NICs not
    drained, the untested NICs, the flaky and undecided parts, the switches, then the links
    no switch verdict stands for."""
    verdicts = [b.scale_open.get(n) or _node_verdict(n, b.bad_nodes, b.bad_nics, inf, by_kind)
                for n in nodes]
    verdicts += [b.bad_nics[k] for k in sorted(b.bad_nics)]
    verdicts += [v for k, v in sorted(inf.nic_suspects.items()) if nic_node(k) not in b.drain]
    verdicts += [Verdict("nic", x, UNTESTED, "no test of it completed with a result that "
                         "clears or blames it") for x in untested_nics]
    verdicts += [inf.flaky[k] for k in sorted(inf.flaky)]
    verdicts += [b.undecided[k] for k in sorted(b.undecided) if k not in inf.nic_suspects]
    verdicts += [sw.verdict for sw in switches]
    verdicts += [_link_verdict(g, view.topology) for g in inf.links
                 if _reported(g) and g.candidates[0] not in in_switch]
    return verdicts


def _verdict_extra(inf: Inference, end: RunEnd, b: _Blame, by_kind: Mapping[str, str],
                   verdicts: list[Verdict], switches: list[_Switch], in_switch: set[LinkKey],
                   topology: Topology) -> dict:
    """The result's ``extra`` entries that follow from its verdicts: when each was reached,
    the bad switches, the flaky parts, the intermittence rechecks, the NICs tested without a
    rail partner, possible contention and the cables to pull."""
    return {
        "verdict_rounds": reported_rounds(
            end.verdict_rounds, [*b.bad_nodes, *b.bad_nics, *inf.hung, *inf.unreachable],
            [link_name(g.candidates[0]) for g in inf.links
             if g.bad and g.candidates[0] not in in_switch],
            {sw.verdict.name: [link_name(k) for k in sw.evidence_links] for sw in switches}),
        "bad_switches": [sw.verdict.name for sw in switches],
        "flaky": sorted(inf.flaky),
        "recheck": {"cleared": dict(sorted(inf.flakiness.cleared.items())),
                    "undecided": sorted(b.undecided),
                    "pending": sorted(set(inf.flakiness.recheck_nics) - set(b.undecided))},
        "tested_without_rail_partner": dict(sorted(by_kind.items())),
        # RoCE: failing tests that ECMP contention may explain (the report's "contention" cells)
        "contention": sorted(inf.ambiguous),
        # the links of link and switch verdicts with their ports: which cable to pull
        "cables": cables(verdicts, {sw.verdict.name: sw.evidence_links for sw in switches},
                         topology),
    }


def reported_rounds(first: Mapping[str, int], devices: Sequence[str], links: Sequence[str],
                    switches: Mapping[str, Sequence[str]], min_links: int = 3
                    ) -> dict[str, int]:
    """The round in which each verdict the result reports was first reached.

    ``first`` is what the loop saw round by round (the first round each node, NIC or link was
    bad, hung or unreachable); a verdict the run later withdrew (a bisection culprit left a
    suspect on a uniformly slow fabric) is not reported, so it has no round. A switch verdict
    stands for its links: it was reached in the round the loop first saw it (``first[switch]``,
    :func:`bad_switches`), else in the round its ``min_links``-th link turned bad
    (:func:`_switch_verdicts`), however long the rest of its links took.

    >>> reported_rounds({"n1": 2, "n9": 7, "a -- s": 3, "b -- s": 4, "c -- s": 9},
    ...                 ["n1"], [], {"s": ["a -- s", "b -- s", "c -- s"]})
    {'n1': 2, 's': 9}
    >>> reported_rounds({"a -- s": 3, "b -- s": 4, "c -- s": 4, "d -- s": 9}, [], [],
    ...                 {"s": ["a -- s", "b -- s", "c -- s", "d -- s"]})
    {'s': 4}
    >>> reported_rounds({"s": 3, "c -- s": 6, "d -- s": 6}, [], [], {"s": ["c -- s", "d -- s"]})
    {'s': 3}
    """
    out = {k: first[k] for k in (*devices, *links) if k in first}
    for sw, members in switches.items():
        seen = sorted(first[k] for k in members if k in first)
        if sw in first:  # the loop saw the switch verdict itself
            out[sw] = first[sw]
        elif seen:
            out[sw] = seen[min(min_links, len(seen)) - 1]
    return dict(sorted(out.items()))


def _untested_nics(nodes: list[str], view: FabricView, inf: Inference,
                   bad_nics: dict[str, Verdict], out_of_play: set[str]) -> list[str]:
    """NICs of nodes still in play that no test cleared (passed) or blamed."""
    judged = inf.good_nics | set(bad_nics) | set(inf.nic_suspects)
    return [nic.endpoint for n in nodes if n not in out_of_play
            for nic in view.topology.nodes[n].nics if nic.endpoint not in judged]


@dataclass(frozen=True)
class _Switch:
    verdict: Verdict
    evidence_links: tuple


def bad_switches(inf: Inference, view: FabricView) -> list[str]:
    """The switches the run's link verdicts so far make one switch verdict each."""
    return [sw.verdict.name for sw in _switch_verdicts(
        [g for g in inf.links if g.bad], fabric_links=view.switch_links)]


def _switch_verdicts(bad_links: list[LinkGroup], min_links: int = 3,
                     topology: Topology | None = None,
                     fabric_links: Iterable[LinkKey] = ()) -> list[_Switch]:
    """A switch whose confirmed bad links are ``min_links`` or more, or every one of its
    switch links (two or more: a leaf with two uplinks, both bad): one switch verdict with
    its links as evidence, instead of many link verdicts (a dead spine is one part).
    ``fabric_links``: every switch-to-switch link of the fabric (``FabricView.switch_links``)."""
    by_switch: dict[str, list[LinkGroup]] = {}
    for g in bad_links:
        for sw in g.candidates[0]:
            by_switch.setdefault(sw, []).append(g)
    of_switch = Counter(e for key in fabric_links for e in key)  # switch -> its links
    out = []
    for sw, groups in sorted(by_switch.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        links = tuple(g.candidates[0] for g in groups)
        every = len(groups) >= 2 and len(groups) == of_switch[sw]
        if ((len(groups) < min_links and not every)
                or any(lk in s.evidence_links for s in out for lk in links)):
            continue
        ids = tuple(t for g in groups for t in g.evidence)
        why = (f"{'all ' if every else ''}{len(groups)} of its links are bad "
               f"({', '.join(link_name(k) for k in links[:4])}"
               f"{' ...' if len(links) > 4 else ''}): the switch explains them together")
        ports = sorted({p for k in links for p in _ports_at(topology, k, sw)})
        if ports:
            why += f"; its ports {','.join(map(str, ports))}"
        out.append(_Switch(Verdict("switch", sw, BAD, why, ids), links))
    return out


def _scale_bad(end: RunEnd, inf: Inference) -> dict[str, Verdict]:
    return {
        n: Verdict("node", n, BAD,
                   "fails only at scale: every group it was in failed, the other halves passed "
                   f"(bisection {' -> '.join(ids)})", tuple(ids))
        for n, ids in end.scale_culprits.items() if n not in inf.bad_nodes
    }


def _bad_nics(bad_nodes: dict[str, Verdict], inf: Inference, view: FabricView
              ) -> dict[str, Verdict]:
    out = dict(inf.bad_nics)
    for n, v in inf.bad_nodes.items():
        nics = view.topology.nodes[n].nics
        if len(nics) == 1:  # one NIC: the node and its NIC cannot be told apart; name both
            e = nics[0].endpoint
            out.setdefault(e, Verdict("nic", e, BAD, "single-NIC node, NIC and node cannot "
                                      "be told apart: " + v.reason, v.evidence))
    return out


def pair_test_kind(test: Test) -> str:
    """``"loopback"``, ``"same-node"``, ``"cross-rail"`` or ``"rail"`` for a pair test (the
    first three are what ``planning.partnerless`` plans for a NIC with no rail partner).

    >>> from fabriccheck.models import Flow, Test
    >>> pair_test_kind(Test("t", "ib_write_bw", ("a",), (Flow("a/x", "a/x"),)))
    'loopback'
    """
    if len(test.flows) != 1:
        return "rail"
    f = test.flows[0]
    if f.src == f.dst:
        return "loopback"
    if nic_node(f.src) == nic_node(f.dst):
        return "same-node"
    return "cross-rail" if len(test.params.get("rails") or ()) > 1 else "rail"


def _partnerless_only(history: RunHistory) -> dict[str, str]:
    """NIC -> how it was tested, for NICs whose every passing test had no same-rail partner:
    ``loopback`` (HCA loopback: its own path, not its cable), ``same-node`` (to another NIC of
    its node through the switch) or ``cross-rail`` (see ``planning.partnerless``)."""
    kinds: dict[str, set[str]] = {}
    for o in history.observations:
        if o.status == PASS and o.test.group_size <= 2 and len(o.test.flows) == 1:
            kind = pair_test_kind(o.test)
            for nic in o.test.nics:
                kinds.setdefault(nic, set()).add(kind)
    order = ("cross-rail", "same-node", "loopback")  # the strongest test it had
    return {nic: next(k for k in order if k in ks) for nic, ks in kinds.items()
            if "rail" not in ks}


def _node_verdict(n: str, bad_nodes: dict[str, Verdict], bad_nics: dict[str, Verdict],
                  inf: Inference, by_kind: Mapping[str, str]) -> Verdict:
    v = (bad_nodes.get(n) or inf.hung.get(n) or inf.unreachable.get(n)
         or inf.node_suspects.get(n) or inf.hang_suspects.get(n) or inf.intra_suspects.get(n))
    if v is not None:
        return v
    state = HEALTHY if n in inf.completed else UNTESTED
    nic_bad = [x for x in bad_nics if nic_node(x) == n]
    reason = (f"drained for its bad NIC(s) {', '.join(nic_bad)}" if nic_bad
              else "passed its tests" if state == HEALTHY else "no test completed")
    lone = sorted(x for x in by_kind if nic_node(x) == n)
    if state == HEALTHY and lone and not nic_bad:
        reason += ("; no same-rail partner in scope for " + ", ".join(
            f"{x} (tested {_HOW[by_kind[x]]})" for x in lone))
    return Verdict("node", n, BAD if nic_bad else state, reason)


_HOW = {
    "cross-rail": "against a NIC of another rail",
    "same-node": "against another NIC of its node, through the switch",
    "loopback": "by HCA loopback: its own path, not its cable",
}


def _reported(g: LinkGroup) -> bool:
    """A bad link, or a candidate set with two or more failures that noise does not explain."""
    return g.bad or (len(g.evidence) >= 2 and g.significant)


def _ports_at(topology: Topology | None, key: LinkKey, end: str) -> tuple[int, ...]:
    link = topology.links.get(key) if topology is not None else None
    return link.port_at(end) if link is not None else ()


def _link_verdict(g: LinkGroup, topology: Topology | None = None) -> Verdict:
    """A bad link, or a candidate set with two or more failures (one unreproduced low flow is
    noise until seen again: ``extra.unconfirmed_link_failures``). With port numbers in the
    topology, a single link's reason names the cable: ``leaf-1 port 17 -- spine-0 port 3``."""
    state = BAD if g.bad else SUSPECT
    name = " | ".join(link_name(k) for k in g.candidates)
    why = (f"{len(g.evidence)} failing flow(s) not explained by any node or NIC "
           f"({', '.join(v for v in g.values[:3] if v)}); "
           + ("the only link on their routes not cleared by passing tests" if g.bad else
              f"{g.summary}: {len(g.candidates)} candidate link(s) explain them equally"))
    link = topology.links.get(g.candidates[0]) if topology is not None else None
    if len(g.candidates) == 1 and link is not None and (link.a_port or link.b_port):
        why += f"; cable: {link.describe()}"
    return Verdict("link", name, state, why, g.evidence,
                   g.candidates[0] if len(g.candidates) == 1 else None)


def _extra(history: RunHistory, inf: Inference, view: FabricView, policy: SweepPolicy,
           end: RunEnd, untested: list[str]) -> dict:
    return {
        "untested": untested,
        "glitches": sorted(inf.glitches),
        "unconfirmed_link_failures": [g.to_json() for g in inf.links if not _reported(g)],
        "stop_reason": end.stop_reason,
        "verdict_rounds": {},  # reported_rounds, filled by _verdict_extra
        "budget_exhausted": end.budget_hit,
        "fabric": view.fabric,
        # where IB routes came from: "lft" (forwarding tables), "d-mod-k" (the model); "ecmp"
        "routing": view.topology.routing,
        # switch links surely crossed by a test that ran to the end (pass or fail)
        "link_coverage": view.coverage(
            f for o in history.observations if o.status in (PASS, FAIL) for f in o.test.flows),
        "topology": view.topology.name,
        "seed": policy.seed,
        "pair_probe": policy.pair_probe,
        # the link screen (screened sweeps): counts, and links passed too few times to clear
        "link_screen": screen_summary(inf.flakiness.links, inf.flakiness.link_rate),
    }
