"""Lab plan (pure, no root): names, addresses, tc rates and how each fault kind becomes real."""

from __future__ import annotations

import pytest

from fabriccheck.errors import ConfigError
from fabriccheck.faults import FaultSet
from fabriccheck.lab.plan import HANG_COMMANDS, plan_lab
from fabriccheck.topology.load import load_topology


@pytest.fixture(scope="module")
def lab8():
    return load_topology("lab-8", require_tree=True)


def faults(*items: dict) -> FaultSet:
    return FaultSet.from_dict({"faults": list(items)})


def test_layout_names_addresses_and_rates(lab8) -> None:
    plan = plan_lab(lab8, name="t1", mgmt_octet=7)
    assert [h.name for h in plan.hosts] == [f"host{i}" for i in range(1, 9)]
    assert len({h.netns for h in plan.hosts} | {plan.switch_ns}) == 9
    assert all(h.netns.startswith("fclab-t1-") for h in plan.hosts)
    assert plan.switch_ns.startswith("fclab-t1.") and plan.mgmt_bridge.startswith("flt1-")
    assert len({h.mgmt_ip for h in plan.hosts}) == 8 and plan.gateway_ip == "10.220.7.1"
    h3 = plan.host("host3")
    assert [(n.name, n.rail, n.ip, n.switch) for n in h3.nics] == [
        ("eth0", 0, "192.168.100.3", "leaf-1-0"), ("eth1", 1, "192.168.101.3", "leaf-1-1")]
    assert all(n.rate_mbit == 1000 and n.port_rate_mbit == 1000 for n in h3.nics)
    assert len(plan.trunks) == 4 and all(t.rate_mbit == 1000 for t in plan.trunks)
    ports = [n.port for h in plan.hosts for n in h.nics] + [
        p for t in plan.trunks for p in (t.port_a, t.port_b)]
    assert len(ports) == len(set(ports)) and all(len(p) <= 15 for p in ports)
    assert all(len(h.mgmt_root_if) <= 15 for h in plan.hosts)
    assert set(plan.bridges) == set(lab8.switches)


def test_faults_become_rates_states_and_sshd(lab8) -> None:
    plan = plan_lab(lab8, faults(
        {"kind": "nic_degraded", "nic": "host2/eth1", "factor": 0.25},
        {"kind": "nic_down", "nic": "host3/eth0"},
        {"kind": "node_slow", "node": "host4", "factor": 0.5},
        {"kind": "link_degraded", "link": ["leaf-2-0", "spine-1"], "factor": 0.5},
        {"kind": "link_down", "link": ["host5/eth1", "leaf-2-1"]},
        {"kind": "node_unreachable", "node": "host6"},
        {"kind": "node_hang", "node": "host7"},
    ), name="t1", rate_scale=0.5)
    nic = {n.endpoint: n for h in plan.hosts for n in h.nics}
    assert nic["host2/eth1"].rate_mbit == nic["host2/eth1"].port_rate_mbit == 125
    assert nic["host2/eth0"].rate_mbit == 500  # rate_scale applies to every link
    assert nic["host3/eth0"].down and not nic["host3/eth0"].link_down
    assert {nic["host4/eth0"].rate_mbit, nic["host4/eth1"].rate_mbit} == {250}
    assert nic["host5/eth1"].link_down and not nic["host5/eth1"].down
    trunk = {t.link: t for t in plan.trunks}
    assert trunk[("leaf-2-0", "spine-1")].rate_mbit == 250
    assert trunk[("leaf-1-0", "spine-1")].rate_mbit == 500
    assert not plan.host("host6").sshd and plan.host("host7").hang
    assert all(h.sshd and not h.hang for h in plan.hosts if h.name not in ("host6", "host7"))
    assert len(plan.faults) == 7
    assert "python3" in HANG_COMMANDS and "iperf3" in HANG_COMMANDS


def test_flapping_links_get_a_flapper_on_a_switch_port(lab8) -> None:
    plan = plan_lab(lab8, faults(
        {"kind": "link_flapping", "link": ["leaf-1-0", "spine-1"], "probability": 0.5},
        {"kind": "link_flapping", "link": ["host3/eth1", "leaf-1-1"], "probability": 0.1}))
    trunk = next(t for t in plan.trunks if t.link == ("leaf-1-0", "spine-1"))
    port = next(n.port for n in plan.host("host3").nics if n.name == "eth1")
    assert sorted(plan.flapping) == sorted([(trunk.port_a, 0.5), (port, 0.1)])
    assert plan_lab(lab8).flapping == ()


def test_bad_names_are_clear_config_errors(lab8) -> None:
    with pytest.raises(ConfigError, match="unknown NIC"):
        plan_lab(lab8, faults({"kind": "nic_down", "nic": "host1/mlx5_0"}))
    for bad in ("Lab", "toolongname", "a-b", ""):
        with pytest.raises(ConfigError, match="lab name"):
            plan_lab(lab8, name=bad)


def test_nic_names_must_be_interface_names() -> None:
    from fabriccheck.topology.load import topology_from_dict

    topo = topology_from_dict({
        "name": "x", "fabric": "roce",
        "nodes": [{"name": "a", "nics": [{"name": "a-very-long-nic-name", "rail": 0}]},
                  {"name": "b", "nics": [{"name": "eth0", "rail": 0}]}],
        "switches": [{"name": "leaf", "tier": "leaf"}],
        "links": [{"a": "a/a-very-long-nic-name", "b": "leaf", "gbps": 1},
                  {"a": "b/eth0", "b": "leaf", "gbps": 1}],
    }, source="x.yaml")
    with pytest.raises(ConfigError, match="interface name"):
        plan_lab(topo)


def test_not_root_is_one_clear_line(monkeypatch, capsys) -> None:
    from fabriccheck.cli.main import main

    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert main(["lab", "up", "lab-4", "--name", "x"]) == 2
    err = capsys.readouterr().err
    assert "needs root" in err and "Traceback" not in err
