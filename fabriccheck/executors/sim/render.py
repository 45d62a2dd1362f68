"""What the simulated tools print: nccl-tests tables, ib_write_bw client output, iperf3 -J JSON.

Formats follow ``reference/tool-formats.md`` (current nccl-tests layout since 2025-10, perftest
header box and ``--report_gbits`` table, iperf3's cJSON style) so the real parsers read them.
Everything here is pure string building; numbers come from ``executors.sim.executor``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import NamedTuple

NCCL_VERSION_LINE = "# nccl-tests version 2.17.6 (a0b82b2) nccl-headers=22703 nccl-library=22703"
SEP87 = "-" * 87
#: PCI bus ids of the 8 GPUs of a DGX-H100-like node
GPU_BUS_IDS = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")

#: busbw = algbw × factor(n) (nccl-tests src/*.cu GetBw)
BUSBW_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "sendrecv": lambda n: 1.0,
}
REDOP = {"all_reduce": "sum", "reduce_scatter": "sum"}


def float_str(value: float, width: int) -> str:
    """nccl-tests ``getFloatStr``: 2 decimals if they fit ``width``, else 1, 0, then ``%.1e``.

    >>> float_str(376.123, 6), float_str(12646.2, 7), float_str(1715.44, 6)
    ('376.12', '12646.2', '1715.4')
    """
    if -0.005 < value < 10 ** (width - 3) - 0.005:  # fast path: 2 decimals fit
        return f"{value:{width}.2f}"
    for decimals in (2, 1, 0):
        s = f"{value:{width}.{decimals}f}"
        if len(s) <= width:
            return s
    return f"{value:{width}.1e}"


class NcclRow(NamedTuple):
    size_bytes: int
    count: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    time_ip_us: float
    algbw_ip_gbps: float
    busbw_ip_gbps: float


class NcclRank(NamedTuple):
    host: str
    pid: int
    device: int
    bus_id: str
    gpu_name: str


def nccl_binary(collective: str) -> str:
    return f"{collective}_perf"


def render_nccl_header(
    collective: str, ranks: Sequence[NcclRank], *, n_gpus: int, min_bytes: int, max_bytes: int,
    warmup: int, iters: int, info: Sequence[str] = (),
) -> list[str]:
    """Version, 'starting', parameters, ``# Using devices`` rank lines, NCCL's init lines
    (``info``: printed while the communicators come up) and the column header."""
    lines = [
        NCCL_VERSION_LINE,
        f"# Collective test starting: {nccl_binary(collective)}",
        f"# nThread 1 nGpus {n_gpus} minBytes {min_bytes} maxBytes {max_bytes} step: 2(factor) "
        f"warmup iters: {warmup} iters: {iters} agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    hosts: dict[str, str] = {}  # host -> " on <short name>" (a node's ranks are many)
    for i, r in enumerate(ranks):
        on = hosts.get(r.host)
        if on is None:
            on = hosts[r.host] = f" on {r.host.split('.')[0]:>10s}"
        lines.append(f"#  Rank {i:2d} Group  0 Pid {r.pid:6d}{on}"
                     f"{_rank_device(r.device, r.bus_id, r.gpu_name)}")
    lines += info
    lines += _column_header()
    return lines


@functools.lru_cache(maxsize=1024)
def _rank_device(device: int, bus_id: str, gpu_name: str) -> str:
    return f" device {device:2d} [0000:{bus_id}:00] {gpu_name}"


@functools.lru_cache(maxsize=1)
def _column_header() -> tuple[str, ...]:
    return (
        "#",
        "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place          ",
        _columns("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                 "time", "algbw", "busbw", "#wrong"),
        _columns("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                 "(GB/s)", "(GB/s)", ""),
    )


def _columns(*c: str) -> str:
    """printf("# %10s  %12s  %8s  %6s  %6s" + 2 × "  %7s  %6s  %6s  %6s")."""
    head = f"# {c[0]:>10}  {c[1]:>12}  {c[2]:>8}  {c[3]:>6}  {c[4]:>6}"
    return head + "".join(f"  {c[i]:>7}  {c[i + 1]:>6}  {c[i + 2]:>6}  {c[i + 3]:>6}"
                          for i in (5, 9))


def render_nccl_row(collective: str, row: NcclRow) -> str:
    """One data row in the 118-character layout of nccl-tests since 2025-10."""
    redop = REDOP.get(collective, "none")
    head = f"{row.size_bytes:12d}  {row.count:12d}  {'float':>8}  {redop:>6}  {'-1':>6}"
    wrong_ip = "N/A" if collective == "sendrecv" else "0"
    oop = (f"  {float_str(row.time_us, 7):>7}  {float_str(row.algbw_gbps, 6):>6}  "
           f"{float_str(row.busbw_gbps, 6):>6}  {'0':>6}")
    ip = (f"  {float_str(row.time_ip_us, 7):>7}  {float_str(row.algbw_ip_gbps, 6):>6}  "
          f"{float_str(row.busbw_ip_gbps, 6):>6}  {wrong_ip:>6}")
    return head + oop + ip


def render_nccl_footer(collective: str, rows: Sequence[NcclRow]) -> list[str]:
    vals = [r.busbw_gbps for r in rows] + [r.busbw_ip_gbps for r in rows]
    avg = sum(vals) / len(vals) if vals else 0.0
    return [
        f"# {'Out of bounds values':<20} : 0 OK",
        f"# {'Avg bus bandwidth':<20} : {round(avg, 4):g} ",
        "#",
        f"# Collective test concluded: {nccl_binary(collective)}",
        "#",
        "",
    ]


# ---- NCCL INFO lines of the init and network subsystems (NCCL_DEBUG_SUBSYS=INIT,NET) ------
#: the NCCL library the simulated nccl-tests are linked against (``NCCL version`` line)
NCCL_LIB_VERSION = "2.21.5+cuda12.4"


def nccl_prefix(host: str, pid: int, tid: int, dev: int) -> str:
    """``host:pid:tid [cudaDev] NCCL INFO`` (NCCL's debug prefix, hostname cut at the dot).

    >>> nccl_prefix("node-001.cluster", 4242, 4300, 3)
    'node-001:4242:4300 [3] NCCL INFO'
    """
    return f"{host.split('.')[0]}:{pid}:{tid} [{dev}] NCCL INFO"


def render_ib_using(prefix: str, hcas: Sequence[str], link: str, oob: str) -> str:
    """``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:<ip><0>`` (``link``:
    ``IB`` or ``RoCE``; NCCL's IB transport drives both).

    >>> render_ib_using("p", ["mlx5_0", "mlx5_3"], "RoCE", "10.0.0.1")
    'p NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_3:1/RoCE [RO]; OOB eth0:10.0.0.1<0>'
    """
    devs = "".join(f" [{i}]{h}:1/{link}" for i, h in enumerate(hcas))
    return f"{prefix} NET/IB : Using{devs} [RO]; OOB eth0:{oob}<0>"


def render_socket_fallback(prefix: str, ip: str) -> list[str]:
    """No usable IB device: NCCL takes its socket transport over the management interface."""
    return [f"{prefix} NET/IB : No device found.",
            f"{prefix} NET/Socket : Using [0]eth0:{ip}<0>"]


def render_gdr_disabled(prefix: str, index: int, hca: str) -> str:
    """NCCL 2.14+'s per-HCA GPUDirect RDMA line (``nvidia_peermem`` not loaded, no DMA-BUF)."""
    return f"{prefix} NET/IB : GPU Direct RDMA Disabled for HCA {index} '{hca}'"


def render_net_channel(prefix: str, channel: int, src: tuple[int, int], dst: tuple[int, int],
                       direction: str, net: str, dev: int, gdr: bool) -> str:
    """A NET channel line of NCCL 2.19+ (``rank[nvmlDev]`` on both ends).

    >>> render_net_channel("p", 0, (0, 0), (8, 0), "send", "IB", 0, True)
    'p Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA'
    """
    return (f"{prefix} Channel {channel:02d}/0 : {src[0]}[{src[1]}] -> {dst[0]}[{dst[1]}] "
            f"[{direction}] via NET/{net}/{dev}{'/GDRDMA' if gdr else ''}")


def render_p2p_channel(prefix: str, channel: int, src: tuple[int, int], dst: tuple[int, int]
                       ) -> str:
    """An intra-node channel over NVLink (``P2P/CUMEM/read``, NCCL 2.19+)."""
    return (f"{prefix} Channel {channel:02d}/0 : {src[0]}[{src[1]}] -> {dst[0]}[{dst[1]}] "
            "via P2P/CUMEM/read")


def render_ib_warn(
    host: str, pid: int, tid: int, gpu: int, *, peer_ip: str, port: int, hca: str,
    local_ip: str, direction: str,
) -> list[str]:
    """The NCCL WARN for an IB completion error (status 12, vendor err 129) and its traces."""
    prefix = f"{host}:{pid}:{tid} [{gpu}]"
    return [
        f"{prefix} transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
        f"{peer_ip}<{port}> with status=12 opcode=0 len=0 vendor err 129 ({direction}) "
        f"localGid ::ffff:{local_ip} remoteGids::ffff:{peer_ip} hca {hca}",
        f"{prefix} NCCL INFO transport/net.cc:1302 -> 6",
        f"{prefix} NCCL INFO proxy.cc:698 -> 6",
        f"{prefix} NCCL INFO proxy.cc:878 -> 6 [Progress Thread]",
    ]


def render_nccl_failure(host: str, pid: int, reason: str) -> list[str]:
    """``Test NCCL failure`` and its stack of ``Test failure`` lines (exit code 3)."""
    return [
        f"{host}: Test NCCL failure common.cu:1279 "
        f"'remote process exited or there was a network error / {reason}'",
        f" .. {host} pid {pid}: Test failure common.cu:1100",
        f" .. {host} pid {pid}: Test failure common.cu:891",
    ]


def render_mpirun_abort(rank: int, exit_code: int) -> str:
    """Open MPI's banner after a rank exits non-zero (stderr)."""
    bar = "-" * 55
    bar2 = "-" * 74
    return (
        f"{bar}\nPrimary job  terminated normally, but 1 process returned\n"
        f"a non-zero exit code. Per user-direction, the job has been aborted.\n{bar}\n{bar2}\n"
        "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n\n"
        f"  Process name: [[4242,1],{rank}]\n  Exit code:    {exit_code}\n{bar2}\n"
    )


# ---- perftest ------------------------------------------------------------------------------
def render_perftest_header(
    *, device: str, link_type: str, qpn: int, psn: int, rqpn: int, rpsn: int, vaddr: int,
    rvaddr: int, lid: int, rlid: int, local_ip: str, remote_ip: str, duration_mode: bool,
) -> list[str]:
    """The client's header box and address lines (``RDMA_Write BW Test``)."""
    roce = link_type == "Ethernet"
    lines = list(_perftest_box(device, link_type, duration_mode))
    for side, (q, p, v, lid_, ip) in (
        ("local", (qpn, psn, vaddr, lid, local_ip)),
        ("remote", (rqpn, rpsn, rvaddr, rlid, remote_ip)),
    ):
        lid_s = "0000" if roce else f"{lid_:#04x}"
        lines.append(
            f" {side} address: LID {lid_s} QPN {q:#06x} PSN {p:#06x} RKey 0x1fff00 "
            f"VAddr {v:#016x}"
        )
        if roce:
            octets = ":".join(f"{int(o):02d}" for o in ip.split("."))
            lines.append(" GID: 00:00:00:00:00:00:00:00:00:00:255:255:" + octets)
    lines.append(SEP87)
    return lines


@functools.lru_cache(maxsize=1024)
def _perftest_box(device: str, link_type: str, duration_mode: bool) -> tuple[str, ...]:
    """The header box of :func:`render_perftest_header` (the same for every test of a NIC)."""
    roce = link_type == "Ethernet"
    lines = []
    if duration_mode:
        lines.append(" WARNING: BW peak won't be measured in this run.")
    lines += [
        SEP87,
        "                    RDMA_Write BW Test",
        f" Dual-port       : OFF\t\tDevice         : {device}",
        " Number of qps   : 1\t\tTransport type : IB",
        " Connection type : RC\t\tUsing SRQ      : OFF",
        " PCIe relax order: ON\t\tLock-free      : OFF",
        " ibv_wr* API     : ON\t\tUsing Enhanced Reorder      : OFF",
        " TX depth        : 128",
        " CQ Moderation   : 1",
        " CQE Poll Batch  : Dynamic",
        " Mtu             : 4096[B]",
        f" Link type       : {link_type}",
    ]
    if roce:
        lines.append(" GID index       : 3")
    lines += [
        " Max inline data : 0[B]",
        " rdma_cm QPs\t : OFF",
        " Data ex. method : Ethernet",
        SEP87,
    ]
    return tuple(lines)


def render_perftest_table_header() -> str:
    return " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"


def render_perftest_row(size_bytes: int, iterations: int, peak_gbps: float, avg_gbps: float,
                        msg_rate_mpps: float) -> str:
    """``" %-7lu    %-10lu       %-7.2lf            %-7.2lf\\t\\t     %-7.6lf"`` (6 decimals
    for the BW values when the average is below 0.1 Gb/s, as perftest does)."""
    if avg_gbps < 0.1:
        return (f" {size_bytes:<7d}    {iterations:<10d}       {peak_gbps:<7.6f}            "
                f"{avg_gbps:<7.6f}\t\t     {msg_rate_mpps:<7.6f}")
    return (f" {size_bytes:<7d}    {iterations:<10d}       {peak_gbps:<7.2f}            "
            f"{avg_gbps:<7.2f}\t\t     {msg_rate_mpps:<7.6f}")


def render_perftest_completion_error(posted: int) -> list[str]:
    """What ib_write_bw prints (stderr) when a work request completes with status 12."""
    return [
        " Completion with error at client",
        " Failed status-transport retry counter exceeded (12): wr_id 0 syndrom 0x81",
        f" scnt={posted}, ccnt=0",
        " Failed to complete run_iter_bw function successfully",
    ]


# ---- iperf3 --------------------------------------------------------------------------------
def iperf3_json(doc: dict) -> str:
    """Serialize like iperf3's cJSON printer (tab indents, ``"key":\\tvalue``)."""
    return json.dumps(doc, indent="\t", separators=(",", ":\t")) + "\n"
