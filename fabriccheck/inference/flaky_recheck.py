"""Stage 2 of :mod:`fabriccheck.inference.flaky`: every rechecked part decided on its fresh
samples (flaky, cleared or undecided), with the rival parts weighed: the partner that failed
most, other links found flaky, partners found flaky, and a switch link most failures crossed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from fabriccheck.inference.flakiness import Flakiness, binomial_cdf, binomial_tail
from fabriccheck.models import (
    FAIL,
    Link,
    LinkKey,
    Observation,
    State,
    Verdict,
    link_key,
    nic_node,
)
from fabriccheck.topology.view import FabricView


def decide_rechecked(fl: Flakiness, samples: dict[str, list[Observation]], alpha: float,
                     beta: float, q_min: float, noise_floor: float = 0.02,
                     view: FabricView | None = None, done: Sequence[Observation] = ()) -> None:
    """Stage 2: decide every rechecked part on its fresh samples only (see
    :mod:`fabriccheck.inference.flaky`). The
    samples are short tests, noisier than the sweep's: their glitch rate is taken as at
    least ``noise_floor``. The samples with the partner that failed most are set aside
    (:func:`worst_partner_aside`) when they failed beyond noise: an intermittent partner, or a
    flapping link on the way to it, must not make the part look intermittent (that partner's
    NIC is rechecked next). A part is flaky only on failures with two partners at least.

    Links are decided first, and weighed against each other (InfiniBand routes): a link is
    flaky only on samples that cross no other link found flaky (a probe across a healthy link
    that also crossed the flapping one fails as often, :func:`_explain_away_links`); a NIC's
    samples whose route crosses a flaky link say nothing about the NIC, and a switch link
    that most of a NIC's failing samples crossed competes with the NIC unless the run's other
    tests across it clear it (:class:`_LinkRival`)."""
    latest = {part: max(o.test.round for o in obs) for part, obs in samples.items()}
    in_round: dict[int, int] = defaultdict(int)  # Bonferroni: parts rechecked in each round
    for r in latest.values():
        in_round[r] += 1
    j = _Judge(fl, alpha, beta, q_min, max(noise_floor, fl.rate))
    fresh = {part: [o for o in obs if o.test.round == latest[part]]
             for part, obs in samples.items()}
    links = sorted(p for p in samples if " -- " in p)
    for part in links:
        fl.recheck_links = [lk for lk in fl.recheck_links if lk != _key(part)]
        j.decide(part, fresh[part], in_round[latest[part]], samples[part])
    if view is not None:
        _explain_away_links(j, links, fresh, samples, latest, in_round, view)
    nics = sorted(p for p in samples if " -- " not in p)
    judged: dict[str, list[Observation]] = {}
    rival = _LinkRival(view, done, q_min, beta) if view is not None else None
    for part in nics:
        fl.recheck_nics.pop(part, None)
        judged[part] = fresh[part] if view is None else _not_on_flaky_links(fresh[part], fl, view)
        m = in_round[latest[part]]
        j.decide(part, judged[part], m, samples[part])
        lk = (rival.of(part, judged[part], fl)
              if rival is not None and part in fl.flaky else None)
        if lk is None:
            continue
        # flaky, but most failures crossed a link nothing else has cleared: judged off it
        name = str(Link.of(*lk))
        why = (f"most of its failing recheck samples crossed link {name}, which the run's "
               f"other tests do not clear: that link explains them as well as this NIC (its "
               f"own samples decide the link; this NIC's samples off it did not)")
        judged[part] = [o for o in judged[part] if lk not in _crossed(o, rival.view)]
        j.redecide(part, judged[part], m, samples[part], why)
        if name not in samples and name not in fl.flaky and lk not in fl.recheck_links:
            fl.recheck_links.append(lk)  # the link's own samples decide it
        if part not in fl.flaky and part not in fl.cleared:
            fl.recheck_nics.pop(part, None)
            fl.undecided[part] = Verdict("nic", part, State.SUSPECT, why, (), None)
    _explain_away_nics(j, nics, judged, samples, latest, in_round)
    _pooled_partners(j, {p: fresh[p] for p in nics})
    # the partner that failed a part's samples beyond noise is the next one to recheck
    for nic, k in sorted(j.suspects.items()):
        if nic not in samples and nic not in fl.flaky:
            fl.recheck_nics[nic] = fl.recheck_nics.get(nic, 0) + k


def _pooled_partners(j: _Judge, fresh: dict[str, list[Observation]]) -> None:
    """A partner NIC whose samples with *several* rechecked NICs fail beyond noise, pooled:
    the NICs it was sampling were cleared (or left undecided) on the rest of their samples,
    each failing a few times with it, too few for any one of them to set it aside (a NIC
    failing one test in three spoils a part's one block of samples, 3 of 16). Pooled over the
    parts, its failures are no glitch: it is a suspect (listed, never a silent pass) and the
    next NIC to recheck. Samples of parts found flaky do not count (they failed for the
    part); Bonferroni over the partners seen."""
    fl = j.fl
    by: dict[str, list[tuple[str, Observation]]] = defaultdict(list)
    for part, obs in fresh.items():
        if part in fl.flaky:
            continue
        for o in obs:
            for x in set(o.test.nics) - {part}:
                by[x].append((part, o))
    m = max(1, len(by))
    for x, got in sorted(by.items()):
        if x in fresh or x in fl.flaky:
            continue
        fails = [(part, o) for part, o in got if o.status == FAIL]
        with_parts = {part for part, _ in fails}
        p = binomial_tail(len(fails), len(got), j.rate)
        if len(fails) < 2 or len(with_parts) < 2 or p >= j.alpha / m:
            continue
        why = (f"failed {len(fails)} of {len(got)} recheck samples of {len(with_parts)} other "
               f"NICs as their partner ({', '.join(sorted(with_parts))}); noise at a glitch "
               f"rate of {100 * j.rate:.1f}% explains that with p={p:.1g} (Bonferroni over "
               f"{m} partners): needs its own recheck")
        fl.undecided[x] = Verdict("nic", x, State.SUSPECT, why,
                                  tuple(o.test.test_id for _, o in fails), None)
        j.suspects[x] = j.suspects.get(x, 0) + len(fails)


def _key(part: str) -> Link:
    return link_key(*part.split(" -- ", 1))


def _crossed(o: Observation, view: FabricView) -> set[LinkKey]:
    """The switch links a test surely crossed (the routes of its flows)."""
    return {lk for f in o.test.flows for lk in view.flow_links(f)[0]}


def _explain_away_nics(j: _Judge, nics: Sequence[str], judged: dict[str, list[Observation]],
                       samples: dict[str, list[Observation]], latest: dict[str, int],
                       in_round: dict[int, int]) -> None:
    """A NIC found flaky is re-decided on its samples with partners not found flaky
    themselves: a NIC sampled against an intermittent one fails with it, and that says
    nothing about the NIC (a new proven-good partner would)."""
    fl = j.fl
    found = {p for p in nics if p in fl.flaky}
    if len(found) < 2:
        return
    for part in sorted(found):
        others = found - {part}
        obs = [o for o in judged[part] if not set(o.test.nics) & others]
        if len(obs) == len(judged[part]):
            continue
        j.redecide(part, obs, in_round[latest[part]], samples[part],
                   "every recheck sample was with a partner found flaky itself: they cannot "
                   "tell the two apart")


def _explain_away_links(j: _Judge, links: Sequence[str], fresh: dict[str, list[Observation]],
                        samples: dict[str, list[Observation]], latest: dict[str, int],
                        in_round: dict[int, int], view: FabricView) -> None:
    """Weigh the flaky links against each other. First each link found flaky is re-decided
    on its independent samples, those crossing no other link found flaky (this recheck's or
    the screen's): one that is still flaky is accepted, one that has none is undecided (two
    links every probe crosses together cannot be told apart: both stay suspects). Then every
    other rechecked link is re-decided on its samples that avoid the accepted links (a probe
    across a healthy link that also crossed the flapping one failed as often)."""
    fl = j.fl
    mine = {_key(p) for p in links}
    accepted = {v.link for v in fl.flaky.values()
                if v.kind == "link" and v.link is not None and v.link not in mine}
    found = [p for p in links if p in fl.flaky]
    if not accepted and len(found) < 2:
        return
    flaky = accepted | {_key(p) for p in found}

    def redo(part: str, avoid: set[LinkKey]) -> None:
        key = _key(part)
        obs = [o for o in fresh[part] if not _crossed(o, view) & (avoid - {key})]
        if len(obs) == len(fresh[part]):
            return
        fl.recheck_links = [lk for lk in fl.recheck_links if lk != key]
        j.redecide(part, obs, in_round[latest[part]], samples[part],
                   "every recheck sample across it also crossed another link that failed "
                   "them: the two cannot be told apart by these probes")

    for part in found:
        redo(part, flaky)
    accepted |= {_key(p) for p in found if p in fl.flaky}
    for part in links:
        if _key(part) not in accepted:
            redo(part, accepted)


class _LinkRival:
    """The competing link hypothesis for a NIC's failing samples (InfiniBand routes): the
    switch link most of them crossed (two at least), unless the run's other finished tests
    across it clear it the way a recheck clears a part (a link failing one test in three
    would have failed more of them: ``P(X <= f | n, q_min) < beta``) or its own recheck did."""

    def __init__(self, view: FabricView, done: Sequence[Observation], q_min: float,
                 beta: float) -> None:
        self.view, self.done, self.q_min, self.beta = view, done, q_min, beta
        self._index: dict[LinkKey, list[Observation]] | None = None

    def of(self, part: str, obs: Sequence[Observation], fl: Flakiness) -> LinkKey | None:
        tally: dict[LinkKey, int] = defaultdict(int)
        for o in obs:
            if o.status == FAIL:
                for lk in _crossed(o, self.view):
                    tally[lk] += 1
        for _, lk in sorted(((-k, lk) for lk, k in tally.items() if k >= 2)):
            if str(Link.of(*lk)) in fl.cleared or self._cleared(lk, part):
                continue
            return lk
        return None

    def _cleared(self, lk: LinkKey, part: str) -> bool:
        if self._index is None:
            self._index = defaultdict(list)
            for o in self.done:
                for k in _crossed(o, self.view):
                    self._index[k].append(o)
        others = [o for o in self._index.get(lk, ()) if part not in o.test.nics]
        f = sum(o.status == FAIL for o in others)
        return bool(others) and binomial_cdf(f, len(others), self.q_min) < self.beta


class _Judge:
    """One part's decision on its samples: flaky, cleared or undecided (see
    :mod:`fabriccheck.inference.flaky`)."""

    def __init__(self, fl: Flakiness, alpha: float, beta: float, q_min: float,
                 rate: float) -> None:
        self.fl, self.alpha, self.beta, self.q_min, self.rate = fl, alpha, beta, q_min, rate
        self.suspects: dict[str, int] = {}  # partners whose samples failed beyond noise

    def redecide(self, part: str, obs: list[Observation], m: int,
                 every: Sequence[Observation], why_none: str) -> None:
        """Decide ``part`` again on a subset of its samples (what a rival part does not
        explain); none left: undecided, ``why_none`` says why."""
        for d in (self.fl.flaky, self.fl.undecided, self.fl.cleared):
            d.pop(part, None)
        if obs:
            self.decide(part, obs, m, every)
        else:
            key = _key(part) if " -- " in part else None
            self.fl.undecided[part] = Verdict("link" if key else "nic", part, State.SUSPECT,
                                              why_none, (), key)

    def decide(self, part: str, obs: list[Observation], m: int,
               every: Sequence[Observation]) -> None:
        """Decide ``part`` on ``obs`` (``m``: the parts rechecked in its round, for Bonferroni;
        ``every``: all its samples, over rounds): the partner that failed most set aside when
        it alone explains the failures (:meth:`_set_aside`), then flaky, cleared or undecided
        on the rest (:meth:`_conclude`)."""
        # a part undecided on its first samples got fresh ones: those alone decide
        again = len({o.test.round for o in every}) > 1
        if not obs:
            return
        if part in self.fl.flaky:
            # flaky at once on the screen's tests after its recheck had begun: the recheck's
            # samples (the test made to decide it) stand against a burst of glitches there
            f_all = sum(o.status == FAIL for o in obs)
            if binomial_cdf(f_all, len(obs), self.q_min) >= self.beta:
                return
            self.fl.flaky.pop(part)
        kept, aside, partners = self._set_aside(part, obs, m)
        self._conclude(part, obs, kept, aside, partners, m, again)

    def _set_aside(self, part: str, obs: list[Observation], m: int
                   ) -> tuple[list[Observation], list[Observation], int]:
        """``(kept, aside, number of partners)``: the samples with the partner that failed
        most set aside (:func:`worst_partner_aside`) only when they fail beyond noise and the
        rest do not; that partner's NICs are then the next to recheck (:attr:`suspects`)."""
        kept, aside, partners = worst_partner_aside(part, obs)
        f_aside = sum(o.status == FAIL for o in aside)
        f_kept = sum(o.status == FAIL for o in kept)
        if (f_aside >= 2 and binomial_tail(f_aside, len(aside), self.rate) < self.alpha / m
                and binomial_tail(f_kept, len(kept), self.rate) >= self.alpha
                and binomial_cdf(f_kept, len(kept), f_aside / len(aside)) < self.alpha):
            # the failures sit with one partner, the others' samples look like noise and
            # are too many to share that partner's failure rate (a few clean samples
            # beside a partner failing 1 in 3 are no evidence that the partner is at fault)
            for nic in {x for o in aside for x in o.test.nics} - {part}:
                self.suspects[nic] = self.suspects.get(nic, 0) + f_aside
            return kept, aside, partners
        # nothing to set aside: the failures are the part's, or noise
        return list(obs), [], partners

    def _conclude(self, part: str, obs: list[Observation], kept: list[Observation],
                  aside: list[Observation], partners: int, m: int, again: bool) -> None:
        """The verdict on ``kept`` (``obs`` less the samples ``aside``): flaky on failures
        beyond noise with two partners at least (any for a link), cleared when a part failing
        at ``q_min`` would have failed more, else undecided, with fresh samples asked for
        unless these were fresh already (``again``)."""
        fl, alpha, beta, rate = self.fl, self.alpha, self.beta, self.rate
        is_link = " -- " in part
        key = _key(part) if is_link else None
        fails = [o for o in kept if o.status == FAIL]
        n, f = len(kept), len(fails)
        owner = "" if is_link else nic_node(part)
        failing_with = {tuple(sorted(set(o.test.nodes) - {owner})) for o in fails}
        total_f = f + sum(o.status == FAIL for o in aside)
        p = binomial_tail(f, n, rate)
        counts = (f"failed {total_f} of {len(obs)} recheck samples "
                  f"({100 * total_f / len(obs):.0f}%) against {partners} proven-good partner"
                  f"{'s' if partners != 1 else ''}")
        if aside:
            counts += (f"; {f} of the {n} with partners other than the one that failed most "
                       f"({100 * f / n:.0f}%)")
        kind = "link" if is_link else "nic"
        ids = tuple(o.test.test_id for o in obs if o.status == FAIL)
        if f >= 2 and p < alpha / m and (len(failing_with) >= 2 or is_link):
            why = (f"{counts}; noise at a glitch rate of {100 * rate:.1f}% explains "
                   f"that with p={p:.1g} (Bonferroni over {m} parts rechecked)")
            fl.flaky[part] = Verdict(kind, part, State.FLAKY, why, ids, key)
        elif binomial_cdf(f, n, self.q_min) < beta:
            fl.cleared[part] = f"{total_f} of {len(obs)}"
        elif f >= 2 and p < alpha / m:
            why = (f"{counts}, all with one partner: that partner (or the path to it) "
                   f"explains them as well as this part does; a sample with another partner "
                   f"would decide")
            fl.undecided[part] = Verdict(kind, part, State.SUSPECT, why, ids, key)
            if not again and not is_link:  # a fresh batch, with other partners if any
                fl.recheck_nics[part] = f
        else:
            why = (f"{counts}: too many for noise to be sure (p={p:.1g}), too few to call it "
                   f"intermittent; more samples would decide")
            fl.undecided[part] = Verdict(kind, part, State.SUSPECT, why, ids, key)
            if not again and is_link:  # fresh samples, if a round is left for them
                fl.recheck_links.append(key)  # type: ignore[arg-type]
            elif not again:
                fl.recheck_nics[part] = f


def _not_on_flaky_links(obs: Sequence[Observation], fl: Flakiness, view: FabricView
                       ) -> list[Observation]:
    """The samples whose routes surely cross no link found flaky."""
    bad = {v.link for v in fl.flaky.values() if v.kind == "link" and v.link is not None}
    if not bad:
        return list(obs)
    return [o for o in obs if not _crossed(o, view) & bad]


def worst_partner_aside(part: str, obs: Sequence[Observation]
                        ) -> tuple[list[Observation], list[Observation], int]:
    """A part's recheck samples split into those judged and those set aside: the samples with
    the partner (for a link: the node pair) that failed most, when there are two partners or
    more and that one failed at all. Returns ``(kept, aside, number of partners)``.

    >>> from fabriccheck.models import FAIL, PASS, Flow, Test
    >>> def o(peer, status):
    ...     t = Test(f"{peer}{status}", "ib_write_bw", ("a", peer), (Flow("a/x", f"{peer}/x"),))
    ...     return Observation(t, status)
    >>> kept, aside, k = worst_partner_aside("a/x", [o("b", FAIL), o("b", FAIL), o("c", PASS)])
    >>> len(kept), len(aside), k
    (1, 2, 2)
    """
    owner = "" if " -- " in part else nic_node(part)
    by: dict[tuple[str, ...], list[Observation]] = defaultdict(list)
    for o in obs:
        by[tuple(sorted(set(o.test.nodes) - {owner}))].append(o)
    if len(by) < 2:
        return list(obs), [], len(by)
    worst = max(sorted(by), key=lambda k: sum(o.status == FAIL for o in by[k]))
    if not any(o.status == FAIL for o in by[worst]):
        return list(obs), [], len(by)
    return [o for k, v in by.items() if k != worst for o in v], by[worst], len(by)
