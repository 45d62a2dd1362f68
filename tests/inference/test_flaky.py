"""Intermittent parts (inference.flaky + planning.recheck): the second stage decides on fresh
samples taken in one round; noise alone is cleared; an undecided part is a suspect (exit 1)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.inference.flaky import binomial_cdf, binomial_tail, find_flaky
from fabriccheck.models import FAIL, PASS, Flow, Observation, Test, link_key
from fabriccheck.orchestrator import run
from fabriccheck.planning.followup_round import RECHECK_ROUNDS
from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import resolve_spec
from tests.planning.fabrics import make_view


def test_binomial_cdf_and_tail_add_up():
    for n, p in ((10, 0.02), (32, 1 / 3)):
        for k in range(n + 1):
            assert math.isclose(binomial_cdf(k, n, p) + binomial_tail(k + 1, n, p), 1.0)


def _samples(part: str, partner: str | list[str], fails: int | set[int], n: int
             ) -> list[Observation]:
    """``n`` recheck samples of ``part``, partners taken in turn (the planner's blocks give
    a part several), failing the first ``fails`` (or those numbered in a set)."""
    partners = [partner] if isinstance(partner, str) else partner
    failing = set(range(fails)) if isinstance(fails, int) else fails
    out = []
    for i in range(n):
        peer = partners[i % len(partners)]
        t = Test(f"r3-{part}-{i:05d}", "ib_write_bw", (part.split("/")[0], peer.split("/")[0]),
                 (Flow(part, peer),), round=3, purpose="confirm",
                 params={"recheck_of": part, "wave": i // 2 or None})
        out.append(Observation(t, FAIL if i in failing else PASS,
                               100.0 if i in failing else 390.0))
    return out


PARTNERS = [f"node-{i:03d}/mlx5_0" for i in range(2, 10)]


def _sweep(view) -> list[Observation]:
    """A clean sweep so the run's glitch rate is measured on something (no failure)."""
    out = []
    for i in range(0, 16, 2):
        a, b = f"node-{i:03d}/mlx5_0", f"node-{i + 1:03d}/mlx5_0"
        t = Test(f"r1-{i:05d}", "ib_write_bw", (a.split("/")[0], b.split("/")[0]),
                 (Flow(a, b),), round=1)
        out.append(Observation(t, PASS, 390.0))
    return out


@pytest.mark.parametrize(("fails", "others", "state"), [
    (0, 0, "cleared"), (3, 0, "cleared"), (4, 0, "flaky"), (9, 0, "flaky"),
    # Bonferroni over 30 parts rechecked: 5 of 32 is neither noise nor 1 in 3 for sure
    (4, 29, "cleared"), (5, 29, "undecided"), (6, 29, "flaky"), (14, 29, "flaky")])
def test_recheck_decides_on_its_samples(fails, others, state):
    view = make_view()
    part = "node-000/mlx5_0"
    obs = _sweep(view) + _samples(part, PARTNERS, fails, 32)
    for i in range(others):  # other parts rechecked in the same run, all clean
        obs += _samples(f"node-{20 + i:03d}/mlx5_1", "node-002/mlx5_1", 0, 32)
    good = {x for o in obs if o.status == PASS for x in o.test.nics}
    fl = find_flaky(obs, view, {n.split("/")[0] for n in good}, good, set(), set())
    got = ("flaky" if part in fl.flaky else "undecided" if part in fl.undecided
           else "cleared" if part in fl.cleared else None)
    assert got == state
    if state == "flaky":
        assert f"failed {fails} of 32" in fl.flaky[part].reason
        assert f"Bonferroni over {others + 1} parts" in fl.flaky[part].reason
    if state == "undecided":
        assert fl.undecided[part].state == "suspect"
        assert part in fl.recheck_nics  # fresh samples would decide: asked for once more
    else:
        assert part not in fl.recheck_nics  # decided: never asked for again


def test_a_second_batch_alone_decides_an_undecided_part():
    """Undecided on its first 32 samples (5 failures, Bonferroni over 30 parts), a part gets
    a fresh batch in a later round; that batch alone decides (the first chose it for another
    look) and it is never asked for a third time."""
    view = make_view()
    part = "node-000/mlx5_0"
    first = _samples(part, PARTNERS, 5, 32)
    others = [o for i in range(29) for o in _samples(f"node-{20 + i:03d}/mlx5_1", PARTNERS, 0, 32)]
    for fails, state in ((10, "flaky"), (0, "cleared")):
        second = [replace(o, test=replace(o.test, test_id=o.test.test_id + "b", round=6))
                  for o in _samples(part, PARTNERS, set(range(0, 32, 32 // fails)) if fails
                                    else 0, 32)]
        obs = _sweep(view) + first + others + second
        good = {x for o in obs if o.status == PASS for x in o.test.nics}
        fl = find_flaky(obs, view, {n.split("/")[0] for n in good}, good, set(), set())
        assert (part in fl.flaky) == (state == "flaky")
        assert (part in fl.cleared) == (state == "cleared")
        assert part not in fl.recheck_nics and part not in fl.undecided
        if state == "flaky":
            assert "Bonferroni over 1 parts" in fl.flaky[part].reason  # alone in its round


def test_failures_with_one_partner_point_at_the_partner_not_the_part():
    """An intermittent partner (or the path to it) fails the part's samples with it only:
    the part is judged on its other samples (cleared here), the partner's NIC is the next
    to recheck; without the set-aside the part would be flaky (9 of 32, p ~ 1e-8)."""
    view = make_view()
    part, bad = "node-000/mlx5_0", PARTNERS[0]
    obs = _sweep(view) + _samples(part, PARTNERS, {0, 8, 16, 24}, 32)
    good = {x for o in obs if o.status == PASS for x in o.test.nics}
    fl = find_flaky(obs, view, {n.split("/")[0] for n in good}, good, set(), set())
    assert part not in fl.flaky
    assert part in fl.cleared
    assert bad in fl.recheck_nics  # the partner that failed is rechecked next


def test_failures_with_a_single_partner_never_convict():
    """All samples with one partner (nobody else to compare): many failures leave the part a
    suspect, not flaky: the partner explains them as well."""
    view = make_view()
    part = "node-000/mlx5_0"
    obs = _sweep(view) + _samples(part, "node-002/mlx5_0", 12, 32)
    good = {x for o in obs if o.status == PASS for x in o.test.nics}
    fl = find_flaky(obs, view, {n.split("/")[0] for n in good}, good, set(), set())
    assert part not in fl.flaky
    assert fl.undecided[part].state == "suspect"
    assert "one partner" in fl.undecided[part].reason


def test_a_lonely_group_failure_makes_its_nics_candidates():
    """A 4-node collective failing while every member passed its pair tests: each of its NICs
    is a recheck candidate (a NIC failing one test in three shows it in collectives too);
    before, group tests counted for nobody."""
    view = make_view()
    topo = view.topology
    names = sorted(topo.nodes)
    nodes, peer = tuple(names[:4]), names[20]
    obs = _sweep(view)
    for n in nodes:  # every NIC passed a pair test
        for r, nic in enumerate(topo.nodes[n].nics):
            t = Test(f"r2-{nic.endpoint}", "ib_write_bw", (n, peer),
                     (Flow(nic.endpoint, topo.nodes[peer].nics[r].endpoint),), round=2)
            obs.append(Observation(t, PASS, 390.0))
    ring = tuple(Flow(topo.nodes[a].nics[r].endpoint, topo.nodes[b].nics[r].endpoint)
                 for r in range(len(topo.nodes[nodes[0]].nics))
                 for a, b in zip(nodes, nodes[1:] + nodes[:1], strict=True))
    obs.append(Observation(Test("r5-g", "nccl", nodes, ring, round=5, purpose="scale"),
                           FAIL, 10.0))
    good_nics = {x for o in obs if o.status == PASS for x in o.test.nics}
    good_nodes = {n for o in obs if o.status == PASS for n in o.test.nodes}
    fl = find_flaky(obs, view, good_nodes, good_nics, set(), set())
    assert {f.src for f in ring} <= set(fl.recheck_nics)
    assert not fl.flaky  # one shared failure convicts nobody


def test_unrechecked_candidates_are_suspects_only_beyond_noise():
    from fabriccheck.inference.flaky import Flakiness
    fl = Flakiness(recheck_nics={"node-001/mlx5_0": 1, "node-002/mlx5_0": 2,
                                 "node-003/mlx5_0": 2},
                   odds={"node-001/mlx5_0": 0.001, "node-002/mlx5_0": 0.001,
                         "node-003/mlx5_0": 0.02})  # 2 of 3 tests; 2 of 10 at 2 % glitches
    assert set(fl.unresolved()) == {"node-002/mlx5_0"}
    assert fl.unresolved()["node-002/mlx5_0"].state == "suspect"


def test_unrechecked_candidates_are_weighed_like_the_screen_bonferroni():
    """The screen looked at thousands of parts (a big RoCE fabric's links on learned paths):
    two glitches among six tests of one link is what noise makes somewhere in most runs, so
    the bound is the screen's (alpha / parts screened), not alpha alone."""
    from fabriccheck.inference.flaky import Flakiness
    from fabriccheck.models import Link
    lk = Link.of("leaf-15-0", "spine-3")
    fl = Flakiness(recheck_links=[lk], odds={str(lk): 0.0015}, bound=0.01 / 5000)
    assert fl.unresolved() == {}
    fl.odds[str(lk)] = 1e-9
    assert set(fl.unresolved()) == {str(lk)}


def spec_run(topo, faults, seed, **policy):
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict(faults)
    return run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed=seed),
               SweepPolicy(mode="sweep", seed=seed, **policy))


NOISE = {"jitter": 0.03, "glitch_rate": 0.02}


def test_recheck_samples_run_in_waves_of_their_round():
    """Each part's samples are taken in one round, in waves after the round's own tests
    (a second recheck round only for candidates the first one's passes made, or an undecided
    part's fresh batch); the recheck adds test time, and rounds only while candidates wait."""
    view = make_view(nodes=32)
    topo = view.topology
    res = spec_run(topo, {"faults": [], "noise": NOISE}, seed=3)
    samples = [o for o in res.observations if o.test.params.recheck_of]
    assert samples, "1-2 % glitches leave lonely failures: the recheck must run"
    assert len({o.test.round for o in samples}) <= RECHECK_ROUNDS
    per_part: dict[tuple[str, int], list[Observation]] = {}
    for o in samples:
        per_part.setdefault((o.test.params.recheck_of, o.test.round), []).append(o)
    want = SweepPolicy().recheck_samples
    full = sum(len(obs) == want for obs in per_part.values())
    assert full >= 0.9 * len(per_part)  # a part that found few partners may get fewer
    for (part, _), obs in per_part.items():
        assert len(obs) <= want
        waves = [o.test.params.wave or 0 for o in obs]
        assert min(waves) >= 1  # after the round's own tests, in waves
        assert len(set(waves)) <= 2 * -(-want // 2)  # blocks retried: the waves at most double
        if " -- " in part:  # an IB link: every sample's route crosses it
            a, b = part.split(" -- ")
            assert all((a, b) in view.flow_links(o.test.flows[0])[0] for o in obs)
        else:
            assert all(part in o.test.nics for o in obs)
    assert res.rounds <= len(res.extra["ladder"]["steps"]) + RECHECK_ROUNDS


@pytest.mark.parametrize("seed", range(4))
def test_noise_only_is_never_flaky_or_suspect(seed):
    topo = make_view(nodes=64).topology
    res = spec_run(topo, {"faults": [], "noise": NOISE}, seed=seed)
    assert res.extra["flaky"] == [] and res.suspects == []
    assert res.exit_code == 0


@pytest.mark.parametrize("seed", range(6))
def test_an_intermittent_nic_with_a_failure_is_never_a_silent_pass(seed):
    """A NIC failing one test in three: when any of its tests failed, the run names it flaky
    (or leaves it a suspect) and exits 1; it is never cleared on noise's terms."""
    topo = make_view(nodes=32).topology
    nic = "node-005/mlx5_1"
    leaf = topo.attachment[nic]
    faults = {"faults": [{"kind": "link_flapping", "link": [nic, leaf], "probability": 0.33}],
              "noise": NOISE}
    res = spec_run(topo, faults, seed=seed)
    failed = any(o.status == FAIL and nic in o.test.nics for o in res.observations)
    if failed:
        assert res.exit_code == 1
        assert nic in res.extra["flaky"] or nic in res.suspects or "node-005" in res.drain
    if nic in res.extra["flaky"]:
        v = next(v for v in res.verdicts if v.name == nic)
        assert v.state == "flaky" and "%" in v.reason


def test_every_nic_finishes_enough_tests_to_show_an_intermittent_part():
    """On a 3-tier fat-tree with two-node leaves some ladder rounds find no room for a node,
    and a NIC can end with three or four tests: a NIC failing one in three then passes them
    all a fifth to a third of the time and nothing points at it. The top-up brings every NIC
    of a healthy node to ``policy.screen_tests`` finished tests."""
    import random

    from tests.scenarios import build_topology

    topo = build_topology("ib-fat3", 32, random.Random(1))
    res = spec_run(topo, {"faults": [], "noise": NOISE}, seed=1)
    counts = dict.fromkeys(topo.nics, 0)
    for o in res.observations:
        if o.status in (PASS, FAIL) and not o.test.params.recheck_of:
            for x in o.test.nics:
                counts[x] += 1
    want = SweepPolicy().screen_tests
    short = {x: k for x, k in counts.items() if k < want and x.split("/")[0] not in res.drain}
    assert not short, short


# ---- competing hypotheses (a partner's rate, a switch link, another link) ---------------------
def _judge(obs, view):
    good = {x for o in obs if o.status == PASS for x in o.test.nics}
    return find_flaky(obs, view, {n.split("/")[0] for n in good}, good, set(), set())


def _renumber(obs: list[Observation], tag: str) -> list[Observation]:
    return [replace(o, test=replace(o.test, test_id=f"{o.test.test_id}-{tag}")) for o in obs]


def _nic(view, node: int, rail: int = 0) -> str:
    return view.rails_of[f"node-{node:03d}"][rail]


def test_partners_failing_at_one_rate_are_both_evidence():
    """A part failing 7 of 20 with one partner and 2 of 12 with another fails at one rate
    with both: the first partner's samples are not set aside (12 clean-looking samples are
    too few to say the part is fine), so the part is flaky on failures with two partners.
    Setting them aside had left it undecided."""
    view = make_view()
    part, a, b = _nic(view, 1), _nic(view, 2), _nic(view, 3)
    obs = _sweep(view) + _renumber(_samples(part, a, 7, 20), "a") + _renumber(
        _samples(part, b, {3, 9}, 12), "b")
    fl = _judge(obs, view)
    assert part in fl.flaky
    assert "failed 9 of 32" in fl.flaky[part].reason


def test_a_probe_that_crossed_the_flapping_link_does_not_convict_another():
    """Link B's probes that also crossed the flapping link A failed; its probes that avoided
    A passed. A is flaky; B is judged on the probes that avoid A and is not flaky."""
    view = make_view()
    src = _nic(view, 1)  # leaf-0-0
    a_probes = [(src, _nic(view, n)) for n in range(33, 64, 2)
                if view.flow_links(Flow(src, _nic(view, n)))[0]]
    link_a = next(iter(view.flow_links(Flow(*a_probes[0]))[0] - {
        lk for lk in view.flow_links(Flow(*a_probes[0]))[0] if "leaf-0-0" not in lk}))
    a_flows = [f for f in a_probes if link_a in view.flow_links(Flow(*f))[0]]
    spine = next(e for e in link_a if e.startswith("spine"))
    link_b = link_key("leaf-1-0", spine)
    assert link_b in view.topology.links
    # B's probes: leaf-1-0 -> leaf-0-0 (cross A too) and leaf-1-0 -> leaf-2/3 (avoid A)
    b_flows = [(_nic(view, m), _nic(view, n)) for m in range(17, 33) for n in [1, *range(33, 64)]
               if link_b in view.flow_links(Flow(_nic(view, m), _nic(view, n)))[0]]
    on_a = [f for f in b_flows if link_a in view.flow_links(Flow(*f))[0]][:12]
    off_a = [f for f in b_flows if link_a not in view.flow_links(Flow(*f))[0]][:20]
    assert len(on_a) >= 6 and len(off_a) >= 16

    def probes(part, flows, failing):
        out = []
        for i, (s, d) in enumerate(flows):
            t = Test(f"r3-{part}-{i:05d}", "ib_write_bw", (s.split("/")[0], d.split("/")[0]),
                     (Flow(s, d),), round=3, purpose="confirm", params={"recheck_of": part})
            out.append(Observation(t, FAIL if i in failing else PASS,
                                   100.0 if i in failing else 390.0))
        return out

    name_a, name_b = (f"{x[0]} -- {x[1]}" for x in (link_a, link_b))
    a_obs = probes(name_a, (a_flows * 4)[:24], set(range(0, 24, 2)))
    b_obs = probes(name_b, on_a + off_a, set(range(0, len(on_a), 2)))
    fl = _judge(_sweep(view) + a_obs + b_obs, view)
    assert name_a in fl.flaky
    assert name_b not in fl.flaky


def test_a_nic_failing_only_beside_a_flaky_partner_is_not_flaky():
    """B's samples failed with A (itself found flaky on proven-good partners) and twice with
    another partner: A explains the first, two failures with one partner decide nothing. B is
    judged without A's samples: a suspect, never flaky (it was, on failures with two
    partners, one of them intermittent)."""
    view = make_view()
    a, b = _nic(view, 1), _nic(view, 2)
    obs = _sweep(view) + _renumber(_samples(a, [_nic(view, n) for n in (4, 5, 6, 7)],
                                            set(range(0, 32, 3)), 32), "a")
    obs += _renumber(_samples(b, a, {1, 4, 9, 12, 15}, 16), "b1")
    obs += _renumber(_samples(b, _nic(view, 3), {2, 11}, 16), "b2")
    fl = _judge(obs, view)
    assert a in fl.flaky
    assert b not in fl.flaky
    assert b in fl.undecided


def _via_one_uplink(view):
    """node-001's NIC on leaf-0-0, partners on leaf-1-0 alternately over two spines; its
    failing samples all cross one uplink (every third sample over that spine fails)."""
    part = _nic(view, 1)
    peers = [_nic(view, n) for n in range(17, 33, 2)]
    via = {p: view.flow_links(Flow(part, p))[0] for p in peers}
    up = next(lk for lk in via[peers[0]] if "leaf-0-0" in lk)
    failing = {i for i in range(32) if up in via[peers[i % len(peers)]] and i % 4 == 0}
    return part, peers, up, failing


def test_a_switch_link_nothing_clears_competes_with_the_nic():
    """Every failing sample crossed one uplink and no other test crossed it: the link explains
    the failures as well as the NIC. The NIC is judged off that link (a suspect, not flaky)
    and the link is rechecked."""
    view = make_view()
    part, peers, up, failing = _via_one_uplink(view)
    assert len(failing) >= 3
    fl = _judge(_sweep(view) + _samples(part, peers, failing, 32), view)
    assert part not in fl.flaky
    assert up in fl.recheck_links


def test_a_switch_link_other_tests_cleared_does_not_compete():
    """The same samples, but 24 other tests across that uplink passed (a link failing one test
    in three would have failed some): the link is cleared, the NIC is judged on all of its
    samples and is flaky."""
    view = make_view()
    part, peers, up, failing = _via_one_uplink(view)
    others = []
    for i, n in enumerate(range(2, 14)):
        for m in range(17, 33):
            a, b = _nic(view, n), _nic(view, m)
            if up in view.flow_links(Flow(a, b))[0] and len(others) < 24:
                t = Test(f"r1-x{i}-{m}", "ib_write_bw", (a.split("/")[0], b.split("/")[0]),
                         (Flow(a, b),), round=1)
                others.append(Observation(t, PASS, 390.0))
    assert len(others) == 24
    fl = _judge(_sweep(view) + others + _samples(part, peers, failing, 32), view)
    assert part in fl.flaky
    assert up not in fl.recheck_links


def test_a_recheck_that_clears_a_part_overrules_a_later_burst_in_the_screen():
    """A NIC rechecked (1 failure in 32 samples: cleared at 1 in 3) whose later ordinary tests
    of the same round glitched three times in a row: flaky at once on the screen's 4 of 8,
    but the recheck is the test made to decide it, and it clears the part."""
    view = make_view()
    part = "node-000/mlx5_0"
    obs = _sweep(view) + _samples(part, PARTNERS, {5}, 32)
    for i in range(8):  # the round's top-up samples with one partner: three glitches
        a, b = (part, "node-001/mlx5_0") if i % 2 else ("node-001/mlx5_0", part)
        t = Test(f"r3-top-{i:05d}", "ib_write_bw", (a.split("/")[0], b.split("/")[0]),
                 (Flow(a, b),), round=3)
        obs.append(Observation(t, FAIL if i in (1, 3, 5) else PASS,
                               120.0 if i in (1, 3, 5) else 390.0))
    obs.append(Observation(Test("r1-x", "ib_write_bw", ("node-000", "node-009"),
                                (Flow(part, "node-009/mlx5_0"),), round=1), FAIL, 150.0))
    for i in range(400):  # the rest of the run, clean: the screen's glitch rate is low
        a, b = f"node-{10 + i % 6:03d}/mlx5_1", f"node-{10 + (i + 1) % 6:03d}/mlx5_1"
        obs.append(Observation(Test(f"r2-{i:05d}", "ib_write_bw", (a[:8], b[:8]),
                                    (Flow(a, b),), round=2), PASS, 390.0))
    good = {x for o in obs if o.status == PASS for x in o.test.nics}
    fl = find_flaky(obs, view, {n.split("/")[0] for n in good}, good, set(), set())
    assert part not in fl.flaky
    assert fl.cleared[part] == "1 of 32"


def test_a_roce_link_on_learned_paths_is_screened_and_rechecked():
    """RoCE: the flaky screen counts a link for the tests whose learned path surely crossed
    it (an unlearned ECMP flow crosses no link for sure), so a flapping uplink becomes a
    recheck candidate; its recheck flows are aimed at it and spread over the waves, one flow
    of a link a wave and never two links of one switch together (flows pinned onto one spine
    in one wave would share it and fail for that alone)."""
    from fabriccheck.models import Link
    from fabriccheck.planning.build import RoundBuilder
    from fabriccheck.planning.confirm import GoodPool
    from fabriccheck.planning.recheck import plan_recheck
    from fabriccheck.topology.generators import generate
    from fabriccheck.topology.view import FabricView

    topo = generate({"kind": "rail-optimized", "nodes": 32, "rails": 2, "gpus_per_node": 2,
                     "nodes_per_leaf": 8, "spines": 4}, name="roce32", fabric="roce")
    view = FabricView(topo)
    flap = link_key("leaf-0-0", "spine-1")
    other = link_key("leaf-1-0", "spine-1")
    obs = []
    for i in range(40):  # rail 0 pairs across leaves 0 and 1, learned paths over spine 1
        a, b = f"node-{1 + i % 8:03d}/mlx5_0", f"node-{9 + (i * 3) % 8:03d}/mlx5_0"
        f = Flow(a, b, path=(flap, other))
        t = Test(f"r1-{i:05d}", "ib_write_bw", (a.split("/")[0], b.split("/")[0]), (f,), round=1)
        obs.append(Observation(t, FAIL if i % 10 in (1, 6) and i < 20 else PASS,
                               150.0 if i % 10 in (1, 6) and i < 20 else 390.0))
    for i in range(40):  # the rest of the fabric: same-leaf pairs, all clean
        a, b = f"node-{17 + i % 8:03d}/mlx5_1", f"node-{17 + (i + 1) % 8:03d}/mlx5_1"
        t = Test(f"r1-{100 + i:05d}", "ib_write_bw", (a.split("/")[0], b.split("/")[0]),
                 (Flow(a, b),), round=1)
        obs.append(Observation(t, PASS, 390.0))
    good = {x for o in obs if o.status == PASS for x in o.test.nics}
    cleared = {lk for o in obs if o.status == PASS for f in o.test.flows
               for lk in view.flow_links(f)[0]}  # what attribution clears
    fl = find_flaky(obs, view, {n.split("/")[0] for n in good}, good, cleared, set())
    assert Link.of(*flap) in fl.recheck_links and not fl.flaky
    b = RoundBuilder(2, view, resolve_spec(None, topo), SweepPolicy(seed=1))
    pool = GoodPool({n.split("/")[0] for n in good}, view, 1, 2)
    made = plan_recheck(b, [], fl.recheck_links, pool, good, seed=1)
    assert made >= 16
    waves: dict[int, list] = {}
    for t in b.tests:
        assert t.params.probe_of and t.params.recheck_of in {str(lk) for lk in fl.recheck_links}
        waves.setdefault(t.params.wave, []).append(t)
    for tests in waves.values():
        ends = [set(t.params.recheck_of.split(" -- ")) for t in tests]
        assert all(not (x & y) for i, x in enumerate(ends) for y in ends[i + 1:])


@pytest.mark.parametrize(("fails_each", "suspect"), [(3, True), (1, False)])
def test_a_partner_failing_the_samples_of_several_parts_is_the_suspect(fails_each, suspect):
    """RoCE, seed 120 of the intermittent family: the NIC failing one test in three passed
    its own sweep tests and was the recheck partner of two candidates, failing 3 of 16 of
    each one's samples: too few for either part to set it aside, so both were cleared and the
    run exited 0. Pooled over the parts its failures are beyond noise: it is a suspect (never
    a silent pass) and the next to recheck. One failure with each is noise."""
    view = make_view()
    bad = "node-030/mlx5_0"
    parts = ["node-020/mlx5_0", "node-021/mlx5_0"]
    obs = _sweep(view)
    for k, part in enumerate(parts):
        # partners in turn: the bad one on even samples, failing the first of them
        fails = set(range(0, 2 * fails_each, 2))
        obs += _renumber(_samples(part, [bad, f"node-03{k + 2}/mlx5_0"], fails, 32), part)
    good = {x for o in obs if o.status == PASS for x in o.test.nics}
    fl = find_flaky(obs, view, {n.split("/")[0] for n in good}, good, set(), set())
    assert all(p in fl.cleared for p in parts)  # each part's own samples clear it
    assert (bad in fl.undecided) == suspect
    assert (bad in fl.recheck_nics) == suspect
    if suspect:
        assert fl.undecided[bad].state == "suspect"
        assert "as their partner" in fl.undecided[bad].reason
        assert bad in fl.unresolved()  # listed if no round is left for its recheck
