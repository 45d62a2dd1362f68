"""Node-internal faults: what the 1x tests (a collective over one node's GPUs, NVLink/PCIe
only) say about each node's own GPU path.

A 1x test touches no NIC and no link, so pair tests can neither clear nor blame what it
measures, and it clears nothing they measure. The rule (independent evidence, docs/design.md
step 4): a node is **bad** (node-internal fault) after ``min_fails`` failing 1x tests in at least
two rounds and no passing one; one or two failures make it a **suspect** that the follow-up rounds
retest alone. Why three: a glitch makes about 1% of tests spuriously low, with any value (a
value far below its peers is no proof it was no glitch), so two failures in a row happen to
1 node in 10,000 (0.4 per 4,096-node sweep); three to 1 in 10^6. A passing 1x test clears the
node's GPU path (its failures were noise).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from fabriccheck.models import BAD, FAIL, PASS, SUSPECT, Observation, Verdict

#: failing 1x tests (in >= 2 rounds, none passing) that make a node-internal fault
MIN_FAILS = 3


def is_solo(o: Observation) -> bool:
    """True for a 1x test: one node, no network flow."""
    return len(o.test.nodes) == 1 and not o.test.flows


def judge_intra(observations: Sequence[Observation], settled: set[str],
                min_fails: int = MIN_FAILS) -> tuple[dict[str, Verdict], dict[str, Verdict]]:
    """``(bad, suspects)``: node -> verdict from the 1x tests (nodes in ``settled`` — already
    bad, hung or unreachable for other reasons — are left out)."""
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
            suspects[node] = Verdict("node", node, SUSPECT, why + "; a 1x retest follows", ids)
    return bad, suspects
