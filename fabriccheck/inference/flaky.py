"""Intermittent parts: a NIC, node or link that fails some tests and passes others, beyond noise.

Attribution trusts passes, so a part that passed once is cleared and its later failures look
like glitches. Here those "lonely" failures are counted per part: a failing test whose every
other node, NIC and (surely crossed) link passed elsewhere points at the part alone. Noise makes
such failures too, at the run's glitch rate ``g`` (the share of finished tests that failed with
nothing left to blame, at least ``min_rate``). A part is **flaky** when its lonely failures are
too many for noise: the binomial tail ``P(X >= k | n tests, g)`` is below ``alpha`` divided by
the number of parts tested (Bonferroni: a large run does not turn noise into verdicts), with
at least two lonely failures and two different partners.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from fabriccheck.models import FAIL, PASS, Link, Observation, State, Verdict, nic_node
from fabriccheck.topology.view import FabricView


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
    #: NIC -> its lonely failures so far (one or more)
    recheck_nics: dict[str, int] = field(default_factory=dict)
    recheck_links: list[Link] = field(default_factory=list)  # two or more (IB)


def find_flaky(observations: Sequence[Observation], view: FabricView, good_nodes: set[str],
               good_nics: set[str], good_links: set[Link], contended: set[str], *,
               alpha: float = 0.01, min_rate: float = 0.005) -> Flakiness:
    """Count lonely failures per part and keep the parts noise cannot explain.

    ``contended`` are failing tests that ECMP contention may explain (RoCE): they count for
    nobody. Group tests (4x, 8x) do not count either: a failure that only shows at scale is
    bisection's to find, not a sign of an intermittent part.
    """
    finished = [o for o in observations if o.status in (PASS, FAIL)
                and o.test.test_id not in contended and o.test.group_size <= 2]
    if not finished:
        return Flakiness()
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
    return Flakiness(flaky, nics, links)


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
