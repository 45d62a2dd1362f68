"""A node judged on the tests it ran alone: HCA loopback, or one of its NICs to another.

A node convicts on failures with two partners at least (``device_judges.judge_node``). A job of
two or three nodes may not have them: every pair test of a slow node fails against its one
healthy partner, and from the pair tests alone either could be the slow one. The tests a node
runs with no other node on the path (``ib_write_bw`` from a NIC to its own address, or to a
sibling NIC through the switch: :mod:`fabriccheck.planning.partnerless`) involve no partner:
when such tests failed on two NICs of the node at least, three tests in all, the node never
passed a test of any kind (one pass clears a node), and another node passed the same kind of
test in this run (the floor is reachable: not a tool, a host type or a fabric that is slow
everywhere), the node is what fails. Noise makes a healthy node fail *every* test it ran,
its own loopbacks included, with a probability of about ``glitch rate ** 3``.

Hangs the same way: a node hangs when it hung with two partners at least; in a two-node job
each node hung only with the other, and the one whose tests alone hang on two of its NICs
(while it finished nothing) is the one that hangs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from fabriccheck.models import PASS, Observation

#: distinct NICs whose tests alone must have failed, and failing tests in all
MIN_NICS, MIN_FAILS = 2, 3


def ran_alone(o: Observation) -> bool:
    """A network test of one node: loopback or NIC to NIC of the same host."""
    return len(set(o.test.nodes)) == 1 and bool(o.test.flows)


def alone_passers(observations: Iterable[Observation]) -> frozenset[str]:
    """Nodes that passed a network test run alone."""
    return frozenset(o.test.nodes[0] for o in observations if o.status == PASS and ran_alone(o))


def alone_reason(node: str, failed: Sequence[Observation], pinned: Mapping[str, str],
                 passers: frozenset[str]) -> str:
    """Why ``node`` is bad on the tests it ran alone ("" when they do not convict it);
    ``failed`` are its failing tests (it passed none), ``pinned`` test id -> the node a
    test's failure is pinned to, ``passers`` from :func:`alone_passers`."""
    alone = [o for o in failed if ran_alone(o) and pinned.get(o.test.test_id) == node]
    nics = sorted({x for o in alone for x in o.test.nics})
    peers = sorted(passers - {node})
    if len(nics) < MIN_NICS or len(alone) < MIN_FAILS or not peers:
        return ""
    ids = ", ".join(o.test.test_id for o in alone[:4]) + (" ..." if len(alone) > 4 else "")
    return (f"; its tests with no other node on the path (loopback, NIC to NIC) failed on "
            f"{len(nics)} NICs ({ids}) while {peers[0]}"
            f"{f' (+{len(peers) - 1} more)' if len(peers) > 1 else ''} passed the same kind")


def hung_alone(hangs: Sequence[Observation]) -> str:
    """Why a node that finished no test hangs, on its tests alone ("" when fewer than
    :data:`MIN_NICS` of its NICs hung alone)."""
    alone = [o for o in hangs if ran_alone(o)]
    nics = {x for o in alone for x in o.test.nics}
    if len(nics) < MIN_NICS:
        return ""
    return (f"; {len(alone)} of them ran with no other node on the path (loopback, NIC to "
            f"NIC) on {len(nics)} NICs ({', '.join(o.test.test_id for o in alone[:4])})")
