"""Generator invariants over many sizes (hypothesis): counts, attachment, routes and ECMP sets."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabriccheck.errors import ConfigError
from fabriccheck.models import link_key, nic_node
from fabriccheck.topology import generate
from fabriccheck.topology.load import check_structure
from fabriccheck.topology.model import Topology

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_valid_path(topo: Topology, src: str, dst: str, path) -> None:
    """``path`` is a walk of existing links from NIC ``src`` to NIC ``dst`` with no repeats."""
    assert path, (src, dst)
    assert all(key in topo.links for key in path)
    cur = src
    visited = {src}
    for a, b in path:
        assert cur in (a, b), (cur, path)
        cur = b if cur == a else a
        assert cur not in visited
        visited.add(cur)
    assert cur == dst
    # only the two ends are NICs; the rest are switches
    assert all(v in topo.switches for v in visited - {src, dst})


def sample_pairs(topo: Topology, rng: random.Random, count: int, same_rail: bool = True):
    nics = sorted(topo.nics)
    for _ in range(count):
        src = rng.choice(nics)
        if same_rail:
            rail = topo.nics[src].rail
            cands = [n for n in nics if topo.nics[n].rail == rail and nic_node(n) != nic_node(src)]
        else:
            cands = [n for n in nics if nic_node(n) != nic_node(src)]
        if cands:
            yield src, rng.choice(cands)


rail_params = st.fixed_dictionaries(
    {
        "nodes": st.integers(1, 160),
        "rails": st.integers(1, 8),
        "nodes_per_leaf": st.integers(1, 40),
        "spines": st.integers(1, 12),
    }
)


@SETTINGS
@given(params=rail_params, fabric=st.sampled_from(["infiniband", "roce"]), seed=st.integers(0, 99))
def test_rail_optimized_invariants(params, fabric, seed):
    n, r, p, s = params["nodes"], params["rails"], params["nodes_per_leaf"], params["spines"]
    topo = generate({"kind": "rail-optimized", **params}, name="t", fabric=fabric)
    check_structure(topo, source="gen")
    groups = math.ceil(n / p)
    assert len(topo.nodes) == n
    assert len(topo.nics) == n * r
    tiers = Counter(sw.tier for sw in topo.switches.values())
    assert tiers == Counter({"leaf": groups * r, "spine": s})
    assert len(topo.links) == n * r + groups * r * s
    width = max(3, len(str(n)))
    assert sorted(topo.nodes)[0] == "node-" + "1".zfill(width)
    # every NIC on exactly one leaf: the leaf of its group and its rail
    attached = Counter(nic for key in topo.links for nic in key if nic in topo.nics)
    assert set(attached.values()) == {1} and len(attached) == n * r
    for i, node in enumerate(sorted(topo.nodes)):
        for nic in topo.nodes[node].nics:
            assert nic.name == f"mlx5_{nic.rail}"
            assert topo.leaf_of(nic.endpoint) == f"leaf-{i // p}-{nic.rail}"
    rng = random.Random(seed)
    for src, dst in sample_pairs(topo, rng, 12):
        paths = topo.paths(src, dst)
        same_leaf = topo.leaf_of(src) == topo.leaf_of(dst)
        assert len(paths) == (1 if same_leaf else s)
        for path in paths:
            assert_valid_path(topo, src, dst, path)
        cands = topo.candidate_paths(src, dst)
        if fabric == "infiniband":
            route = topo.route(src, dst)
            assert cands == (route,) and route in paths
            assert topo.route(src, dst) == route  # deterministic
        else:
            assert cands == paths


ft2_params = st.fixed_dictionaries(
    {
        "nodes": st.integers(2, 120),
        "rails": st.integers(1, 4),
        "nodes_per_leaf": st.integers(1, 24),
        "spines": st.integers(1, 10),
    }
)


@SETTINGS
@given(params=ft2_params, fabric=st.sampled_from(["infiniband", "roce"]), seed=st.integers(0, 99))
def test_fat_tree_2_tier_invariants(params, fabric, seed):
    n, r, p, s = params["nodes"], params["rails"], params["nodes_per_leaf"], params["spines"]
    topo = generate({"kind": "fat-tree", **params}, name="t", fabric=fabric)
    check_structure(topo, source="gen")
    leaves = math.ceil(n / p)
    assert Counter(sw.tier for sw in topo.switches.values()) == {"leaf": leaves, "spine": s}
    assert len(topo.links) == n * r + leaves * s
    for node in topo.nodes:
        assert len(topo.node_leaves(node)) == 1  # not rail-optimized: one leaf per node
    for src, dst in sample_pairs(topo, random.Random(seed), 10, same_rail=False):
        paths = topo.paths(src, dst)
        assert len(paths) == (1 if topo.leaf_of(src) == topo.leaf_of(dst) else s)
        for path in topo.candidate_paths(src, dst):
            assert_valid_path(topo, src, dst, path)


ft3_params = st.fixed_dictionaries(
    {
        "nodes": st.integers(2, 160),
        "rails": st.integers(1, 2),
        "nodes_per_leaf": st.integers(1, 8),
        "leaves_per_pod": st.integers(1, 4),
        "spines_per_pod": st.integers(1, 4),
        "cores_per_spine": st.integers(1, 4),
    }
)


@SETTINGS
@given(params=ft3_params, fabric=st.sampled_from(["infiniband", "roce"]), seed=st.integers(0, 99))
def test_fat_tree_3_tier_invariants(params, fabric, seed):
    params = dict(params)
    sp, g = params["spines_per_pod"], params.pop("cores_per_spine")
    params["cores"] = sp * g
    n, r = params["nodes"], params["rails"]
    p, lp = params["nodes_per_leaf"], params["leaves_per_pod"]
    topo = generate({"kind": "fat-tree", "tiers": 3, **params}, name="t", fabric=fabric)
    pods = math.ceil(n / (p * lp))
    tiers = Counter(sw.tier for sw in topo.switches.values())
    assert tiers == {"leaf": pods * lp, "spine": pods * sp, "core": sp * g}
    assert len(topo.links) == n * r + pods * lp * sp + pods * sp * g
    check_structure(topo, source="gen")
    for src, dst in sample_pairs(topo, random.Random(seed), 10):
        paths = topo.paths(src, dst)
        src_leaf, dst_leaf = topo.leaf_of(src), topo.leaf_of(dst)
        same_pod = src_leaf.split("-")[1] == dst_leaf.split("-")[1]
        expected = 1 if src_leaf == dst_leaf else (sp if same_pod else sp * g)
        assert len(paths) == expected
        for path in topo.candidate_paths(src, dst):
            assert_valid_path(topo, src, dst, path)


def spread(counts: Counter, keys) -> int:
    values = [counts.get(k, 0) for k in keys]
    return max(values) - min(values)


@pytest.mark.parametrize("nodes,per_leaf,spines", [(64, 8, 8), (96, 16, 6), (100, 10, 7)])
def test_ib_dmodk_spreads_destinations_evenly_over_spines(nodes, per_leaf, spines):
    topo = generate(
        {"kind": "rail-optimized", "nodes": nodes, "rails": 2, "nodes_per_leaf": per_leaf,
         "spines": spines},
        name="t", fabric="infiniband",
    )
    src = topo.nic("node-001", 1)
    used = Counter()
    for node in sorted(topo.nodes):
        dst = topo.nic(node, 1)
        if topo.leaf_of(dst) == topo.leaf_of(src):
            continue
        route = topo.route(src, dst)
        (spine,) = {e for key in route for e in key if e.startswith("spine-")}
        used[spine] += 1
    all_spines = [s for s in topo.switches if s.startswith("spine-")]
    assert set(used) == set(all_spines)
    assert spread(used, all_spines) <= 2  # a contiguous block (the source leaf) is excluded


def test_ib_dmodk_uses_every_core_evenly_on_3_tier():
    # spines_per_pod and cores per spine share a factor: a plain "k mod count" at every level
    # would reach only 4 of the 16 cores; D-mod-K divides by the fan-out already used
    topo = generate(
        {"kind": "fat-tree", "tiers": 3, "nodes": 128, "rails": 1, "nodes_per_leaf": 4,
         "leaves_per_pod": 4, "spines_per_pod": 4, "cores": 16},
        name="t", fabric="infiniband",
    )
    src = topo.nic("node-001", 0)
    used = Counter()
    for node in sorted(topo.nodes)[16:]:  # other pods only
        route = topo.route(src, topo.nic(node, 0))
        assert_valid_path(topo, src, topo.nic(node, 0), route)
        (core,) = {e for key in route for e in key if e.startswith("core-")}
        used[core] += 1
    cores = [s for s in topo.switches if s.startswith("core-")]
    assert set(used) == set(cores)
    assert spread(used, cores) <= 1


def test_ib_routes_to_one_destination_converge():
    """Destination-based forwarding: two sources on one leaf reach a destination via one spine."""
    topo = generate(
        {"kind": "rail-optimized", "nodes": 64, "rails": 1, "nodes_per_leaf": 16, "spines": 4},
        name="t", fabric="infiniband",
    )
    dst = topo.nic("node-040", 0)
    spines = {
        next(e for k in topo.route(topo.nic(src, 0), dst) for e in k if e.startswith("spine"))
        for src in ("node-001", "node-002", "node-016")
    }
    assert len(spines) == 1


def test_link_key_is_how_paths_name_links():
    topo = generate({"kind": "fat-tree", "nodes": 4, "nodes_per_leaf": 2, "spines": 2, "rails": 1},
                    name="t", fabric="roce")
    (path, *_rest) = topo.paths("node-001/mlx5_0", "node-004/mlx5_0")
    assert path[0] == link_key("node-001/mlx5_0", "leaf-0")


@pytest.mark.parametrize(
    "gen,field",
    [
        ({"kind": "fat-tree", "tiers": 4, "nodes": 4}, "generator.tiers"),
        ({"kind": "fat-tree", "tiers": 3, "nodes": 8, "nodes_per_leaf": 2, "leaves_per_pod": 2,
          "spines_per_pod": 3, "cores": 4}, "generator.cores"),
        ({"kind": "fat-tree", "tiers": 3, "nodes": 80, "nodes_per_leaf": 2, "leaves_per_pod": 2,
          "spines_per_pod": 2, "cores": 4, "pods": 2}, "generator.pods"),
        ({"kind": "fat-tree", "nodes": 8, "nodes_per_leaf": 2, "spines": 2, "cores": 4},
         "generator.cores"),
        ({"kind": "rail-optimized", "nodes": 8, "nic_gbps": 0, "spines": 1}, "generator.nic_gbps"),
    ],
)
def test_generator_parameter_errors_name_the_field(gen, field):
    with pytest.raises(ConfigError) as info:
        generate(gen, name="t", fabric="roce", source="x.yaml")
    assert info.value.field == field
    assert str(info.value).startswith(f"x.yaml:{field}: ")


def test_doctests():
    import doctest

    from fabriccheck.topology import generators
    from fabriccheck.topology.discovery import common, ibnet_parse, ibnetdiscover

    for module in (generators, common, ibnet_parse, ibnetdiscover):
        assert doctest.testmod(module).failed == 0, module.__name__


def test_ib_every_node_pair_has_one_route_per_rail():
    topo = generate(
        {"kind": "rail-optimized", "nodes": 48, "rails": 4, "nodes_per_leaf": 16, "spines": 4},
        name="t", fabric="infiniband",
    )
    nodes = sorted(topo.nodes)
    for rail in range(4):
        for a in nodes:
            for b in nodes:
                if a == b:
                    continue
                src, dst = topo.nic(a, rail), topo.nic(b, rail)
                cands = topo.candidate_paths(src, dst)
                assert len(cands) == 1
                assert cands[0] in topo.paths(src, dst)
                assert cands[0][0] == ((src, topo.leaf_of(src)) if src < topo.leaf_of(src)
                                       else (topo.leaf_of(src), src))


def test_generator_models_match_params():
    """The schema (docs, validation) and the generators take the same parameters."""
    from fabriccheck.schema.topology import FatTree, RailOptimized
    from fabriccheck.topology.generators import PARAMS

    assert set(RailOptimized.model_fields) == {"kind", *PARAMS["rail-optimized"]}
    assert set(FatTree.model_fields) == {"kind", *PARAMS["fat-tree"]}
