"""Verdicts within issue 12's round bar (3 rounds for nodes and NICs, 5 with links), and
``verdict_rounds`` listing only the verdicts a result reports."""

from __future__ import annotations

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.inference.verdicts import reported_rounds
from fabriccheck.models import link_key
from fabriccheck.orchestrator import run
from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import resolve_spec
from tests.scenarios import scenario


def _run(family: str, kind: str, seed: int):
    sc = scenario(family, kind, seed)
    topo, faults, nodes, mode = sc
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict(faults)
    return run(mode, nodes, topo, spec, SimExecutor(topo, spec, fs, seed=seed),
               SweepPolicy(mode=mode, seed=seed)), fs


def _reported(res) -> set[str]:
    links = {f"{a} -- {b}" for a, b in (link_key(*lk) for lk in res.bad_links)}
    return (set(res.drain) | set(res.bad_nics) | set(res.unreachable) | set(res.hung)
            | links | set(res.extra["bad_switches"]))


def test_reported_rounds_keeps_reported_verdicts_and_folds_links_into_their_switch():
    first = {"n1": 1, "n2/x": 2, "n9": 13, "a -- s": 3, "b -- s": 5, "c -- s": 4, "d -- s": 9,
             "e -- t": 4}
    got = reported_rounds(first, ["n1", "n2/x"], ["e -- t"],
                          {"s": ["a -- s", "b -- s", "c -- s", "d -- s"]})
    assert got == {"n1": 1, "n2/x": 2, "e -- t": 4, "s": 5}  # n9 withdrawn: no round
    assert reported_rounds(first, ["n7"], [], {}) == {}  # never reached by the loop


def test_withdrawn_culprits_have_no_verdict_round():
    """A uniformly slow fabric: bisection 'culprits' are left suspects (no drain), so they
    have no verdict round (they had rounds 13-14, over the bar, for verdicts never given)."""
    res, _ = _run("fabric_slow", "ib-rail", 2)
    assert res.drain == [] and res.fabric_warnings
    assert set(res.extra["verdict_rounds"]) <= _reported(res)
    assert max(res.extra["verdict_rounds"].values(), default=0) <= 5


@pytest.mark.slow
def test_dead_spine_is_one_switch_verdict_within_the_link_bar():
    res, fs = _run("switch_down", "ib-rail", 0)
    assert "spine-0" in res.extra["bad_switches"]
    rounds = res.extra["verdict_rounds"]
    assert rounds["spine-0"] <= 5
    assert not any("spine-0" in k for k in rounds if k != "spine-0")  # its links are evidence
    assert set(rounds) <= _reported(res)


def test_link_probes_pin_on_a_small_rail_within_the_link_bar():
    """odd_leaves: three leaves on the rail, so every probe of the uplink also crosses
    another leaf's uncleared link to the same spine; probes take cleared routes or clear the
    other link beside them (round 6 before)."""
    res, fs = _run("odd_leaves", "ib-rail", 1)
    rounds = res.extra["verdict_rounds"]
    assert max(rounds.values()) <= 5, rounds
    assert {f"{a} -- {b}" for a, b in (link_key(*lk) for lk in fs.bad_links())} <= set(rounds)
