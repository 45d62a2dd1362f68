"""Link localization by boolean tomography (007 / NetBouncer style).

Each failing observation that no node or NIC explains implicates the links on its paths that no
passing observation exonerated. The fewest links that explain every such failure are chosen
greedily; links that explain exactly the same failures cannot be told apart and are reported
together as one candidate set. On InfiniBand (known routes) a set usually shrinks to one link;
on RoCE (ECMP) the set is what the data supports, and its size is said, not guessed away.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from fabriccheck.models import LinkKey, Observation


@dataclass(frozen=True)
class LinkGroup:
    """Links that explain the same failing observations.

    ``bad`` when it is a single link and at least two localization probes from two fresh node
    pairs (not retests) failed across it: independent confirmation, so two unrelated glitches
    that happen to share a link (hundreds of glitches per round at 4,096 nodes) never convict it.
    On InfiniBand each such probe must have that link as the only uncleared link on its path
    (so a bad link next to it that the probes also crossed does not convict it); on RoCE those
    probes must have been aimed at the link (``params.probe_of``, pinned onto it by a learned
    path).
    """

    candidates: tuple[LinkKey, ...]
    evidence: tuple[str, ...]
    flows: tuple[tuple[str, str], ...]
    values: tuple[str, ...]
    bad: bool
    #: False when noise (the run's glitch rate) explains this many failures among the flows
    #: that could have crossed the candidates: kept as an unconfirmed failure, not a suspect
    significant: bool = True
    #: other uncleared links on these failures' paths (explain some, not all): a probe that
    #: pins a candidate must avoid them too
    rivals: tuple[LinkKey, ...] = ()

    @property
    def summary(self) -> str:
        """The candidate set in words, with its size (see :func:`describe_links`)."""
        return describe_links(self.candidates)

    def to_json(self) -> dict:
        return {
            "candidates": [list(k) for k in self.candidates],
            "size": len(self.candidates),
            "summary": self.summary,
            "evidence": list(self.evidence),
            "flows": [list(f) for f in self.flows],
            "values": list(self.values),
            "confirmed": self.bad,
            "beyond_noise": self.significant,
        }


def describe_links(cands: Sequence[LinkKey]) -> str:
    """Say what a candidate set is, with its size, instead of guessing one link.

    >>> describe_links([("leaf-1-2", f"spine-{i}") for i in range(8)])
    "one of leaf-1-2's 8 links"
    >>> describe_links([(f"leaf-{j}-2", f"spine-{i}") for j in (0, 1) for i in range(8)])
    'one of 16 links: 8 of leaf-0-2, 8 of leaf-1-2'
    """
    if len(cands) == 1:
        return f"{cands[0][0]} -- {cands[0][1]}"
    count: dict[str, int] = defaultdict(int)
    for a, b in cands:
        count[a] += 1
        count[b] += 1
    common = [sw for sw, n in count.items() if n == len(cands)]
    if common:
        return f"one of {sorted(common)[0]}'s {len(cands)} links"
    top = sorted(count, key=lambda sw: (-count[sw], sw))[:2]
    if len(top) == 2 and all(a in top or b in top for a, b in cands):
        return (f"one of {len(cands)} links: {count[top[0]]} of {top[0]}, "
                f"{count[top[1]]} of {top[1]}")
    return f"one of {len(cands)} links"


def localize_links(
    link_obs: Sequence[tuple[Observation, Sequence[LinkKey]]], *, ib: bool,
    min_probe_pairs: int = 2, specific_max: int = 4,
    cleared: frozenset[LinkKey] | None = None,
) -> list[LinkGroup]:
    """Group failing observations by the links that could explain them.

    Parameters
    ----------
    link_obs
        ``(observation, candidate links)`` for every failure left to the links: the links on
        its path(s) that no passing observation exonerated.
    ib
        True on InfiniBand (a single-link answer can be called bad); False on RoCE, where only a
        candidate set of one link with two independent failures is called bad.
    min_probe_pairs
        Failing localization probes (distinct fresh node pairs) a single link needs to be bad.
    specific_max
        RoCE: failures with at most this many candidate links (a learned path) are grouped
        first; the others only form groups of their own when no chosen set explains them.
    cleared
        Links a passing observation of the run crossed. A switch none of whose links is cleared
        may be dead: see :func:`_switch_pass` (None: not known, the strict rule only).

    Returns
    -------
    list of LinkGroup
        Most-supported first.

    Examples
    --------
    >>> from fabriccheck.models import Test, Flow, Observation
    >>> def obs(i, a, b, purpose="sweep"):
    ...     t = Test(f"t{i}", "ib_write_bw", (a, b), (Flow(a + "/m0", b + "/m0"),), purpose=purpose)
    ...     return Observation(t, "fail", value=196.0, unit="Gb/s")
    >>> L = ("leaf-0", "spine-1")
    >>> seen = [(obs(1, "n1", "n5"), [L, ("leaf-1", "spine-1")]),
    ...         (obs(2, "n2", "n6", "localize"), [L])]
    >>> groups = localize_links(seen, ib=True)
    >>> groups[0].candidates, groups[0].bad
    ((('leaf-0', 'spine-1'),), False)
    >>> localize_links([*seen, (obs(3, "n7", "n3", "localize"), [L])], ib=True)[0].bad
    True
    """
    covers = _covers(link_obs)
    specific, vague = _by_specificity(link_obs, ib, specific_max)
    out: list[LinkGroup] = []
    chosen: set[LinkKey] = set()
    for left in (specific, vague):
        if left is vague:
            left = {i for i in left if not chosen & set(link_obs[i][1])} if specific else left
        out += _greedy_groups(link_obs, covers, left, chosen, ib, min_probe_pairs, cleared)
    return out


def _covers(link_obs: Sequence[tuple[Observation, Sequence[LinkKey]]]
            ) -> dict[LinkKey, set[int]]:
    """Per candidate link the failures (indices into ``link_obs``) it could explain."""
    covers: dict[LinkKey, set[int]] = defaultdict(set)
    for i, (_, links) in enumerate(link_obs):
        for lk in links:
            covers[lk].add(i)
    return covers


def _by_specificity(link_obs: Sequence[tuple[Observation, Sequence[LinkKey]]], ib: bool,
                    specific_max: int) -> tuple[set[int], set[int]]:
    """The failures (indices into ``link_obs``) to explain first and those to explain after.

    Specific failures (a known path: a route, a learned ECMP path) are explained first; a
    failure with many candidates (an unlearned ECMP flow) that a chosen set already explains
    is left there, so it cannot narrow a set the specific failures could not split (RoCE
    only: on InfiniBand every failure has its routes, and one pass is the rule). Returns the
    specific failures (at least one and at most ``specific_max`` candidate links; any number
    on InfiniBand) and the vague ones (more); a failure without candidates is in neither.
    """
    bound = float("inf") if ib else specific_max
    specific = {i for i, (_, links) in enumerate(link_obs) if 0 < len(links) <= bound}
    vague = {i for i, (_, links) in enumerate(link_obs) if len(links) > bound}
    return specific, vague


def _greedy_groups(
    link_obs: Sequence[tuple[Observation, Sequence[LinkKey]]], covers: dict[LinkKey, set[int]],
    left: set[int], chosen: set[LinkKey], ib: bool, min_probe_pairs: int,
    cleared: frozenset[LinkKey] | None = None,
) -> list[LinkGroup]:
    """Greedy groups over the failures ``left`` (see :func:`localize_links`); adds the chosen
    candidates to ``chosen``."""
    covers = {lk: s & left for lk, s in covers.items() if s & left}
    out: list[LinkGroup] = []
    gots: list[set[int]] = []
    while left:
        best = max(covers, key=lambda k: (len(covers[k] & left), k))
        got = covers[best] & left
        if not got:
            break
        cands = tuple(sorted(lk for lk, s in covers.items() if got <= s))
        chosen.update(cands)
        obs = [link_obs[i][0] for i in sorted(got)]
        pairs = {frozenset(o.test.nodes) for o in obs}
        # IB: a probe pins a link only when that link is the one uncleared link on its path
        # (a probe that also crossed another uncleared link may have failed there); RoCE: the
        # probe was aimed at the link through a learned path
        probes = {frozenset(link_obs[i][0].test.nodes) for i in got
                  if link_obs[i][0].test.purpose == "localize"
                  and not link_obs[i][0].test.params.retest_of
                  and (len(set(link_obs[i][1])) == 1 if ib
                       else _aimed_at(link_obs[i][0], cands))}
        rivals = tuple(sorted({lk for i in got for lk in link_obs[i][1]} - set(cands)))
        single = len(cands) == 1
        bad = single and len(probes) >= min_probe_pairs and len(pairs) >= min_probe_pairs
        out.append(LinkGroup(
            candidates=cands,
            evidence=tuple(o.test.test_id for o in obs),
            flows=tuple((f.src, f.dst) for o in obs for f in o.test.flows[:1]),
            values=tuple("" if o.value is None else f"{o.value:.1f} {o.unit}" for o in obs),
            bad=bad and (ib or single),
            rivals=rivals,
        ))
        gots.append(got)
        left -= got
    return _switch_pass(out, gots, link_obs, min_probe_pairs, cleared=cleared, ib=ib)


def _switch_pass(groups: list[LinkGroup], gots: list[set[int]],
                 link_obs: Sequence[tuple[Observation, Sequence[LinkKey]]],
                 min_probe_pairs: int, min_links: int = 3,
                 cleared: frozenset[LinkKey] | None = None, ib: bool = True
                 ) -> list[LinkGroup]:
    """A dead switch: every probe across one of its links also crosses another of its links,
    both uncleared, so no probe pins a single link. When ``min_links`` or more single-link
    groups meet at one switch, a probe counts for its link if every uncleared link on its path
    touches that switch (the switch explains it); such links are bad together and become one
    switch verdict (``inference.verdicts``). Fewer links at a switch keep the strict rule.

    When no link of the switch is ``cleared`` (no test that crossed the switch passed), the
    switch is one hypothesis: the probes it explains are pooled (greedy grouping hands a probe
    across two of its links to one of them only, so each link alone may lack probes), and each
    of its groups that such a failure supports is bad with it. A switch with two bad cables
    and healthy others does not qualify: tests across its healthy links pass and clear them.
    This holds on RoCE too (a flow's learned path, or the ECMP links no passing test
    cleared); the strict rule above is InfiniBand's (RoCE links need aimed probes).

    >>> from fabriccheck.models import Test, Flow, Observation
    >>> def obs(i, a, b, links):
    ...     t = Test(f"t{i}", "ib_write_bw", (a, b), (Flow(a + "/m0", b + "/m0"),),
    ...              purpose="localize")
    ...     return Observation(t, "fail", value=0.0, unit="Gb/s"), links
    >>> A, B, C = ("leaf-0", "spine-9"), ("leaf-1", "spine-9"), ("leaf-2", "spine-9")
    >>> seen = [obs(1, "n1", "n3", [A, B]), obs(2, "n2", "n4", [A, B]),
    ...         obs(3, "n5", "n3", [B, C]), obs(4, "n6", "n4", [B, C]), obs(5, "n7", "n1", [C, A])]
    >>> [(len(g.candidates), g.bad) for g in localize_links(seen, ib=True)]  # nothing pins B
    [(1, False), (2, False)]
    >>> [(len(g.candidates), g.bad) for g in localize_links(seen, ib=True, cleared=frozenset())]
    [(1, True), (2, False)]
    >>> [g.bad for g in localize_links(seen, ib=True, cleared=frozenset({("leaf-3", "spine-9")}))]
    [False, False]
    """
    at: dict[str, list[int]] = defaultdict(list)
    for k, g in enumerate(groups):
        if len(g.candidates) == 1 and not g.bad:
            for sw in g.candidates[0]:
                at[sw].append(k)
    single_at: dict[str, int] = defaultdict(int)
    for g in groups:
        if len(g.candidates) == 1:
            for sw in g.candidates[0]:
                single_at[sw] += 1
    dark = None if cleared is None else {sw for ks in at.values() for k in ks
                                         for sw in groups[k].candidates[0]} - {
        sw for lk in cleared for sw in lk}
    out = list(groups)
    for sw, ks in at.items():
        if dark is not None and sw in dark:
            out = _dead_switch(out, gots, link_obs, sw, ks, min_probe_pairs, min_links)
            continue
        if not ib or single_at[sw] < min_links:
            continue
        for k in ks:
            if len(_switch_probes(gots[k], link_obs, sw)) >= min_probe_pairs:
                out[k] = replace(out[k], bad=True)
    return out


def _switch_probes(failures: set[int], link_obs: Sequence[tuple[Observation, Sequence[LinkKey]]],
                   sw: str) -> set[frozenset[str]]:
    """Fresh localization probes among ``failures`` whose uncleared links all touch ``sw``."""
    return {frozenset(link_obs[i][0].test.nodes) for i in failures
            if link_obs[i][0].test.purpose == "localize"
            and not link_obs[i][0].test.params.retest_of
            and all(sw in lk for lk in link_obs[i][1])}


def _dead_switch(groups: list[LinkGroup], gots: list[set[int]],
                 link_obs: Sequence[tuple[Observation, Sequence[LinkKey]]], sw: str,
                 ks: list[int], min_probe_pairs: int, min_links: int = 3) -> list[LinkGroup]:
    """``sw`` had no passing test: its single-link groups are bad together when the failures
    it alone explains touch ``min_links`` of its links and come from ``min_probe_pairs`` fresh
    probe pairs; each group needs one such failure of its own."""
    everything = set().union(*(gots[k] for k in ks))
    mine = {i for i in everything if all(sw in lk for lk in link_obs[i][1])}
    touched = {lk for i in mine for lk in link_obs[i][1]}
    if len(touched) < min_links or len(_switch_probes(mine, link_obs, sw)) < min_probe_pairs:
        return groups
    out = list(groups)
    for k in ks:
        if gots[k] & mine:
            out[k] = replace(out[k], bad=True)
    return out


def _aimed_at(o: Observation, cands: Sequence[LinkKey]) -> bool:
    """RoCE: a localization flow aimed at the (single) candidate link (``params.probe_of``), so
    its learned path was chosen to cross it; random batch flows that happened to cross it are
    evidence to aim at, not to convict on (glitches on two of hundreds of sampled flows meet)."""
    aim = o.test.params.probe_of
    return len(cands) == 1 and aim is not None and aim in (
        f"{cands[0][0]} -- {cands[0][1]}", f"{cands[0][1]} -- {cands[0][0]}")
