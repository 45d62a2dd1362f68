"""The bisect conclusion: fabric when a part is bad, not-fabric only when everything tested is
healthy (naming the stuck rank and how to get its stack), unknown with what is missing."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from fabriccheck.inference.job_log import bisect_exit_code, conclude
from fabriccheck.probes.job_triage import JobLog

LOG = JobLog({"op": "ALLREDUCE", "seq": 4021, "timeout_ms": 600000}, 32, (28,),
             rank_hosts={r: f"node-{r // 8 + 1:03d}" for r in range(32)},
             rank_pids={28: "41028"}, suspect_hosts=("node-004",))
NODES = ["node-001", "node-002", "node-003", "node-004"]


@dataclass
class Result:  # the RunResult fields conclude reads
    nodes: list[str] = field(default_factory=lambda: list(NODES))
    drain: list[str] = field(default_factory=list)
    bad_nics: list[str] = field(default_factory=list)
    bad_nodes: list[str] = field(default_factory=list)
    bad_links: list[list[str]] = field(default_factory=list)
    link_suspects: list[dict] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    hung: list[str] = field(default_factory=list)
    suspects: list[str] = field(default_factory=list)
    fabric_warnings: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)


def test_healthy_run_is_not_fabric_and_names_the_rank_and_the_command():
    c = conclude(LOG, Result())
    assert c.conclusion == "not-fabric"
    assert c.why.startswith("rank 28 on node-004 never reached ALLREDUCE SeqNum=4021; look at "
                            "its stack")
    assert "ssh node-004 py-spy dump --pid 41028" in c.why and "flight_recorder" in c.why
    assert bisect_exit_code(c, 0) == 0


def test_bad_nic_on_the_silent_ranks_host_is_fabric():
    c = conclude(LOG, Result(drain=["node-004"], bad_nics=["node-004/mlx5_5"]))
    assert c.conclusion == "fabric" and "NIC node-004/mlx5_5" in c.why
    assert "rank 28 on node-004" in c.why and bisect_exit_code(c, 1) == 1


def test_bad_link_elsewhere_is_fabric_too():
    c = conclude(LOG, Result(bad_links=[["leaf-1", "spine-2"]]))
    assert c.conclusion == "fabric" and "link leaf-1 -- spine-2" in c.why


@pytest.mark.parametrize("kw,needle", [
    ({"unreachable": ["node-004"]}, "unreachable, not tested: node-004"),
    ({"suspects": ["node-002/mlx5_1"]}, "suspects still open"),
    ({"extra": {"untested": ["node-003"]}}, "no test finished on node-003"),
    ({"fabric_warnings": ["fabric below its baseline"]}, "fabric warning"),
    ({"link_suspects": [{"candidates": [["a", "b"], ["a", "c"]]}]}, "2 candidate link(s)"),
])
def test_open_items_make_it_unknown_and_never_exit_0(kw, needle):
    c = conclude(LOG, Result(**kw))
    assert c.conclusion == "unknown" and needle in c.why
    assert bisect_exit_code(c, 0) == 1


def test_logged_ib_errors_with_healthy_tests_are_unknown():
    log = JobLog(error_ranks=({"rank": 3, "host": "node-001", "kind": "ib_completion",
                               "hca": "mlx5_3", "message": "status 12"},))
    c = conclude(log, Result())
    assert c.conclusion == "unknown" and "node-001/mlx5_3" in c.why


def test_every_rank_timed_out_is_not_fabric_and_asks_for_every_stack():
    log = JobLog({"op": "ALLREDUCE", "seq": 7, "timeout_ms": 1000}, 4, reported_ranks=(0, 1, 2, 3))
    c = conclude(log, Result())
    assert c.conclusion == "not-fabric" and "every rank's stack" in c.why


def test_fabric_why_says_when_the_log_agrees():
    log = JobLog(error_ranks=({"host": "node-017", "kind": "ib_completion", "hca": "mlx5_3",
                               "message": "status 12"},))
    c = conclude(log, Result(nodes=["node-017"], drain=["node-017"],
                             bad_nics=["node-017/mlx5_3"]))
    assert c.conclusion == "fabric"
    assert "the log's ib_completion error on node-017/mlx5_3 agrees" in c.why


def test_stuck_ranks_host_untested_or_job_nodes_left_out_is_unknown():
    c = conclude(LOG, Result(nodes=NODES[:3]))  # node-004 (rank 28) was not tested
    assert c.conclusion == "unknown" and "job node(s) not tested: node-004" in c.why
    c = conclude(LOG, Result(), left_out=["gpu-x"])
    assert c.conclusion == "unknown" and "gpu-x" in c.why


def test_gpu_errors_in_the_log_are_named_when_the_fabric_is_healthy():
    log = JobLog({"op": "ALLREDUCE", "seq": 1, "timeout_ms": 1}, 32, (28,),
                 error_ranks=({"host": "node-004", "kind": "xid",
                               "message": "Xid 79: GPU has fallen off the bus."},),
                 rank_hosts={28: "node-004"})
    c = conclude(log, Result())
    assert c.conclusion == "not-fabric" and "Xid 79" in c.why and "node-004" in c.why
