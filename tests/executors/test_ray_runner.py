"""Grouping a round's tests for reservation: tests sharing a node share one placement group."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.executors.ray.reserve import overlapping_groups
from fabriccheck.models import Test

node_sets = st.lists(st.sets(st.sampled_from([f"n{i}" for i in range(8)]), min_size=1,
                             max_size=3), max_size=10)


@settings(max_examples=80, deadline=None)
@given(node_sets)
def test_groups_partition_the_round_and_never_share_nodes(sets):
    tests = [Test(f"t{i}", "iperf3", tuple(sorted(s))) for i, s in enumerate(sets)]
    groups = overlapping_groups(tests)
    flat = [t.test_id for g in groups for t in g]
    assert sorted(flat) == sorted(t.test_id for t in tests)  # a partition
    assert [g[0].test_id for g in groups] == sorted(
        (g[0].test_id for g in groups), key=lambda x: int(x[1:]))  # in input order
    hosts = [{h for t in g for h in t.nodes} for g in groups]
    for i, a in enumerate(hosts):  # groups are disjoint ...
        for b in hosts[i + 1:]:
            assert not a & b
    for g in groups:  # ... and minimal: each group is connected through shared nodes
        seen, todo = {g[0].test_id}, [g[0]]
        while todo:
            cur = todo.pop()
            for t in g:
                if t.test_id not in seen and set(t.nodes) & set(cur.nodes):
                    seen.add(t.test_id)
                    todo.append(t)
        assert seen == {t.test_id for t in g}


def test_disjoint_tests_get_one_group_each():
    tests = [Test("a", "iperf3", ("n1", "n2")), Test("b", "iperf3", ("n3", "n4"))]
    assert [[t.test_id for t in g] for g in overlapping_groups(tests)] == [["a"], ["b"]]
