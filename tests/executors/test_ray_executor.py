"""RayExecutor on a real multi-node Ray cluster (one raylet per host, all on loopback).

Each raylet carries ``fchost_<host>`` and the environment variable ``FC_RAY_TEST_HOST=<host>``;
a command that prints that variable proves which raylet's worker ran it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from fabriccheck.errors import ExecutorError, RemoteCommandError, TaskTimeout
from fabriccheck.executors.ray.executor import RayExecutor, wait_reservations_gone
from fabriccheck.inventory.ray_session import ray_get
from fabriccheck.models import Flow, Test
from fabriccheck.probes.launch import HostCommand, ProbeLaunch
from tests.executors.test_ray_agent import procs_with, wait_gone
from tests.raycluster import RAY_TEST_ENV, cluster_fixture

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(240)]
ray = pytest.importorskip("ray")

ray_cluster = pytest.fixture(scope="module")(cluster_fixture)


#: test id -> the shell script its steps run (a test double's settings: Test.params is typed)
SCRIPTS: dict[str, str] = {}


def script_builder(test: Test, nic_ips, port: int) -> ProbeLaunch:
    """One step per node running the test's script (``$PORT`` set); output from the first."""
    script = SCRIPTS[test.test_id]
    steps = tuple(
        HostCommand(n, ("bash", "-c", script), env={"PORT": str(port), "RANK": str(i)})
        for i, n in enumerate(test.nodes)
    )
    return ProbeLaunch(steps=steps, output_step=0)


def t(test_id: str, nodes: tuple[str, ...], script: str, timeout_s: float = 30.0) -> Test:
    SCRIPTS[test_id] = script
    return Test(test_id, "allreduce-cpu", nodes, timeout_s=timeout_s)


@pytest.fixture(scope="module")
def ex(ray_cluster):
    executor = RayExecutor(ray_cluster.address, launch_builder=script_builder,
                           idle_resource="CPU", reserve_timeout_s=10.0)
    yield executor
    executor.close()


def our_pgs() -> dict[str, str]:
    """name -> state of every fabriccheck placement group the cluster knows."""
    from ray.util.placement_group import placement_group_table

    return {v["name"]: v["state"] for v in placement_group_table().values()
            if v["name"].startswith("fabriccheck-")}


def node_free(node_id: str, resource: str) -> float:
    from ray._private import state

    return float(state.available_resources_per_node().get(node_id, {}).get(resource, 0.0))


def test_hosts_map_to_distinct_live_ray_nodes(ex, ray_cluster):
    for spec in ray_cluster.nodes:
        node = ex.node(spec.name)
        assert node.ip == spec.ip
        assert node.resources[f"fchost_{spec.name}"] == 1.0
    ids = {ex.node(s.name).node_id for s in ray_cluster.nodes}
    assert len(ids) == len(ray_cluster.nodes)


def test_commands_land_on_the_requested_node(ex):
    tests = [
        t("one-h1", ("h1",), "echo $FC_RAY_TEST_HOST"),
        t("one-h3", ("h3",), "echo $FC_RAY_TEST_HOST"),
        t("pair", ("h2", "h0"), "echo $FC_RAY_TEST_HOST $RANK"),
    ]
    results = ex.run_round(tests)
    assert [r.test_id for r in results] == ["one-h1", "one-h3", "pair"]
    assert [r.stdout.strip() for r in results] == ["h1", "h3", "h2 0"]
    assert all(r.exit_code == 0 and not r.timed_out and r.error is None for r in results)
    assert results[2].commands[0].startswith("h2: ") and results[2].commands[1].startswith("h0: ")


def test_agents_run_inside_the_right_raylet(ex, ray_cluster):
    import ray as _ray

    agent = ex.agent("h2")
    node_id = ray_get(agent.__ray_call__.remote(
        lambda self: _ray.get_runtime_context().get_node_id()), 20)
    assert node_id == ex.node("h2").node_id
    info = ray_get(agent.info.remote(), 20)
    assert info["name"] == "h2"
    assert ray_cluster.node_of_pid(info["pid"]) == "h2"  # a worker process of h2's raylet


def test_exit_codes_and_stderr_come_back(ex):
    results = ex.run_round([
        t("ok", ("h1",), "echo fine"),
        t("bad", ("h2",), "echo oops >&2; exit 7"),
    ])
    assert results[0].exit_code == 0 and results[0].stdout == "fine\n"
    assert results[1].exit_code == 7 and "oops" in results[1].stderr
    assert not results[1].timed_out


def test_reservation_holds_the_group_while_it_runs(ex):
    """While a group runs, a CPU task pinned to one of its nodes must wait for the release."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=1)
    def intruder() -> float:
        return time.time()

    seen: dict[str, object] = {}
    h2 = ex.node("h2").node_id

    def watch() -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            created = [n for n, s in our_pgs().items() if n.endswith("-held") and s == "CREATED"]
            if created:
                from ray.util.placement_group import placement_group_table

                table = [v for v in placement_group_table().values() if v["name"] == created[0]]
                seen["bundles"] = table[0]["bundles_to_node_id"]
                seen["strategy"] = table[0]["strategy"]
                seen["intruder"] = intruder.options(scheduling_strategy=(
                    NodeAffinitySchedulingStrategy(h2, soft=False))).remote()
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    result = ex.run_round([t("held", ("h2", "h3"), "sleep 2; date +%s.%N")])[0]
    watcher.join()
    command_end = float(result.stdout)
    assert seen["strategy"] == "STRICT_SPREAD"
    assert set(seen["bundles"].values()) == {h2, ex.node("h3").node_id}
    # the bundle held h2's CPU: the intruder started only after the test's command ended
    assert ray_get(seen["intruder"], 30) > command_end
    assert wait_reservations_gone([n for n in our_pgs() if n.endswith("-held")]) == []
    deadline = time.monotonic() + 5
    while node_free(h2, "CPU") < 1.0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert node_free(h2, "CPU") == 1.0


def test_hung_command_is_killed_within_timeout_plus_5s_and_leaves_nothing(ex):
    token = f"fchang-{uuid.uuid4().hex[:8]}"
    hang = t("hang", ("h1", "h3"), f"trap '' TERM; sleep 1000 & exec -a {token} sleep 1000",
             timeout_s=2.0)
    assert ex.unresponsive(["h1", "h2", "h3"]) == set()  # agents up: time only the hang
    t0 = time.monotonic()
    results = ex.run_round([hang, t("quick", ("h2",), "echo ok")])
    elapsed = time.monotonic() - t0
    assert elapsed <= hang.timeout_s + 5.0
    assert results[0].timed_out and results[0].exit_code is None
    assert results[0].duration_s <= hang.timeout_s + 5.0
    assert results[1].exit_code == 0 and results[1].stdout == "ok\n"
    assert wait_gone(token, 2.0) == []  # both hosts' commands, and the untagged sleeps' groups
    assert not ex.leftovers


def test_reservations_released_after_success_failure_and_timeout(ex):
    before = set(our_pgs())
    results = ex.run_round([
        t("r-ok", ("h1",), "true"),
        t("r-fail", ("h2",), "exit 1"),
        t("r-hang", ("h3",), "sleep 100", timeout_s=1.0),
    ])
    assert [r.exit_code for r in results] == [0, 1, None] and results[2].timed_out
    new = [n for n in our_pgs() if n not in before]
    assert len(new) == 3
    assert wait_reservations_gone(new) == []
    assert ex.reservations == {}


def test_reservations_released_and_commands_killed_when_the_round_raises(ex, monkeypatch):
    """The round is interrupted after it started a real command (Ctrl-C stand-in)."""
    token = f"fcintr-{uuid.uuid4().hex[:8]}"
    import fabriccheck.executors.ray.executor as mod

    def interrupted(runner, tests, build, max_parallel):  # starts real work, then "Ctrl-C"
        runner.start(HostCommand("h1", ("bash", "-c", f"exec -a {token} sleep 1000")), "x")
        time.sleep(0.3)
        assert procs_with(token)
        raise KeyboardInterrupt

    monkeypatch.setattr(mod, "run_tests", interrupted)
    before = set(our_pgs())
    with pytest.raises(KeyboardInterrupt):
        ex.run_round([t("intr", ("h1", "h2"), "true")])
    new = [n for n in our_pgs() if n not in before]
    assert new and wait_reservations_gone(new) == []
    assert wait_gone(token, 3.0) == []


def test_busy_node_is_reported_not_run(ex):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=1)
    class Squatter:
        def ping(self) -> str:
            return "here"

    squat = Squatter.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        ex.node("h3").node_id, soft=False)).remote()
    try:
        assert ray_get(squat.ping.remote(), 30) == "here"
        ex.reserve_timeout_s = 2.0
        results = ex.run_round([t("busy", ("h3",), "echo ran"), t("free", ("h1",), "echo ran")])
    finally:
        ex.reserve_timeout_s = 10.0
        ray.kill(squat)
    # h3's CPU is taken: the group is not reserved within 2 s, reported, never run
    assert results[0].exit_code is None and results[0].stdout == ""
    assert "could not reserve" in results[0].error
    assert results[1].stdout == "ran\n"
    assert ex.reservations == {}


def test_unknown_host_is_unreachable_and_the_round_goes_on(ex):
    results = ex.run_round([t("ghost", ("h1", "no-such-host"), "echo x"), t("ok", ("h2",), "true")])
    assert results[0].unreachable == ("no-such-host",) and results[0].exit_code is None
    assert results[1].exit_code == 0


def test_real_iperf3_between_two_raylets_with_node_ips_as_nic_addresses(ray_cluster):
    """The default command builder: NIC addresses fall back to the Ray nodes' IPs."""
    import shutil

    if shutil.which("iperf3") is None or shutil.which("ss") is None:
        pytest.skip("iperf3/ss not installed (make apt)")
    from fabriccheck.probes.detect import parse_raw

    with RayExecutor(ray_cluster.address) as ex2:
        test = Test("ip3", "iperf3", ("h1", "h2"), flows=(Flow("h1/eth0", "h2/eth0"),),
                    timeout_s=30, params={"duration_s": 1})
        raw = ex2.run_round([test])[0]
    assert raw.exit_code == 0, raw
    assert ray_cluster.nodes[2].ip in raw.commands[0]  # the server bound h2's address
    parsed = parse_raw(test, raw)
    assert json.loads(raw.stdout)["end"]["sum_received"]["bits_per_second"] > 1e6
    assert parsed is not None


def test_real_ray_errors_are_mapped(ex):
    agent = ex.agent("h1")
    with pytest.raises(TaskTimeout):
        ray_get(agent.wait.remote(ray_get(agent.start.remote(["sleep", "5"]), 20), 3), 0.5,
                host="h1")
    with pytest.raises(RemoteCommandError, match="KeyError"):
        ray_get(agent.wait.remote(987654, 0), 20, host="h1")
    agent.kill_all.remote()


def test_dead_node_is_unreachable_and_the_others_go_on(ex, ray_cluster):
    assert ex.run_round([t("pre", ("hx",), "echo alive")])[0].stdout == "alive\n"  # agent exists
    ray_cluster.kill_node("hx")
    results = ex.run_round([t("dead", ("hx", "h1"), "echo x"), t("alive", ("h2",), "echo y")])
    assert results[0].unreachable == ("hx",) and results[0].exit_code is None
    assert results[1].stdout == "y\n"
    assert "hx" in results[0].error


DRIVER = """
import json, os, sys, threading, time
from fabriccheck.executors.ray.executor import RayExecutor
from fabriccheck.models import Test
from fabriccheck.probes.launch import HostCommand, ProbeLaunch
def build(test, nic_ips, port):
    return ProbeLaunch((HostCommand(test.nodes[0], ("bash", "-c", sys.argv[2])),), 0)
ex = RayExecutor(sys.argv[1], launch_builder=build)
test = Test("drv", "allreduce-cpu", ("h2", "h3"), timeout_s=300)
threading.Thread(target=ex.run_round, args=([test],), daemon=True).start()
time.sleep(1000)
"""


def test_driver_killed_mid_test_releases_reservation_and_processes(ray_cluster):
    token = f"fcdrv-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, **RAY_TEST_ENV}
    before = set(our_pgs())
    drv = subprocess.Popen(
        [sys.executable, "-c", DRIVER, ray_cluster.address,
         f"trap '' TERM; exec -a {token} sleep 1000"],
        env=env, cwd=str(Path(__file__).resolve().parents[2]), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not procs_with(token) and time.monotonic() < deadline and drv.poll() is None:
            time.sleep(0.1)
        assert procs_with(token), drv.stderr.read().decode()[-2000:] if drv.poll() else "no start"
        live = [n for n, s in our_pgs().items() if n not in before and s == "CREATED"]
        assert live  # the driver's reservation is held
        os.killpg(drv.pid, signal.SIGKILL)
        drv.wait(10)
        # Ray removes the dead job's placement groups and actors; the agent's death TERMs the
        # command's group (ignored here) and KILLs it 2 s later
        assert wait_reservations_gone(live, 30.0) == []
        assert wait_gone(token, 30.0) == []
    finally:
        if drv.poll() is None:
            os.killpg(drv.pid, signal.SIGKILL)
            drv.wait(10)


def test_close_is_idempotent_and_a_closed_executor_refuses_rounds(ray_cluster):
    ex2 = RayExecutor(ray_cluster.address, launch_builder=script_builder, idle_resource="CPU")
    assert ex2.run_round([t("c", ("h1",), "echo hi")])[0].stdout == "hi\n"
    ex2.close()
    ex2.close()
    assert ray.is_initialized()  # the fixture owns the connection; the executor left it alone
    with pytest.raises(ExecutorError, match="closed"):
        ex2.run_round([t("c2", ("h1",), "true")])


def test_factory_builds_a_ray_executor_that_runs(ray_cluster):
    from fabriccheck.executors.factory import make_executor
    from fabriccheck.topology.load import load_topology

    ex2 = make_executor("ray", topology=load_topology("lab-4"), ray_address=ray_cluster.address,
                        launch_builder=script_builder)
    try:
        assert isinstance(ex2, RayExecutor) and ex2.name == "ray"
        assert ex2.idle_resource == "CPU"  # no node has a GPU: CPUs decide idleness
        assert ex2.reserve_resources == ("CPU", "GPU")
        assert ex2.run_round([t("f", ("h1",), "echo $FC_RAY_TEST_HOST")])[0].stdout == "h1\n"
    finally:
        ex2.close()


def test_factory_refuses_faults_for_ray():
    from fabriccheck.errors import ConfigError
    from fabriccheck.executors.factory import make_executor
    from fabriccheck.faults import FaultSet
    from fabriccheck.topology.load import load_topology

    faults = FaultSet.from_dict({"faults": [{"kind": "node_hang", "node": "host1"}]})
    with pytest.raises(ConfigError, match="cannot inject faults"):
        make_executor("ray", topology=load_topology("lab-4"), faults=faults, ray_address="x:1")


def test_tests_sharing_a_node_in_one_round_share_one_reservation(ex):
    """A follow-up round may pair one suspect with two partners at once: both must run."""
    before = set(our_pgs())
    results = ex.run_round([t("s1", ("h1", "h2"), "sleep 0.5; echo a"),
                            t("s2", ("h3", "h1"), "sleep 0.5; echo b"),
                            t("s3", ("h0",), "echo c")])
    assert [r.stdout for r in results] == ["a\n", "b\n", "c\n"]
    new = sorted(n for n in our_pgs() if n not in before)
    assert len(new) == 2 and any(n.endswith("s1+s2") for n in new)
    assert wait_reservations_gone(new) == []
