"""Ray inventory: naming rules and idleness on literal ``ray.nodes()`` data, then a real cluster."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.inventory.ray import host_name_of, is_idle, nodes_from_state
from tests.conftest import read_fixture


def _node(node_id: str, *, alive=True, res=None, labels=None, hostname="vm", ip="10.0.0.1"):
    return {"NodeID": node_id, "Alive": alive, "NodeManagerAddress": ip,
            "NodeManagerHostname": hostname, "Resources": res or {}, "Labels": labels or {}}


def test_real_ray_nodes_output_is_read():
    """``ray.nodes()`` as Ray 2.60 returned it for a 3-raylet test cluster (fixture)."""
    raw = json.loads(read_fixture("ray/ray_nodes_2.60.json"))
    nodes = nodes_from_state(raw["nodes"], raw["available"], idle_resource="CPU")
    assert [n.name for n in nodes] == ["h0", "h1", "h2"]
    assert len({n.node_id for n in nodes}) == 3 and len({n.ip for n in nodes}) == 3
    by = {n.name: n for n in nodes}
    assert by["h1"].idle and by["h2"].idle
    assert not by["h0"].idle  # its CPU was taken when the fixture was recorded
    assert by["h1"].total("CPU") == 1.0


def test_naming_rules_label_then_resource_then_hostname():
    assert host_name_of(_node("a", labels={"fabriccheck/host": "n1"},
                              res={"fchost_other": 1})) == "n1"
    assert host_name_of(_node("a", res={"fchost_n2": 1, "CPU": 4})) == "n2"
    assert host_name_of(_node("a", hostname="gpu-9.example.org")) == "gpu-9"
    assert host_name_of(_node("a", hostname="", ip="10.1.2.3")) == "10.1.2.3"


def test_dead_nodes_are_left_out_and_idle_needs_all_of_the_resource():
    raw = [_node("a", res={"GPU": 8}), _node("b", res={"GPU": 8}, hostname="b"),
           _node("c", alive=False, hostname="c", res={"GPU": 8}),
           _node("d", hostname="d", res={"CPU": 8})]
    avail = {"a": {"GPU": 8.0}, "b": {"GPU": 4.0}, "d": {"CPU": 8.0}}
    nodes = {n.node_id: n for n in nodes_from_state(raw, avail)}
    assert set(nodes) == {"a", "b", "d"}
    assert nodes["a"].idle and not nodes["b"].idle
    assert not nodes["d"].idle  # no GPU: not a GPU node to test (idle_resource="GPU")
    by_cpu = {n.node_id: n.idle for n in nodes_from_state(raw, avail, idle_resource="CPU")}
    assert by_cpu == {"a": False, "b": False, "d": True}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 8), st.integers(0, 8)), max_size=12))
def test_idle_iff_alive_and_all_of_the_resource_free(specs):
    raw = [_node(f"id{i}", alive=alive, hostname=f"n{i}", res={"GPU": total})
           for i, (alive, total, _) in enumerate(specs)]
    avail = {f"id{i}": {"GPU": min(free, total)} for i, (_, total, free) in enumerate(specs)}
    nodes = nodes_from_state(raw, avail)
    assert [n.node_id for n in nodes] == sorted(
        (f"id{i}" for i, s in enumerate(specs) if s[0]), key=lambda x: (f"n{x[2:]}", x))
    for n in nodes:
        i = int(n.node_id[2:])
        _, total, free = specs[i]
        assert n.idle == (total > 0 and min(free, total) == total)
        assert n.idle == is_idle(n.resources, n.available, "GPU")


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.timeout(180)
def test_discover_a_real_cluster_and_see_a_busy_gpu_node():
    ray = pytest.importorskip("ray")
    from tests.raycluster import NodeSpec, RayCluster, loopback_ips, unavailable_reason

    if unavailable_reason():
        pytest.skip(unavailable_reason())
    if ray.is_initialized():
        pytest.skip("this process is already connected to a Ray cluster")
    from fabriccheck.inventory.ray import discover_ray_nodes, idle_ray_nodes
    from fabriccheck.inventory.ray_session import connect, disconnect

    ips = loopback_ips(2)
    cluster = RayCluster([  # fake GPUs: Ray counts what it is told
        NodeSpec("gpu-a", ips[0], num_gpus=2),
        NodeSpec("gpu-b", ips[1], num_gpus=2, tag_resource=False,
                 labels={"fabriccheck/host": "gpu-b"}),
    ])
    with cluster:
        deadline = time.monotonic() + 15  # a fresh node's free resources show up within ~1 s
        while True:
            nodes = discover_ray_nodes(cluster.address, timeout_s=60)
            assert not ray.is_initialized()  # discovery cleaned up the connection it made
            assert [(n.name, n.ip) for n in nodes] == [("gpu-a", ips[0]), ("gpu-b", ips[1])]
            if all(n.idle for n in nodes) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert [n.idle for n in nodes] == [True, True]
        assert nodes[1].labels["fabriccheck/host"] == "gpu-b" and nodes[0].total("GPU") == 2
        connect(cluster.address, timeout_s=60)
        try:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            @ray.remote(num_gpus=1, num_cpus=0)
            class Trainer:
                def ping(self) -> int:
                    return 1

            busy = Trainer.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
                nodes[1].node_id, soft=False)).remote()
            assert ray.get(busy.ping.remote(), timeout=60) == 1
            deadline = time.monotonic() + 10
            while (idle := idle_ray_nodes(cluster.address)) != ["gpu-a"]:
                assert time.monotonic() < deadline, idle
                time.sleep(0.2)
            assert ray.is_initialized()  # a connection it did not make is left alone
        finally:
            disconnect()


def test_available_from_the_public_cluster_status():
    """The per-node free resources come from Ray's public cluster status (no ray._private)."""
    schema = pytest.importorskip("ray.autoscaler.v2.schema")
    from fabriccheck.inventory.ray import available_from_status

    def info(node_id, used_gpu):
        usage = [schema.ResourceUsage("GPU", 8.0, used_gpu), schema.ResourceUsage("CPU", 4.0, 0)]
        return schema.NodeInfo(instance_type_name="", ray_node_type_name="", instance_id="",
                               ip_address="10.0.0.1", node_id=node_id,
                               resource_usage=schema.NodeUsage(usage=usage, idle_time_ms=0))

    status = schema.ClusterStatus(active_nodes=[info("aa", 8.0)], idle_nodes=[info("bb", 0.0)])
    avail = available_from_status(status)
    assert avail == {"aa": {"GPU": 0.0, "CPU": 4.0}, "bb": {"GPU": 8.0, "CPU": 4.0}}
    raw = [_node("aa", res={"GPU": 8.0}), _node("bb", res={"GPU": 8.0}, hostname="h2")]
    assert {n.node_id: n.idle for n in nodes_from_state(raw, avail)} == {"aa": False, "bb": True}
