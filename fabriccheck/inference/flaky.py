"""Intermittent parts: a NIC, node or link that fails some tests and passes others, beyond noise.

Attribution trusts passes, so a part that passed once is cleared and its later failures look
like glitches. Here those "lonely" failures are counted per part: a failing test whose every
other node, NIC and (surely crossed) link passed elsewhere points at the part alone. Noise makes
such failures too, at the run's glitch rate ``g`` (the share of finished tests that failed with
nothing left to blame, at least ``min_rate``). Two stages:

1. **Screen** (the sweep's own tests). A part is flaky at once when its lonely failures in pair
   tests are too many for noise: the binomial tail ``P(X >= k | n tests, g)`` below ``alpha``
   divided by the number of parts tested (Bonferroni), with at least two lonely failures and
   two partners. Every other NIC with a lonely failure in a test of any size (collectives
   included), and IB link with two, is a candidate for the recheck.
2. **Recheck** (``planning.recheck``: ``policy.recheck_samples`` short tests of each candidate
   against proven-good partners, in blocks with fresh partners, in one round). Only these
   fresh samples are judged, so choosing the candidates from the screen does not bias the
   test; Bonferroni is over the ``m`` parts rechecked in that round. Samples crossing a flaky
   link, and those with the one partner that failed beyond noise while the others did not,
   are set aside first (that partner is the next candidate). With ``f`` failures in the ``n``
   samples left:

   - **flaky** when ``f >= 2`` with two partners at least and ``P(X >= f | n, g) < alpha / m``
     (noise cannot explain it);
   - **cleared** when ``P(X <= f | n, q_min) < beta``: a part failing at least ``q_min`` of
     its tests (1 in 3 by default) would have failed more often than that;
   - otherwise **undecided**: a suspect (exit 1) with its counts, never a silent pass; it is
     a candidate once more, and a fresh batch in a later round, judged alone, decides.

   The samples' glitch rate is taken as at least 2 % (short tests are noisier than the
   sweep's). With the defaults (32 samples, ``g`` = 2 %, ``q_min`` = 1/3, ``alpha = beta = 0.01``) a
   part is cleared at 4 failures or fewer and flaky at 6 or more (``m`` up to 50); a healthy
   part is left undecided with probability about 4e-4, a part failing 1 test in 3 is missed
   (cleared) with probability below 1 %. A part failing much less often than ``q_min`` may
   be cleared: that is the promise's limit.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from fabriccheck.models import (
    FAIL,
    PASS,
    Link,
    LinkKey,
    Observation,
    State,
    Verdict,
    link_key,
    nic_node,
)
from fabriccheck.topology.view import FabricView


def binomial_cdf(k: int, n: int, p: float) -> float:
    """``P(X <= k)`` for ``X ~ Binomial(n, p)``.

    >>> round(binomial_cdf(1, 4, 0.5), 4)
    0.3125
    """
    return 1.0 - binomial_tail(k + 1, n, p)


def binomial_tail(k: int, n: int, p: float) -> float:
    """``P(X >= k)`` for ``X ~ Binomial(n, p)``.

    >>> round(binomial_tail(2, 4, 0.5), 4)
    0.6875
    """
    if k <= 0:
        return 1.0
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


@dataclass
class Flakiness:
    """Flaky parts by name (node, ``node/nic``, or ``"a -- b"`` for a link), and the parts
    with lonely failures that are not flaky (yet): more tests of them tell noise from a part."""

    flaky: dict[str, Verdict] = field(default_factory=dict)
    #: NIC -> its lonely failures so far (one or more), not yet rechecked
    recheck_nics: dict[str, int] = field(default_factory=dict)
    recheck_links: list[Link] = field(default_factory=list)  # two or more (IB)
    #: parts whose recheck (or lack of one) decided nothing: suspects, never a silent pass
    undecided: dict[str, Verdict] = field(default_factory=dict)
    rate: float = 0.0  # the run's glitch rate the screen measured
    #: parts the recheck cleared: name -> "f of n"
    cleared: dict[str, str] = field(default_factory=dict)
    #: candidate -> P(noise makes its lonely failures among its finished tests)
    odds: dict[str, float] = field(default_factory=dict)

    def unresolved(self, alpha: float = 0.01) -> dict[str, Verdict]:
        """Parts neither flaky nor cleared when the run ends: the undecided, and candidates
        whose recheck never ran (no round left for it) with lonely failures noise explains
        with odds below ``alpha`` (two or more among few tests): suspects, never a silent
        pass. One lonely failure among a NIC's tests, left unrechecked, is what a glitch
        makes in every run: listed (``recheck.pending``), not a suspect."""
        why = ("failed {k} test(s) that nothing else on them explains (the shape of an "
               "intermittent part; noise makes that with p={p:.1g}) and was not rechecked: "
               "no round was left for it")
        out = {nic: Verdict("nic", nic, State.SUSPECT, why.format(k=k, p=self.odds[nic]))
               for nic, k in self.recheck_nics.items()
               if k >= 2 and self.odds.get(nic, 1.0) < alpha}
        out.update({str(lk): Verdict("link", str(lk), State.SUSPECT,
                                     why.format(k="2+", p=self.odds[str(lk)]),
                                     link=link_key(lk.a, lk.b))
                    for lk in self.recheck_links if self.odds.get(str(lk), 1.0) < alpha})
        return {**out, **self.undecided}


def find_flaky(observations: Sequence[Observation], view: FabricView, good_nodes: set[str],
               good_nics: set[str], good_links: set[Link], contended: set[str], *,
               alpha: float = 0.01, min_rate: float = 0.005, q_min: float = 1 / 3,
               beta: float = 0.01, bad_links: set[Link] | frozenset[Link] = frozenset()
               ) -> Flakiness:
    """Count lonely failures per part and keep the parts noise cannot explain (module doc).

    ``contended`` are failing tests that ECMP contention may explain (RoCE): they count for
    nobody. Group tests (4x, 8x) never make a part flaky at once (a failure that only shows at
    scale is bisection's to find, and a group's failure is shared by all its members), but a
    lonely group failure makes each of its NICs (and IB links) a recheck candidate: a NIC that
    fails one test in three shows it in a collective as often as in a pair test.

    ``bad_links`` (links found bad): a test that may have crossed one says nothing about
    anything else on it (on RoCE any link of the flow's ECMP set; the NICs behind a half-speed
    leaf fail their cross-leaf tests, and pass the rest, without being intermittent).
    """
    done = [o for o in observations if o.status in (PASS, FAIL)
            and o.test.test_id not in contended
            and not (bad_links and _may_cross(o, bad_links, view))]
    finished = [o for o in done if not o.test.params.recheck_of]
    if not finished:
        return Flakiness()
    screen = _screen(finished, view, good_nodes, good_nics, good_links, alpha, min_rate)
    samples: dict[str, list[Observation]] = defaultdict(list)
    for o in done:
        if o.test.params.recheck_of:
            samples[o.test.params.recheck_of].append(o)
    if samples:
        _recheck(screen, samples, alpha, beta, q_min, view=view, done=done)
    return screen


def _may_cross(o: Observation, links: set[Link] | frozenset[Link], view: FabricView) -> bool:
    return any(view.flow_links(f)[1] & links for f in o.test.flows)


def _screen(finished: list[Observation], view: FabricView, good_nodes: set[str],
            good_nics: set[str], good_links: set[Link], alpha: float,
            min_rate: float) -> Flakiness:
    """Stage 1 on the run's own tests (the recheck's samples excluded): pair tests decide
    at once, tests of any size make candidates."""
    every = _lonely(finished, view, good_nodes, good_nics, good_links)
    nic_tests: dict[str, int] = defaultdict(int)  # finished tests of any size per NIC
    for o in finished:
        for x in o.test.nics:
            nic_tests[x] += 1
    finished = [o for o in finished if o.test.group_size <= 2]
    tally: dict[tuple[str, object], list[Observation]] = defaultdict(list)
    for o in finished:
        for part in _parts(o, view):
            tally[part].append(o)
    lonely = _lonely(finished, view, good_nodes, good_nics, good_links)
    lonely_tests = set().union(*lonely.values()) if lonely else set()
    rate = max(min_rate, len(lonely_tests) / max(1, len(finished)))
    out: dict[str, Verdict] = {}
    for part, obs in tally.items():
        fails = [o for o in obs if o.test.test_id in lonely.get(part, ())]
        partners = {n for o in fails for n in o.test.nodes} - {_owner(part)}
        if len(fails) < 2 or len(partners) < 2 or len(fails) == len(obs):
            continue
        p = binomial_tail(len(fails), len(obs), rate)
        if p < alpha / max(1, len(tally)):
            name = str(part[1])
            why = (f"failed {len(fails)} of {len(obs)} tests ({100 * len(fails) / len(obs):.0f}%) "
                   f"with {len(partners)} partners whose other parts passed, and passed the rest; "
                   f"noise at the run's glitch rate {100 * rate:.1f}% explains that with "
                   f"p={p:.1g}")
            out[name] = Verdict(part[0], name, State.FLAKY, why,
                                tuple(o.test.test_id for o in fails),
                                part[1] if part[0] == "link" else None)  # type: ignore[arg-type]
    demoted = _screen_links_apart(out, tally, lonely, alpha / max(1, len(tally)), rate, view)
    flaky = _keep_most_specific(out)
    nics = {str(p[1]): len(ids) for p, ids in sorted(every.items(), key=lambda kv: str(kv[0]))
            if p[0] == "nic" and str(p[1]) not in flaky}
    links = sorted({p[1] for p, ids in every.items()  # type: ignore[misc]
                    if p[0] == "link" and len(ids) >= 2 and str(p[1]) not in flaky}
                   | demoted)
    out_f = Flakiness(flaky, nics, links)
    out_f.rate = rate
    # how likely noise makes each candidate's lonely failures (for one left unrechecked)
    for x, k in nics.items():
        out_f.odds[x] = binomial_tail(k, max(k, nic_tests[x]), rate)
    for lk in links:
        k = len(every[("link", lk)])
        out_f.odds[str(lk)] = binomial_tail(k, max(k, len(tally.get(("link", lk), ()))), rate)
    return out_f


def _screen_links_apart(out: dict[str, Verdict],
                        tally: dict[tuple[str, object], list[Observation]],
                        lonely: dict[tuple[str, object], set[str]], bound: float,
                        rate: float, view: FabricView) -> set[Link]:
    """Links flaky at once only on failures that crossed no other link flaky at once: a
    pair test across a healthy link and the flapping one fails as often as one across the
    flapping link alone. The links that fall short leave ``out`` and are returned: they are
    recheck candidates (whose probes avoid the other suspects), not verdicts."""
    found = {v.link for v in out.values() if v.kind == "link" and v.link is not None}
    if len(found) < 2:
        return set()
    demoted: set[Link] = set()
    for lk in sorted(found):
        others = found - {lk}
        obs = [o for o in tally[("link", lk)]
               if not any(p[0] == "link" and p[1] in others for p in _parts(o, view))]
        ids = {o.test.test_id for o in obs} & lonely.get(("link", lk), set())
        partners = {n for o in obs if o.test.test_id in ids for n in o.test.nodes}
        if (len(ids) < 2 or len(partners) < 2 or len(ids) == len(obs)
                or binomial_tail(len(ids), len(obs), rate) >= bound):
            demoted.add(lk)
            out.pop(str(lk), None)
    return demoted


def _recheck(fl: Flakiness, samples: dict[str, list[Observation]], alpha: float, beta: float,
             q_min: float, noise_floor: float = 0.02, view: FabricView | None = None,
             done: Sequence[Observation] = ()) -> None:
    """Stage 2: decide every rechecked part on its fresh samples only (module doc). The
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
        fl.flaky.pop(part)
        judged[part] = [o for o in judged[part] if not rival.crosses(o, lk)]
        j.decide(part, judged[part], m, samples[part])
        name = str(Link.of(*lk))
        if name not in samples and name not in fl.flaky and lk not in fl.recheck_links:
            fl.recheck_links.append(lk)  # the link's own samples decide it
        if part not in fl.flaky and part not in fl.cleared:
            fl.recheck_nics.pop(part, None)
            fl.undecided[part] = Verdict(
                "nic", part, State.SUSPECT,
                f"most of its failing recheck samples crossed link {name}, which the run's "
                f"other tests do not clear: that link explains them as well as this NIC (its "
                f"own samples decide the link; this NIC's samples off it did not)", (), None)
    _explain_away_nics(j, nics, judged, samples, latest, in_round)
    # the partner that failed a part's samples beyond noise is the next one to recheck
    for nic, k in sorted(j.suspects.items()):
        if nic not in samples and nic not in fl.flaky:
            fl.recheck_nics[nic] = fl.recheck_nics.get(nic, 0) + k


def _key(part: str) -> Link:
    return link_key(*part.split(" -- ", 1))


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
        fl.flaky.pop(part, None)
        if obs:
            j.decide(part, obs, in_round[latest[part]], samples[part])
        else:
            fl.undecided[part] = Verdict(
                "nic", part, State.SUSPECT,
                "every recheck sample was with a partner found flaky itself: they cannot "
                "tell the two apart", (), None)


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
        obs = [o for o in fresh[part]
               if not any(view.flow_links(f)[0] & (avoid - {key}) for f in o.test.flows)]
        if len(obs) == len(fresh[part]):
            return
        for d in (fl.flaky, fl.undecided, fl.cleared):
            d.pop(part, None)
        fl.recheck_links = [lk for lk in fl.recheck_links if lk != key]
        if obs:
            j.decide(part, obs, in_round[latest[part]], samples[part])
        else:
            fl.undecided[part] = Verdict(
                "link", part, State.SUSPECT,
                "every recheck sample across it also crossed another link that failed them: "
                "the two cannot be told apart by these probes", (), key)

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

    def crosses(self, o: Observation, lk: LinkKey) -> bool:
        return any(lk in self.view.flow_links(f)[0] for f in o.test.flows)

    def of(self, part: str, obs: Sequence[Observation], fl: Flakiness) -> LinkKey | None:
        tally: dict[LinkKey, int] = defaultdict(int)
        for o in obs:
            if o.status == FAIL:
                for lk in {lk for f in o.test.flows for lk in self.view.flow_links(f)[0]}:
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
                for k in {k for f in o.test.flows for k in self.view.flow_links(f)[0]}:
                    self._index[k].append(o)
        others = [o for o in self._index.get(lk, ()) if part not in o.test.nics]
        f = sum(o.status == FAIL for o in others)
        return bool(others) and binomial_cdf(f, len(others), self.q_min) < self.beta


class _Judge:
    """One part's decision on its samples: flaky, cleared or undecided (module doc)."""

    def __init__(self, fl: Flakiness, alpha: float, beta: float, q_min: float,
                 rate: float) -> None:
        self.fl, self.alpha, self.beta, self.q_min, self.rate = fl, alpha, beta, q_min, rate
        self.suspects: dict[str, int] = {}  # partners whose samples failed beyond noise

    def decide(self, part: str, obs: list[Observation], m: int,
               every: Sequence[Observation]) -> None:
        fl, alpha, beta, rate = self.fl, self.alpha, self.beta, self.rate
        is_link = " -- " in part
        key = _key(part) if is_link else None
        # a part undecided on its first samples got fresh ones: those alone decide
        again = len({o.test.round for o in every}) > 1
        if part in fl.flaky or not obs:
            return
        kept, aside, partners = worst_partner_aside(part, obs)
        f_aside = sum(o.status == FAIL for o in aside)
        f_kept = sum(o.status == FAIL for o in kept)
        if (f_aside >= 2 and binomial_tail(f_aside, len(aside), rate) < alpha / m
                and binomial_tail(f_kept, len(kept), rate) >= alpha
                and binomial_cdf(f_kept, len(kept), f_aside / len(aside)) < alpha):
            # the failures sit with one partner, the others' samples look like noise and
            # are too many to share that partner's failure rate (a few clean samples
            # beside a partner failing 1 in 3 are no evidence that the partner is at fault)
            for nic in {x for o in aside for x in o.test.nics} - {part}:
                self.suspects[nic] = self.suspects.get(nic, 0) + f_aside
        else:  # nothing to set aside: the failures are the part's, or noise
            kept, aside = list(obs), []
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
    return [o for o in obs if not any(view.flow_links(f)[0] & bad for f in o.test.flows)]


def worst_partner_aside(part: str, obs: Sequence[Observation]
                        ) -> tuple[list[Observation], list[Observation], int]:
    """A part's recheck samples split into those judged and those set aside: the samples with
    the partner (for a link: the node pair) that failed most, when there are two partners or
    more and that one failed at all. Returns ``(kept, aside, number of partners)``.

    >>> from fabriccheck.models import Flow, Test
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


def _parts(o: Observation, view: FabricView) -> list[tuple[str, object]]:
    parts: list[tuple[str, object]] = [("node", n) for n in o.test.nodes]
    parts += [("nic", x) for x in o.test.nics]
    if view.fabric == "infiniband":
        parts += [("link", lk) for f in o.test.flows for lk in view.flow_links(f)[0]]
    return parts


def _owner(part: tuple[str, object]) -> str:
    return nic_node(str(part[1])) if part[0] != "link" else ""


def _lonely(finished: Sequence[Observation], view: FabricView, good_nodes: set[str],
            good_nics: set[str], good_links: set[Link]) -> dict[tuple[str, object], set[str]]:
    """Part -> failing tests that point at it alone (all its co-parts passed elsewhere)."""
    out: dict[tuple[str, object], set[str]] = defaultdict(set)
    for o in finished:
        if o.status != FAIL:
            continue
        parts = _parts(o, view)
        cleared = {p for p in parts if (p[0] == "node" and p[1] in good_nodes)
                   or (p[0] == "nic" and p[1] in good_nics)
                   or (p[0] == "link" and p[1] in good_links)}
        if cleared != set(parts):
            continue  # something on it is still blamed: attribution's business, not noise
        for part in parts:
            out[part].add(o.test.test_id)
    return out


def _keep_most_specific(found: dict[str, Verdict]) -> dict[str, Verdict]:
    """A flaky NIC explains its node's lonely failures: keep the NIC, drop the node when all
    of the node's evidence is the NIC's; a flaky link drops the parts its failures share."""
    nic_ids = {nic_node(v.name): set(v.evidence) for v in found.values() if v.kind == "nic"}
    link_ids = set().union(*(set(v.evidence) for v in found.values() if v.kind == "link"))
    out = {}
    for name, v in found.items():
        ids = set(v.evidence)
        if v.kind == "node" and ids <= nic_ids.get(name, set()):
            continue
        if v.kind != "link" and ids <= link_ids:
            continue
        out[name] = v
    return out
