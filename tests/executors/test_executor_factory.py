"""make_executor: the simulator branch, and one clear error for unknown kinds."""

from __future__ import annotations

import pytest

from fabriccheck.errors import ConfigError
from fabriccheck.executors.factory import make_executor
from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.models import Test
from tests.executors.sim.simfab import rail_fabric


def test_sim_kind_builds_a_working_simulator():
    topo = rail_fabric(nodes=4, rails=2, spines=1)
    faults = FaultSet.from_dict({"faults": [{"kind": "node_hang", "node": "node-002"}]})
    ex = make_executor("sim", topology=topo, faults=faults, seed=3)
    assert isinstance(ex, SimExecutor) and ex.name == "sim" and ex.seed == 3
    ok, hung = ex.run_round([Test("a", "ib_write_bw", ("node-001", "node-003")),
                             Test("b", "ib_write_bw", ("node-002", "node-004"))])
    assert ok.exit_code == 0 and hung.timed_out
    ex.close()


def test_sim_validates_faults_against_the_topology():
    topo = rail_fabric(nodes=4, rails=2, spines=1)
    faults = FaultSet.from_dict({"faults": [{"kind": "node_hang", "node": "node-099"}]},
                                source="f.yaml")
    with pytest.raises(ConfigError, match=r"f.yaml:faults\[0\].node: unknown node"):
        make_executor("sim", topology=topo, faults=faults)


def test_unknown_kind_lists_the_known_ones():
    with pytest.raises(ConfigError) as info:
        make_executor("carrier-pigeon", topology=rail_fabric(nodes=4, rails=1, spines=1))
    assert "unknown executor 'carrier-pigeon'" in str(info.value)
    assert "sim" in info.value.hint
