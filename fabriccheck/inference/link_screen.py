"""The link screen: a sequential test per switch link, noise or a link failing one test in five.

The intermittence screen of :mod:`fabriccheck.inference.flaky` counts a link's lonely failures
(nothing else on the test is blamed) among the sweep's tests. A default sweep crosses most
links a handful of times, too few to tell a link that fails one test in five from 1-3 %
glitches, and such a link passed silently (issue 31). Here every pair test that surely crossed
the link counts (an InfiniBand route, a RoCE flow's learned path; the sweep's tests, the
top-up's, confirmations and recheck samples alike: none was chosen for what it showed about
*this* link), and Wald's sequential probability ratio test weighs them:

    llr = k ln(Q / g) + (n - k) ln((1 - Q) / (1 - g))

for ``k`` lonely failures among ``n`` crossings, ``Q`` = :data:`Q` (the rate the promise is
made at) against ``g``, the run's glitch rate (at least :data:`NOISE_FLOOR`: the top-up's
short tests are noisier than the sweep's). A link is

- **cleared** when ``llr <= ln(beta)``: a link failing one test in five is cleared with
  probability below ``beta`` (1 %), whenever the test stops;
- **flaky** when ``llr >= ln(m / alpha)`` (``m`` links screened: noise makes some healthy
  link flaky in at most ``alpha`` = 1 % of runs), with failures over two node pairs at least,
  still beyond ``ln(1 / beta)`` once the tests of the NIC that failed most of them are set
  aside (a NIC failing one test in three fails the samples that come down its one route in:
  that is the NIC's), judged strongest first on the tests crossing no link found flaky
  before it (a test across a healthy link and the flapping one fails as often);
- **open** otherwise: :mod:`fabriccheck.planning.link_topup` gives it the crossings that
  clear a healthy link (84 % of the time, :meth:`LinkTally.crossings_to_clear`; a link still
  open asks again in the next top-up round). A link still open when the run ends with a
  lonely failure is a suspect (exit 1), never a silent pass, unless its evidence favours noise
  10:1 (:data:`END_BETA`; a link failing one test in five ends there well under 1 % of the
  time). One that passed every crossing is listed as thinly screened
  (:func:`screen_summary`): a fabric whose top-up cannot reach every link in its rounds (a
  629-node 3-tier fabric with 2,039 links) is not a fabric of suspects.

A fabric whose noise is too high to clear a link within :data:`CAP` crossings (about 4 % of
pair tests failing with nothing to blame: 8 % jitter and 3 % glitches make 6-7 %) is not
screened: no top-up, and one fabric warning (exit 1) says how many links were left open.

Numbers (``g`` = 2 %): a failure adds 2.30, a pass takes 0.20 away; a link with no failure is
cleared after 23 crossings, each failure costs 11 more; a link failing one test in five drifts
up 0.30 a crossing and reaches ``ln(1,024 / 0.01)`` = 11.5 (a 128-node fat-tree's links) in
about 40.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fabriccheck.models import FAIL, LinkKey, Observation, State, Verdict, link_key
from fabriccheck.topology.view import FabricView

#: the failure rate a link is told from noise at (issue 31: links failing 20-30 % of tests)
Q = 0.2
#: the glitch rate assumed at least (short tests are noisier than the sweep's)
NOISE_FLOOR = 0.02
ALPHA, BETA = 0.01, 0.01
#: a link still open when the run ends is a suspect unless its ratio is below this: the
#: evidence favours noise 10:1 (a link failing one test in five ends there after its
#: top-up, 30-60 crossings, well under 1 % of the time)
END_BETA = 0.1
#: crossings a top-up round gives a link at most; a run whose noise needs more to clear a
#: link with no failure (about 4 % of tests failing) is too noisy to screen its links
CAP = 64


@dataclass(frozen=True)
class LinkTally:
    """One link's sequential test: ``k`` lonely failures (``ids``) among ``n`` crossings,
    ``llr`` their log likelihood ratio, ``state`` cleared / open / flaky."""

    link: LinkKey
    n: int
    k: int
    llr: float
    state: str
    ids: tuple[str, ...] = ()
    pairs: int = 0

    def crossings_to_clear(self, g: float, z: float = 1.0) -> int:
        """Crossings that clear the link from here, if it fails at the noise rate ``g`` only,
        with probability about ``Phi(z)`` (84 % at 1): a pass takes ``b`` from the ratio, a
        failure adds ``a``, so ``n`` crossings take ``n (b - g (a + b))`` away on average,
        give or take ``(a + b) sqrt(n g (1 - g))``. A link left open asks again in the next
        top-up round.

        >>> LinkTally(("l", "s"), 10, 0, llr(0, 10, 0.02), "open").crossings_to_clear(0.02)
        30
        """
        a, b = math.log(Q / g), -math.log((1 - Q) / (1 - g))
        drift, spread = b - g * (a + b), z * (a + b) * math.sqrt(g * (1 - g))
        gap = self.llr - math.log(BETA)
        if gap <= 0:
            return 0
        if drift <= 0:
            return 0  # noise this high never clears a link: not screenable, a fabric warning
        root = (spread + math.sqrt(spread ** 2 + 4 * drift * gap)) / (2 * drift)
        return math.ceil(root ** 2)

    def why(self, g: float, m: int) -> str:
        return (f"{self.k} of the {self.n} pair tests that crossed it failed with nothing else "
                f"on them to blame ({self.pairs} node pairs); against noise at "
                f"{100 * g:.1f}% a link failing one test in {round(1 / Q)} is "
                f"{math.exp(min(self.llr, 700.0)):.2g} times as likely "
                f"(flaky beyond {m / ALPHA:.2g}, cleared below {BETA:g})")


def screens_links(mode: str, fabric: str, links: int, rounds: int, max_links: int) -> bool:
    """A run whose links are screened: an InfiniBand sweep (routes say which links a test
    surely crossed) with link top-up rounds (``policy.link_topup_rounds``) on a fabric of at
    most ``max_links`` switch links (``policy.link_screen_max_links``: the top-up costs about
    25 short flows a link).

    >>> screens_links("sweep", "infiniband", 1024, 6, 4096)
    True
    >>> screens_links("gate", "infiniband", 1024, 6, 4096)
    False
    """
    return mode == "sweep" and fabric == "infiniband" and rounds > 0 and 0 < links <= max_links


def screenable(g: float) -> bool:
    """Noise at ``g`` lets a link with no evidence yet be cleared within :data:`CAP`
    crossings (84 % of the time).

    >>> screenable(0.02), screenable(0.03), screenable(0.067)
    (True, True, False)
    """
    return 0 < LinkTally(("", ""), 0, 0, 0.0, "open").crossings_to_clear(
        max(g, NOISE_FLOOR)) <= CAP


def noise_warning(tallies: Mapping[LinkKey, LinkTally], g: float) -> list[str]:
    """The fabric warning of a run too noisy to screen its links (none when it was not, or
    no link is left open)."""
    left = sum(1 for t in tallies.values() if t.state == "open")
    if not left or screenable(max(g, NOISE_FLOOR)):
        return []
    return [f"{100 * g:.1f}% of the run's pair tests failed with nothing else on them to "
            f"blame: at that noise a switch link failing one test in {round(1 / Q)} cannot be "
            f"told from noise within {CAP} crossings, and {left} link(s) were left unscreened "
            "for intermittence (a quieter window settles them)"]


def llr(k: int, n: int, g: float) -> float:
    """The log likelihood ratio of ``k`` failures in ``n`` at :data:`Q` against ``g``.

    >>> round(llr(0, 23, 0.02), 2), round(llr(4, 20, 0.02), 2)
    (-4.67, 5.96)
    """
    return k * math.log(Q / g) + (n - k) * math.log((1 - Q) / (1 - g))


def crossings(o: Observation, view: FabricView) -> frozenset[LinkKey]:
    """The switch links ``o`` surely crossed."""
    out: set[LinkKey] = set()
    for f in o.test.flows:
        out |= view.flow_links(f)[0]
    return frozenset(out & view.switch_links)


def screen_links(tests: Sequence[Observation], lonely: set[str], view: FabricView,
                 rate: float) -> tuple[dict[LinkKey, LinkTally], float]:
    """Every switch link the pair tests ``tests`` (finished: pass or fail) crossed, judged
    (module doc); ``lonely``: the ids of the failing tests nothing else explains. Returns
    the tallies and the glitch rate used."""
    g = max(NOISE_FLOOR, rate)
    crossed = {o.test.test_id: crossings(o, view) for o in tests}
    by_link: dict[LinkKey, list[Observation]] = {}
    for o in tests:
        for lk in crossed[o.test.test_id]:
            by_link.setdefault(lk, []).append(o)
    m = max(1, len(by_link))
    bound = math.log(m / ALPHA)
    tallies = {lk: _tally(lk, obs, lonely, g) for lk, obs in by_link.items()}
    flaky: set[LinkKey] = set()
    for lk in sorted(tallies, key=lambda x: (-tallies[x].llr, x)):
        if tallies[lk].llr < bound:
            break
        obs = [o for o in by_link[lk] if not crossed[o.test.test_id] & flaky]
        t = _tally(lk, obs, lonely, g)
        if t.llr >= bound and t.pairs >= 2 and _beyond_one_nic(obs, lonely, g):
            tallies[lk] = _with_state(t, "flaky")
            flaky.add(lk)
        else:
            tallies[lk] = _with_state(t, "open")
    return tallies, g


def _tally(lk: LinkKey, obs: Sequence[Observation], lonely: set[str], g: float) -> LinkTally:
    fails = [o for o in obs if o.status == FAIL and o.test.test_id in lonely]
    value = llr(len(fails), len(obs), g)
    pairs = len({frozenset(o.test.nodes) for o in fails})
    return _with_state(LinkTally(lk, len(obs), len(fails), value, "", tuple(
        o.test.test_id for o in fails), pairs), "open")


def _with_state(t: LinkTally, flaky_or_open: str) -> LinkTally:
    state = "cleared" if t.llr <= math.log(BETA) else flaky_or_open
    return LinkTally(t.link, t.n, t.k, t.llr, state, t.ids, t.pairs)


def _beyond_one_nic(obs: Sequence[Observation], lonely: set[str], g: float) -> bool:
    """Still beyond ``ln(1 / beta)`` without the tests of the NIC that failed most of them."""
    fails = Counter(x for o in obs if o.status == FAIL and o.test.test_id in lonely
                    for x in o.test.nics)
    if not fails:
        return False
    worst = fails.most_common(1)[0][0]
    rest = [o for o in obs if worst not in o.test.nics]
    k = sum(1 for o in rest if o.status == FAIL and o.test.test_id in lonely)
    return llr(k, len(rest), g) >= -math.log(BETA)


def flaky_verdicts(tallies: Mapping[LinkKey, LinkTally], g: float
                   ) -> dict[str, Verdict]:
    """The flaky links' verdicts, by ``"a -- b"`` name."""
    m = max(1, len(tallies))
    return {_name(t.link): Verdict("link", _name(t.link), State.FLAKY, t.why(g, m), t.ids,
                                   link=link_key(*t.link))
            for t in tallies.values() if t.state == "flaky"}


def open_suspects(tallies: Mapping[LinkKey, LinkTally], g: float,
                  skip: Iterable[str] = ()) -> dict[str, Verdict]:
    """Links still open when the run ends with a lonely failure among their crossings, the
    evidence not favouring noise 10:1 (:data:`END_BETA`): suspects (``skip``: names another
    verdict already covers); none when the noise is too high to screen (:func:`noise_warning`
    says so). A link that passed every crossing is no suspect, whatever their number: nothing
    points at it, and the result lists it as thinly screened (:func:`screen_summary`)."""
    if not tallies or not screenable(g):
        return {}  # not screened, or the fabric warning says it (noise_warning)
    m, skipped = max(1, len(tallies)), set(skip)
    return {_name(t.link): Verdict(
        "link", _name(t.link), State.SUSPECT,
        t.why(g, m) + ": neither cleared nor beyond noise when the run ended", t.ids,
        link=link_key(*t.link))
        for t in tallies.values() if _unsettled(t) and t.k > 0 and _name(t.link) not in skipped}


def _unsettled(t: LinkTally) -> bool:
    """Open at the end, the evidence not favouring noise 10:1 (:data:`END_BETA`)."""
    return t.state == "open" and t.llr > math.log(END_BETA)


def screen_summary(tallies: Mapping[LinkKey, LinkTally], g: float) -> dict | None:
    """The run result's ``link_screen`` (None when no link was screened): links screened,
    cleared, flaky and open, the glitch rate they were weighed against, and ``thin``: the links
    that passed every crossing but too few of them to rule out failing one test in five (a
    fabric whose top-up could not reach every link within its rounds; not suspects, listed).

    >>> t = {("a", "b"): LinkTally(("a", "b"), 9, 0, llr(0, 9, 0.02), "open")}
    >>> screen_summary(t, 0.02)["thin"]
    [['a', 'b', 9]]
    """
    if not tallies:
        return None
    states = Counter(t.state for t in tallies.values())
    thin = sorted([*t.link, t.n] for t in tallies.values() if _unsettled(t) and t.k == 0)
    return {"links": len(tallies), "cleared": states["cleared"], "flaky": states["flaky"],
            "open": states["open"], "noise_rate": round(max(g, NOISE_FLOOR), 4),
            "thin": thin if screenable(g) else []}


def _name(lk: LinkKey) -> str:
    return f"{lk[0]} -- {lk[1]}"

