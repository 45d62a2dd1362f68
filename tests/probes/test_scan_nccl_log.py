"""NCCL job-log scanner: every shared log fixture, asserting hosts, ranks, HCAs and errors named."""

from __future__ import annotations

from fabriccheck.probes.nccl_log import scan_nccl_log
from tests.conftest import read_fixture


def _scan(name: str):
    return scan_nccl_log(read_fixture("nccl-logs/" + name))


def _kinds(scan) -> list[str]:
    return [e.kind for e in scan.errors]


def test_ib_status12_vendor129_names_host_and_peer():
    s = _scan("nccl_warn_net_ib_status12_vendor129_recv_gids_excerpt.txt")
    (e,) = s.errors  # three identical completions folded
    assert (e.kind, e.host, e.status, e.vendor_err, e.peer, e.count) == (
        "ib_completion", "kp-ddp-worker-0", "12", "129", "10.216.210.236", 3)
    assert s.suspects == ("kp-ddp-worker-0",) and s.peers == ("10.216.210.236",)


def test_ib_status12_then_status5_flush():
    s = _scan("nccl_warn_net_ib_status12_then_status5_vendor249_ipv4_mapped_gids_excerpt.txt")
    assert [(e.status, e.vendor_err, e.count) for e in s.errors] == [
        ("12", "129", None), ("5", "249", 2)]
    assert {e.host for e in s.errors} == {"hostname-test"} and s.peers == ("172.36.143.59",)


def test_older_ib_completion_in_nccl_tests_dir():
    rel = "nccl-tests/nccl_warn_net_ib_completion_error4_vendor81_older.txt"
    s = scan_nccl_log(read_fixture(rel))
    assert [(e.host, e.status, e.vendor_err) for e in s.errors] == [
        ("H100-2", "4", "81"), ("H100-1", "4", "81")]
    assert s.suspects == ("H100-2", "H100-1")


def test_remote_error_resolves_rank_to_host():
    s = _scan("nccl_remote_error_ib_completion_error5_elastic_kill.txt")
    assert s.ranks == {16: "node-1"}  # `comm ... rank 16 ... Abort COMPLETE` on node-1
    ib = [e for e in s.errors if e.kind == "ib_completion"]
    assert [(e.status, e.vendor_err, e.peer, e.rank, e.host, e.count) for e in ib] == [
        ("5", "244", "10.42.0.2", 16, "node-1", 2)]
    assert "connection_closed" in _kinds(s) and "nccl_error" in _kinds(s)
    assert s.suspects == ("node-1",)


def test_socket_traces_and_process_abort():
    s = _scan("nccl_socket_errors_abort_complete_then_pg_watchdog_excerpt.txt")
    assert s.hosts == ("n124-137-109",)  # host found behind the glued tqdm bar too
    assert s.ranks == {6: "n124-137-109"}
    assert sorted(_kinds(s)) == ["process_abort", "socket"]
    (sock,) = [e for e in s.errors if e.kind == "socket"]
    assert sock.message.startswith("10 NCCL socket error trace")


def test_watchdog_pg_guid_format():
    s = _scan("pytorch_watchdog_timeout_allreduce_pg_guid_format_excerpt.txt")
    assert [(e.kind, e.rank) for e in s.errors] == [
        ("watchdog_timeout", 1), ("watchdog_timeout", 0), ("watchdog_timeout", 2)]
    assert "ALLREDUCE SeqNum=808" in s.errors[0].message and "ran 600.02 s" in s.errors[0].message


def test_watchdog_reduce_scatter_base():
    s = _scan("pytorch_watchdog_timeout_reduce_scatter_base_excerpt.txt")
    assert [e.rank for e in s.errors] == [0, 4, 3]
    assert all("_REDUCE_SCATTER_BASE SeqNum=7753" in e.message for e in s.errors)


def test_watchdog_blocking_wait_counted_once_per_rank():
    s = _scan("pytorch_watchdog_timeout_blocking_wait_excerpt.txt")
    assert [e.rank for e in s.errors] == [1, 7, 5]


def test_watchdog_old_format_1800s():
    s = _scan("pytorch_watchdog_timeout_old_format_no_numel_1800s_excerpt.txt")
    assert [e.rank for e in s.errors] == [1, 3, 2, 6, 7]
    assert "timeout 1800 s" in s.errors[0].message and "ran 1802.21 s" in s.errors[0].message


def test_watchdog_hard_wrapped_lines():
    s = _scan("pytorch_watchdog_timeout_exception_hit_wrapped_lines_excerpt.txt")
    (e,) = s.errors
    assert (e.kind, e.rank) == ("watchdog_timeout", 0)
    assert "ALLREDUCE SeqNum=2" in e.message and "timeout 10 s" in e.message
    assert "ran 10.028 s" in e.message


def test_watchdog_lines_cut_by_a_slide():
    s = _scan("pytorch_nccl_watchdog_timeouts_excerpt.txt")
    assert [e.rank for e in s.errors] == [22, 23, 24, 25, 26, 27, 29, 30]
    assert "ran 600.038 s" in s.errors[0].message


def test_flight_recorder_dump_with_role_prefix():
    s = _scan("pytorch_flight_recorder_dump_glog_prefixed_excerpt.txt")
    assert [(e.kind, e.rank) for e in s.errors] == [("watchdog_dump", 0)]


def test_torchrun_failures_map_ranks_to_hosts():
    s = _scan("torchrun_childfailederror_multi_failure_ranks_hosts_excerpt.txt")
    assert s.ranks == {1: "hedp017-default", 2: "hedp017-default"}
    assert [(e.kind, e.host, e.rank, e.status) for e in s.errors] == [
        ("process_exit", "hedp017-default", 1, "6"), ("process_exit", "hedp017-default", 2, "6")]
    assert s.suspects == ("hedp017-default",)


def test_torchrun_root_cause():
    s = _scan("torchrun_root_cause_sigabrt_watchdog_excerpt.txt")
    assert [(e.kind, e.rank, e.status) for e in s.errors] == [
        ("process_exit", 7, "-6"), ("root_cause", 0, "-6")]
    assert "SIGABRT" in s.errors[1].message and s.ranks == {0: "472a4389fceb", 7: "472a4389fceb"}


def test_xid_119_repeated():
    s = _scan("dmesg_ctime_xid119_gsp_rpc_timeout_xe9680.txt")
    assert [(e.xid, e.pci) for e in s.errors] == [(119, "0000:9b:00")] * 5
    assert "GSP" in s.errors[0].message


def test_xid_13_and_109():
    s = _scan("dmesg_ctime_xid13_sm_exception_xid109_ctx_switch_timeout.txt")
    assert [e.xid for e in s.errors] == [13, 13, 13, 109]
    assert {e.pci for e in s.errors} == {"0000:cb:00"}
    assert "CTX SWITCH TIMEOUT" in s.errors[3].message


def test_xid_74_and_79():
    (e74,) = _scan("dmesg_xid74_nvlink_fatal.txt").errors
    assert (e74.xid, e74.pci) == (74, "0000:2d:00") and "NVLink" in e74.message
    s79 = _scan("dmesg_xid79_gpu_fallen_off_bus.txt")
    assert [(e.kind, e.xid, e.pci) for e in s79.errors] == [("xid", 79, "0000:5d:00")]


def test_fallen_off_bus_without_xid():
    (e,) = _scan("dmesg_nvrm_fallen_off_bus_no_xid_570_open.txt").errors
    assert (e.kind, e.pci) == ("gpu_lost", "0000:b3:00.0")
    (e2,) = _scan("dmesg_xid79_probe_failed_after_reload.txt").errors
    assert (e2.kind, e2.pci) == ("gpu_lost", "0000:5d:00.0")


def test_libnccl_segfault():
    (e,) = _scan("dmesg_decode_iso_libnccl_segfault.txt").errors
    assert (e.kind, e.count) == ("segfault", 2) and "libnccl.so.2" in e.message


def test_mlx5_ib_port_init_active_at_boot_is_not_a_flap():
    s = _scan("journalctl_k_mlx5_ib_port_link_init_active_boot_excerpt.txt")
    host = "000-000-00000-1-gpu-1"
    assert s.hosts == (host,) and s.hcas == ((host, "mlx5_5"),)
    (e,) = s.errors
    assert (e.kind, e.hca, e.pci) == ("link_state", "mlx5_5", "0000:ab:00.0")
    assert s.suspects == ()


def test_mlx5_eth_link_flapping():
    s = _scan("journalctl_mlx5_eth_link_up_flapping.txt")
    (e,) = s.errors
    assert (e.kind, e.host, e.hca, e.count) == ("link_flap", "cc1", "eth1", 4)
    assert s.suspects == ("cc1",)


def test_suspects_rank_most_implicated_first_and_hca_from_new_warn():
    text = (
        "n1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>\n"
        "n2:5:5 [0] NCCL INFO comm 0x1 rank 9 nranks 16 cudaDev 1 busId 1b000 - Init COMPLETE\n"
        "n3:7:8 [2] transport/net_ib.cc:1696 NCCL WARN NET/IB: Got completion from peer "
        "10.0.0.2<5> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::1 "
        "remoteGids::2 hca mlx5_2\n"
        "[rank9]:[E626 06:24:44.9 ProcessGroupNCCL.cpp:616] [Rank 9] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=8, OpType=ALLREDUCE, Timeout(ms)=600000) ran for "
        "600020 milliseconds before timing out.\n"
        "Mar 27 15:37:34 n4 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, GPU has "
        "fallen off the bus.\n"
    )
    s = scan_nccl_log(text)
    assert s.suspects == ("n4", "n3", "n2")  # xid > ib_completion > watchdog timeout
    assert s.ranks == {9: "n2"}
    assert ("n1", "mlx5_0") in s.hcas and ("n1", "mlx5_1") in s.hcas and ("n3", "mlx5_2") in s.hcas
    assert s.peers == ("10.0.0.2",)


def test_empty_log():
    s = scan_nccl_log("")
    assert s.status == "incomplete" and not s.errors and s.suspects == ()


def test_warn_naming_an_hca_and_socket_peer():
    text = ("n5:10:11 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/RoCE [RO]; "
            "OOB eth0:10.0.0.5<0>\n"
            "n5:10:12 [1] transport/net_ib.cc:87 NCCL WARN NET/IB : mlx5_3:1 Got async event : "
            "port error\n"
            "n6:20:21 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote "
            "peer n5<43210>\n")
    s = scan_nccl_log(text)
    assert [(e.kind, e.host, e.hca, e.peer) for e in s.errors] == [
        ("nccl_warn", "n5", "mlx5_3", None), ("socket", "n6", None, "n5")]
    assert s.hcas == (("n5", "mlx5_0"), ("n5", "mlx5_3"))
    # the socket error blames its peer n5, not n6 that printed it (issue 16)
    assert s.peers == ("n5",) and s.suspects == ("n5",)


def test_ib_peer_address_resolved_to_a_suspect_host():
    text = (
        "n1:10:10 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "n2:20:20 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.2<0>\n"
        "n3:30:30 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.3<0>\n"
        "n1:10:11 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4001> "
        "with status=12 opcode=0 len=0 vendor err 129 (Recv) hca mlx5_0\n"
    )
    s = scan_nccl_log(text)
    assert s.suspects == ("n1", "n2")  # reporter first, then the far end; n3 not implicated
    assert s.peers == ("10.0.0.2",) and s.hosts == ("n1", "n2", "n3")
