"""RoCE link probes: flows aimed at a candidate link avoid the set's other links, and keep the
round's collective rings off their leaf ends."""

from __future__ import annotations

import pytest

from fabriccheck.models import link_key, nic_node
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.roce_link_probes import plan_roce_link_probes
from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import resolve_spec
from fabriccheck.topology import generate, load_topology
from fabriccheck.topology.view import FabricView


def roce_view(nodes: int = 64, spines: int = 8) -> FabricView:
    if nodes == 64 and spines == 8:
        return FabricView(load_topology("roce-rail-64"))
    return FabricView(generate({"kind": "rail-optimized", "nodes": nodes, "rails": 8,
                                "gpus_per_node": 8, "nodes_per_leaf": 32, "spines": spines},
                               name=f"roce-{nodes}", fabric="roce"))


def builder(view: FabricView, round_no: int = 3) -> RoundBuilder:
    return RoundBuilder(round_no, view, resolve_spec(None, view.topology), SweepPolicy())


@pytest.mark.parametrize("seed", range(4))
def test_two_leaves_per_rail_probe_each_link_without_the_other(seed):
    """leaf-0-7 - spine-3 - leaf-1-7: every same-rail flow crossing one of the two links
    crosses the other too, so a failure there can never split them. Each link's probes go to
    (or come from) another rail's leaf instead, whose paths include that link only."""
    view = roce_view()
    good = set(view.topology.nics)
    cands = (link_key("leaf-0-7", "spine-3"), link_key("leaf-1-7", "spine-3"))
    b = builder(view)
    made = plan_roce_link_probes(cands, b, good, seed=seed)
    assert made == 6
    for t in b.tests:
        target = link_key(*t.params.probe_of.split(" -- "))
        possible = view.route_links(t.flows[0].src, t.flows[0].dst)
        assert target in possible and not (set(cands) - {target}) & possible
        assert t.params.sport is not None and t.params.dport == 4791  # pinned: learnable
    att = view.topology.attachment
    for link in cands:  # three fresh node pairs per link: down it, up it, down again
        mine = [t for t in b.tests if link_key(*t.params.probe_of.split(" -- ")) == link]
        assert len({frozenset(t.nodes) for t in mine}) == 3
        leaf = next(x for x in link if x.startswith("leaf"))
        assert [att[t.flows[0].dst] == leaf for t in mine] == [True, False, True]
        ends = {view.topology.attachment[f] for t in mine for f in (t.flows[0].src,
                                                                   t.flows[0].dst)}
        assert set(link) & ends


def test_a_same_rail_partner_is_used_when_its_paths_avoid_the_rivals():
    view = roce_view(128, 8)  # 4 leaves per rail
    good = set(view.topology.nics)
    cands = (link_key("leaf-0-2", "spine-5"), link_key("leaf-3-2", "spine-5"))
    b = builder(view)
    assert plan_roce_link_probes(cands, b, good, seed=1) == 6
    nics = view.topology.nics
    assert all(nics[t.flows[0].src].rail == nics[t.flows[0].dst].rail == 2 for t in b.tests)


def test_rings_stay_off_the_leaf_ends_of_an_aimed_probe():
    """A collective ring's path is a hash nobody knows: one sharing the probe's link would
    halve it, and two such probes would convict a healthy link."""
    view = roce_view()
    good = set(view.topology.nics)
    b = builder(view)
    plan_roce_link_probes((link_key("leaf-0-7", "spine-3"),), b, good, seed=0)
    att = view.topology.attachment
    probe = b.tests[0]
    src_leaf = att[probe.flows[0].src]
    busy = {nic_node(n) for t in b.tests for n in t.nics}
    # a 2-node ring whose rail-7 flow leaves the probe's source leaf for the other group
    a = next(n for n in sorted(view.topology.nodes)
             if n not in busy and att[view.rails_of[n][view.topology.nics[probe.flows[0].src]
                                                         .rail]] == src_leaf)
    other = next(n for n in sorted(view.topology.nodes, reverse=True)
                 if n not in busy and view.pod(n) != view.pod(a))
    assert b.add_group((a, other), "scale", probe="nccl") is None
    local = next(n for n in sorted(view.topology.nodes)
                 if n not in busy and n != a and view.pod(n) == view.pod(a))
    assert b.add_group((a, local), "scale", probe="nccl") is not None  # leaf-local: fine
