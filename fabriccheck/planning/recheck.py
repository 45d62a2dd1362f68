"""The intermittence recheck: enough samples of a part to tell an intermittent part from noise,
in ONE round.

A sweep gives a NIC two to four tests, too few to tell a part that fails one test in three from
1-2 % measurement glitches. A part with a failure nothing else explains ("lonely", see
:mod:`fabriccheck.inference.flaky`) gets samples like a confirmation (client against one
proven-good partner, server from another, at once: links are full duplex) in **waves** that run
after the round's own tests (``params.wave``: each wave starts when the one before has ended;
the round count does not grow, its test time does: about ``waves x (setup +
recheck_duration_s)``), ``policy.recheck_samples`` samples a part in all. Every sample carries
``params.recheck_of`` (the part), which is what the second-stage test in
``inference.flaky`` counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from fabriccheck.models import Link, Test, nic_node
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.followup import GoodPool, plan_link_probes, plan_nic_confirm


def plan_recheck(b: RoundBuilder, nics: Sequence[str], links: Sequence[Link], pool: GoodPool,
                 good_nics: set[str], local: Sequence[str] = (),
                 met: Mapping[str, frozenset[str]] | None = None, *, seed: int = 0) -> int:
    """Samples of every candidate, in waves 1.. of this round (after the round's own tests,
    so they never take a NIC or link the confirmations need, and the NICs the round's tests
    use are free again): per NIC a client test against one proven-good partner and a server
    test from another, per IB link fresh known-good flows across it and no other suspect
    link; each repeated in every wave, ``policy.recheck_samples`` samples a part in all.
    Returns the number of samples planned."""
    met = met or {}
    sub = RoundBuilder(b.round_no, b.view, b.spec, b.policy)  # the waves' own resources
    # partners are proven good and not candidates themselves: a failure then points at the
    # part, and a small leaf's few NICs are left to the candidates' own samples
    good_nics = good_nics - set(nics)
    groups: list[tuple[str, list[Test]]] = []
    for nic in nics:
        start = len(sub.tests)
        plan_nic_confirm(nic, sub, pool, good_nics, local,
                         met=met.get(nic_node(nic), frozenset()))
        if len(sub.tests) - start == 1:  # one partner only: it also runs the other way
            t = sub.tests[start]
            rail = b.view.topology.nics[nic].rail
            sub.add_flow(t.nodes[1], t.nodes[0], rail, "confirm")
        groups.append((nic, sub.tests[start:]))
    for link in links:
        start = len(sub.tests)
        plan_link_probes((), (link,), sub, good_nics, seed=seed, retest=False)
        groups.append((str(Link.of(*link)), sub.tests[start:]))
    # two samples a wave at most (a NIC sends once and receives once at a time)
    waves = max(1, -(-b.policy.recheck_samples // 2))
    made = 0
    for w in range(1, waves + 1):
        for part, tests in groups:
            for t in tests:
                b.tests.append(_sample(t, b._id(), part, w, b.policy.recheck_duration_s))
                made += 1
    return made


def _sample(t: Test, test_id: str, part: str, wave: int, duration_s: float) -> Test:
    p = {**dict(t.params), "recheck_of": part, "duration_s": duration_s, "wave": wave}
    return replace(t, test_id=test_id, params=p)
