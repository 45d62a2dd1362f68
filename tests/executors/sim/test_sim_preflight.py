"""The simulator answers the preflight commands in the real formats, faults included, and the
real parsers read them; anything else is refused (exit 127), never made up."""

from __future__ import annotations

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.inference.signals import judge_signal
from fabriccheck.planning.preflight import preflight
from fabriccheck.planning.signal_rounds import plan_signal_tests
from fabriccheck.specs import load_spec
from fabriccheck.topology.load import load_topology
from fabriccheck.topology.view import FabricView

FAULTS = [{"kind": "gpu_missing", "node": "node-002"},
          {"kind": "pcie_downtrained", "nic": "node-003/mlx5_1", "width": 4},
          {"kind": "port_errors", "nic": "node-004/mlx5_2", "rate": 3},
          {"kind": "nic_down", "nic": "node-001/mlx5_7"}]


@pytest.mark.parametrize("topo_name,spec_name", [("ib-fattree-128", "h100-ndr400-ib"),
                                                 ("roce-rail-64", "h100-roce400")])
def test_every_preflight_reading_reflects_exactly_the_faults(topo_name, spec_name):
    topo, spec = load_topology(topo_name), load_spec(spec_name)
    signals = preflight(spec, topo.fabric).signals
    ex = SimExecutor(topo, spec, FaultSet.from_dict({"faults": FAULTS}), seed=2)
    nodes = ["node-001", "node-002", "node-003", "node-004", "node-005"]
    tests = plan_signal_tests(signals, nodes, FabricView(topo), 1, spec.gpus_per_node)
    raws = ex.run_round(tests)
    by = {s.name: s for s in signals}
    failing = set()
    for t, r in zip(tests, raws, strict=True):
        o = judge_signal(t, r, by[t.params["signal"]])
        assert o.status in ("pass", "fail"), (t.test_id, o.reason, r.stdout[:200])
        if o.status == "fail":
            failing.add((t.params["signal"], t.nodes[0] + (f"/{t.params['nic']}"
                                                           if "nic" in t.params else "")))
    assert failing == {
        ("gpu-count", "node-002"), ("kernel-log", "node-002"),
        ("pcie-link", "node-003/mlx5_1"), ("port-errors", "node-004/mlx5_2"),
        ("port-state", "node-001/mlx5_7"), ("port-rate", "node-001/mlx5_7")}
    # port_errors at 3/s over the 5 s window: 15 counts > 10 allowed
    pq = [r for t, r in zip(tests, raws, strict=True)
          if t.params["signal"] == "port-errors" and t.nodes == ("node-004",)
          and t.params["nic"] == "mlx5_2"][0]
    assert pq.duration_s >= 5


def test_an_unknown_or_piped_command_is_refused_not_answered():
    topo, spec = load_topology("ib-fattree-128"), load_spec("h100-ndr400-ib")
    ex = SimExecutor(topo, spec, FaultSet(), seed=0)
    from fabriccheck.models import Test

    tests = [Test(f"t{i}", "signal", ("node-001",), params={"signal": "x", "command": c})
             for i, c in enumerate(["dmesg | grep -c Xid", "ipmitool sdr", "nvidia-smi -q -d ECC"])]
    for r in ex.run_round(tests):
        assert r.exit_code == 127 and "no simulated output" in r.stderr and r.stdout == ""
