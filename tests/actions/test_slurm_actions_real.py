"""Drain / resume for real: slurmctld + 4 slurmd + munge started by the test, read with sinfo."""

from __future__ import annotations

from fabriccheck.actions.pipeline import apply_run_outcome
from fabriccheck.actions.slurm import SlurmActions
from fabriccheck.inventory.slurm import SlurmInventory
from fabriccheck.store import Store
from tests.runfactory import build_run
from tests.slurmlab import REAL_SLURM, slurm_lab_fixture

pytestmark = REAL_SLURM
lab = slurm_lab_fixture(nodes=4)


def test_drain_with_evidence_then_resume_only_what_we_drained(lab, tmp_path):
    runner = lab.runner()
    slurm = SlurmActions(runner)
    inv = SlurmInventory(runner=runner)
    store = Store(tmp_path / "h.sqlite")
    names = inv.idle_nodes()
    assert names == ["fcn1", "fcn2", "fcn3", "fcn4"]
    bad_run = build_run(names, node_gbps={"fcn3": 96.0}, seed=3)
    assert bad_run.bad_nodes == ["fcn3"]

    # dry-run (the default): recorded, nothing changes in Slurm
    out = apply_run_outcome(bad_run, store=store, backend=slurm, max_drain=0.25)
    assert [(d["node"], d["status"]) for d in out["done"]] == [("fcn3", "dry-run")]
    assert lab.wait_states({"fcn3": "idle"}, timeout_s=5)

    # --apply: drained, with a reason saying what was found
    out = apply_run_outcome(bad_run, store=store, backend=slurm, apply=True, max_drain=0.25)
    assert [(d["node"], d["status"]) for d in out["done"]] == [("fcn3", "applied")]
    lab.wait_states({"fcn3": "drained"})
    reason = slurm.node_info("fcn3")["Reason"]
    assert reason.startswith("fabriccheck: ib_write_bw ") and "< 342 (2 tests)" in reason
    reasons = lab.run("sinfo", "-h", "-R", "-N", "-o", "%N|%E")
    assert reasons.strip().startswith("fcn3|fabriccheck: ib_write_bw")
    assert list(store.held_nodes("slurm")) == ["fcn3"]

    # an operator drains fcn4 for something else; fabriccheck must never resume it
    lab.run("scontrol", "update", "NodeName=fcn4", "State=DRAIN", "Reason=memory errors")
    lab.wait_states({"fcn4": "drained"})
    assert slurm.give_back("fcn4") == "drained by someone else"

    # the next sweep re-tests the node it drained (and only that drained node)
    assert inv.idle_nodes() == ["fcn1", "fcn2"]
    assert inv.idle_nodes(recovering=store.held_nodes("slurm")) == ["fcn1", "fcn2", "fcn3"]
    assert inv.recheck_idle(["fcn1", "fcn2", "fcn3", "fcn4"]) == ["fcn1", "fcn2", "fcn3"]
    good_run = build_run(["fcn1", "fcn2", "fcn3", "fcn4"], seed=9)
    out = apply_run_outcome(good_run, store=store, backend=slurm, apply=True, max_drain=0.25)
    assert [(d["node"], d["action"], d["status"]) for d in out["done"]] == [
        ("fcn3", "resume", "applied")
    ]
    lab.wait_states({"fcn3": "idle", "fcn4": "drained"})
    assert slurm.node_info("fcn4")["Reason"].startswith("memory errors")
    assert store.held_nodes("slurm") == {}
    assert slurm.give_back("fcn3") == "not drained"
    store.close()
