"""What :mod:`fabriccheck.inference.flaky` finds (flaky parts, candidates, undecided and
cleared parts) and the binomial tails its tests use."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fabriccheck.inference.link_screen import LinkTally, open_suspects
from fabriccheck.models import (
    Link,
    State,
    Verdict,
    link_key,
)


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
    #: the screen's bound on those odds: ``alpha`` / the number of parts it screened
    bound: float = 0.01
    #: switch link -> its sequential test (:mod:`fabriccheck.inference.link_screen`); open
    #: links get crossings from the top-up (:mod:`fabriccheck.planning.link_topup`)
    links: dict[Link, LinkTally] = field(default_factory=dict)
    #: the glitch rate the link screen used
    link_rate: float = 0.0

    def unresolved(self, alpha: float | None = None) -> dict[str, Verdict]:
        """Parts neither flaky nor cleared when the run ends: the undecided, and candidates
        whose recheck never ran (no round left for it) with lonely failures noise explains
        with odds below ``alpha`` (default: the screen's :attr:`bound`, Bonferroni over the
        parts it screened, as the screen's own verdicts: among a few thousand links of a big
        RoCE fabric with learned paths, one has two glitches among six tests in most runs):
        suspects, never a silent pass. One lonely failure among a NIC's tests, left
        unrechecked, is what a glitch makes in every run: listed (``recheck.pending``), not a
        suspect."""
        alpha = self.bound if alpha is None else alpha
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
        out.update(open_suspects(self.links, self.link_rate, skip=self.flaky))
        return {**out, **self.undecided}
