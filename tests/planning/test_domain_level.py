"""The domain level's carvings (planning/domain_level.py): partitions of a rack's trays in two
carvings where no two trays share every group, and the rounds the ladder plans on NVL72."""

from __future__ import annotations

import itertools

import pytest

from fabriccheck.planning.domain_level import DOMAIN_STEPS, carve_domain


@pytest.mark.parametrize("n", range(2, 40))
def test_every_carve_partitions_the_rack(n):
    trays = [f"t{i:02d}" for i in range(n)]
    for carve, carving in DOMAIN_STEPS[:-1]:
        groups = carve_domain(trays, carve, carving)
        if not groups:
            continue
        assert sorted(t for g in groups for t in g) == trays
        assert all(len(g) >= 2 for g in groups)


@pytest.mark.parametrize("n", range(8, 33))
def test_no_two_trays_share_every_group(n):
    """Up to 32 trays a rack (NVL72: 18); beyond, three trays of one first-carving quarter
    share a second-carving quarter and two halves cannot split them all (localization does)."""
    trays = list(range(n))
    groups = [set(g) for c, k in DOMAIN_STEPS[:-1] for g in carve_domain(trays, c, k)]
    for a, b in itertools.combinations(trays, 2):
        assert any((a in g) != (b in g) for g in groups), (a, b)


@pytest.mark.parametrize("carve", ["half", "quarter"])
@pytest.mark.parametrize("n", [8, 9, 17, 18])
def test_the_two_carvings_give_new_partners(carve, n):
    trays = list(range(n))
    one = carve_domain(trays, carve, 1)
    two = carve_domain(trays, carve, 2)
    for g in two:
        assert max(len(set(g) & set(h)) for h in one) < len(g)


def test_small_racks_carve_only_what_has_two_trays_per_group():
    assert carve_domain(["a"], "full", 0) == []
    assert carve_domain(list("abc"), "half", 1) == []
    assert carve_domain(list("abcd"), "half", 1) == [("a", "b"), ("c", "d")]
    assert carve_domain(list("abcdefg"), "quarter", 2) == []
