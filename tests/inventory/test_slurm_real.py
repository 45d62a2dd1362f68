"""Slurm inventory against a real Slurm (slurmctld + 4 slurmd + munge started by the test)."""

from __future__ import annotations

import pytest

from fabriccheck.errors import ExecutorError
from fabriccheck.inventory.guard import IdleGuardExecutor
from fabriccheck.inventory.slurm import SlurmInventory
from fabriccheck.models import RawResult, Test
from tests.slurmlab import REAL_SLURM, slurm_lab_fixture

pytestmark = REAL_SLURM
lab = slurm_lab_fixture(nodes=4)


@pytest.fixture
def inv(lab):
    return SlurmInventory(runner=lab.runner())


def test_busy_node_is_not_idle_and_recheck_drops_it(lab, inv):
    assert inv.idle_nodes() == ["fcn1", "fcn2", "fcn3", "fcn4"]
    assert inv.idle_nodes(exclude=["fcn4"]) == ["fcn1", "fcn2", "fcn3"]
    job = lab.submit("fcn1", "sleep 120")
    try:
        lab.wait_states({"fcn1": "allocated"})
        assert inv.idle_nodes() == ["fcn2", "fcn3", "fcn4"]
        assert inv.recheck_idle(["fcn1", "fcn2", "fcn3"]) == ["fcn2", "fcn3"]
        # a reservation over a busy node is refused by Slurm: the sweep never takes it
        with pytest.raises(ExecutorError, match="busy"):
            with inv.reserve(["fcn1", "fcn2"]):
                pass
    finally:
        lab.run("scancel", job)
        lab.wait_states({"fcn1": "idle"})


def test_reservation_holds_nodes_and_is_released_even_on_error(lab, inv):
    with pytest.raises(RuntimeError, match="boom"):
        with inv.reserve(["fcn2", "fcn3"], name="fc-test-hold") as name:
            assert name == "fc-test-hold"
            shown = lab.run("scontrol", "show", "reservation", name)
            assert "Nodes=fcn[2-3]" in shown
            lab.wait_states({"fcn2": "reserved", "fcn3": "reserved"})
            # our own reserved nodes still count as idle for the next round; others' would not
            assert inv.recheck_idle(["fcn2", "fcn3", "fcn4"]) == ["fcn2", "fcn3", "fcn4"]
            assert inv.idle_nodes() == ["fcn1", "fcn4"]
            # a job asking for a held node waits instead of landing on a node under test
            job = lab.submit("fcn2", "true")
            state = lab.run("squeue", "-h", "-j", job, "-o", "%T").strip()
            assert state == "PENDING"
            raise RuntimeError("boom")
    assert "fc-test-hold" not in lab.run("scontrol", "show", "reservation", check=False)
    lab.wait_states({"fcn2": "idle", "fcn3": "idle"}, timeout_s=40)


class EchoExecutor:
    """Stands in for the probe executor (the subject here is the guard against real Slurm)."""

    name = "echo"

    def __init__(self):
        self.ran: list[str] = []

    def run_round(self, tests):
        self.ran += [t.test_id for t in tests]
        return [RawResult(t.test_id, stdout="ok") for t in tests]

    def close(self):
        pass


def test_guard_skips_tests_on_a_node_a_job_took_between_rounds(lab, inv):
    guard = IdleGuardExecutor(EchoExecutor(), inv)
    pairs = [Test("a", "iperf3", ("fcn1", "fcn2")), Test("b", "iperf3", ("fcn3", "fcn4"))]
    assert [r.error for r in guard.run_round(pairs)] == [None, None]
    job = lab.submit("fcn2", "sleep 120")
    try:
        lab.wait_states({"fcn2": "allocated"})
        swapped = [Test("c", "iperf3", ("fcn2", "fcn3")), Test("d", "iperf3", ("fcn4", "fcn1"))]
        raws = guard.run_round(swapped)
        assert raws[0].exit_code is None and "fcn2 no longer idle" in raws[0].error
        assert raws[1].stdout == "ok"
        assert guard.inner.ran == ["a", "b", "d"] and guard.lost == {"fcn2": 1}
    finally:
        lab.run("scancel", job)
        lab.wait_states({"fcn2": "idle"})
