"""NCCL transport per rank: fixtures written here on NCCL 2.12-2.23 wordings, NCCL's own line
shapes one by one, the ``parse --json`` contract, the commands' debug settings, and every real
output in ../shared that carries NCCL INFO lines (read where it is, skipped without it)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from fabriccheck.errors import ParseError
from fabriccheck.models import Flow, Test
from fabriccheck.probes.commands import NCCL_TRANSPORT_ENV, CommandOptions, build_launch
from fabriccheck.probes.detect import parse_text
from fabriccheck.probes.nccl_tests import parse_nccl_tests
from fabriccheck.probes.nccl_transport import (
    TransportReader,
    net_kind,
    parse_ib_devices,
    parse_net_via,
    read_transport,
    transport_summary,
)
from fabriccheck.probes.results import RankTransport
from fabriccheck.probes.to_json import result_to_json
from tests.conftest import LOCAL_FIXTURES, REPO, SHARED_FIXTURES, read_fixture, requires_shared

NX = "nccl-transport/"  # fixtures written here on NCCL's wordings, one per version and case


def _parse(name: str):
    return parse_nccl_tests(read_fixture(NX + name))


def _by_rank(result) -> dict[int, RankTransport]:
    return {t.rank: t for t in result.transport}


# --- fixtures written on real wordings ---------------------------------------------------------


def test_v218_two_nodes_ib_every_channel_gdrdma():
    r = _parse("nccl_allreduce_v2.18_2node_ib_gdrdma_info_synthetic.txt")
    assert r.status == "ok" and len(r.rows) == 2  # the table is read as before
    ranks = _by_rank(r)
    assert sorted(ranks) == [0, 1, 2, 3]
    assert {t.host for t in r.transport} == {"gpu-a1", "gpu-a2"}
    assert all(t.net == "ib" and t.gdr is True for t in r.transport)
    # NET/IB/<dev> indexes the "NET/IB : Using [0]mlx5_0 [1]mlx5_3" list of its process
    assert ranks[0].hcas == ("mlx5_0",) and ranks[1].hcas == ("mlx5_3",)
    assert ranks[3].host == "gpu-a2" and ranks[3].hcas == ("mlx5_3",)


def test_v220_one_node_falls_back_to_sockets():
    r = _parse("nccl_allreduce_v2.20_socket_fallback_one_node_synthetic.txt")
    ranks = _by_rank(r)
    assert [ranks[i].net for i in range(4)] == ["ib", "ib", "socket", "socket"]
    assert ranks[2].host == ranks[3].host == "dgx-02"
    assert ranks[2].hcas == ("enp86s0f0",) and ranks[2].gdr is False
    assert ranks[0].hcas == ("mlx5_0",) and ranks[0].gdr is True
    assert transport_summary(r.transport) == {
        "net": "socket", "socket_hosts": ["dgx-02"], "no_gdr_hosts": []}


def test_v212_no_peermem_channels_lack_gdrdma_under_tag_output():
    r = _parse("nccl_allreduce_v2.12_no_gdr_module_tag_output_synthetic.txt")
    ranks = _by_rank(r)
    assert r.hosts == ("a100-06", "a100-07")
    assert [(ranks[i].host, ranks[i].gdr) for i in range(4)] == [
        ("a100-06", True), ("a100-06", True), ("a100-07", False), ("a100-07", False)]
    assert all(t.net == "ib" for t in r.transport)
    assert transport_summary(r.transport)["no_gdr_hosts"] == ["a100-07"]


def test_v223_roce_one_process_two_gpus_pxn_and_shared_channels():
    """RoCE prints NET/IB (NCCL's IB transport drives both); ``-g 2`` puts two ranks in one
    process, told apart by ``[cudaDev]``; PXN ``NET/IB/0(0)`` and ``/Shared`` still count."""
    r = _parse("nccl_allreduce_v2.23_roce_g2_pxn_info_synthetic.txt")
    ranks = _by_rank(r)
    assert sorted(ranks) == [0, 1, 2, 3]
    assert all(t.net == "ib" and t.gdr is True for t in r.transport)
    assert ranks[1].host == "roce-node-1" and set(ranks[1].hcas) == {"mlx5_0", "mlx5_1"}
    assert ranks[3].host == "roce-node-2" and ranks[3].hcas == ("mlx5_1",)


def test_v219_ib_plugin_network_is_ib():
    r = _parse("nccl_allreduce_v2.19_ibext_sharp_plugin_info_synthetic.txt")
    assert [(t.host, t.net, t.gdr) for t in r.transport] == [
        ("h100-7", "ib", True), ("h100-8", "ib", True)]
    assert r.transport[0].hcas == ("mlx5_1", "mlx5_2")  # SHARP devices: mlx5_1:1/IB/SHARP


def test_v221_single_node_has_no_net_channel():
    r = _parse("nccl_allreduce_v2.21_1node_p2p_only_info_synthetic.txt")
    assert [(t.rank, t.net, t.gdr, t.hcas) for t in r.transport] == [
        (0, None, None, ()), (1, None, None, ())]
    assert transport_summary(r.transport)["net"] is None


def test_killed_before_channels_falls_back_on_the_chosen_network():
    """No channel line before the kill: a job over two hosts is taken to use the network
    NCCL chose (``Using network Socket``), ranks from the ``# Rank`` lines."""
    r = _parse("nccl_allreduce_v2.20_socket_killed_before_rows_synthetic.txt")
    assert r.status == "incomplete"
    assert [(t.rank, t.host, t.net, t.hcas) for t in r.transport] == [
        (0, "node-a", "socket", ("eth0", "eth1")), (1, "node-b", "socket", ("eth0", "eth1"))]


def test_output_without_nccl_info_lines_has_no_transport():
    r = parse_nccl_tests(read_fixture("nccl-tests/nccl_allreduce_v2.20_current_format_2node_"
                                      "synthetic.txt"))
    assert r.status == "ok" and r.transport == ()


# --- NCCL's line shapes, version by version --------------------------------------------------


@pytest.mark.parametrize("msg,want", [
    # 2.19+ (nvmlDev), 2.12-2.18 (busId), 2.7-2.11 (no connIndex), 2.4-2.6 (Ring, no dev)
    ("Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/2/GDRDMA", (0, "ib", True, "2")),
    ("Channel 03/1 : 15[a01d0] -> 6[a01c0] [receive] via NET/IB/1", (6, "ib", False, "1")),
    ("Channel 01 : 9[101d0] -> 0[101c0] [send] via NET/Socket/0", (9, "socket", False, "0")),
    ("Ring 00 : 3 -> 12 [send] via NET/IB/0/GDRDMA", (3, "ib", True, "0")),
    # 2.27: GDR through PCI, PXN proxy rank, shared buffers
    ("Channel 02/0 : 4[4] -> 12[4] [send] via NET/IB/3(5)/GDRDMA(PCI)/Shared",
     (4, "ib", True, "3")),
    # CollNet (SHARP) channels
    ("CollNet 00/0 : 7 [receive] via COLLNET/IBext_v8/0/GDRDMA", (7, "ib", True, "0")),
])
def test_channel_wordings(msg, want):
    rank, net, gdr, dev = want
    t = TransportReader()
    t.feed("h1", "10", "0", msg)
    [got] = t.ranks(multi_host=True)
    assert (got.rank, got.net, got.gdr, got.hcas) == (rank, net, gdr, (f"#{dev}",))


def test_p2p_and_shm_channels_are_not_net():
    t = TransportReader()
    for msg in ("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
                "Channel 01 : 0[1b000] -> 1[1c000] via SHM/direct/direct",
                "Ring 00 : 0[0] -> 1[1] via direct shared memory"):
        t.feed("h1", "10", "0", msg)
    assert t.ranks(multi_host=True) == (RankTransport("h1", 0, None, None, ()),)


@pytest.mark.parametrize("line,hca,enabled", [
    ("NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)", "mlx5_0", False),
    ("NET/IB : GPU Direct RDMA Enabled for HCA 1 'mlx5_1'", "mlx5_1", True),
    ("NET/IBext_v8 : GPU Direct RDMA Disabled for HCA 0 'mlx5_4'", "mlx5_4", False),
])
def test_gdr_lines_decide_when_no_channel_was_printed(line, hca, enabled):
    t = TransportReader()
    t.feed("h1", "10", "0", "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_4:1/IB "
                            "[RO]; OOB ib0:10.0.0.1<0>")
    t.feed("h1", "10", "0", line)
    t.feed("h1", "10", "0", "Using network IB")
    [got] = t.ranks(multi_host=True)
    assert got.net == "ib" and got.gdr is enabled


def test_distance_line_turns_gdr_off_without_channels():
    t = TransportReader()
    t.feed("h1", "10", "3", "Using network IB")
    t.feed("h1", "10", "3", "GPU Direct RDMA Disabled for GPU 3 / HCA 1b (distance 5 > 4)")
    assert t.ranks(multi_host=True)[0].gdr is False


def test_device_lists_merged_and_sharp():
    assert parse_ib_devices("NET/IB : Using [0]={[0] mlx5_0:1/IB, [1] mlx5_1:1/IB} "
                            "[1]mlx5_4:1/RoCE [RO]; OOB eth0:10.0.0.1<0>") == {
        0: "mlx5_0+mlx5_1", 1: "mlx5_4"}
    assert parse_ib_devices("NET/IB : Using [0]mlx5_1:1/IB/SHARP [RO]; OOB ens7:x<0>") == {
        0: "mlx5_1"}


def test_network_names():
    assert [net_kind(n) for n in ("IB", "IBext", "IBext_v6", "Socket", "GPUDirectTCPX")] == [
        "ib", "ib", "ib", "socket", "GPUDirectTCPX"]
    assert parse_net_via("NET/AWS Libfabric/1/GDRDMA") == ("AWS Libfabric", 1, True)
    assert parse_net_via("SHM/direct/direct") is None


def test_single_host_without_channels_says_nothing():
    """One host: NCCL brings its network up but no channel need use it."""
    t = TransportReader()
    t.feed("h1", "10", "0", "NET/IB : No device found.")
    t.feed("h1", "10", "0", "NET/Socket : Using [0]eth0:10.0.0.1<0>")
    t.feed("h1", "10", "0", "Using network Socket")
    assert [x.net for x in t.ranks(multi_host=False)] == [None]
    assert [x.net for x in t.ranks(multi_host=True)] == ["socket"]


def test_read_transport_reads_a_whole_log_with_launcher_prefixes():
    text = ("[1,0]<stdout>:n1:10:11 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] "
            "via NET/Socket/0\n"
            "[1,1]<stdout>:n2:20:21 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] "
            "via NET/IB/0/GDRDMA\n")
    assert [(t.host, t.rank, t.net) for t in read_transport(text)] == [
        ("n1", 0, "socket"), ("n2", 1, "ib")]


# --- the parse --json contract ----------------------------------------------------------------


def test_parse_json_names_socket_ranks_through_the_cli():
    """The issue's done-when: NCCL INFO lines showing NET/Socket parse to ``net: socket`` for
    those ranks, through ``fabriccheck parse --json`` (the CLI as a subprocess)."""
    path = LOCAL_FIXTURES / NX / "nccl_allreduce_v2.20_socket_fallback_one_node_synthetic.txt"
    out = subprocess.run([sys.executable, "-m", "fabriccheck", "parse", str(path), "--json"],
                         capture_output=True, text=True, timeout=120, cwd=REPO, check=True)
    data = json.loads(out.stdout)
    assert data["tool"] == "nccl-tests" and data["status"] == "ok"
    by_rank = {t["rank"]: t for t in data["transport"]}
    assert {r: t["net"] for r, t in by_rank.items()} == {
        0: "ib", 1: "ib", 2: "socket", 3: "socket"}
    assert by_rank[2] == {"host": "dgx-02", "rank": 2, "net": "socket", "gdr": False,
                          "hcas": ["enp86s0f0"]}
    assert data["transport_summary"]["net"] == "socket"
    assert data["transport_summary"]["socket_hosts"] == ["dgx-02"]


def test_json_keys_of_an_output_without_info_lines():
    data = result_to_json(parse_nccl_tests(read_fixture(
        "nccl-tests/nccl_allreduce_v2.20_current_format_2node_synthetic.txt")))
    assert data["transport"] == []
    assert data["transport_summary"] == {"net": None, "socket_hosts": [], "no_gdr_hosts": []}


# --- the commands: NCCL's init and network lines by default ------------------------------------


def _nccl_test() -> Test:
    nodes = ("n0", "n1")
    flows = (Flow("n0/mlx5_0", "n1/mlx5_0"), Flow("n1/mlx5_0", "n0/mlx5_0"))
    return Test("t", "nccl", nodes, flows, params={"size_bytes": 1 << 30})


IPS = {"n0/mlx5_0": "10.0.0.1", "n1/mlx5_0": "10.0.0.2"}


def test_nccl_runs_with_init_and_net_info_by_default():
    (step,) = build_launch(_nccl_test(), IPS).steps
    assert step.env["NCCL_DEBUG"] == "INFO" and step.env["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    exported = {step.argv[i + 1] for i, a in enumerate(step.argv) if a == "-x"}
    assert {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS"} <= exported


def test_site_nccl_env_without_debug_keeps_transport_lines():
    opts = CommandOptions(nccl_env={"NCCL_IB_TIMEOUT": "22"})
    (step,) = build_launch(_nccl_test(), IPS, options=opts).steps
    assert step.env["NCCL_IB_TIMEOUT"] == "22"
    assert {k: step.env[k] for k in NCCL_TRANSPORT_ENV} == NCCL_TRANSPORT_ENV


def test_site_nccl_debug_wins():
    opts = CommandOptions(nccl_env={"NCCL_DEBUG": "WARN"})
    (step,) = build_launch(_nccl_test(), IPS, options=opts).steps
    assert step.env["NCCL_DEBUG"] == "WARN" and "NCCL_DEBUG_SUBSYS" not in step.env


# --- real outputs in ../shared: what is read is what the lines say -----------------------------

_VIA = re.compile(r"(?P<host>[\w.-]+):(?P<pid>\d+):\d+ \[(?P<dev>\d+)\] NCCL INFO "
                  r"(?:Channel|Ring) \d+(?:/\d+)? : (?P<a>\d+)(?:\[\w+\])? -> (?P<b>\d+)"
                  r"(?:\[\w+\])? \[(?P<dir>send|receive)\] via NET/(?P<net>[^/]+)/\d+"
                  r"(?P<flags>\S*)")


def _shared_files_with_info_lines():
    if not SHARED_FIXTURES.is_dir():
        return []
    roots = [SHARED_FIXTURES, SHARED_FIXTURES.parent / "corpus"]
    return sorted(p for root in roots if root.is_dir() for p in root.rglob("*.txt")
                  if "NCCL INFO" in p.read_text(encoding="utf-8", errors="replace"))


@requires_shared
def test_fixtures_say_what_they_model():
    for path in (LOCAL_FIXTURES / NX).glob("*.txt"):
        assert path.read_text().startswith("# source: written for fabriccheck, modelled on "), path


@requires_shared
def test_shared_outputs_with_info_lines_exist():
    assert len(_shared_files_with_info_lines()) >= 5


@requires_shared
@pytest.mark.parametrize("path", _shared_files_with_info_lines(), ids=lambda p: p.name)
def test_real_output_transport_matches_its_channel_lines(path):
    """Rank by rank, the net and GDRDMA read agree with the file's own NET channel lines
    (derived here with a separate regex); a rank with no NET channel line has no net, unless
    the job spans hosts and printed no channel line at all."""
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        transport = getattr(parse_text(text), "transport", None)
    except ParseError:  # a kernel log, a torchrun summary: not a parser's output
        transport = None
    if transport is None:  # a job log or another tool: the reader on the whole text
        transport = read_transport(text)
    want: dict[tuple[str, int], tuple[str, bool]] = {}
    for m in _VIA.finditer(text):
        rank = int(m["b"] if m["dir"] == "receive" else m["a"])
        net = net_kind(m["net"])
        gdr = want.get((m["host"], rank), (net, False))[1] or "/GDRDMA" in m["flags"]
        want[(m["host"], rank)] = (net, gdr and net != "socket")
    got = {(t.host, t.rank): (t.net, t.gdr) for t in transport if t.net is not None}
    if want:
        assert got == want
    else:  # no NET channel line: a net only for a host that said which network it chose
        for host, _rank in got:
            assert re.search(rf"{re.escape(host)}:\d+:\d+ \[\d+\] NCCL INFO "
                             r"(?:Using network|NET/(?:IB|Socket) : Using)", text), host


@requires_shared
def test_real_efa_output_reads_sixteen_ranks_over_the_libfabric_plugin():
    path = REPO.parent / "shared" / "corpus" / "parsers"
    [efa] = sorted(path.glob("awsefa_nccltests_allreduce_2node_*.txt"))
    r = parse_text(efa.read_text(encoding="utf-8", errors="replace"))
    assert [t.rank for t in r.transport] == list(range(16))
    assert {t.net for t in r.transport} == {"AWS Libfabric"}  # a net plugin, by its own name
    assert all(t.gdr is True for t in r.transport)
    assert {t.host for t in r.transport} == set(r.hosts)
    assert transport_summary(r.transport) == {
        "net": "AWS Libfabric", "socket_hosts": [], "no_gdr_hosts": []}
