"""The sequential link screen (issue 31): a switch link failing one test in five is flaky or a
suspect, never a silent pass; noise alone clears every link; one NIC's failures, or a flapping
neighbour's, never make a link flaky."""

from __future__ import annotations

import math
import random

import pytest

from fabriccheck.inference.link_screen import (
    BETA,
    LinkTally,
    crossings,
    llr,
    noise_warning,
    screen_links,
    screenable,
)
from fabriccheck.models import FAIL, PASS, Flow, Observation, RawResult, Test
from fabriccheck.topology.view import FabricView
from tests.inference.test_flaky import spec_run
from tests.planning.fabrics import make_view

VIEW: FabricView = make_view(kind="fat-tree")  # IB, 64 nodes, 16 a leaf, 4 spines
_n = iter(range(1_000_000))


def pair(src: str, dst: str, ok: bool) -> Observation:
    t = Test(f"r3-{next(_n):06d}", "ib_write_bw", (src.split("/")[0], dst.split("/")[0]),
             (Flow(src, dst),), round=3, purpose="sweep", params={"rails": (0,)})
    return Observation(t, PASS if ok else FAIL, value=391.0 if ok else 98.0, unit="Gb/s",
                       floor=335.0, expected=385.0, raw=RawResult(t.test_id))


def crossing(link, rng: random.Random, tries: int = 5000):
    """A random NIC pair whose route surely crosses ``link``."""
    nics = sorted(VIEW.topology.attachment)
    for _ in range(tries):
        a, b = rng.sample(nics, 2)
        if a.split("/")[0] != b.split("/")[0] and link in VIEW.route_links(a, b):
            return a, b
    raise AssertionError(f"no pair crosses {link}")


def sample(link, n: int, fail_p: float, rng: random.Random, glitch: float = 0.0):
    """``n`` pair tests across ``link``; each fails with ``fail_p`` (the link) or ``glitch``."""
    out = []
    for _ in range(n):
        a, b = crossing(link, rng)
        out.append(pair(a, b, rng.random() >= fail_p and rng.random() >= glitch))
    return out


def judge(obs, rate=0.01):
    lonely = {o.test.test_id for o in obs if o.status == FAIL}
    return screen_links(obs, lonely, VIEW, rate)


LINKS = sorted(VIEW.switch_links)


def test_clean_crossings_clear_a_link_and_a_fifth_failing_makes_it_flaky():
    rng = random.Random(5)
    good, bad = LINKS[0], LINKS[-1]
    obs = sample(good, 30, 0.0, rng) + sample(bad, 60, 0.25, rng)
    tallies, g = judge(obs)
    assert tallies[good].state == "cleared" and tallies[good].k == 0
    t = tallies[bad]
    assert t.state == "flaky" and t.k >= 8 and t.pairs >= 2
    assert "pair tests that crossed it failed" in t.why(g, len(tallies))


def test_few_crossings_leave_a_link_open_and_say_how_many_more():
    rng = random.Random(6)
    tallies, g = judge(sample(LINKS[1], 8, 0.0, rng))
    t = tallies[LINKS[1]]
    assert t.state == "open" and t.crossings_to_clear(g, z=0.0) > 0
    more = t.crossings_to_clear(g, z=0.0)
    assert llr(0, t.n + more, g) <= math.log(BETA), "that many clean crossings clear it"


def test_one_nic_failing_its_tests_does_not_make_its_uplink_flaky():
    """Every failure across the link comes from one NIC's flows (an intermittent NIC whose
    samples come down its one route): set aside, the rest clears the link of the blame."""
    rng = random.Random(7)
    link = LINKS[2]
    obs = sample(link, 40, 0.0, rng)
    src, dst = crossing(link, rng)
    obs += [pair(src, dst, False) for _ in range(12)]  # one NIC pair, failing again and again
    tallies, _ = judge(obs)
    assert tallies[link].state != "flaky"


def test_a_healthy_link_beside_a_flapping_one_is_not_flaky():
    """Tests that cross both the flapping link and a healthy one fail as often: the healthy
    one is judged without the tests crossing the link found flaky first."""
    rng = random.Random(8)
    flapping = LINKS[3]
    obs = sample(flapping, 80, 0.3, rng)
    tallies, _ = judge(obs)
    assert tallies[flapping].state == "flaky"
    assert [lk for lk, t in tallies.items() if t.state == "flaky"] == [flapping]


@pytest.mark.parametrize("seed", range(3))
def test_noise_alone_clears_links_given_crossings(seed):
    rng = random.Random(100 + seed)
    obs = [o for lk in LINKS[:12] for o in sample(lk, 60, 0.0, rng, glitch=0.01)]
    tallies, _ = judge(obs, rate=0.01)
    assert not [lk for lk, t in tallies.items() if t.state == "flaky"]


def test_a_fabric_too_noisy_to_screen_says_so_once():
    assert screenable(0.02) and not screenable(0.07)
    open_ = {LINKS[0]: LinkTally(LINKS[0], 10, 1, 0.5, "open")}
    assert noise_warning(open_, 0.02) == []
    (warning,) = noise_warning(open_, 0.07)
    assert "7.0%" in warning and "1 link(s)" in warning


def test_crossings_are_the_switch_links_of_the_route():
    a, b = crossing(LINKS[0], random.Random(9))
    got = crossings(pair(a, b, True), VIEW)
    assert LINKS[0] in got and got <= VIEW.switch_links


def test_a_link_failing_a_fifth_of_its_tests_is_never_a_silent_pass():
    """End to end on the simulator (a fresh seed each run): a leaf uplink flapping at 0.2-0.3
    of a 64-node fat-tree sweep is flaky or a suspect and the run exits 1."""
    seed = random.randrange(1_000_000)
    topo = VIEW.topology
    rng = random.Random(seed)
    link = rng.choice(LINKS)
    p = round(rng.uniform(0.2, 0.3), 2)
    res = spec_run(topo, {"faults": [{"kind": "link_flapping", "link": list(link),
                                      "probability": p}],
                          "noise": {"jitter": 0.03, "glitch_rate": 0.01}}, seed=seed)
    name = f"{link[0]} -- {link[1]}"
    named = name in res.extra["flaky"] or name in res.suspects or any(
        tuple(c) == tuple(link) for g in res.link_suspects for c in g["candidates"])
    assert res.exit_code == 1 and named, f"seed {seed}: {name} at {p}: {res.extra['flaky']}"
    assert not res.drain, f"seed {seed}: drained {res.drain}"
