"""Command builders: Test + NIC addresses -> the exact host commands (pure)."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.errors import ConfigError
from fabriccheck.models import Flow, Test
from fabriccheck.probes.commands import CommandOptions, build_launch

IPS = {f"n{i}/{nic}": f"10.0.{r}.{i}" for i in range(8) for r, nic in enumerate(("eth0", "eth1"))}
IB = {f"n{i}/mlx5_{r}": f"10.1.{r}.{i}" for i in range(4) for r in range(2)}


def ring(nodes: tuple[str, ...], nics: tuple[str, ...]) -> tuple[Flow, ...]:
    k = len(nodes)
    if k < 2:
        return ()
    return tuple(Flow(f"{nodes[i]}/{nic}", f"{nodes[(i + 1) % k]}/{nic}")
                 for nic in nics for i in range(k))


def test_iperf3_server_then_client_bound_to_the_flow_nics() -> None:
    t = Test("t", "iperf3", ("n1", "n2"), (Flow("n1/eth1", "n2/eth1"),), params={"duration_s": 3})
    launch = build_launch(t, IPS, port=5301)
    server, client = launch.steps
    assert server.host == "n2" and server.background and server.wait_port == 5301
    assert server.argv == ("iperf3", "-s", "-1", "-B", "10.0.1.2", "-p", "5301")
    assert client.host == "n1" and not client.background
    assert client.argv == ("iperf3", "-J", "-c", "10.0.1.2", "-B", "10.0.1.1", "-p", "5301",
                           "-t", "3")
    assert launch.output_step == 1
    assert launch.rendered[1].startswith("n1: iperf3 -J -c 10.0.1.2")


def test_ib_write_bw_per_side_device_gid_and_port() -> None:
    t = Test("t", "ib_write_bw", ("n0", "n3"), (Flow("n0/mlx5_1", "n3/mlx5_1"),),
             params={"size_bytes": 1 << 16, "duration_s": 5})
    launch = build_launch(t, IB, port=18600, options=CommandOptions(gid_index=3, use_cuda=1))
    server, client = launch.steps
    assert server.host == "n3" and server.wait_port == 18600 and server.background
    assert server.argv[:3] == ("ib_write_bw", "-d", "mlx5_1")
    for flag in ("-F", "--report_gbits", "--use_cuda=1"):
        assert flag in server.argv and flag in client.argv
    for argv in (server.argv, client.argv):
        assert argv[argv.index("-x") + 1] == "3"
        assert argv[argv.index("-p") + 1] == "18600"
        assert argv[argv.index("-D") + 1] == "5"
        assert argv[argv.index("-s") + 1] == "65536"
    assert client.argv[-1] == "10.1.1.3"  # the server's address, last
    assert "-x" not in build_launch(t, IB).steps[0].argv  # IB: no GID index


def test_nccl_mpirun_hosts_slots_env_and_ring() -> None:
    nodes = ("n0", "n1", "n2")
    t = Test("t", "nccl", nodes, ring(nodes, ("mlx5_0", "mlx5_1")),
             params={"size_bytes": 1 << 30, "min_bytes": 1 << 20, "gpus_per_node": 4,
                     "collective": "all_gather"})
    opts = CommandOptions(nccl_tests_dir="/opt/nccl-tests/build/")
    (step,) = build_launch(t, IB, options=opts).steps
    argv = step.argv
    assert step.host == "n0"
    assert argv[argv.index("-np") + 1] == "12"
    assert argv[argv.index("-H") + 1] == "n0:4,n1:4,n2:4"
    assert "/opt/nccl-tests/build/all_gather_perf" in argv
    tool = argv[argv.index("/opt/nccl-tests/build/all_gather_perf"):]
    assert tool[1:] == ("-b", "1048576", "-e", "1073741824", "-f", "2", "-g", "1", "-c", "1")
    assert step.env["NCCL_ALGO"] == "Ring"
    assert step.env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"
    exported = {argv[i + 1] for i, a in enumerate(argv) if a == "-x"}
    assert exported == set(step.env)  # every env var is exported to the ranks


def test_nccl_per_nic_run_limits_ib_hca_to_that_rail() -> None:
    nodes = ("n0", "n1")
    t = Test("t", "nccl", nodes, ring(nodes, ("mlx5_1",)), params={"size_bytes": 1 << 30})
    (step,) = build_launch(t, IB, options=CommandOptions(gid_index=3)).steps
    assert step.env["NCCL_IB_HCA"] == "=mlx5_1:1"
    assert step.env["NCCL_IB_GID_INDEX"] == "3"


def test_nccl_single_node_has_no_ring_forcing_or_hca() -> None:
    t = Test("t", "nccl", ("n0",), (), params={"size_bytes": 1 << 34})
    (step,) = build_launch(t, IB).steps
    assert "NCCL_ALGO" not in step.env and "NCCL_IB_HCA" not in step.env
    assert step.argv[step.argv.index("-np") + 1] == "8"


def test_nccl_unknown_gpu_count_runs_one_rank_per_node() -> None:
    """An imported topology without --gpus-per-node says 0 GPUs (unknown): never -np 0."""
    nodes = ("n0", "n1")
    t = Test("t", "nccl", nodes, ring(nodes, ("mlx5_0",)),
             params={"size_bytes": 1 << 30, "gpus_per_node": 0})
    (step,) = build_launch(t, IB).steps
    assert step.argv[step.argv.index("-np") + 1] == "2"
    assert step.argv[step.argv.index("-H") + 1] == "n0:1,n1:1"


def test_nccl_srun_inside_an_allocation() -> None:
    nodes = ("n0", "n1")
    t = Test("t", "nccl", nodes, ring(nodes, ("mlx5_0",)),
             params={"size_bytes": 1 << 30, "gpus_per_node": 8})
    (step,) = build_launch(t, IB, options=CommandOptions(launcher="srun")).steps
    assert step.argv[:5] == ("srun", "-N", "2", "-w", "n0,n1")
    assert "--ntasks-per-node=8" in step.argv and "all_reduce_perf" in step.argv
    assert step.env["NCCL_IB_HCA"] == "=mlx5_0:1"  # env travels with srun's --export=ALL


def test_allreduce_cpu_one_rank_per_node_master_on_rank0_nic() -> None:
    nodes = ("n3", "n1", "n5")
    t = Test("t", "allreduce-cpu", nodes, ring(nodes, ("eth0",)),
             params={"size_bytes": 1 << 24, "iters": 3})
    launch = build_launch(t, IPS, port=29500, options=CommandOptions(python="/venv/python"))
    assert [s.host for s in launch.steps] == list(nodes)
    assert launch.output_step == 0
    for rank, step in enumerate(launch.steps):
        a = step.argv
        assert a[:3] == ("/venv/python", "-m", "fabriccheck.probes.allreduce_cpu")
        assert a[a.index("--rank") + 1] == str(rank)
        assert a[a.index("--world-size") + 1] == "3"
        assert a[a.index("--master-addr") + 1] == "10.0.0.3"
        assert a[a.index("--master-port") + 1] == "29500"
        assert a[a.index("--iters") + 1] == "3"
        assert step.env["GLOO_SOCKET_IFNAME"] == "eth0"
        assert not step.background


def test_errors_name_the_test_and_what_to_do() -> None:
    with pytest.raises(ConfigError, match="unknown probe"):
        build_launch(Test("t", "ping", ("n0", "n1")), IPS)
    with pytest.raises(ConfigError, match="no address for NIC n9/eth0"):
        build_launch(Test("t", "iperf3", ("n9", "n1"), (Flow("n9/eth0", "n1/eth0"),)), IPS)
    with pytest.raises(ConfigError, match="unknown collective"):
        build_launch(Test("t", "nccl", ("n0",), params={"collective": "bcast"}), IPS)
    with pytest.raises(ConfigError, match="launcher"):
        build_launch(Test("t", "nccl", ("n0",)), IPS, options=CommandOptions(launcher="pdsh"))


@settings(max_examples=40, deadline=None)
@given(
    probe=st.sampled_from(["iperf3", "allreduce-cpu", "nccl"]),
    k=st.integers(min_value=2, max_value=6),
    port=st.integers(min_value=1024, max_value=65000),
    rails=st.sampled_from([("eth0",), ("eth1",), ("eth0", "eth1")]),
)
def test_every_launch_is_runnable_and_only_touches_its_nodes(probe, k, port, rails) -> None:
    nodes = tuple(f"n{i}" for i in range(k))
    flows = ring(nodes, rails) if probe != "iperf3" else (Flow(f"n0/{rails[0]}", f"n1/{rails[0]}"),)
    if probe == "iperf3":
        nodes = nodes[:2]
    t = Test("t", probe, nodes, flows, params={"size_bytes": 1 << 20})
    launch = build_launch(t, IPS, port=port)
    assert {s.host for s in launch.steps} <= set(nodes)
    assert 0 <= launch.output_step % len(launch.steps) < len(launch.steps)
    assert not launch.steps[launch.output_step].background  # the output comes from a foreground
    for step in launch.steps:
        assert step.argv and all(isinstance(a, str) and a for a in step.argv)
        assert shlex.split(step.render())[-len(step.argv):] == list(step.argv)  # round-trips
        if step.background:
            assert step.wait_port == port
