"""Intermittent parts: a NIC, node or link that fails some tests and passes others, beyond noise.

Attribution trusts passes, so a part that passed once is cleared and its later failures look
like glitches. Here those "lonely" failures are counted per part: a failing test whose every
other node, NIC and (surely crossed) link passed elsewhere points at the part alone. Noise makes
such failures too, at the run's glitch rate ``g`` (the share of finished tests that failed with
nothing left to blame, at least ``min_rate``). Two stages:

1. **Screen** (the sweep's own tests). A part is flaky at once when its lonely failures are too
   many for noise: the binomial tail ``P(X >= k | n tests, g)`` below ``alpha`` divided by the
   number of parts tested (Bonferroni), with at least two lonely failures and two partners.
   Every other part with a lonely failure is a candidate for the recheck.
2. **Recheck** (``planning.recheck``: ``policy.recheck_samples`` short tests of each candidate
   against proven-good partners, in one round). Only these fresh samples are judged, so
   choosing the candidates from the screen does not bias the test; Bonferroni is over the
   ``m`` parts rechecked. With ``f`` failures in ``n`` samples:

   - **flaky** when ``f >= 2`` and ``P(X >= f | n, g) < alpha / m`` (noise cannot explain it);
   - **cleared** when ``P(X <= f | n, q_min) < beta``: a part failing at least ``q_min`` of
     its tests (1 in 3 by default) would have failed more often than that;
   - otherwise **undecided**: a suspect (exit 1) with its counts, never a silent pass.

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


def find_flaky(observations: Sequence[Observation], view: FabricView, good_nodes: set[str],
               good_nics: set[str], good_links: set[Link], contended: set[str], *,
               alpha: float = 0.01, min_rate: float = 0.005, q_min: float = 1 / 3,
               beta: float = 0.01) -> Flakiness:
    """Count lonely failures per part and keep the parts noise cannot explain (module doc).

    ``contended`` are failing tests that ECMP contention may explain (RoCE): they count for
    nobody. Group tests (4x, 8x) do not count either: a failure that only shows at scale is
    bisection's to find, not a sign of an intermittent part.
    """
    done = [o for o in observations if o.status in (PASS, FAIL)
            and o.test.test_id not in contended and o.test.group_size <= 2]
    finished = [o for o in done if not o.test.params.recheck_of]
    if not finished:
        return Flakiness()
    screen = _screen(finished, view, good_nodes, good_nics, good_links, alpha, min_rate)
    samples: dict[str, list[Observation]] = defaultdict(list)
    for o in done:
        if o.test.params.recheck_of:
            samples[o.test.params.recheck_of].append(o)
    if samples:
        _recheck(screen, samples, alpha, beta, q_min)
    return screen


def _screen(finished: list[Observation], view: FabricView, good_nodes: set[str],
            good_nics: set[str], good_links: set[Link], alpha: float,
            min_rate: float) -> Flakiness:
    """Stage 1 on the run's own tests (the recheck's samples excluded)."""
    tally: dict[tuple[str, object], list[Observation]] = defaultdict(list)
    for o in finished:
        for part in _parts(o, view):
            tally[part].append(o)
    lonely = _lonely(finished, view, good_nodes, good_nics, good_links)
    lonely_tests = set().union(*lonely.values()) if lonely else set()
    rate = max(min_rate, len(lonely_tests) / len(finished))
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
    flaky = _keep_most_specific(out)
    nics = {str(p[1]): len(ids) for p, ids in sorted(lonely.items(), key=lambda kv: str(kv[0]))
            if p[0] == "nic" and str(p[1]) not in flaky}
    links = sorted(p[1] for p, ids in lonely.items()  # type: ignore[misc]
                   if p[0] == "link" and len(ids) >= 2 and str(p[1]) not in flaky)
    out_f = Flakiness(flaky, nics, links)
    out_f.rate = rate
    return out_f


def _recheck(fl: Flakiness, samples: dict[str, list[Observation]], alpha: float, beta: float,
             q_min: float, noise_floor: float = 0.02) -> None:
    """Stage 2: decide every rechecked part on its fresh samples only (module doc). The
    samples are short tests, noisier than the sweep's: their glitch rate is taken as at
    least ``noise_floor``."""
    m = len(samples)
    rate = max(noise_floor, fl.rate)
    for part, obs in sorted(samples.items()):
        fl.recheck_nics.pop(part, None)
        is_link = " -- " in part
        key = link_key(*part.split(" -- ", 1)) if is_link else None
        if is_link:
            fl.recheck_links = [lk for lk in fl.recheck_links if lk != key]
        if part in fl.flaky:
            continue
        fails = [o for o in obs if o.status == FAIL]
        n, f = len(obs), len(fails)
        p = binomial_tail(f, n, rate)
        counts = (f"failed {f} of {n} recheck samples ({100 * f / n:.0f}%) against proven-good "
                  f"partners")
        kind = "link" if is_link else "nic"
        ids = tuple(o.test.test_id for o in fails)
        if f >= 2 and p < alpha / m:
            why = (f"{counts}; noise at a glitch rate of {100 * rate:.1f}% explains "
                   f"that with p={p:.1g} (Bonferroni over {m} parts rechecked)")
            fl.flaky[part] = Verdict(kind, part, State.FLAKY, why, ids, key)
        elif binomial_cdf(f, n, q_min) < beta:
            fl.cleared[part] = f"{f} of {n}"
        else:
            why = (f"{counts}: too many for noise to be sure (p={p:.1g}), too few to call it "
                   f"intermittent; more samples would decide")
            fl.undecided[part] = Verdict(kind, part, State.SUSPECT, why, ids, key)


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
