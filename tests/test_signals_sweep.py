"""Signals through the whole loop on the simulator: the preflight finds node-local faults on a
128-node InfiniBand fat-tree (h100 spec) with nothing else drained; user signals, retests,
untested readings and skipped checks."""

from __future__ import annotations

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.models import RoundKind
from fabriccheck.orchestrator import run
from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import SignalSpec, load_spec, resolve_spec
from fabriccheck.topology.load import load_topology
from tests.conftest import REPO

TOPO = REPO / "topologies" / "ib-fattree-128.yaml"
NOISE = {"jitter": 0.03, "glitch_rate": 0.01}


@pytest.fixture(scope="module")
def topo():
    return load_topology(str(TOPO))


def sweep(topo, faults, seed=0, policy=None, spec=None):
    spec = spec or resolve_spec(None, topo)
    fs = FaultSet.from_dict({"noise": NOISE, "faults": faults})
    res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed),
              policy or SweepPolicy(seed=seed))
    return res, fs


@pytest.mark.parametrize("seed", [0, 5])
@pytest.mark.parametrize("fault,signal,target", [
    ({"kind": "gpu_missing", "node": "node-011"}, "gpu-count", "node-011"),
    ({"kind": "pcie_downtrained", "nic": "node-040/mlx5_3", "width": 8}, "pcie-link",
     "node-040/mlx5_3"),
    ({"kind": "port_errors", "nic": "node-077/mlx5_5", "rate": 40}, "port-errors",
     "node-077/mlx5_5"),
])
def test_default_sweep_finds_each_preflight_fault_and_drains_nothing_else(topo, fault, signal,
                                                                          target, seed):
    res, fs = sweep(topo, [fault], seed)
    node = target.split("/")[0]
    assert res.drain == [node], res.drain
    assert res.exit_code == 1
    reading = res.extra["signals"][signal]["values"][target]
    assert reading["status"] == "fail"
    verdicts = [v for v in res.verdicts if v.name == target and v.state == "bad"]
    assert verdicts and f"signal {signal}" in verdicts[0].reason
    # found before any traffic: the first round is the preflight, and it convicted
    assert res.extra["verdict_rounds"][target] == 1
    others = {t: v for t, v in res.extra["signals"][signal]["values"].items()
              if v["status"] != "pass" and t != target}
    assert not others


def test_pcie_downtrained_also_caps_the_nic_in_traffic(topo):
    res, _ = sweep(topo, [{"kind": "pcie_downtrained", "nic": "node-040/mlx5_3", "width": 8}])
    low = [o for o in res.observations if "node-040/mlx5_3" in o.test.nics and o.value]
    assert low and max(o.value for o in low) < 0.6 * 392


def test_healthy_fabric_every_signal_passes_and_preflight_is_round_one(topo):
    res, _ = sweep(topo, [], seed=3)
    assert res.drain == [] and res.exit_code == 0, (res.suspects, res.extra["untested"])
    sig = res.extra["signals"]
    assert set(sig) == {"gpu-count", "gpu-health", "gpu-nvlink", "port-state", "port-rate",
                        "pcie-link", "port-errors", "kernel-log", "node-config", "nic-config"}
    assert len(sig["gpu-count"]["values"]) == 128 and len(sig["port-rate"]["values"]) == 1024
    assert all(v["status"] == "pass" for s in sig.values() for v in s["values"].values())
    assert sig["port-rate"]["pass"] == {"min": 400.0}


def _user(name, command, **kw):
    base = dict(name=name, level=1, per="nic", command=command, value=None, parser=None,
                unit="", pass_min=None, pass_max=None, timeout_s=10.0)
    return SignalSpec(**{**base, **kw})


def test_a_value_within_noise_of_its_bound_is_retested_before_blame(topo):
    # 400 Gb/s against min 420: 4.8% short, inside the 10% noise margin -> a retest round
    strict = _user("rate-420", "cat /sys/class/infiniband/{nic}/ports/1/rate",
                   value=r"(?P<value>\d+) Gb/sec", pass_min=420.0)
    nodes = sorted(topo.nodes)[:4]
    spec = resolve_spec(None, topo)
    fs = FaultSet()
    res = run("sweep", nodes, topo, spec, SimExecutor(topo, spec, fs, 0),
              SweepPolicy(preflight=False, signals=(strict,)))
    values = res.extra["signals"]["rate-420"]["values"]
    assert all(len(v["tests"]) == 2 for v in values.values())  # read, then retested
    assert all(v["status"] == "fail" for v in values.values())
    assert sorted(res.bad_nics) == sorted(values)


def test_a_command_the_simulator_does_not_know_is_untested_never_a_crash(topo):
    odd = _user("fan-rpm", "ipmitool sdr type Fan", per="node",
                value=r"(?P<value>\d+) RPM", pass_min=1000.0)
    nodes = sorted(topo.nodes)[:4]
    spec = resolve_spec(None, topo)
    res = run("sweep", nodes, topo, spec, SimExecutor(topo, spec, FaultSet(), 0),
              SweepPolicy(preflight=False, signals=(odd,)))
    assert res.drain == []
    vals = res.extra["signals"]["fan-rpm"]["values"]
    assert {v["status"] for v in vals.values()} == {"untested"}
    assert "exited 127" in next(iter(vals.values()))["reason"]
    assert res.exit_code == 3  # never 0 with something untested
    assert "signal fan-rpm on node-001" in res.extra["untested"]


def test_no_gpus_no_rdma_skips_the_preflight_with_reasons(topo):
    spec = load_spec("lab-tcp")
    res = run("sweep", sorted(topo.nodes)[:4], topo, spec,
              SimExecutor(topo, spec, FaultSet(), 0), SweepPolicy(pair_probe="iperf3"))
    assert res.extra["signals"] == {}
    skipped = " | ".join(res.extra["preflight_skipped"])
    assert "no GPUs" in skipped and "no RDMA ports" in skipped


def test_level_two_signal_runs_after_the_sweep_in_groups_across_leaves(topo):
    pair = _user("peer-seen", "cat /sys/class/infiniband/{nic}/ports/1/rate # {peer} {peer_addr}",
                 level=2, value=r"(?P<value>\d+) Gb/sec", pass_min=400.0)
    spec = resolve_spec(None, topo)
    nodes = sorted(topo.nodes)[:16]
    res = run("sweep", nodes, topo, spec, SimExecutor(topo, spec, FaultSet(), 0),
              SweepPolicy(preflight=False, signals=(pair,)))
    vals = res.extra["signals"]["peer-seen"]["values"]
    assert len(vals) == 8 * 8  # 8 pairs x 8 rails
    groups = {t.split("@")[0] for t in vals}
    assert all(len(g.split("+")) == 2 for g in groups)
    assert res.exit_code == 0


def test_preflight_rides_along_with_the_first_round(topo):
    spec = resolve_spec(None, topo)
    seen = []
    nodes = sorted(topo.nodes)[:8]
    run("sweep", nodes, topo, spec, SimExecutor(topo, spec, FaultSet(), 0), SweepPolicy(),
        progress=seen.append)
    assert seen[0]["kind"] == RoundKind.SWEEP
    assert seen[0]["purposes"]["preflight"] == 8 * (5 + 5 * 8)  # 5 per node, 5 per NIC
    assert "preflight" not in seen[1]["purposes"]


def test_a_single_node_is_still_preflighted_in_its_first_round(topo):
    spec = resolve_spec(None, topo)
    seen = []
    res = run("sweep", ["node-001"], topo, spec, SimExecutor(topo, spec, FaultSet(), 0),
              SweepPolicy(), progress=seen.append)
    assert seen[0]["purposes"]["preflight"] == 5 + 5 * 8
    assert res.extra["signals"]["gpu-count"]["values"]["node-001"]["status"] == "pass"


def test_ports_are_held_to_their_own_speed_not_the_specs():
    """A 200G (HDR) fabric judged with a 400G spec: every port trains at its own 200 Gb/s and
    passes; a mixed EDR/HDR fabric holds each port to the slowest speed and says so."""
    from fabriccheck.planning.preflight import preflight
    from fabriccheck.topology.load import topology_from_dict

    spec = load_spec("h100-ndr400-ib")
    hdr = preflight(spec, "infiniband", [200.0] * 4)
    assert next(s for s in hdr.signals if s.name == "port-rate").pass_min == 200.0
    mixed = preflight(spec, "infiniband", [100.0, 200.0])
    assert next(s for s in mixed.signals if s.name == "port-rate").pass_min == 100.0
    assert any("held to the slowest (100 Gb/s)" in r for r in mixed.skipped)
    assert next(s for s in preflight(spec, "infiniband").signals
                if s.name == "port-rate").pass_min == spec.nic_gbps
    hosts = [f"h{i}" for i in range(4)]
    topo = topology_from_dict({
        "name": "hdr", "fabric": "infiniband", "gpus_per_node": 8,
        "nodes": [{"name": h, "nics": [{"name": "mlx5_0", "rail": 0, "gbps": 200}]}
                  for h in hosts],
        "switches": [{"name": "leaf-0", "tier": "leaf"}],
        "links": [{"a": f"{h}/mlx5_0", "b": "leaf-0", "gbps": 200} for h in hosts],
    }, source="test")
    # the loop and the CLI's history recorder take their signals from one function
    from fabriccheck.planning.preflight import run_signals

    signals, _ = run_signals(spec, topo, hosts, SweepPolicy())
    assert next(s for s in signals if s.name == "port-rate").pass_min == 200.0
    res, _ = sweep(topo, [], spec=spec)
    rates = res.extra["signals"]["port-rate"]
    assert rates["pass"] == {"min": 200.0}
    assert {v["status"] for v in rates["values"].values()} == {"pass"}, rates
    assert res.drain == [] and res.exit_code == 0


def test_ports_of_another_speed_are_not_each_others_peers():
    """A storage fabric with EDR (100G) and HDR (200G) ports, no fault: every port reads its
    own rate; EDR ports are not outliers among HDR ones (an imported Selene storage fabric
    listed 300 suspects), but a port reading below the others of its own speed still is."""
    from fabriccheck.planning.preflight import preflight
    from fabriccheck.topology.load import topology_from_dict

    hosts = [f"h{i:02d}" for i in range(12)]
    speed = {h: (100 if i < 4 else 200) for i, h in enumerate(hosts)}
    topo = topology_from_dict({
        "name": "mixed", "fabric": "infiniband", "gpus_per_node": 8,
        "nodes": [{"name": h, "nics": [{"name": "mlx5_0", "rail": 0, "gbps": speed[h]}]}
                  for h in hosts],
        "switches": [{"name": "leaf-0", "tier": "leaf"}],
        "links": [{"a": f"{h}/mlx5_0", "b": "leaf-0", "gbps": speed[h]} for h in hosts],
    }, source="test")
    spec = load_spec("h100-ndr400-ib")
    res, _ = sweep(topo, [], spec=spec)
    rates = res.extra["signals"]["port-rate"]["values"]
    assert {v["status"] for v in rates.values()} == {"pass"}, rates
    assert not [s for s in res.suspects if "mlx5_0" in s]
    # one HDR port reading EDR speed: above the fabric's bar (100), below its own class
    from dataclasses import replace

    from fabriccheck.inference.signals import evaluate_signals, judge_signal
    from fabriccheck.planning.signal_rounds import plan_signal_tests
    from fabriccheck.topology.view import FabricView

    view = FabricView(topo)
    sigs = [s for s in preflight(spec, "infiniband", [100, 200]).signals if s.name == "port-rate"]
    tests = plan_signal_tests(sigs, hosts, view, 1, spec.gpus_per_node)
    raws = SimExecutor(topo, spec, FaultSet.from_dict({}), 0).run_round(tests)
    obs = [judge_signal(t, r, sigs[0]) for t, r in zip(tests, raws, strict=True)]
    obs = [replace(o, value=100.0) if o.test.nodes[0] == "h11" else o for o in obs]
    state = evaluate_signals(obs, sigs, view.peer_class)
    assert set(state.suspects) == {"h11/mlx5_0"} and not state.bad_nics
    # without classes the four EDR ports would be the outliers
    assert {f"{h}/mlx5_0" for h in hosts[:4]} <= set(evaluate_signals(obs, sigs).suspects)
