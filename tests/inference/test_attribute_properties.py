"""Properties of attribution over random observation sets (hypothesis).

- nothing is blamed (bad or suspect: node, NIC, hang, link) without a failing observation that
  touched it;
- a history where everything passed blames nothing;
- adding a passing observation never turns a part that was judged healthy (tested, blamed by
  nothing) into a bad one.

The fast slice runs in ``make test``; the ``slow`` variants draw 300 examples each and run in
``make test-long``. Every failure a long run finds is pinned below as an ``@example``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabriccheck.inference.attribute import Inference, infer
from fabriccheck.models import FAIL, HANG, PASS, Flow, Observation, RawResult, Test
from tests.planning.fabrics import make_view

VIEWS = {"infiniband": make_view(), "roce": make_view(fabric="roce")}
NODES = sorted(VIEWS["infiniband"].topology.nodes)  # 64 nodes, 16 per leaf, 4 rails

#: one test: (client index, server index, rail, status, round, purpose, value share)
test_row = st.tuples(
    st.integers(0, len(NODES) - 1), st.integers(0, len(NODES) - 1), st.integers(0, 3),
    st.sampled_from([PASS, PASS, PASS, FAIL, FAIL, HANG]), st.integers(1, 5),
    st.sampled_from(["sweep", "sweep", "confirm", "localize"]),
    st.sampled_from([0.2, 0.5, 0.8]),
)
histories = st.lists(test_row, min_size=0, max_size=60)


def observations(rows, fabric: str) -> list[Observation]:
    view = VIEWS[fabric]
    out = []
    for i, (a, b, rail, status, rnd, purpose, share) in enumerate(rows):
        if a == b:
            continue
        na, nb = NODES[a], NODES[b]
        t = Test(f"r{rnd}-{i:05d}", "ib_write_bw", (na, nb),
                 (Flow(view.rails_of[na][rail], view.rails_of[nb][rail]),), round=rnd,
                 purpose=purpose, params={"rails": (rail,)})
        value = 385.0 if status == PASS else 385.0 * share if status == FAIL else None
        out.append(Observation(t, status, value=value, unit="Gb/s", floor=335.0, expected=385.0,
                               raw=RawResult(t.test_id, timed_out=status == HANG)))
    return out


def blamed(inf: Inference) -> dict[str, set]:
    return {
        "node": set(inf.bad_nodes) | set(inf.node_suspects) | set(inf.hung)
        | set(inf.hang_suspects),
        "nic": set(inf.bad_nics) | set(inf.nic_suspects),
        "link": {lk for g in inf.links for lk in g.candidates},
    }


def bad(inf: Inference) -> set:
    return (set(inf.bad_nodes) | set(inf.bad_nics) | set(inf.hung)
            | {g.candidates[0] for g in inf.links if g.bad})


def healthy_parts(inf: Inference, obs: list[Observation]) -> set:
    """Nodes and NICs that were tested and that nothing blames."""
    b = blamed(inf)
    nodes = {n for o in obs for n in o.test.nodes} & inf.completed
    nics = {x for o in obs for x in o.test.nics}
    return (nodes - b["node"]) | {x for x in nics - b["nic"] if x.split("/")[0] in nodes}


def check_blame_needs_a_failure(rows, fabric):
    obs = observations(rows, fabric)
    inf = infer(obs, VIEWS[fabric])
    failing = [o for o in obs if o.status in (FAIL, HANG)]
    b = blamed(inf)
    for node in b["node"]:
        assert any(node in o.test.nodes for o in failing), f"{node} blamed with no failure"
    for nic in b["nic"]:
        assert any(nic in o.test.nics for o in failing), f"{nic} blamed with no failure"
    view = VIEWS[fabric]
    for lk in b["link"]:
        assert any(lk in view.flow_links(f)[1] for o in failing for f in o.test.flows), \
            f"{lk} blamed with no failing flow across it"


def check_all_pass_blames_nothing(rows, fabric):
    obs = observations([(a, b, r, PASS, rnd, p, s) for a, b, r, _, rnd, p, s in rows], fabric)
    inf = infer(obs, VIEWS[fabric])
    assert not any(blamed(inf).values()) and not bad(inf) and not inf.glitches


def check_a_pass_never_convicts(rows, extra, fabric):
    obs = observations(rows, fabric)
    view = VIEWS[fabric]
    before = infer(obs, view)
    healthy = healthy_parts(before, obs)
    more = observations([(*extra[:3], PASS, 6, "sweep", 1.0)], fabric)
    after = infer(obs + more, view)
    turned = healthy & bad(after)
    assert not turned, f"a passing test turned {sorted(turned)} bad"


fast = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
long = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
fabrics = st.sampled_from(sorted(VIEWS))
extra_test = st.tuples(st.integers(0, len(NODES) - 1), st.integers(0, len(NODES) - 1),
                       st.integers(0, 3))


@fast
@given(rows=histories, fabric=fabrics)
def test_blame_needs_a_failing_observation(rows, fabric):
    check_blame_needs_a_failure(rows, fabric)


@fast
@given(rows=histories, fabric=fabrics)
def test_an_all_pass_history_blames_nothing(rows, fabric):
    check_all_pass_blames_nothing(rows, fabric)


@fast
@given(rows=histories, extra=extra_test, fabric=fabrics)
def test_a_passing_observation_never_convicts_a_healthy_part(rows, extra, fabric):
    check_a_pass_never_convicts(rows, extra, fabric)


@pytest.mark.slow
@long
@given(rows=histories, fabric=fabrics)
def test_blame_needs_a_failing_observation_long(rows, fabric):
    check_blame_needs_a_failure(rows, fabric)


@pytest.mark.slow
@long
@given(rows=histories, extra=extra_test, fabric=fabrics)
def test_a_passing_observation_never_convicts_a_healthy_part_long(rows, extra, fabric):
    check_a_pass_never_convicts(rows, extra, fabric)
