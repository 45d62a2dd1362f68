"""Job-log triage: the timed-out collective, missing / lagging / error ranks and where they ran.

Logs are built here in the real PyTorch and NCCL line formats (see tests/fixtures/nccl-logs/ and
../shared/fixtures/nccl-logs/); a property test checks that whatever the launcher prefixes, the
order and the ranks per host, the silent ranks are exactly the missing ones, on the right host.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabriccheck.probes.job_triage import parse_hostfile, scan_with_triage, triage_job_log
from tests.conftest import LOCAL_FIXTURES, SHARED_FIXTURES

RANK28 = LOCAL_FIXTURES / "nccl-logs" / "pytorch_32rank_4host_rank28_missing.log"
CORPUS = SHARED_FIXTURES.parent / "corpus" / "parsers"
WATCHDOG = ("[E1125 04:12:31.123456789 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=8, "
            "NumelOut=8, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.")
COMM = ("{h}:{pid}:{tid} [{dev}] NCCL INFO comm 0x55d0c8a04b0 rank {r} nranks {n} cudaDev {dev} "
        "busId 18000 commId 0x6c3f - Init COMPLETE")


def _shared(name: str) -> str:
    path = SHARED_FIXTURES / "nccl-logs" / name
    if not path.exists():
        pytest.skip(f"../shared is absent: {path} (third-party logs are read where they are)")
    return path.read_text(encoding="utf-8", errors="replace")


def test_32_ranks_4_hosts_rank_28_silent():
    t = triage_job_log(RANK28.read_text())
    assert t.collective == {"op": "ALLREDUCE", "seq": 4021, "timeout_ms": 600000}
    assert t.nranks == 32 and t.missing_ranks == (28,) and len(t.reported_ranks) == 31
    assert t.rank_hosts[28] == "node-004" and t.rank_hosts[0] == "node-001"
    assert t.suspect_hosts == ("node-004",) and t.rank_pids[28] == "41028"
    assert t.lagging_ranks == () and t.error_ranks == ()
    assert t.hosts == ("node-001", "node-002", "node-003", "node-004")  # no host inflation
    assert "rank 28 on node-004 never reported it" in t.why and t.conclusion == "unknown"


def test_parse_json_carries_job_log_and_keeps_the_contract_keys():
    from fabriccheck.probes.to_json import result_to_json

    d = result_to_json(scan_with_triage(RANK28.read_text()))
    for key in ("tool", "status", "reason", "hosts", "ranks", "hcas", "peers", "suspects",
                "errors"):
        assert key in d
    jl = d["job_log"]
    assert jl["missing_ranks"] == [28] and jl["rank_hosts"]["28"] == "node-004"
    assert jl["collective"]["seq"] == 4021 and jl["suspect_hosts"] == ["node-004"]
    assert set(jl) >= {"collective", "nranks", "missing_ranks", "lagging_ranks", "error_ranks",
                       "rank_hosts", "suspect_hosts", "conclusion", "why"}


def _job(hosts: int, per_host: int, silent: set[int], style: str, seed: int,
         comm_lines: bool = True) -> str:
    """A job log: NCCL init lines (optional), then a watchdog report from every rank but
    ``silent``, each line under the launcher prefix ``style``, in a shuffled order."""
    n = hosts * per_host
    rnd = random.Random(seed)
    lines = []
    for r in range(n):
        h, pid = f"gpu{r // per_host + 1:02d}", 5000 + r
        nccl = COMM.format(h=h, pid=pid, tid=pid + 9, dev=r % per_host, r=r, n=n)
        if comm_lines or style != "torchrun":
            lines.append(_prefix(style, r) + nccl)
    reports = [_prefix(style, r) + WATCHDOG.format(r=r, seq=77) for r in range(n)
               if r not in silent]
    rnd.shuffle(reports)
    return "\n".join(lines + reports) + "\n"


def _prefix(style: str, rank: int) -> str:
    return {"srun": f"{rank}: ", "torchrun": f"[rank{rank}]:", "mpirun": f"[1,{rank}]<stdout>:",
            "none": ""}[style]


@given(hosts=st.integers(1, 6), per_host=st.integers(1, 8),
       style=st.sampled_from(["srun", "torchrun", "mpirun", "none"]), data=st.data())
def test_silent_ranks_are_missing_on_their_host(hosts, per_host, style, data):
    n = hosts * per_host
    silent = data.draw(st.sets(st.integers(0, n - 1), max_size=max(0, n - 1)))
    text = _job(hosts, per_host, silent, style, seed=n)
    t = triage_job_log(text)
    assert t.missing_ranks == tuple(sorted(silent))
    names = {f"gpu{h + 1:02d}" for h in range(hosts)}
    assert set(scan_with_triage(text).hosts) == names == set(t.hosts)  # prefixes add no host
    assert set(t.reported_ranks) == set(range(n)) - silent and t.nranks == n
    assert all(t.rank_hosts[r] == f"gpu{r // per_host + 1:02d}" for r in range(n))
    assert set(t.suspect_hosts) == {t.rank_hosts[r] for r in silent}
    assert t.collective == {"op": "ALLREDUCE", "seq": 77, "timeout_ms": 600000}


def test_srun_task_ids_map_ranks_when_no_comm_line_does():
    log = "".join(f"{r}: gpu0{r}:{100 + r}:1 [0] NCCL INFO Using network IB\n" for r in range(3))
    log += "".join(f"{r}: " + WATCHDOG.format(r=r, seq=5) + "\n" for r in (0, 2))
    t = triage_job_log(log)
    assert t.rank_hosts == {0: "gpu00", 1: "gpu01", 2: "gpu02"}
    assert t.nranks is None and t.missing_ranks == ()  # without nranks: no guessing at gaps


def test_hostfile_places_ranks_the_log_does_not():
    log = "\n".join(WATCHDOG.format(r=r, seq=9) for r in (0, 1, 3)) + "\n"
    log += "[rank0]: Not all ranks joining collective, sequence number: 9\n"
    log += "[rank0]: collective: nccl:all_reduce\n[rank0]: missing ranks: {2}\n"
    t = triage_job_log(log, hostfile="a slots=2\nb slots=2\n")
    assert t.missing_ranks == (2,) and t.rank_hosts == {0: "a", 1: "a", 2: "b", 3: "b"}
    assert t.suspect_hosts == ("b",)
    assert parse_hostfile("a:3\n# c\nb\n") == ["a", "a", "a", "b"]


def test_lagging_rank_never_enqueued_the_collective():
    """A dump-signal line says the rank's last enqueued work is below the timed-out SeqNum."""
    base = ("[rank{r}]:[E703 17:54:18.88 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID "
            "0(default_pg) Rank {r}] {what} Last enqueued NCCL work: {e}, last completed NCCL "
            "work: {d}.This is most likely caused by incorrect usages of collectives")
    lines = [f"[rank{r}]:" + WATCHDOG.format(r=r, seq=4021) for r in (0, 1, 2)]
    lines += [base.format(r=r, e=4021, d=4020, what="Exception hit.") for r in (0, 1, 2)]
    lines.append(base.format(r=3, e=4020, d=4020, what="Received a dump signal due to a "
                             "collective timeout from rank 0 and we will try our best."))
    t = triage_job_log("\n".join(lines))
    assert t.lagging_ranks == (3,) and t.collective["seq"] == 4021


def test_lowest_last_completed_is_lagging():
    lines = [f"[rank{r}]:[E1 ProcessGroupNCCL.cpp:1] [PG 0 Rank {r}] Exception (either an error "
             f"or timeout) detected by watchdog at work: 50, last enqueued NCCL work: 52, last "
             f"completed NCCL work: {d}." for r, d in ((0, 49), (1, 49), (2, 47))]
    assert triage_job_log("\n".join(lines)).lagging_ranks == (2,)


def test_flight_recorder_trace_table_names_missing_ranks():
    text = ("--- Collectives ---\n"
            "  id  group_id    pass_check  collective_seq_id  collective_name    "
            "collective_state  missing_ranks\n"
            "   3  main_comm   True        3                  nccl:broadcast     scheduled\n"
            "   4  main_comm   True        4                  nccl:all_reduce    scheduled"
            "         {1}\n"
            "Not all ranks joining collective 5 at entry 4\n group info: 0:default_pg\n"
            " collective: nccl:all_reduce\n missing ranks: {1, 3}\n expected ranks: 4\n")
    t = triage_job_log(text)
    assert t.missing_ranks == (1, 3) and t.nranks == 4
    assert t.collective == {"op": "ALL_REDUCE", "seq": 5, "timeout_ms": None}


def test_nccl_warn_rank_from_its_process_and_hca():
    text = "\n".join([
        COMM.format(h="gpu01", pid=700, tid=1, dev=3, r=3, n=8),
        COMM.format(h="gpu01", pid=700, tid=1, dev=3, r=1, n=2),  # a sub-communicator
        "gpu01:700:760 [3] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from "
        "peer 10.0.0.9<3> with status=12 opcode=0 len=0 vendor err 129 (Recv) hca mlx5_3",
        "gpu02:800:801 [0] some_lib: ibv_reg_mr failed on mlx5_1: Cannot allocate memory",
    ])
    t = triage_job_log(text)
    ib, ibv = t.error_ranks
    assert (ib["rank"], ib["host"], ib["kind"], ib["hca"]) == (3, "gpu01", "ib_completion",
                                                               "mlx5_3")
    assert t.rank_hosts == {3: "gpu01"}  # the world (widest) communicator's rank only
    assert ibv["kind"] == "ibv" and ibv["hca"] == "mlx5_1"
    assert t.suspect_hosts[0] == "gpu01"


def test_socket_connect_refused_blames_the_peer():
    text = ("h1:5:6 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.7<0>\n"
            "h7:5:6 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.8<0>\n"
            "h1:5:6 [0] NCCL INFO comm 0x1 rank 0 nranks 2 - Init COMPLETE\n"
            "h7:5:6 [0] NCCL INFO comm 0x1 rank 1 nranks 2 - Init COMPLETE\n"
            "h1:5:6 [1] include/socket.h:403 NCCL WARN Connect to 10.0.0.8<56821> failed : "
            "Connection refused\n")
    s = scan_with_triage(text)
    (e,) = s.errors
    assert (e.kind, e.host, e.peer) == ("socket", "h1", "10.0.0.8")
    assert s.suspects == ("h7",) and s.peers == ("10.0.0.8",)
    assert s.job_log.suspect_hosts == ("h7",)
    assert s.job_log.error_ranks[0]["peer_host"] == "h7"


def test_pytorch_runtime_error_nccl_unhandled_system_error():
    s = scan_with_triage("    work = default_pg.barrier(opts=opts)\nRuntimeError: NCCL error in: "
                      "/opt/c10d/ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version "
                      "2.7.8\n")
    (e,) = s.errors
    assert e.kind == "nccl_error" and "unhandled system error" in e.message


def test_wrapped_ib_warn_keeps_its_vendor_error():
    s = scan_with_triage("node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got "
                      "completion from peer 10.2.0.5<33092> with error 12, opcode 0, len\n"
                      "0, vendor err 129 (Recv)\n"
                      "node-2:5776:5902 [0] NCCL INFO transport/net.cc:1134 -> 6\n")
    (e,) = s.errors
    assert (e.status, e.vendor_err, e.peer, e.host) == ("12", "129", "10.2.0.5", "node-2")


def test_hard_wrapped_pytorch_watchdog_published_log():
    t = triage_job_log(_shared("pytorch_watchdog_timeout_exception_hit_wrapped_lines_excerpt.txt"))
    assert t.collective == {"op": "ALLREDUCE", "seq": 2, "timeout_ms": 10000}
    assert t.reported_ranks == (0,)


@pytest.mark.parametrize("name,seq,ranks", [
    ("pytorch_watchdog_timeout_allreduce_pg_guid_format_excerpt.txt", 808, (0, 1, 2)),
    ("pytorch_watchdog_timeout_reduce_scatter_base_excerpt.txt", 7753, (0, 3, 4)),
    ("pytorch_watchdog_timeout_blocking_wait_excerpt.txt", 2521, (1, 5, 7)),
    ("pytorch_watchdog_timeout_old_format_no_numel_1800s_excerpt.txt", 469508, (1, 2, 3, 6, 7)),
    ("pytorch_nccl_watchdog_timeouts_excerpt.txt", None, (22, 23, 24, 25, 26, 27, 29, 30)),
])
def test_published_watchdog_logs(name, seq, ranks):
    t = triage_job_log(_shared(name))
    assert t.collective["seq"] == seq and t.reported_ranks == ranks
    assert t.missing_ranks == ()  # nranks unknown: an excerpt's gaps are not missing ranks


@pytest.mark.parametrize("name", ["ncclog_mlengineering_net_ib_error12_wrapped_line.txt",
                                  "ncclog_mlengineering_socket_connect_refused.txt",
                                  "ncclog_mlengineering_pytorch_nccl_error_unhandled_system_"
                                  "error.txt"])
def test_corpus_nccl_logs_as_expected(name):
    import json

    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"../shared is absent: {path}")
    want = next(e for e in json.loads((CORPUS / "expected.json").read_text())
                if e["file"] == name)["expected"]
    s = scan_with_triage(path.read_text(encoding="utf-8"))
    assert len(s.errors) >= want.get("errors_min", 0)
    for k in ("hosts", "peers"):
        if k in want:
            assert list(getattr(s, k)) == want[k]
    for w in want.get("error_with", []):
        assert any(all(str(getattr(e, f)) == v for f, v in w.items()) for e in s.errors)


@given(st.text(max_size=400))
def test_any_text_gives_a_triage(text):
    t = triage_job_log(text)
    assert set(t.missing_ranks).isdisjoint(t.reported_ranks)
    assert t.conclusion == "unknown" and isinstance(t.why, str)


def test_fixture_says_what_it_models():
    assert Path(RANK28).read_text().startswith("# models: ")


def test_rank_tag_only_watchdog_and_pg_status_variants():
    """``[rank11]: Watchdog caught ...`` (no ``[Rank N]``) and ``failure detected by watchdog at
    work sequence id: N PG status: last enqueued work: E, last completed work: D``."""
    text = "\n".join([
        "[rank10]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=167, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000)",
        "[rank11]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=167, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000)",
        "[rank14]: failure detected by watchdog at work sequence id: 167 PG status: last "
        "enqueued work: 167, last completed work: 166",
        "[rank2]: Received a dump signal due to a collective timeout from rank 10 ... Last "
        "enqueued NCCL work: 166, last completed NCCL work: 166.",
    ])
    t = triage_job_log(text)
    assert t.reported_ranks == (10, 11, 14) and t.collective["seq"] == 167
    assert t.lagging_ranks == (2,)


def test_dist_backend_error_remote_process_exited_names_its_rank():
    text = ("[rank3]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed"
            "/c10d/NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL "
            "version 2.20.5\n[rank3]: ncclRemoteError: A call failed possibly due to a network "
            "error or a remote process exiting prematurely.\n")
    t = triage_job_log(text, hostfile="gpu01 slots=2\ngpu02 slots=2\n")
    (e,) = t.error_ranks
    assert (e["rank"], e["host"], e["kind"]) == (3, "gpu02", "nccl_error")
    assert "remote process exited or there was a network error" in e["message"]
