"""Node-internal faults: what the 1x tests (a collective over one node's GPUs, NVLink/PCIe
only) say about each node's own GPU path.

A 1x test touches no NIC and no link, so pair tests can neither clear nor blame what it
measures, and it clears nothing they measure. The rule (independent evidence, docs/design.md
step 4): a node is **bad** (node-internal fault) after ``min_fails`` failing 1x tests in at least
two rounds and no passing one; fewer make it a **suspect** that the follow-up rounds retest
alone. Why three: a glitch makes about 1% of tests spuriously low, with any value (a value far
below its peers is no proof it was no glitch), so two failures in a row happen to 1 node in
10,000 (0.4 per 4,096-node sweep); three to 1 in 10^6. On a busy fabric (8% jitter) a healthy
1x test fails far more often, so the count follows the run's own 1x noise
(:func:`noise_rate`: the share of first 1x tests that failed): the fewest failures in a row
noise makes on some node of the run with probability below 0.2% (:func:`fails_needed`: three
at 1% on up to 2,000 nodes, four at 4,096; five at 8% on 128).
A passing 1x test clears the node's GPU path (its failures were noise).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence

from fabriccheck.models import BAD, FAIL, PASS, SUSPECT, Observation, Verdict

#: failing 1x tests (in >= 2 rounds, none passing) that make a node-internal fault, at least
MIN_FAILS = 3
#: ... and at most: noise that needs more (a 1x test failing one time in five) convicts nobody
MAX_FAILS = 6
#: noise makes some healthy node of the run a node-internal fault with at most this probability
ALPHA = 0.002
#: the 1x noise rate assumed at least
MIN_RATE = 0.01


def fails_needed(rate: float, nodes: int) -> int:
    """Failing 1x tests in a row that noise failing a 1x test at ``rate`` makes on some
    healthy node of ``nodes`` with probability below :data:`ALPHA` (``MAX_FAILS + 1`` when
    even :data:`MAX_FAILS` would not do: then nobody is convicted on 1x tests alone).

    >>> fails_needed(0.01, 128), fails_needed(0.078, 128), fails_needed(0.3, 128)
    (3, 5, 7)
    """
    r, bound = max(MIN_RATE, rate), ALPHA / max(1, nodes)
    for n in range(MIN_FAILS, MAX_FAILS + 1):
        if r ** n < bound:
            return n
    return MAX_FAILS + 1


def noise_rate(observations: Sequence[Observation], settled: Collection[str] = ()
               ) -> tuple[float, int]:
    """The 1x tests' noise rate and the node count it is over: the share of nodes whose first
    finished 1x test failed, nodes ``settled`` by other evidence (a slow node's 1x fails for
    its fault, not noise) left out."""
    first: dict[str, Observation] = {}
    for o in sorted((o for o in observations if is_solo(o) and o.status in (PASS, FAIL)),
                    key=lambda o: o.test.round):
        first.setdefault(o.test.nodes[0], o)
    left = [o for n, o in first.items() if n not in settled]
    return sum(o.status == FAIL for o in left) / max(1, len(left)), len(first)


def is_solo(o: Observation) -> bool:
    """True for a 1x test: one node, no network flow."""
    return len(o.test.nodes) == 1 and not o.test.flows


def judge_intra(observations: Sequence[Observation], settled: set[str],
                min_fails: int | None = None
                ) -> tuple[dict[str, Verdict], dict[str, Verdict], int]:
    """``(bad, suspects, needed)``: node -> verdict from the 1x tests (nodes in ``settled``
    — already bad, hung or unreachable for other reasons — are left out), and the failing 1x
    tests that convict (``min_fails``, or :func:`fails_needed` at the run's
    :func:`noise_rate`: a busy fabric's jitter fails healthy 1x tests more often)."""
    if min_fails is None:
        min_fails = fails_needed(*noise_rate(observations, settled))
    fails: dict[str, list[Observation]] = defaultdict(list)
    passed: set[str] = set()
    for o in observations:
        if not is_solo(o):
            continue
        node = o.test.nodes[0]
        if o.status == PASS:
            passed.add(node)
        elif o.status == FAIL:
            fails[node].append(o)
    bad: dict[str, Verdict] = {}
    suspects: dict[str, Verdict] = {}
    for node, obs in sorted(fails.items()):
        if node in passed or node in settled:
            continue
        ids = tuple(o.test.test_id for o in obs)
        rounds = {o.test.round for o in obs}
        vals = ", ".join(f"{o.test.test_id} {o.value:.0f} {o.unit}" if o.value is not None
                         else f"{o.test.test_id} {o.status}" for o in obs[:4])
        why = (f"node-internal fault (NVLink/PCIe between its GPUs): its 1x collective failed "
               f"{len(obs)} time(s) in {len(rounds)} round(s) and never passed ({vals}); "
               "its network tests are judged apart")
        if len(obs) >= min_fails and len(rounds) >= 2:
            bad[node] = Verdict("node", node, BAD, why, ids)
        else:
            more = ("; a 1x retest follows" if min_fails <= MAX_FAILS else
                    "; the run's 1x tests fail too often for failures alone to convict")
            suspects[node] = Verdict("node", node, SUSPECT, why + more, ids)
    return bad, suspects, min_fails
