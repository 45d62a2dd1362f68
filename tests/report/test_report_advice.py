"""The first screen's words: headline per outcome, steps and notes from the run's lists."""

from __future__ import annotations

import hostlist
import pytest

from fabriccheck.models import BAD, SUSPECT, RunResult, Verdict
from fabriccheck.report.advice import describe_links, headline, next_steps
from fabriccheck.report.view import build_view

NODES = [f"node-{i:03d}" for i in range(1, 9)]


def run(**kw) -> RunResult:
    return RunResult(mode=kw.pop("mode", "sweep"), nodes=list(NODES), **kw)


@pytest.mark.parametrize(
    ("kw", "verdict", "level"),
    [
        ({}, "HEALTHY", "ok"),
        ({"mode": "gate"}, "GO", "ok"),
        ({"mode": "gate", "drain": ["node-002"]}, "DO NOT START", "bad"),
        ({"drain": ["node-002"]}, "DRAIN", "bad"),
        ({"bad_links": [("leaf-0", "spine-1")]}, "REPAIR", "bad"),
        ({"unreachable": ["node-004"]}, "CANNOT TEST", "unreachable"),
        ({"suspects": ["node-005"]}, "WATCH", "suspect"),
        ({"link_suspects": [{"candidates": [["leaf-0", "spine-1"], ["leaf-0", "spine-2"]]}]},
         "WATCH", "suspect"),
    ],
)  # fmt: skip
def test_headline_per_outcome(kw, verdict, level):
    r = run(**kw)
    h = headline(r, build_view(r, None))
    assert (h.verdict, h.level) == (verdict, level)


def test_many_drained_nodes_become_one_hostlist_command():
    drain = NODES[:7] + [f"node-{i:03d}" for i in range(100, 120)]
    r = RunResult(mode="sweep", nodes=drain + ["node-200"], drain=drain, bad_nodes=drain)
    step = next_steps(r, build_view(r, None))[0]
    scontrol = [c for c in step.commands if c.startswith("scontrol")]
    assert len(scontrol) == 1
    hosts = scontrol[0].split("NodeName=", 1)[1].split()[0].strip("'")
    assert hostlist.expand_hostlist(hosts) == sorted(drain)
    assert "… and 15 more" in step.detail


def test_many_bad_links_are_one_step_and_few_are_one_each():
    few = run(bad_links=[("leaf-0", "spine-1"), ("leaf-1", "spine-2")])
    titles = [s.title for s in next_steps(few, build_view(few, None), "infiniband")]
    assert sum(t.startswith("Repair link") for t in titles) == 2
    links = [(f"leaf-{i}", f"spine-{i}") for i in range(6)]
    many = run(bad_links=links)
    steps = next_steps(many, build_view(many, None), "infiniband")
    assert [s.title for s in steps] == ["Repair 6 links: reseat or replace their cables/optics"]
    assert all(e in steps[0].commands[0] for lk in links for e in lk)


def test_suspect_link_set_is_summarized_and_never_drains():
    cands = [[f"leaf-{g}-2", f"spine-{s}"] for g in range(2) for s in range(8)]
    r = run(link_suspects=[{"candidates": cands, "evidence": ["r1-1"], "values": ["95 Gb/s"]}])
    (step,) = next_steps(r, build_view(r, None), "roce")
    assert step.level == SUSPECT
    assert step.title == "One of 16 links is bad: leaf-[0-1]-2 ↔ spine-[0-7]"
    assert "r1-1 (95 Gb/s)" in step.detail and not step.commands
    assert describe_links([("a", "b"), ("c", "d")]) == "a ↔ b, c ↔ d"


def test_orchestrator_notes_are_info_steps():
    r = run(drain=["node-001"], extra={
        "glitches": ["r1-3", "r2-9"], "untested": ["node-008"], "budget_exhausted": True,
        "stop_reason": "budget of 300 s reached", "log_suspects": ["node-001", "node-002"],
        "unconfirmed_link_failures": [{"candidates": [["leaf-0", "spine-1"]]}],
    })  # fmt: skip
    info = [s.title for s in next_steps(r, build_view(r, None)) if s.level == "info"]
    assert any("budget of 300 s reached" in t for t in info)
    assert any(t.startswith("1 node not tested: node-008") for t in info)
    assert any(t.startswith("2 transient failures") for t in info)
    assert any("leaf-0 ↔ spine-1" in t and "not confirmed" in t for t in info)
    assert any(t.startswith("The job log named node-[001-002]") for t in info)


def test_nic_and_node_steps_carry_checks_and_a_retest_with_a_healthy_partner():
    r = run(drain=["node-002", "node-003"], bad_nics=["node-002/mlx5_3"], bad_nodes=["node-003"],
            verdicts=[Verdict("nic", "node-002/mlx5_3", BAD, "slow"),
                      Verdict("node", "node-003", BAD, "slow everywhere")])  # fmt: skip
    from tests.report.report_runs import Faults as F
    from tests.report.report_runs import build_run, rail_topology

    r.observations = build_run(rail_topology(8), F()).observations  # every node was tested
    steps = next_steps(r, build_view(r, None), "infiniband", "rail-8")
    nic = next(s for s in steps if s.title.startswith("Check NIC node-002/mlx5_3"))
    assert "ssh node-002 mlxlink -d mlx5_3 -m -c -e" in nic.commands
    retest = [c for c in nic.commands if c.startswith("fabriccheck gate")]
    assert retest and "node-002," in retest[0] and "--topology rail-8" in retest[0]
    partner = retest[0].split("node-002,", 1)[1].split()[0]
    assert partner not in ("node-002", "node-003")
    node = next(s for s in steps if s.title.startswith("Check node node-003"))
    assert any("nvidia-smi" in c for c in node.commands)


def test_drain_commands_are_per_scheduler_never_mixed():
    def blocks(extra):
        r = RunResult(mode="sweep", nodes=["node-001", "node-002"], drain=["node-001"],
                      bad_nodes=["node-001"], extra=extra)
        return [s.commands for s in next_steps(r, build_view(r, None))
                if s.title.startswith(("Drain", "Or on Kubernetes"))]

    for cmds in blocks({}):  # no scheduler named: one block per scheduler
        assert len({c.split()[0] for c in cmds}) == 1
    assert [c[0].split()[0] for c in blocks({})] == ["scontrol", "kubectl"]
    assert [c[0].split()[0] for c in blocks({"actions": {"backend": "slurm"}})] == ["scontrol"]
    assert [c[0].split()[0] for c in blocks({"actions": {"backend": "kubernetes"}})] == [
        "kubectl"]
