"""Intermittent parts (inference.flaky + planning.recheck): the second stage decides on fresh
samples taken in one round; noise alone is cleared; an undecided part is a suspect (exit 1)."""

from __future__ import annotations

import math

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.inference.flaky import binomial_cdf, binomial_tail, find_flaky
from fabriccheck.models import FAIL, PASS, Flow, Observation, Test
from fabriccheck.orchestrator import run
from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import resolve_spec
from tests.planning.fabrics import make_view


def test_binomial_cdf_and_tail_add_up():
    for n, p in ((10, 0.02), (32, 1 / 3)):
        for k in range(n + 1):
            assert math.isclose(binomial_cdf(k, n, p) + binomial_tail(k + 1, n, p), 1.0)


def _samples(part: str, partner: str, fails: int, n: int) -> list[Observation]:
    out = []
    for i in range(n):
        t = Test(f"r3-{i:05d}", "ib_write_bw", (part.split("/")[0], partner.split("/")[0]),
                 (Flow(part, partner),), round=3, purpose="confirm",
                 params={"recheck_of": part, "wave": i // 2 or None})
        out.append(Observation(t, FAIL if i < fails else PASS, 100.0 if i < fails else 390.0))
    return out


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
    obs = _sweep(view) + _samples(part, "node-002/mlx5_0", fails, 32)
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
    assert part not in fl.recheck_nics  # rechecked once: never asked for again


def spec_run(topo, faults, seed, **policy):
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict(faults)
    return run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed=seed),
               SweepPolicy(mode="sweep", seed=seed, **policy))


NOISE = {"jitter": 0.03, "glitch_rate": 0.02}


def test_recheck_samples_run_in_waves_of_one_round():
    view = make_view(nodes=32)
    topo = view.topology
    res = spec_run(topo, {"faults": [], "noise": NOISE}, seed=3)
    samples = [o for o in res.observations if o.test.params.recheck_of]
    assert samples, "1-2 % glitches leave lonely failures: the recheck must run"
    assert len({o.test.round for o in samples}) == 1
    per_part: dict[str, list[Observation]] = {}
    for o in samples:
        per_part.setdefault(o.test.params.recheck_of, []).append(o)
    for part, obs in per_part.items():
        assert len(obs) >= SweepPolicy().recheck_samples
        waves = [o.test.params.wave or 0 for o in obs]
        assert min(waves) >= 1  # after the round's own tests, in waves
        assert len(set(waves)) == -(-SweepPolicy().recheck_samples // 2)
        if " -- " in part:  # an IB link: every sample's route crosses it
            a, b = part.split(" -- ")
            assert all((a, b) in view.flow_links(o.test.flows[0])[0] for o in obs)
        else:
            assert all(part in o.test.nics for o in obs)
    # the recheck rides in the ladder's rounds or adds one at most (noise only: no follow-ups)
    assert res.rounds <= len(res.extra["ladder"]["steps"]) + 1


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
