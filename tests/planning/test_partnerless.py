"""NICs whose rail has no partner in scope: tested across rails, NIC to NIC on their own node,
or by HCA loopback, and said so; a NIC with no such test stays untested (exit 3)."""

from __future__ import annotations

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.orchestrator import run
from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import resolve_spec
from fabriccheck.topology.load import topology_from_dict


def fabric(hosts: dict[str, list[tuple[str, int, str]]], fabric: str = "infiniband"):
    """Explicit one- or two-leaf fabric: host -> [(nic, rail, leaf)]."""
    leaves = sorted({leaf for nics in hosts.values() for _, _, leaf in nics})
    links = [{"a": f"{h}/{nic}", "b": leaf, "gbps": 200}
             for h, nics in hosts.items() for nic, _, leaf in nics]
    links += [{"a": leaf, "b": "spine-0", "gbps": 200} for leaf in leaves]
    return topology_from_dict({
        "name": "t", "fabric": fabric, "gpus_per_node": 0,
        "nodes": [{"name": h, "gpus": 0, "nics": [{"name": n, "rail": r, "gbps": 200}
                                                   for n, r, _ in nics]}
                  for h, nics in hosts.items()],
        "switches": [{"name": leaf, "tier": "leaf"} for leaf in leaves]
        + [{"name": "spine-0", "tier": "spine"}],
        "links": links,
    }, source="test")


def sweep(topo, faults=(), **policy):
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict({"faults": list(faults), "noise": {"jitter": 0.01}})
    return run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed=1),
               SweepPolicy(mode="sweep", seed=1, **policy))


ONE_NIC = {"h1": [("mlx5_0", 0, "leaf-0")]}
TWO_NICS = {"h1": [("mlx5_0", 0, "leaf-0"), ("mlx5_1", 1, "leaf-0")]}
EXTRA_RAIL = {"h1": [("mlx5_0", 0, "leaf-0"), ("mlx5_2", 2, "leaf-1")],
              "h2": [("mlx5_0", 0, "leaf-0")], "h3": [("mlx5_0", 0, "leaf-1")]}


def test_single_host_single_nic_is_tested_by_loopback_and_said_so():
    res = sweep(fabric(ONE_NIC))
    assert res.exit_code == 0 and res.healthy
    assert res.extra["untested"] == []
    assert res.extra["tested_without_rail_partner"] == {"h1/mlx5_0": "loopback"}
    node = next(v for v in res.verdicts if v.name == "h1")
    assert "loopback" in node.reason and "not its cable" in node.reason
    flows = [f for o in res.observations for f in o.test.flows]
    assert flows and all(f.src == f.dst == "h1/mlx5_0" for f in flows)


def test_loopback_fails_a_down_nic():
    res = sweep(fabric(ONE_NIC), [{"kind": "nic_down", "nic": "h1/mlx5_0"}])
    assert res.exit_code == 1 and not res.healthy
    assert "h1" in res.drain or "h1/mlx5_0" in res.suspects


def test_single_host_two_nics_test_each_other_through_the_switch():
    res = sweep(fabric(TWO_NICS))
    assert res.exit_code == 0
    assert res.extra["tested_without_rail_partner"] == {"h1/mlx5_0": "same-node",
                                                        "h1/mlx5_1": "same-node"}
    slow = sweep(fabric(TWO_NICS), [{"kind": "nic_degraded", "nic": "h1/mlx5_1",
                                     "factor": 0.25}])
    assert slow.exit_code == 1  # the slow NIC's test fails: never a pass


def test_lone_rail_is_tested_against_another_rail():
    res = sweep(fabric(EXTRA_RAIL))
    assert res.exit_code == 0
    assert res.extra["tested_without_rail_partner"] == {"h1/mlx5_2": "cross-rail"}
    lone = [o for o in res.observations if "h1/mlx5_2" in o.test.nics]
    assert lone and all(o.status == "pass" for o in lone)
    bad = sweep(fabric(EXTRA_RAIL), [{"kind": "nic_degraded", "nic": "h1/mlx5_2",
                                      "factor": 0.25}])
    assert bad.exit_code == 1
    assert "h1/mlx5_2" not in bad.extra["tested_without_rail_partner"]


def test_tcp_probe_never_calls_a_kernel_loopback_a_nic_test():
    """iperf3 to the host's own address never leaves the kernel: the NIC stays untested."""
    topo = fabric(ONE_NIC, fabric="roce")
    res = sweep(topo, pair_probe="iperf3")
    assert res.exit_code == 3 and not res.healthy
    assert "h1/mlx5_0" in res.extra["untested"]
    assert not any(f.src == f.dst for o in res.observations for f in o.test.flows)


@pytest.mark.parametrize("hosts", [ONE_NIC, TWO_NICS, EXTRA_RAIL])
def test_no_nic_left_without_a_completed_test(hosts):
    res = sweep(fabric(hosts))
    touched = {e for o in res.observations if o.status == "pass" for e in o.test.nics}
    assert touched == {f"{h}/{n}" for h, nics in hosts.items() for n, _, _ in nics}


def test_a_collective_needs_a_rail_in_common():
    """Two hosts whose NICs sit on different rails share no ring: the builder refuses the
    group (a collective over them would not cross the fabric; the simulator had no flows to
    give it and crashed on an imported Voltaire dump)."""
    from fabriccheck.planning.build import RoundBuilder
    from fabriccheck.topology.view import FabricView

    topo = fabric({"h1": [("mlx5_0", 0, "leaf-0")], "h2": [("mlx5_1", 1, "leaf-0")]})
    spec = resolve_spec(None, topo)
    b = RoundBuilder(1, FabricView(topo), spec, SweepPolicy())
    assert b.add_group(("h1", "h2"), "sweep", probe="nccl") is None and b.tests == []
    assert b.add_group(("h1",), "sweep", probe="nccl") is not None
