"""Proof on the routed ECMP lab (lab-ecmp-4): real routing namespaces, real multipath hashing.

Pinned iperf3 flows (``--cport``) with different source ports take different spines, as a
same-5-tuple traceroute says and as the spines' byte counters confirm; a ``tc``-throttled
leaf-spine link is named (or put in a set of <= 2) by an SSH sweep over real traffic with no
host drained; ``down`` leaves no namespace or interface of the lab behind.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from fabriccheck.executors.ssh import SSHExecutor
from fabriccheck.learn_paths import PathLearner
from fabriccheck.models import Flow, Test, link_key
from fabriccheck.topology.load import load_topology
from fabriccheck.topology.view import FabricView
from tests.lab.labfixtures import lab_skip_reason, reap_stale_test_labs

pytestmark = pytest.mark.lab

TOPOLOGY = "lab-ecmp-4"


@pytest.fixture(scope="module")
def ecmp(tmp_path_factory: pytest.TempPathFactory):
    reason = lab_skip_reason()
    if reason is None:
        from shutil import which

        reason = None if which("traceroute") else "traceroute not installed (make apt)"
    if reason:
        pytest.skip(reason)
    from fabriccheck import lab

    reap_stale_test_labs()
    name = f"e{os.getpid() % 100000}"  # unique per run; the reaper knows the pattern
    info = lab.up(TOPOLOGY, name=name, directory=tmp_path_factory.mktemp("ecmp"))
    try:
        yield info
    finally:
        lab.down(name)


def _rx_bytes(netns: str, ifname: str) -> int:
    out = subprocess.run(["ip", "-n", netns, "-s", "-j", "link", "show", ifname],
                         capture_output=True, text=True, check=True, timeout=10).stdout
    return int(json.loads(out)[0]["stats64"]["rx"]["bytes"])


def _spine_ports(name: str) -> dict[str, tuple[str, str]]:
    """spine -> (its namespace, its port towards leaf-1), from the lab's own plan."""
    from fabriccheck import lab

    state = lab.load_state(name)
    plan = lab.lab._plan_from_state(state, lab.lab.FaultSet())
    ports = {}
    for t in plan.trunks:
        if "leaf-1" in t.link and t.b.startswith("spine"):
            ports[t.b] = (plan.port_ns(t.port_b), t.port_b)
    return ports


def pinned(tid: str, sport: int, dport: int = 5301, duration_s: float = 2) -> Test:
    return Test(tid, "iperf3", ("host1", "host3"), (Flow("host1/eth0", "host3/eth0"),),
                timeout_s=30, params={"duration_s": duration_s, "sport": sport,
                                      "dport": dport})


def test_routers_hash_on_the_five_tuple(ecmp) -> None:
    from fabriccheck import lab

    plan_ns = [ns for ns in lab.status(ecmp.name)["netns"] if ".sw" in ns]
    assert len(plan_ns) == 4  # two leaves, two spines
    for ns in plan_ns:
        out = subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-n",
                              "net.ipv4.fib_multipath_hash_policy", "net.ipv4.ip_forward"],
                             capture_output=True, text=True, timeout=10).stdout.split()
        assert out[0] in ("1", "3") and out[1] == "1"
    leaf1 = next(ns for ns in plan_ns if ns.endswith(".sw0"))
    routes = subprocess.run(["ip", "-n", leaf1, "route", "show", "10.2.0.0/16"],
                            capture_output=True, text=True, timeout=10).stdout
    assert routes.count("nexthop via") == 2


def test_pinned_flows_take_the_spine_their_traceroute_shows(ecmp) -> None:
    """Different --cport, different spines: traceroute says which, the counters agree."""
    topo = load_topology(TOPOLOGY)
    view = FabricView(topo)
    spines: dict[str, int] = {}  # spine -> a source port whose path crosses it
    with SSHExecutor(ecmp.inventory) as ex:
        learner = PathLearner.for_executor(view, ex)
        assert learner is not None  # the routed lab's inventory names its router addresses
        tests = [pinned(f"p{s}", s) for s in range(20000, 20016)]
        for t in learner.learn(tests, ex, repin_tries=0, cover_tries=0):  # tracing alone
            path = t.flows[0].path
            assert path is not None, learner.stats.examples
            spine = next(sw for lk in path for sw in lk if sw.startswith("spine"))
            spines.setdefault(spine, int(t.params.sport))
        assert set(spines) == {"spine-1", "spine-2"}  # 16 ports: both members hit
        assert learner.stats.learned == 16 and learner.stats.traces == 16
        ports = _spine_ports(ecmp.name)
        for spine, sport in sorted(spines.items()):
            before = {s: _rx_bytes(*ports[s]) for s in ports}
            (raw,) = ex.run_round([pinned(f"run{sport}", sport)])
            assert raw.exit_code == 0, raw.stderr
            moved = {s: _rx_bytes(*ports[s]) - before[s] for s in ports}
            other = next(s for s in ports if s != spine)
            assert moved[spine] > 20_000_000, moved  # the data went over the traced spine
            assert moved[other] < 1_000_000, moved  # and not over the other one


@pytest.mark.slow
def test_throttled_leaf_spine_link_is_named_without_draining(ecmp) -> None:
    orchestrator = pytest.importorskip("fabriccheck.orchestrator")
    from fabriccheck import lab
    from fabriccheck.faults import FaultSet
    from fabriccheck.policy import SweepPolicy
    from fabriccheck.specs import resolve_spec

    lab.apply_faults(ecmp.name, FaultSet.from_dict({"faults": [
        {"kind": "link_degraded", "link": ["leaf-1", "spine-1"], "factor": 0.25}]}))
    try:
        topo = load_topology(TOPOLOGY)
        policy = SweepPolicy(pair_probe="iperf3", scale_probe="allreduce-cpu", duration_s=2)
        with SSHExecutor(ecmp.inventory) as ex:
            res = orchestrator.run("sweep", sorted(topo.nodes), topo,
                                   resolve_spec(None, topo), ex, policy)
    finally:
        lab.apply_faults(ecmp.name, None)
    truth = link_key("leaf-1", "spine-1")
    bad = {link_key(*lk) for lk in res.bad_links}
    sets = [{link_key(*c) for c in s["candidates"]} for s in res.link_suspects]
    assert bad == {truth} or (not bad and any(truth in s and len(s) <= 2 for s in sets)), (
        res.bad_links, res.link_suspects)
    assert res.drain == [] and res.bad_nodes == [] and res.bad_nics == []
    learned = res.extra["path_learning"]
    assert learned["learned"] == learned["pinned_flows"] > 0


def test_down_leaves_nothing_behind(tmp_path: Path) -> None:
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    from fabriccheck import lab
    from fabriccheck.lab.netns import lab_netns, root_links

    name = f"e{(os.getpid() + 1) % 100000}"
    lab.up(TOPOLOGY, name=name, directory=tmp_path / "lab")
    assert len(lab_netns(name)) == 8 and root_links(name)
    lab.down(name)
    assert lab_netns(name) == [] and root_links(name) == []
    assert not lab.status(name)["up"]
