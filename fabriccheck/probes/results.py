"""What the parsers return: typed, unit-named results of one tool run (pure values).

Every result has ``status``: ``ok`` (complete and sane), ``failed`` (the tool ran and reported a
failure: errors[] says which), ``incomplete`` (output stops early: truncated, killed, hung) or
``unparseable`` (not this tool's output at all); ``reason`` says why when not ``ok``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

OK, FAILED, INCOMPLETE, UNPARSEABLE = "ok", "failed", "incomplete", "unparseable"


@dataclass(frozen=True)
class ToolError:
    """An error the tool output names. ``kind`` is a stable slug (e.g. ``cuda``, ``nccl``,
    ``ib_completion``, ``connect``, ``timeout``, ``wrong_results``, ``setup``)."""

    kind: str
    message: str
    host: str | None = None
    hca: str | None = None
    status: str | None = None
    rank: int | None = None
    peer: str | None = None
    vendor_err: str | None = None
    line: int | None = None
    xid: int | None = None  # NVIDIA Xid number (kernel log)
    pci: str | None = None  # PCI id of the GPU/NIC a kernel line names
    count: int | None = None  # how many times the same error repeated (None = once)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class NcclRow:
    size_bytes: int
    count: int | None
    dtype: str | None
    redop: str | None
    root: int | None
    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None  # GB/s (bytes), out-of-place, as printed
    wrong: int | None  # None when validation is off (N/A)
    time_inplace_us: float | None = None
    algbw_inplace_gbps: float | None = None
    busbw_inplace_gbps: float | None = None
    wrong_inplace: int | None = None
    max_rel_error: float | None = None  # old format (before 2022-08): `error` column, not a count
    max_rel_error_inplace: float | None = None


@dataclass(frozen=True)
class RankTransport:
    """How one NCCL rank moved its inter-node data (:mod:`fabriccheck.probes.nccl_transport`):
    ``net`` ``ib`` (InfiniBand or RoCE) | ``socket`` | a net plugin's name | None (no NET channel),
    ``gdr`` whether its NET channels used GPUDirect RDMA (None: unknown), ``hcas`` the devices
    NCCL chose for them."""

    host: str
    rank: int | None
    net: str | None
    gdr: bool | None
    hcas: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "rank": self.rank, "net": self.net, "gdr": self.gdr,
                "hcas": list(self.hcas)}


@dataclass(frozen=True)
class NcclTestsResult:
    status: str
    rows: tuple[NcclRow, ...] = ()
    collective: str | None = None
    hosts: tuple[str, ...] = ()
    ranks: int = 0
    avg_busbw_gbps: float | None = None
    errors: tuple[ToolError, ...] = ()
    reason: str = ""
    warnings: tuple[ToolError, ...] = ()  # NCCL WARN lines that did not stop the test
    min_bytes: int | None = None  # from the `# nThread ... minBytes ... maxBytes` header
    max_bytes: int | None = None
    validation: int | None = None  # -c value (0: #wrong is N/A)
    out_of_bounds: int | None = None  # footer `Out of bounds values : N`
    #: per rank, the network and GPUDirect RDMA its NCCL INFO lines show (none without them)
    transport: tuple[RankTransport, ...] = ()

    @property
    def max_busbw_gbps(self) -> float | None:
        vals = [r.busbw_gbps for r in self.rows if r.busbw_gbps is not None]
        return max(vals) if vals else None

    def busbw_at(self, size_bytes: int) -> float | None:
        """busbw (GB/s) at the row of exactly ``size_bytes``, else at the largest size below it."""
        below = [r for r in self.rows if r.size_bytes <= size_bytes and r.busbw_gbps is not None]
        return max(below, key=lambda r: r.size_bytes).busbw_gbps if below else None


@dataclass(frozen=True)
class PerftestRow:
    size_bytes: int
    iterations: int | None
    bw_peak_gbps: float | None  # Gb/s (bits), converted from MiB/s when needed
    bw_avg_gbps: float | None
    msg_rate_mpps: float | None = None


@dataclass(frozen=True)
class PerftestLatencyRow:
    size_bytes: int
    iterations: int | None
    t_min_us: float | None
    t_max_us: float | None
    t_typical_us: float | None
    t_avg_us: float | None
    t_stdev_us: float | None = None
    t_p99_us: float | None = None
    t_p999_us: float | None = None


@dataclass(frozen=True)
class PerftestResult:
    status: str
    test: str | None = None  # e.g. "RDMA_Write BW Test"
    device: str | None = None
    link_type: str | None = None  # IB | Ethernet
    side: str | None = None  # client | server
    rows: tuple[PerftestRow, ...] = ()
    latency_rows: tuple[PerftestLatencyRow, ...] = ()
    errors: tuple[ToolError, ...] = ()
    reason: str = ""
    program: str | None = None  # ib_write_bw, ... when the command line was echoed
    unit: str | None = None  # BW unit as printed (Gb/sec, MiB/sec, MB/sec)
    loopback: bool = False  # local and remote LID equal: never crossed the cable or switch
    warnings: tuple[ToolError, ...] = ()  # rows read in part (columns run together), ...

    def bw_at(self, size_bytes: int | None = None) -> float | None:
        """Average Gb/s at ``size_bytes`` (largest size at or below it), or at the largest size."""
        rows = [r for r in self.rows if r.bw_avg_gbps is not None]
        if size_bytes is not None:
            rows = [r for r in rows if r.size_bytes <= size_bytes] or rows
        return max(rows, key=lambda r: r.size_bytes).bw_avg_gbps if rows else None


@dataclass(frozen=True)
class Iperf3Result:
    status: str
    sent_gbps: float | None = None
    received_gbps: float | None = None
    retransmits: int | None = None
    duration_s: float | None = None
    streams: int | None = None
    errors: tuple[ToolError, ...] = ()
    reason: str = ""
    protocol: str | None = None  # TCP | UDP
    lost_percent: float | None = None  # UDP only

    @property
    def bw_gbps(self) -> float | None:
        """The bandwidth to judge: what the receiver got, else what the sender sent."""
        return self.received_gbps if self.received_gbps is not None else self.sent_gbps


@dataclass(frozen=True)
class NcclLogScan:
    """What a post-timeout bisection needs from a job's log: who was involved and what broke."""

    hosts: tuple[str, ...] = ()
    ranks: dict[int, str] | None = None  # rank -> host, where the log says
    hcas: tuple[tuple[str, str], ...] = ()  # (host, hca) named by NCCL WARN/INFO lines
    peers: tuple[str, ...] = ()  # remote addresses named by IB completion errors
    errors: tuple[ToolError, ...] = ()  # ib_completion, watchdog_timeout, xid, socket, ...
    suspects: tuple[str, ...] = ()  # hosts named by errors, most implicated first
    status: str = OK
    reason: str = ""
    job_log: Any = None  # probes.job_triage.JobLog: the timeout's triage from the text alone
