"""The bandwidth model: max-min invariants, fault capacities, and healthy tests stay healthy."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.executors.sim.model import Capacities, max_min_rates
from fabriccheck.faults import FaultSet
from fabriccheck.models import link_key, nic_node
from fabriccheck.probes.nccl_tests import parse_nccl_tests
from fabriccheck.probes.perftest import parse_perftest
from tests.executors.sim.simfab import nccl, pair, rail_fabric, sim

units_st = st.lists(st.lists(st.integers(0, 5), min_size=0, max_size=6), min_size=1, max_size=8)
caps_st = st.lists(st.floats(0.0, 400.0), min_size=6, max_size=6)


@settings(max_examples=150, deadline=None)
@given(units=units_st, caps=caps_st, perm_seed=st.randoms(use_true_random=False))
def test_max_min_is_feasible_fair_and_order_free(units, caps, perm_seed):
    rates = max_min_rates(units, caps)
    used = [0.0] * len(caps)
    for u, r in zip(units, rates, strict=True):
        if not u:
            assert r == float("inf")
            continue
        assert r >= 0
        for h in u:
            used[h] += r
    for h, cap in enumerate(caps):
        assert used[h] <= cap * (1 + 1e-9) + 1e-9  # never above capacity
    for u, r in zip(units, rates, strict=True):
        if not u:
            continue
        # max-min: some hop of u is saturated and nobody on it gets more than u
        assert any(
            used[h] >= caps[h] * (1 - 1e-9) - 1e-9
            and all(r2 <= r * (1 + 1e-9) + 1e-9
                    for u2, r2 in zip(units, rates, strict=True) if h in u2)
            for h in u
        ), (units, caps, rates)
    order = list(range(len(units)))
    perm_seed.shuffle(order)
    again = max_min_rates([units[i] for i in order], caps)
    assert again == pytest.approx([rates[i] for i in order], rel=1e-9, abs=1e-9)


def test_capacities_fold_nic_node_and_link_faults():
    topo = rail_fabric(nodes=4, rails=2, spines=1)
    fs = FaultSet.from_dict({"faults": [
        {"kind": "nic_degraded", "nic": "node-001/mlx5_1", "factor": 0.5},
        {"kind": "node_slow", "node": "node-002", "factor": 0.25},
        {"kind": "link_degraded", "link": ["leaf-0-0", "spine-0"], "factor": 0.5},
        {"kind": "link_down", "link": ["leaf-1-1", "spine-0"]},
        {"kind": "nic_down", "nic": "node-004/mlx5_0"},
        {"kind": "link_flapping", "link": ["leaf-1-0", "spine-0"], "probability": 0.5},
        {"kind": "link_flapping", "link": ["leaf-1-0", "spine-0"], "probability": 0.5},
    ]})
    caps = Capacities.build(topo, fs)
    lk = caps.link_gbps
    assert lk[link_key("node-001/mlx5_1", "leaf-0-1")] == 200
    assert lk[link_key("node-001/mlx5_0", "leaf-0-0")] == 400
    assert lk[link_key("node-002/mlx5_0", "leaf-0-0")] == 100
    assert lk[link_key("node-002/mlx5_1", "leaf-0-1")] == 100
    assert lk[("leaf-0-0", "spine-0")] == 200
    assert lk[("leaf-1-1", "spine-0")] == 0
    assert lk[link_key("node-004/mlx5_0", "leaf-1-0")] == 0
    assert caps.flapping[("leaf-1-0", "spine-0")] == pytest.approx(0.75)
    assert caps.down_nics == {"node-004/mlx5_0"}


# ---- property: a test that touches no faulty component is not hurt ---------------------------
NODES = [f"node-{i:03d}" for i in range(1, 9)]
FAULT_KINDS = ["nic_degraded", "nic_down", "node_slow", "node_hang", "node_unreachable",
               "link_degraded", "link_down", "link_flapping"]


@st.composite
def fault_sets(draw, topo):
    links = sorted(topo.links)
    faults = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(FAULT_KINDS))
        f = {"kind": kind}
        if kind.startswith("nic"):
            f["nic"] = topo.nic(draw(st.sampled_from(NODES)), draw(st.integers(0, 1)))
        elif kind.startswith("node"):
            f["node"] = draw(st.sampled_from(NODES))
        else:
            f["link"] = list(draw(st.sampled_from(links)))
        if kind.endswith(("degraded", "slow")):
            f["factor"] = draw(st.sampled_from([0.1, 0.25, 0.5, 0.8]))
        if kind == "link_flapping":
            f["probability"] = draw(st.sampled_from([0.3, 1.0]))
        faults.append(f)
    return {"faults": faults}


def measured(test, raw) -> float | None:
    if raw.exit_code != 0:
        return None
    if test.probe == "nccl":
        return parse_nccl_tests(raw.stdout).max_busbw_gbps
    return parse_perftest(raw.stdout).bw_at()


def touched(ex, test) -> tuple[set, set, set]:
    nics = {e for f in test.flows for e in (f.src, f.dst)}
    links = {k for f in test.flows for k in ex.router.path(f, test.test_id)}
    return set(test.nodes), nics, links


@pytest.mark.parametrize("fabric", ["infiniband", "roce"])
def test_healthy_only_tests_keep_at_least_90_percent(fabric):
    topo = rail_fabric(fabric, nodes=8, rails=2, nodes_per_leaf=2, spines=2)
    tests = [pair(topo, f"p{a}{b}{r}", NODES[a], NODES[b], rail=r)
             for a, b in ((0, 2), (1, 5), (3, 6), (4, 7)) for r in (0, 1)]
    tests += [nccl(topo, "n04", [NODES[0], NODES[4]]), nccl(topo, "n37", [NODES[3], NODES[7]]),
              nccl(topo, "n1", [NODES[1]]), nccl(topo, "n6", [NODES[6]])]
    clean = sim(topo, seed=9)
    healthy = {t.test_id: measured(t, clean.run_round([t])[0]) for t in tests}
    assert all(v and v > 0 for v in healthy.values())
    seen = {"faulty": 0, "clean": 0}

    @settings(max_examples=25, deadline=None)
    @given(faults=fault_sets(topo))
    def check(faults):
        ex = sim(topo, faults, seed=9)
        fs = ex.faults
        bad_nodes = set(fs.bad_nodes()) | set(fs.unreachable_nodes())
        bad_nics, bad_links = set(fs.bad_nics()), set(fs.bad_links())
        maybe = {f.link for f in fs.faults if f.kind == "link_flapping" and f.probability < 1}
        sure_links = {f.link for f in fs.faults if f.link and f.link not in maybe}
        for t in tests:  # one test per round: no contention
            nodes, nics, links = touched(ex, t)
            faulty = (nodes & bad_nodes or nics & bad_nics or links & bad_links
                      or {nic_node(n) for n in nics} & bad_nodes)
            value = measured(t, ex.run_round([t])[0])
            if faulty:
                seen["faulty"] += 1
                sure = (nodes & bad_nodes or nics & bad_nics or links & sure_links
                        or {nic_node(n) for n in nics} & bad_nodes)
                if sure:  # and the converse: a faulty component always shows
                    assert value is None or value < 0.9 * healthy[t.test_id], (t.test_id, faults)
                continue
            seen["clean"] += 1
            assert value is not None and value >= 0.9 * healthy[t.test_id], (t.test_id, faults)

    check()
    assert seen["faulty"] > 0 and seen["clean"] > 0  # both sides of the property were exercised
