"""Every executor passes the same contract (tests/executors/contract.py).

Harnesses: ``sim`` (the simulator on lab-4), ``ssh-inproc`` (SSH executor against paramiko's
in-process server; commands are local processes, traffic on loopback) and ``ssh-lab`` (SSH
executor against the namespace lab's real sshd; marked ``lab``). A new executor adds a harness.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from tests.executors.contract import CHECKS, HOSTS, Harness
from tests.lab.labfixtures import lab, lab4  # noqa: F401  (shared lab-4 singleton)


def _sim_harness() -> Harness:
    from fabriccheck.executors.factory import make_executor
    from fabriccheck.faults import FaultSet
    from fabriccheck.specs import resolve_spec
    from fabriccheck.topology.load import load_topology

    topo = load_topology("lab-4")
    spec = resolve_spec(None, topo)

    def make(faults: list[dict]):
        return make_executor("sim", topology=topo, spec=spec,
                             faults=FaultSet.from_dict({"faults": faults}), seed=1)

    return Harness("sim", make)


def _inproc_harness(root: Path) -> Harness:
    from fabriccheck.executors.ssh import SSHExecutor
    from tests.executors.sshserver import free_port_pair, make_cluster

    cluster = make_cluster(root, list(HOSTS), connect_timeout_s=2)
    marker = f"21474{uuid.uuid4().int % 10**5:05d}"  # a sleep only this harness's hangs use
    hang_bin = root / "hang-bin"
    hang_bin.mkdir()
    shim = hang_bin / "iperf3"
    shim.write_text(f"#!/bin/sh\nexec sleep {marker}\n")
    shim.chmod(0o755)
    def make(faults: list[dict]):
        hung = {f["node"] for f in faults if f["kind"] == "node_hang"}
        down = {f["node"] for f in faults if f["kind"] == "node_unreachable"}
        for name, host in cluster.hosts.items():
            host.hang_bin = hang_bin if name in hung else None
            host.refuse = name in down
        return SSHExecutor(cluster.inventory_path, port_base=free_port_pair())

    def strays() -> str:
        return subprocess.run(["pgrep", "-af", f"sleep {marker}|iperf3 -s -1 -B 127.0.0.1"],
                              capture_output=True, text=True).stdout

    return Harness("ssh-inproc", make, strays)


def _lab_harness(the_lab) -> Harness:
    from fabriccheck import lab as lab_mod
    from fabriccheck.executors.ssh import SSHExecutor
    from fabriccheck.faults import FaultSet
    from tests.lab.labfixtures import stray_processes

    ports = iter(range(27000, 28000, 10))

    def make(faults: list[dict]):
        lab_mod.apply_faults(the_lab.name, FaultSet.from_dict({"faults": faults}))
        return SSHExecutor(the_lab.inventory, port_base=next(ports))

    return Harness("ssh-lab", make, lambda: stray_processes(the_lab))


@pytest.fixture(scope="module")
def inproc(tmp_path_factory: pytest.TempPathFactory) -> Harness:
    return _inproc_harness(tmp_path_factory.mktemp("contract"))


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_sim_executor(check: str) -> None:
    CHECKS[check](_sim_harness())


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_ssh_executor_inproc(check: str, inproc: Harness) -> None:
    CHECKS[check](inproc)


@pytest.mark.lab
@pytest.mark.parametrize("check", sorted(CHECKS))
def test_ssh_executor_lab(check: str, lab) -> None:  # noqa: F811 - the fixture
    CHECKS[check](_lab_harness(lab))
