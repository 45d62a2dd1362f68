"""Routed lab plan (pure, no root): /31 addresses, ECMP routes, hop names, what it refuses."""

from __future__ import annotations

import pytest

from fabriccheck.errors import ConfigError
from fabriccheck.faults import FaultSet
from fabriccheck.lab.plan import plan_lab
from fabriccheck.lab.routed import route_argv
from fabriccheck.topology.load import load_topology, topology_from_dict


@pytest.fixture(scope="module")
def ecmp4():
    return load_topology("lab-ecmp-4")


def test_topology_file_chooses_the_mode(ecmp4) -> None:
    assert ecmp4.lab_mode == "routed" and load_topology("lab-4").lab_mode == "bridged"
    with pytest.raises(ConfigError, match="lab"):
        topology_from_dict({"name": "x", "fabric": "roce", "lab": {"mode": "meshed"},
                            "generator": {"kind": "rail-optimized", "nodes": 4,
                                          "gpus_per_node": 0, "rails": 1,
                                          "nodes_per_leaf": 2, "spines": 2}}, source="x.yaml")


def test_layout_addresses_routes_and_hop_names(ecmp4) -> None:
    plan = plan_lab(ecmp4, name="t2", mgmt_octet=3)
    assert plan.mode == "routed" and plan.bridges == {}
    assert [r.name for r in plan.routers] == ["leaf-1", "leaf-2", "spine-1", "spine-2"]
    assert len({r.netns for r in plan.routers}) == 4
    assert all(r.netns.startswith("fclab-t2.") for r in plan.routers)
    for h in plan.hosts:
        (nic,) = h.nics
        assert nic.prefix == 31 and nic.gateway and nic.ip != nic.gateway
        assert plan.port_ns(nic.port) == next(r.netns for r in plan.routers
                                              if r.name == nic.switch)
        # host and leaf addresses are the two ends of one /31
        assert nic.ip.rsplit(".", 1)[0] == nic.gateway.rsplit(".", 1)[0]
    addrs = [a for r in plan.routers for _, a in r.addresses]
    assert len(addrs) == len(set(addrs)) == 4 + 2 * 4  # a host port per host, 2 per trunk
    leaf1 = next(r for r in plan.routers if r.name == "leaf-1")
    (route,) = leaf1.routes  # to leaf-2's block, over both spines
    assert route.prefix == "10.2.0.0/16" and len(route.nexthops) == 2
    names = plan.hop_names()
    assert {names[h] for h in route.nexthops} == {"spine-1", "spine-2"}
    spine1 = next(r for r in plan.routers if r.name == "spine-1")
    assert sorted(len(r.nexthops) for r in spine1.routes) == [1, 1]
    argv = route_argv(leaf1.netns, route)
    assert argv[:6] == ["ip", "-n", leaf1.netns, "route", "replace", "10.2.0.0/16"]
    assert argv.count("nexthop") == 2


def test_faults_shape_the_routed_links(ecmp4) -> None:
    plan = plan_lab(ecmp4, FaultSet.from_dict({"faults": [
        {"kind": "link_degraded", "link": ["leaf-1", "spine-1"], "factor": 0.25},
        {"kind": "link_down", "link": ["leaf-2", "spine-2"]}]}), name="t2")
    trunk = {t.link: t for t in plan.trunks}
    assert trunk[("leaf-1", "spine-1")].rate_mbit == 250
    assert trunk[("leaf-2", "spine-2")].down and not trunk[("leaf-1", "spine-2")].down
    assert all(t.ip_a and t.ip_b for t in plan.trunks)
    # routes as a routing protocol converges: leaf-2 lost its spine-2 link, so it reaches
    # leaf-1 over spine-1 alone
    names = plan.hop_names()
    leaf2 = next(r for r in plan.routers if r.name == "leaf-2")
    (to_leaf1,) = leaf2.routes
    assert [names[h] for h in to_leaf1.nexthops] == ["spine-1"]
    leaf1 = next(r for r in plan.routers if r.name == "leaf-1")
    (to_leaf2,) = leaf1.routes  # spine-2 no longer offers leaf-2's block one hop away
    assert [names[h] for h in to_leaf2.nexthops] == ["spine-1"]


def test_refuses_what_it_cannot_build(ecmp4) -> None:
    with pytest.raises(ConfigError, match="flapping"):
        plan_lab(ecmp4, FaultSet.from_dict({"faults": [
            {"kind": "link_flapping", "link": ["leaf-1", "spine-1"], "probability": 0.5}]}))
    two_nics = topology_from_dict({
        "name": "x", "fabric": "roce", "lab": {"mode": "routed"}, "gpus_per_node": 0,
        "nodes": [{"name": "h1", "gpus": 0, "nics": ["eth0", "eth1"]},
                  {"name": "h2", "gpus": 0, "nics": ["eth0", "eth1"]}],
        "switches": [{"name": "l1", "tier": "leaf"}, {"name": "l2", "tier": "leaf"},
                     {"name": "s1", "tier": "spine"}],
        "links": [{"a": "h1/eth0", "b": "l1", "gbps": 1}, {"a": "h2/eth0", "b": "l1", "gbps": 1},
                  {"a": "h1/eth1", "b": "l2", "gbps": 1}, {"a": "h2/eth1", "b": "l2", "gbps": 1},
                  {"a": "l1", "b": "s1", "gbps": 1}, {"a": "l2", "b": "s1", "gbps": 1}],
    }, source="x.yaml")
    with pytest.raises(ConfigError, match="one data NIC"):
        plan_lab(two_nics)


def test_bridged_plans_are_unchanged() -> None:
    plan = plan_lab(load_topology("lab-4", require_tree=True), name="t3")
    assert plan.mode == "bridged" and plan.routers == () and plan.port_netns == {}
    assert all(n.prefix == 24 and not n.gateway for h in plan.hosts for n in h.nics)
