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

from collections import defaultdict
from collections.abc import Sequence

from fabriccheck.inference.flakiness import Flakiness, binomial_cdf, binomial_tail
from fabriccheck.inference.flaky_recheck import decide_rechecked
from fabriccheck.inference.link_screen import flaky_verdicts, screen_links
from fabriccheck.models import (
    FAIL,
    PASS,
    Link,
    Observation,
    State,
    Verdict,
    nic_node,
)
from fabriccheck.topology.view import FabricView

__all__ = ["Flakiness", "binomial_cdf", "binomial_tail", "find_flaky"]


def find_flaky(observations: Sequence[Observation], view: FabricView, good_nodes: set[str],
               good_nics: set[str], good_links: set[Link], contended: set[str], *,
               alpha: float = 0.01, min_rate: float = 0.005, q_min: float = 1 / 3,
               beta: float = 0.01, bad_links: set[Link] | frozenset[Link] = frozenset(),
               suspected: set[Link] | frozenset[Link] = frozenset(),
               screen_links: bool = False) -> Flakiness:
    """Count lonely failures per part and keep the parts noise cannot explain (module doc).

    ``contended`` are failing tests that ECMP contention may explain (RoCE): they count for
    nobody. Group tests (4x, 8x) never make a part flaky at once (a failure that only shows at
    scale is bisection's to find, and a group's failure is shared by all its members), but a
    lonely group failure makes each of its NICs (and IB links) a recheck candidate: a NIC that
    fails one test in three shows it in a collective as often as in a pair test.

    ``bad_links`` (links found bad): a test that may have crossed one says nothing about
    anything else on it (on RoCE any link of the flow's ECMP set; the NICs behind a half-speed
    leaf fail their cross-leaf tests, and pass the rest, without being intermittent).
    ``suspected`` (a link alone in a candidate set beyond noise, not yet confirmed): a failure
    that may have crossed it is the link's, not lonely for its nodes and NICs (a dead RoCE
    uplink fails the flows ECMP hashes onto it and passes the rest: their NIC looked flaky).
    ``screen_links``: every switch link is also judged by the sequential link screen
    (:mod:`fabriccheck.inference.link_screen`; an InfiniBand sweep whose top-up feeds it).
    """
    done = [o for o in observations if o.status in (PASS, FAIL)
            and o.test.test_id not in contended
            and not (bad_links and may_cross(o, bad_links, view))]
    finished = [o for o in done if not o.test.params.recheck_of]
    if not finished:
        return Flakiness()
    screen = _screen(finished, view, good_nodes, good_nics, good_links, alpha, min_rate,
                     suspected)
    samples: dict[str, list[Observation]] = defaultdict(list)
    for o in done:
        if o.test.params.recheck_of:
            samples[o.test.params.recheck_of].append(o)
    if samples:
        decide_rechecked(screen, samples, alpha, beta, q_min, view=view, done=done)
    if screen_links:
        _screen_links(screen, done, view, good_nodes, good_nics, good_links, suspected)
    return screen


def _screen_links(fl: Flakiness, done: list[Observation], view: FabricView,
                  good_nodes: set[str], good_nics: set[str], good_links: set[Link],
                  suspected: set[Link] | frozenset[Link]) -> None:
    """The sequential link screen (:mod:`fabriccheck.inference.link_screen`) over every
    finished pair test, recheck samples included; its flaky links join ``fl.flaky``."""
    pairs = [o for o in done if o.test.group_size <= 2]
    lonely = _lonely(pairs, view, good_nodes, good_nics, good_links, suspected)
    ids = {i for part, got in lonely.items() if part[0] == "link" for i in got}
    fl.links, fl.link_rate = screen_links(pairs, ids, view, fl.rate)
    for name, v in flaky_verdicts(fl.links, fl.link_rate).items():
        if name not in fl.flaky:
            fl.flaky[name] = v
            fl.undecided.pop(name, None)
    fl.recheck_links = [lk for lk in fl.recheck_links if str(lk) not in fl.flaky]
    for lk, t in fl.links.items():  # cleared on every crossing, its recheck samples included
        if t.state == "cleared":
            fl.undecided.pop(str(lk), None)


def may_cross(o: Observation, links: set[Link] | frozenset[Link], view: FabricView) -> bool:
    """Whether a flow of ``o`` may have crossed one of ``links`` (on RoCE: any link of its
    ECMP set)."""
    return any(view.flow_links(f)[1] & links for f in o.test.flows)


def _screen(finished: list[Observation], view: FabricView, good_nodes: set[str],
            good_nics: set[str], good_links: set[Link], alpha: float,
            min_rate: float, suspected: set[Link] | frozenset[Link] = frozenset()
            ) -> Flakiness:
    """Stage 1 on the run's own tests (the recheck's samples excluded): pair tests decide
    at once, tests of any size make candidates."""
    every = _lonely(finished, view, good_nodes, good_nics, good_links, suspected)
    nic_tests: dict[str, int] = defaultdict(int)  # finished tests of any size per NIC
    for o in finished:
        for x in o.test.nics:
            nic_tests[x] += 1
    finished = [o for o in finished if o.test.group_size <= 2]
    tally: dict[tuple[str, object], list[Observation]] = defaultdict(list)
    for o in finished:
        for part in _parts(o, view):
            tally[part].append(o)
    lonely = _lonely(finished, view, good_nodes, good_nics, good_links, suspected)
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
    out_f.bound = alpha / max(1, len(tally))
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


def _parts(o: Observation, view: FabricView) -> list[tuple[str, object]]:
    parts: list[tuple[str, object]] = [("node", n) for n in o.test.nodes]
    parts += [("nic", x) for x in o.test.nics]
    # the links it surely crossed: an IB route, a RoCE flow's learned path (an unlearned RoCE
    # flow surely crosses no switch link: its ECMP paths share none)
    parts += [("link", lk) for f in o.test.flows for lk in view.flow_links(f)[0]]
    return parts


def _owner(part: tuple[str, object]) -> str:
    return nic_node(str(part[1])) if part[0] != "link" else ""


def _lonely(finished: Sequence[Observation], view: FabricView, good_nodes: set[str],
            good_nics: set[str], good_links: set[Link],
            suspected: set[Link] | frozenset[Link] = frozenset()
            ) -> dict[tuple[str, object], set[str]]:
    """Part -> failing tests that point at it alone (all its co-parts passed elsewhere);
    one that may have crossed a ``suspected`` link counts for links only."""
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
        link_only = bool(suspected) and may_cross(o, suspected, view)
        for part in parts:
            if not link_only or part[0] == "link":
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
