"""One simulated tool run: from a modelled bandwidth (or a failure) to text, exit code and time.

Each ``run_<probe>`` takes the test, the :class:`ToolContext` and what the model decided (the
measured asymptotic bandwidth, or the flows that broke) and returns a :class:`ToolRun`.
Timing model: nccl-tests rows take ``lat + size/algbw`` per iteration (``warmup + iters`` of them,
out-of-place and in-place) plus launch time; perftest/iperf3 take their duration plus setup.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from fabriccheck.executors.sim import render
from fabriccheck.executors.sim.model import stable_hash
from fabriccheck.models import Flow, Test, nic_node

NCCL_LAUNCH_S = 2.0  # mpirun start + NCCL init
NCCL_FAIL_AFTER_S = 25.0  # IB retry counter exhausted (NCCL_IB_TIMEOUT/RETRY_CNT defaults)
PERFTEST_SETUP_S = 1.5
IPERF3_SETUP_S = 0.5
BASE_UNIX_S = 1_798_761_600  # 2027-01-01T00:00:00Z: the simulated clock's origin


@dataclass(frozen=True)
class ToolRun:
    stdout: str
    stderr: str = ""
    exit_code: int | None = 0
    duration_s: float = 0.0
    timed_out: bool = False


@dataclass(frozen=True)
class ToolContext:
    """What text rendering needs besides the test: addresses, GPU name, seed, simulated time."""

    seed: int
    round_no: int
    clock_s: float
    nic_ip: Callable[[str], str]
    nic_lid: Callable[[str], int]
    nic_rail: Callable[[str], int]
    link_type: str  # IB | Ethernet
    gpu_name: str
    #: node -> its NICs' names (NCCL's IB device list when a test names none of them)
    node_nics: Callable[[str], tuple[str, ...]] = lambda node: ()
    #: node -> its management address (NCCL's out-of-band interface, and its sockets)
    mgmt_ip: Callable[[str], str] = lambda node: "192.168.0.1"
    #: node -> what its NCCL falls back to (``socket`` | ``host_memory``); absent: IB + GDRDMA
    fallback: Mapping[str, str] = field(default_factory=dict)


def _pid(ctx: ToolContext, test: Test, host: str, i: int = 0) -> int:
    """A process id per (test, host, local rank): one hash per test, then arithmetic."""
    base = _test_hash(ctx.seed, ctx.round_no, test.test_id)
    k = test.nodes.index(host) if host in test.nodes else 0
    return 2000 + (base + 104_729 * (64 * k + i)) % 900_000


@functools.lru_cache(maxsize=8192)
def _test_hash(seed: int, round_no: int, test_id: str) -> int:
    return stable_hash(seed, round_no, test_id)


def _nic_name(endpoint: str) -> str:
    return endpoint.split("/", 1)[1]


# ---- nccl-tests (and allreduce-cpu, which prints the same table) ---------------------------
@dataclass(frozen=True)
class NcclShape:
    collective: str
    gpus_per_node: int
    min_bytes: int
    max_bytes: int
    iters: int
    warmup: int = 1

    def sizes(self) -> list[int]:
        out, s = [], max(1, self.min_bytes)
        while s <= self.max_bytes and len(out) < 64:
            out.append(s)
            s *= 2
        return out or [self.max_bytes]


def _ranks(test: Test, ctx: ToolContext, shape: NcclShape, cpu: bool) -> list[render.NcclRank]:
    """One rank per GPU (``mpirun -np N ... -g 1``), each its own process."""
    g = max(1, shape.gpus_per_node)
    base = _test_hash(ctx.seed, ctx.round_no, test.test_id)
    bus_ids = ("00",) * g if cpu else tuple(
        render.GPU_BUS_IDS[d % len(render.GPU_BUS_IDS)] for d in range(g))
    return [
        render.NcclRank(node, 2000 + (base + 104_729 * (64 * k + d)) % 900_000, d, bus_ids[d],
                        ctx.gpu_name)
        for k, node in enumerate(test.nodes) for d in range(g)
    ]


def _test_nics(test: Test) -> dict[str, list[str]]:
    """node -> the names of its NICs the test's flows use (rail order: NCCL_IB_HCA's list)."""
    out: dict[str, set[str]] = {}
    for f in test.flows:
        for e in (f.src, f.dst):
            node, name = e.split("/", 1)
            got = out.get(node)
            if got is None:
                out[node] = {name}
            else:
                got.add(name)
    return {n: sorted(names) for n, names in out.items()}


def nccl_info_lines(test: Test, ctx: ToolContext, ranks: Sequence[render.NcclRank],
                    gpus: int) -> list[str]:
    """What ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET`` adds to the output, per rank: the
    network's devices (``NET/IB : Using ...``, or no IB device and ``NET/Socket`` on a node
    that falls back to sockets), ``GPU Direct RDMA Disabled`` per HCA on a node without
    GPUDirect RDMA, ``Using network``, then one send and one receive NET channel to the same
    GPU of the next and previous node (GPU g on NIC g: the rail layout), ``/GDRDMA`` unless the
    node stages through host memory; a single-node test's channels are NVLink (``P2P``). A
    few lines per rank, where real NCCL prints some per channel.

    The per-node part of a rank's init lines (after NCCL's ``host:pid:tid [dev] NCCL INFO``
    prefix) is the same for every rank of the node: it is built once per node."""
    g = max(1, gpus)
    k_nodes = len(test.nodes)
    link = "IB" if ctx.link_type == "IB" else "RoCE"
    nics = _test_nics(test)
    lines = [f"NCCL version {render.NCCL_LIB_VERSION}"]
    per_node: dict[str, tuple] = {}
    for i, r in enumerate(ranks):
        k, d = divmod(i, g)
        node = per_node.get(r.host)
        if node is None:
            node = per_node[r.host] = _rank_node_lines(r.host, ctx, nics, link)
        short, tails, hcas, net = node
        head = f"{short}:{r.pid}:"
        init = f"{head}{r.pid + 31} [{d}] NCCL INFO"
        lines += [init + t for t in tails]
        if k_nodes > 1:
            proxy = f"{head}{r.pid + 47} [{d}] NCCL INFO"
            dev, gdr = (0, False) if net == "Socket" else (d % len(hcas), net == "IB")
            send, receive = _net_channels(i, d, ((k + 1) % k_nodes) * g + d,
                                          ((k - 1) % k_nodes) * g + d,
                                          "Socket" if net == "Socket" else "IB", dev, gdr)
            lines.append(proxy + send)
            lines.append(proxy + receive)
        elif g > 1:
            proxy = f"{head}{r.pid + 47} [{d}] NCCL INFO"
            lines.append(render.render_p2p_channel(proxy, 0, (i, d),
                                                   (k * g + (d + 1) % g, (d + 1) % g)))
    return lines


@functools.lru_cache(maxsize=1 << 16)
def _net_channels(i: int, d: int, nxt: int, prv: int, net: str, dev: int, gdr: bool
                  ) -> tuple[str, str]:
    """Rank ``i``'s send and receive NET channel lines after their prefix."""
    return (render.render_net_channel("", 0, (i, d), (nxt, d), "send", net, dev, gdr),
            render.render_net_channel("", 0, (prv, d), (i, d), "receive", net, dev, gdr))


def _rank_node_lines(host: str, ctx: ToolContext, nics: Mapping[str, list[str]], link: str
                     ) -> tuple[str, tuple[str, ...], list[str], str]:
    """One node's part of its ranks' init lines: (short host name, the init lines after their
    prefix, the HCAs, ``Socket`` | ``IB`` | ``IB-host`` (IB without GPUDirect RDMA))."""
    fallback = ctx.fallback.get(host)
    hcas = nics.get(host) or list(ctx.node_nics(host))
    if fallback == "socket" or not hcas:
        tails = render.render_socket_fallback("", ctx.mgmt_ip(host))
        net = "Socket"
    else:
        tails = [render.render_ib_using("", hcas, link, ctx.mgmt_ip(host))]
        if fallback == "host_memory":
            tails += [render.render_gdr_disabled("", j, h) for j, h in enumerate(hcas)]
        net = "IB-host" if fallback == "host_memory" else "IB"
    tails.append(f" Using network {'Socket' if net == 'Socket' else 'IB'}")
    return host.split(".")[0], tuple(tails), hcas, net


def _count(collective: str, size: int, n: int) -> int:
    count = size // 4
    return count // n if collective in ("all_gather", "alltoall", "reduce_scatter") else count


def _latency_us(nodes: int) -> float:
    return 20.0 if nodes == 1 else 60.0 + 20.0 * (nodes - 1).bit_length()


def run_nccl(
    test: Test, ctx: ToolContext, shape: NcclShape, *, busbw_gbps: float, jitter: float,
    rng: random.Random, cpu: bool = False,
) -> ToolRun:
    """A complete table whose busbw approaches ``busbw_gbps`` at large sizes.

    Stops early (``timed_out``) when the simulated time passes ``test.timeout_s``.
    """
    ranks = _ranks(test, ctx, shape, cpu)
    n = len(ranks)
    factor = render.BUSBW_FACTOR[shape.collective](n) if n > 1 else 0.0
    algbw_peak = busbw_gbps / factor if factor > 0 else busbw_gbps
    lat = _latency_us(len(test.nodes))
    lines = render.render_nccl_header(
        shape.collective, ranks, n_gpus=1, min_bytes=shape.min_bytes,
        max_bytes=shape.max_bytes, warmup=shape.warmup, iters=shape.iters,
        info=() if cpu else nccl_info_lines(test, ctx, ranks, shape.gpus_per_node),
    )
    elapsed = NCCL_LAUNCH_S
    rows = []
    for size in shape.sizes():
        halves = []
        for _ in range(2):
            # (jitter 0: gauss(0, 0) is 0 whatever it draws)
            wobble = max(0.05, 1.0 + rng.gauss(0.0, jitter / 4)) if jitter else 1.0
            t_us = lat + size / (algbw_peak * 1e3 * wobble) if algbw_peak > 0 else 1e12
            alg = size / t_us / 1e3
            halves.append((t_us, alg, alg * factor))
        elapsed += (shape.warmup + shape.iters) * (halves[0][0] + halves[1][0]) / 1e6
        if elapsed > test.timeout_s:
            return ToolRun("\n".join(lines) + "\n", exit_code=None, duration_s=test.timeout_s,
                           timed_out=True)
        row = render.NcclRow(size, _count(shape.collective, size, n), *halves[0], *halves[1])
        rows.append(row)
        lines.append(render.render_nccl_row(shape.collective, row))
    lines += render.render_nccl_footer(shape.collective, rows)
    return ToolRun("\n".join(lines), exit_code=0, duration_s=round(elapsed, 3))


def run_nccl_failure(
    test: Test, ctx: ToolContext, shape: NcclShape, broken: Sequence[Flow], *, cpu: bool = False
) -> ToolRun:
    """Header, then NCCL WARN completion errors from both ends of each broken flow (host and
    hca named), ``Test NCCL failure`` lines, and Open MPI's abort banner; exit code 3."""
    ranks = _ranks(test, ctx, shape, cpu)
    lines = render.render_nccl_header(
        shape.collective, ranks, n_gpus=1, min_bytes=shape.min_bytes,
        max_bytes=shape.max_bytes, warmup=shape.warmup, iters=shape.iters,
        info=() if cpu else nccl_info_lines(test, ctx, ranks, shape.gpus_per_node),
    )
    hosts: list[str] = []
    for k, flow in enumerate(broken[:16]):
        for end, peer, direction in ((flow.src, flow.dst, "Send"), (flow.dst, flow.src, "Recv")):
            host = nic_node(end)
            gpu = ctx.nic_rail(end) % max(1, shape.gpus_per_node)  # rail r serves GPU r
            lines += render.render_ib_warn(
                host, _pid(ctx, test, host, gpu), _pid(ctx, test, host, 100 + gpu), gpu,
                peer_ip=ctx.nic_ip(peer), port=40000 + stable_hash(ctx.seed, test.test_id, k)
                % 20000, hca=_nic_name(end), local_ip=ctx.nic_ip(end), direction=direction,
            )
            if host not in hosts:
                hosts.append(host)
    first = broken[0]
    reason = (f"NET/IB : Got completion from peer {ctx.nic_ip(first.dst)} with status=12 "
              f"opcode=0 len=0 vendor err 129 (Send) hca {_nic_name(first.src)}")
    for host in hosts:
        lines += render.render_nccl_failure(host, _pid(ctx, test, host, 0), reason)
    rank = test.nodes.index(hosts[0]) * max(1, shape.gpus_per_node) if hosts[0] in test.nodes \
        else 0
    duration = min(NCCL_LAUNCH_S + NCCL_FAIL_AFTER_S, test.timeout_s)
    return ToolRun("\n".join(lines) + "\n", stderr=render.render_mpirun_abort(rank, 3),
                   exit_code=3, duration_s=duration)


# ---- perftest ------------------------------------------------------------------------------
def _perftest_header(test: Test, ctx: ToolContext, flow: Flow, duration_mode: bool) -> list[str]:
    h = stable_hash(ctx.seed, ctx.round_no, test.test_id, "qp")
    return render.render_perftest_header(
        device=_nic_name(flow.src), link_type=ctx.link_type,
        qpn=0x40 + h % 0x4000, psn=h % 0xFFFFFF, rqpn=0x40 + (h >> 16) % 0x4000,
        rpsn=(h >> 24) % 0xFFFFFF, vaddr=0x7F0000000000 + ((h >> 8) % 0xFFFFFF) * 0x1000,
        rvaddr=0x7F0000000000 + ((h >> 32) % 0xFFFFFF) * 0x1000,
        lid=ctx.nic_lid(flow.src), rlid=ctx.nic_lid(flow.dst),
        local_ip=ctx.nic_ip(flow.src), remote_ip=ctx.nic_ip(flow.dst), duration_mode=duration_mode,
    )


def run_ib_write_bw(
    test: Test, ctx: ToolContext, flow: Flow, *, bw_gbps: float | None, size_bytes: int,
    duration_s: float | None, iters: int,
) -> ToolRun:
    """Client output for ``ib_write_bw --report_gbits``; ``bw_gbps=None`` means the work
    requests completed with status 12 (retry exceeded): errors on stderr, exit code 1."""
    if bw_gbps is not None and ctx.link_type != "Ethernet":
        return _ib_write_bw_ok(test, ctx, flow, bw_gbps, size_bytes, duration_s, iters)
    lines = _perftest_header(test, ctx, flow, duration_s is not None)
    lines.append(render.render_perftest_table_header())
    if bw_gbps is None:
        err = render.render_perftest_completion_error(128)
        return ToolRun("\n".join(lines) + "\n", stderr="\n".join(err) + "\n", exit_code=1,
                       duration_s=PERFTEST_SETUP_S + 8.0)
    msg_rate, count, run_s, peak = _bw_run(test, bw_gbps, size_bytes, duration_s, iters)
    if PERFTEST_SETUP_S + run_s > test.timeout_s:
        return ToolRun("\n".join(lines) + "\n", exit_code=None, duration_s=test.timeout_s,
                       timed_out=True)
    lines.append(render.render_perftest_row(size_bytes, count, peak, bw_gbps, msg_rate))
    lines.append(render.SEP87)
    return ToolRun("\n".join(lines) + "\n", exit_code=0,
                   duration_s=round(PERFTEST_SETUP_S + run_s, 3))


def _bw_run(test: Test, bw_gbps: float, size_bytes: int, duration_s: float | None,
            iters: int) -> tuple[float, int, float, float]:
    """An ib_write_bw run's message rate (Mpps), iterations, seconds and peak (Gb/s): a timed
    run (``-D``) counts what fits its duration and prints no peak."""
    msg_rate = bw_gbps * 1e9 / 8 / size_bytes / 1e6
    if duration_s is not None:
        return msg_rate, int(bw_gbps * 1e9 / 8 / size_bytes * duration_s), duration_s, 0.0
    run_s = iters * size_bytes * 8 / (bw_gbps * 1e9) if bw_gbps > 0 else test.timeout_s
    return msg_rate, iters, run_s, bw_gbps * 1.0005


def _ib_write_bw_ok(test: Test, ctx: ToolContext, flow: Flow, bw_gbps: float, size_bytes: int,
                    duration_s: float | None, iters: int) -> ToolRun:
    """:func:`run_ib_write_bw` of a run that completed on InfiniBand, as one string: the same
    header box, address lines, table and separator (the box text is built once per HCA)."""
    msg_rate, count, run_s, peak = _bw_run(test, bw_gbps, size_bytes, duration_s, iters)
    h = stable_hash(ctx.seed, ctx.round_no, test.test_id, "qp")
    head = (f"{_ib_box(_nic_name(flow.src), ctx.link_type, duration_s is not None)}"
            f" local address: LID {ctx.nic_lid(flow.src):#04x} QPN {0x40 + h % 0x4000:#06x} "
            f"PSN {h % 0xFFFFFF:#06x} RKey 0x1fff00 "
            f"VAddr {0x7F0000000000 + ((h >> 8) % 0xFFFFFF) * 0x1000:#016x}\n"
            f" remote address: LID {ctx.nic_lid(flow.dst):#04x} "
            f"QPN {0x40 + (h >> 16) % 0x4000:#06x} PSN {(h >> 24) % 0xFFFFFF:#06x} RKey 0x1fff00 "
            f"VAddr {0x7F0000000000 + ((h >> 32) % 0xFFFFFF) * 0x1000:#016x}\n"
            f"{render.SEP87}\n{render.render_perftest_table_header()}\n")
    if PERFTEST_SETUP_S + run_s > test.timeout_s:
        return ToolRun(head, exit_code=None, duration_s=test.timeout_s, timed_out=True)
    row = render.render_perftest_row(size_bytes, count, peak, bw_gbps, msg_rate)
    return ToolRun(f"{head}{row}\n{render.SEP87}\n", exit_code=0,
                   duration_s=round(PERFTEST_SETUP_S + run_s, 3))


@functools.lru_cache(maxsize=1024)
def _ib_box(device: str, link_type: str, duration_mode: bool) -> str:
    """The perftest header box (its lines, each ending in a newline) of an InfiniBand HCA."""
    return "".join(line + "\n" for line in render._perftest_box(device, link_type, duration_mode))


# ---- iperf3 --------------------------------------------------------------------------------
def _iperf3_start(test: Test, ctx: ToolContext, flow: Flow, duration_s: float, streams: int,
                  connected: bool, port: int) -> dict:
    h = stable_hash(ctx.seed, ctx.round_no, test.test_id, "iperf3")
    now = int(BASE_UNIX_S + ctx.clock_s)
    start: dict = {}
    if connected:
        start["connected"] = [
            {"socket": 5 + 2 * i, "local_host": ctx.nic_ip(flow.src),
             "local_port": 40000 + (h + i) % 20000, "remote_host": ctx.nic_ip(flow.dst),
             "remote_port": port}
            for i in range(streams)
        ]
    start.update({
        "version": "iperf 3.12",
        "system_info": f"Linux {nic_node(flow.src)} 6.1.0-27-amd64 #1 SMP PREEMPT_DYNAMIC "
                       "Debian 6.1.115-1 (2024-11-01) x86_64",
        "timestamp": {"time": _http_date(now), "timesecs": now},
        "connecting_to": {"host": ctx.nic_ip(flow.dst), "port": port},
        "cookie": f"{h:016x}{h >> 3:016x}"[:36],
        "tcp_mss_default": 1448, "target_bitrate": 0, "fq_rate": 0,
        "sock_bufsize": 0, "sndbuf_actual": 16384, "rcvbuf_actual": 131072,
    })
    if connected:
        start["test_start"] = {
            "protocol": "TCP", "num_streams": streams, "blksize": 131072, "omit": 0,
            "duration": int(duration_s), "bytes": 0, "blocks": 0, "reverse": 0, "tos": 0,
            "target_bitrate": 0, "bidir": 0, "fqrate": 0,
        }
    return start


def _http_date(unix_s: int) -> str:
    import email.utils

    return email.utils.formatdate(unix_s, usegmt=True).replace("GMT", "UTC")


def run_iperf3(
    test: Test, ctx: ToolContext, flow: Flow, *, bw_gbps: float | None, duration_s: float,
    streams: int, jitter: float, rng: random.Random, port: int = 5201,
) -> ToolRun:
    """``iperf3 -J`` client JSON; ``bw_gbps=None``: the connection never came up (exit 1)."""
    if bw_gbps is None:
        doc = {"start": _iperf3_start(test, ctx, flow, duration_s, streams, False, port),
               "intervals": [], "end": {},
               "error": "unable to connect to server - server may have stopped running or use "
                        "a different port, firewall issue, etc.: Connection timed out"}
        return ToolRun(render.iperf3_json(doc), exit_code=1, duration_s=IPERF3_SETUP_S + 30.0)
    secs = max(1, int(round(duration_s)))
    intervals, total = [], 0
    for i in range(secs):
        bps = bw_gbps * 1e9 * (max(0.05, 1 + rng.gauss(0.0, jitter / 4)) if jitter else 1.0)
        nbytes = int(bps / 8)
        total += nbytes
        per = [{"socket": 5 + 2 * j, "start": float(i), "end": float(i + 1), "seconds": 1.0,
                "bytes": nbytes // streams, "bits_per_second": bps / streams, "retransmits": 0,
                "snd_cwnd": 3_145_728, "rtt": 48, "rttvar": 6, "pmtu": 9000,
                "omitted": False, "sender": True} for j in range(streams)]
        sums = {"start": float(i), "end": float(i + 1), "seconds": 1.0, "bytes": nbytes,
                "bits_per_second": bps, "retransmits": 0, "omitted": False, "sender": True}
        intervals.append({"streams": per, "sum": sums})
    sent_bps = total * 8 / secs
    recv_bytes = int(total * 0.9998)
    sender = {"socket": 5, "start": 0, "end": float(secs), "seconds": float(secs), "bytes": total,
              "bits_per_second": sent_bps, "retransmits": 0, "max_snd_cwnd": 3_145_728,
              "max_rtt": 120, "min_rtt": 21, "mean_rtt": 48, "sender": True}
    receiver = {"socket": 5, "start": 0, "end": secs + 0.000412, "seconds": float(secs),
                "bytes": recv_bytes, "bits_per_second": recv_bytes * 8 / (secs + 0.000412),
                "sender": True}
    end = {
        "streams": [{"sender": sender, "receiver": receiver}],
        "sum_sent": {k: sender[k] for k in ("start", "end", "seconds", "bytes",
                                             "bits_per_second", "retransmits", "sender")},
        "sum_received": {k: receiver[k] for k in ("start", "end", "seconds", "bytes",
                                                   "bits_per_second", "sender")},
        "cpu_utilization_percent": {"host_total": 38.2, "host_user": 1.1, "host_system": 37.1,
                                    "remote_total": 21.4, "remote_user": 0.4,
                                    "remote_system": 21.0},
        "sender_tcp_congestion": "cubic", "receiver_tcp_congestion": "cubic",
    }
    doc = {"start": _iperf3_start(test, ctx, flow, duration_s, streams, True, port),
           "intervals": intervals, "end": end}
    return ToolRun(render.iperf3_json(doc), exit_code=0,
                   duration_s=round(IPERF3_SETUP_S + secs, 3))


# ---- traceroute (Debian traceroute 2.x, ``-n -q 1``) ---------------------------------------

TRACE_HOP_S = 0.02  # one answered probe (lab-scale round trip plus scheduling)
TRACE_WAIT_S = 1.0  # ``-w 1``: how long a silent hop is waited for


def run_traceroute(ctx: ToolContext, flow: Flow, answered: tuple[str, ...], reached: bool,
                   *, max_hops: int = 8) -> ToolRun:
    """What ``traceroute -n -q 1 ... <dst>`` prints for a path whose switches answered with
    ``answered`` (in order), the destination answering last when ``reached``."""
    dst = ctx.nic_ip(flow.dst)
    lines = [f"traceroute to {dst} ({dst}), {max_hops} hops max, 60 byte packets"]
    rtt = 0.04
    for ttl, addr in enumerate(answered, 1):
        rtt += 0.011 + 0.003 * (stable_hash(ctx.seed, ctx.round_no, flow.src, ttl) % 7)
        lines.append(f"{ttl:2d}  {addr}  {rtt:.3f} ms")
    ttl = len(answered) + 1
    if reached:
        lines.append(f"{ttl:2d}  {dst}  {rtt + 0.012:.3f} ms")
        silent = 0
    else:
        silent = max(0, max_hops - len(answered))
        lines += [f"{t:2d}  *" for t in range(ttl, ttl + silent)]
    duration = TRACE_HOP_S * (len(answered) + 1) + TRACE_WAIT_S * silent
    return ToolRun("\n".join(lines) + "\n", exit_code=0, duration_s=duration)
