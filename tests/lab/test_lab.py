"""Proof on the namespace lab: real sshd, real iperf3/gloo traffic through tc-shaped veths.

A sweep with the ssh executor finds a throttled NIC and a throttled uplink; an allreduce-cpu
group with a throttled member is slower than a healthy group; a hung probe is killed within its
timeout + 5 s with nothing left on the hosts; an unreachable host is reported while the rest
completes; ``down`` removes everything, even when the lab's state was lost.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from fabriccheck.executors.ssh import SSHExecutor, SSHHostRunner
from fabriccheck.inventory.file import load_inventory
from fabriccheck.models import Flow, Test
from fabriccheck.probes.nccl_tests import parse_nccl_tests
from tests.lab.labfixtures import Lab, inject, lab_skip_reason, stray_processes

pytestmark = pytest.mark.lab


def iperf3(tid: str, src: str, dst: str, timeout_s: float = 20, duration_s: float = 2) -> Test:
    return Test(tid, "iperf3", (src, dst), (Flow(f"{src}/eth0", f"{dst}/eth0"),),
                timeout_s=timeout_s, params={"duration_s": duration_s})


def allreduce(tid: str, nodes: tuple[str, ...], timeout_s: float = 60) -> Test:
    k = len(nodes)
    flows = tuple(Flow(f"{nodes[i]}/eth0", f"{nodes[(i + 1) % k]}/eth0") for i in range(k))
    return Test(tid, "allreduce-cpu", nodes, flows, timeout_s=timeout_s,
                params={"size_bytes": 8 << 20, "iters": 3})


def sweep(lab: Lab):
    orchestrator = pytest.importorskip("fabriccheck.orchestrator")
    from fabriccheck.policy import SweepPolicy
    from fabriccheck.specs import resolve_spec
    from fabriccheck.topology.load import load_topology

    topo = load_topology("lab-4")
    policy = SweepPolicy(pair_probe="iperf3", scale_probe="allreduce-cpu", duration_s=2)
    with SSHExecutor(lab.inventory) as ex:
        return orchestrator.run("sweep", sorted(topo.nodes), topo, resolve_spec(None, topo), ex,
                                policy)


def test_hosts_have_own_hostname_sshd_and_nic_address(lab: Lab) -> None:
    inv = load_inventory(lab.inventory)
    runner = SSHHostRunner(inv)
    try:
        for host in inv.nodes():
            out = runner.run(host, ["sh", "-c", "hostname; ip -o -4 addr show dev eth0"])
            name, addr = out.stdout.splitlines()
            assert out.exit_code == 0 and name == host
            assert inv.host(host).nic("eth0").ip in addr
    finally:
        runner.close()


def test_enter_argv_runs_on_a_host_without_ssh(lab: Lab) -> None:
    from fabriccheck import lab as lab_mod

    inject(lab, {"kind": "node_unreachable", "node": "host4"})
    for host in ("host1", "host4"):  # with and without sshd
        argv = lab_mod.enter_argv(lab.name, host) + ["sh", "-c", "hostname; ip -o -4 addr"]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
        assert out.splitlines()[0] == host
        assert load_inventory(lab.inventory).host(host).nic("eth0").ip in out


@pytest.mark.slow
def test_cli_sweep_over_ssh_finds_the_throttled_nic(lab: Lab) -> None:
    """The whole path: `fabriccheck sweep --executor ssh --inventory` as a subprocess."""
    import json
    import sys

    pytest.importorskip("fabriccheck.cli.run_cmd")  # the sweep command (another module)
    inject(lab, {"kind": "nic_degraded", "nic": "host2/eth0", "factor": 0.25})
    proc = subprocess.run(
        [sys.executable, "-m", "fabriccheck", "sweep", "--executor", "ssh", "--topology", "lab-4",
         "--inventory", str(lab.inventory), "--probe", "iperf3", "--json"],
        capture_output=True, text=True, timeout=240)
    assert proc.returncode == 1, proc.stderr[-2000:]  # 1 = faults found
    result = json.loads(proc.stdout)
    assert result["drain"] == ["host2"], result
    assert "host2" in result["bad_nodes"] or "host2/eth0" in result["bad_nics"]
    assert not result["bad_links"] and not result["unreachable"]
    # the NIC/node verdict by round 3 (DESIGN bar); lab-4 is RoCE, where up to 3 link-sampling
    # rounds follow the ladder (ECMP paths are a hash): the ladder's rounds plus 3 at most
    decided = [r for k, r in result["verdict_rounds"].items() if k in ("host2", "host2/eth0")]
    assert decided and min(decided) <= 3, result["verdict_rounds"]
    assert result["rounds"] <= len(result["ladder"]["steps"]) + 3


@pytest.mark.slow
def test_sweep_over_ssh_localizes_the_throttled_uplink(lab: Lab) -> None:
    inject(lab, {"kind": "link_degraded", "link": ["leaf-2", "spine-1"], "factor": 0.5})
    result = sweep(lab)
    assert result.drain == [] and result.bad_nodes == [] and result.bad_nics == []
    named = [tuple(sorted(link)) for link in result.bad_links] + [
        tuple(sorted(c)) for s in result.link_suspects for c in s["candidates"]]
    assert ("leaf-2", "spine-1") in named
    # lab-4 has one spine: every cross-leaf flow crosses both uplinks, so at most those two
    assert set(named) <= {("leaf-1", "spine-1"), ("leaf-2", "spine-1")}


@pytest.mark.slow
def test_throttled_nic_behind_a_throttled_uplink_is_never_a_silent_pass(lab: Lab) -> None:
    """A slow NIC (host1, on leaf-1) and a slow uplink of the other leaf at once, over real
    traffic: the NIC is named (drained) or both stay open suspects, and the run exits 1 either
    way; nobody else is drained and nothing is called healthy."""
    inject(lab, {"kind": "nic_degraded", "nic": "host1/eth0", "factor": 0.25},
           {"kind": "link_degraded", "link": ["leaf-2", "spine-1"], "factor": 0.5})  # one call
    result = sweep(lab)
    assert result.exit_code == 1 and not result.healthy, result.extra.get("stop_reason")
    assert set(result.drain) <= {"host1"}, result.drain
    nic_named = "host1" in result.drain or any(s.startswith("host1") for s in result.suspects)
    assert nic_named, (result.drain, result.suspects, [(v.name, v.state) for v in result.verdicts])
    links = [tuple(sorted(lk)) for lk in result.bad_links] + [
        tuple(sorted(c)) for s in [*result.link_suspects,
                                   *result.extra.get("unconfirmed_link_failures", [])]
        for c in s["candidates"]]
    # the uplink is named, or its failures are on record for the next run to separate
    assert ("leaf-2", "spine-1") in links or result.drain == ["host1"], (links, result.suspects)


def test_allreduce_cpu_group_with_a_throttled_member_is_slower(lab: Lab) -> None:
    inject(lab, {"kind": "nic_degraded", "nic": "host1/eth0", "factor": 0.25})
    tests = [allreduce("slow", ("host1", "host2")), allreduce("fast", ("host3", "host4"))]
    with SSHExecutor(lab.inventory, port_base=29610) as ex:
        slow, fast = ex.run_round(tests)
    parsed = {}
    for raw in (slow, fast):
        assert raw.exit_code == 0, (raw.error, raw.stderr[-500:])
        parsed[raw.test_id] = parse_nccl_tests(raw.stdout)
        assert parsed[raw.test_id].status == "ok"
    assert parsed["slow"].hosts == ("host1", "host2") and parsed["fast"].ranks == 2
    slow_bw, fast_bw = parsed["slow"].max_busbw_gbps, parsed["fast"].max_busbw_gbps
    assert fast_bw > 0.07  # ~0.11 GB/s through a 1 Gb/s link
    assert slow_bw < 0.6 * fast_bw  # the 0.25x member drags its group down


def test_hung_probe_is_killed_within_timeout_and_leaves_nothing(lab: Lab) -> None:
    inject(lab, {"kind": "node_hang", "node": "host4"})
    with SSHExecutor(lab.inventory, port_base=29620) as ex:
        t0 = time.monotonic()
        hung, ok = ex.run_round([iperf3("hung", "host3", "host4", timeout_s=3),
                                 iperf3("ok", "host1", "host2")])
        assert hung.timed_out and hung.exit_code is None
        assert hung.duration_s < 3 + 5 and time.monotonic() - t0 < 20
        assert ok.exit_code == 0 and not ok.timed_out
        (group,) = ex.run_round([allreduce("group", ("host1", "host2", "host4"), timeout_s=4)])
    assert group.timed_out and group.duration_s < 4 + 5
    time.sleep(0.3)
    assert stray_processes(lab) == {}  # no sleep/iperf3/python left on any host


def test_flapping_link_hurts_throughput_until_healed(lab: Lab) -> None:
    import json
    from pathlib import Path

    from fabriccheck.lab.netns import FLAP_TAG, netns_pids

    inject(lab, {"kind": "link_flapping", "link": ["host1/eth0", "leaf-1"], "probability": 1.0})
    with SSHExecutor(lab.inventory, port_base=29640) as ex:
        (flapping,) = ex.run_round([iperf3("flap", "host1", "host2", duration_s=4)])
        from fabriccheck import lab as lab_mod

        lab_mod.apply_faults(lab.name, None)
        switch_ns = f"fclab-{lab.name}.switches"
        cmdlines = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in netns_pids(switch_ns)]
        assert not any(FLAP_TAG.encode() in c for c in cmdlines)  # the flapper is gone
        (healed,) = ex.run_round([iperf3("healed", "host1", "host2")])
    rates = {}
    for raw in (flapping, healed):
        assert raw.exit_code == 0, raw.error
        rates[raw.test_id] = json.loads(raw.stdout)["end"]["sum_received"]["bits_per_second"]
    assert rates["flap"] < 0.7e9 < rates["healed"]  # down for 1 s of every 2


def test_unreachable_host_is_reported_and_the_rest_completes(lab: Lab) -> None:
    with SSHExecutor(lab.inventory, port_base=29630) as ex:
        assert ex.runner.run("host3", ["true"]).exit_code == 0  # a cached connection to host3
        inject(lab, {"kind": "node_unreachable", "node": "host3"})  # ... dies with the host
        ok, down = ex.run_round([iperf3("ok", "host1", "host2"), iperf3("down", "host3", "host4")])
    assert ok.exit_code == 0 and not ok.unreachable
    assert down.unreachable == ("host3",) and down.exit_code is None and down.error
    assert stray_processes(lab) == {}  # host4's server was killed too (or never started)


def test_down_removes_everything_even_after_state_was_lost(tmp_path) -> None:
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    from fabriccheck import lab
    from fabriccheck.lab import netns

    name = f"d{os.getpid() % 100000}"
    info = lab.up("lab-4", name=name, directory=tmp_path / "lab")
    assert len(netns.lab_netns(name)) == 5 and netns.root_links(name)
    # a crash: the registry pointer and state are gone, only the kernel objects remain
    (tmp_path / "lab" / "state.json").unlink()
    lab.lab.REGISTRY.joinpath(name).unlink()
    removed = lab.down(name)
    assert netns.lab_netns(name) == [] and netns.root_links(name) == []
    assert any(r.startswith("netns") for r in removed)
    left = subprocess.run(["pgrep", "-f", info.dir], capture_output=True, text=True).stdout
    assert left == ""  # every sshd of that lab is gone


def test_cli_up_json_status_and_down(tmp_path) -> None:
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    import json
    import sys

    name = f"c{os.getpid() % 100000}"
    cli = [sys.executable, "-m", "fabriccheck"]
    faults = tmp_path / "f.yaml"
    faults.write_text("faults:\n  - {kind: node_unreachable, node: host4}\n")
    up = subprocess.run([*cli, "lab", "up", "lab-4", "--name", name, "--faults", str(faults),
                         "--dir", str(tmp_path / "lab"), "--json"],
                        capture_output=True, text=True, timeout=120)
    try:
        assert up.returncode == 0, up.stderr
        info = json.loads(up.stdout)  # stdout holds only the JSON
        assert info["dir"] == str(tmp_path / "lab")
        inv = load_inventory(info["inventory"])
        assert inv.nodes() == ["host1", "host2", "host3", "host4"]
        st = subprocess.run([*cli, "lab", "status", "--name", name, "--json"],
                            capture_output=True, text=True, timeout=60)
        status = json.loads(st.stdout)
        assert status["up"] and status["sshd"] == {"host1": True, "host2": True, "host3": True}
        assert status["faults"] == [{"kind": "node_unreachable", "node": "host4"}]
    finally:
        down = subprocess.run([*cli, "lab", "down", "--name", name, "--json"],
                              capture_output=True, text=True, timeout=60)
    assert down.returncode == 0 and json.loads(down.stdout)["removed"]
    st = subprocess.run([*cli, "lab", "status", "--name", name, "--json"],
                        capture_output=True, text=True, timeout=60)
    assert json.loads(st.stdout)["up"] is False


def test_lab8_rails_are_separate_interfaces(tmp_path) -> None:
    """A degraded eth1 slows rail-1 traffic only: each rail's IP answers on its own NIC."""
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    import json

    from fabriccheck import lab
    from fabriccheck.faults import FaultSet

    name = f"e{os.getpid() % 100000}"
    faults = FaultSet.from_dict({"faults": [
        {"kind": "nic_degraded", "nic": "host1/eth1", "factor": 0.25}]})
    info = lab.up("lab-8", name=name, faults=faults, directory=tmp_path / "lab")
    try:
        def pair(tid: str, src: str, dst: str, nic: str) -> Test:
            return Test(tid, "iperf3", (src, dst), (Flow(f"{src}/{nic}", f"{dst}/{nic}"),),
                        timeout_s=20, params={"duration_s": 2})

        with SSHExecutor(info.inventory) as ex:
            results = ex.run_round([pair("r1", "host1", "host2", "eth1"),
                                    pair("r0", "host3", "host4", "eth0")])
            results += ex.run_round([pair("h1r0", "host1", "host2", "eth0"),
                                     pair("in", "host5", "host1", "eth1")])
        gbps = {}
        for r in results:
            assert r.exit_code == 0, r.error
            gbps[r.test_id] = json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e9
        assert gbps["r1"] < 0.35 and gbps["in"] < 0.35  # both directions of host1/eth1
        assert gbps["r0"] > 0.8 and gbps["h1r0"] > 0.8  # host1's other rail is healthy
    finally:
        lab.down(name)


def test_up_refuses_bad_input_before_touching_anything(tmp_path) -> None:
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    from fabriccheck import lab
    from fabriccheck.errors import ConfigError
    from fabriccheck.faults import FaultSet

    precious = tmp_path / "notes.txt"
    precious.write_text("keep me")
    with pytest.raises(ConfigError, match="not a lab directory"):
        lab.up("lab-4", name="x1", directory=tmp_path)
    assert precious.read_text() == "keep me"
    bad = FaultSet.from_dict({"faults": [{"kind": "nic_down", "nic": "host1/mlx5_0"}]})
    with pytest.raises(ConfigError, match="unknown NIC"):
        lab.up("lab-4", name="x1", faults=bad, directory=tmp_path / "new")
    with pytest.raises(ConfigError, match="cycle|tree"):
        lab.up("roce-rail-64", name="x1", directory=tmp_path / "new")
    assert lab.status("x1")["up"] is False


def test_labs_of_crashed_test_runs_are_reaped(tmp_path) -> None:
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    import sys

    from fabriccheck.lab import netns
    from tests.lab.labfixtures import reap_stale_test_labs

    name = f"c{(os.getpid() + 7) % 100000}"
    up = subprocess.run([sys.executable, "-m", "fabriccheck", "lab", "up", "lab-4", "--name", name,
                         "--dir", str(tmp_path / "lab")], capture_output=True, text=True,
                        timeout=120)  # its creator (this subprocess) is gone once it returns
    assert up.returncode == 0, up.stderr
    assert netns.lab_netns(name)
    assert name in reap_stale_test_labs()
    assert netns.lab_netns(name) == []
