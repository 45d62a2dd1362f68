"""Job-log triage: which collective timed out, which ranks never reached it, and where they ran.

Pure, from the text alone. Reads PyTorch ProcessGroupNCCL watchdog reports (``Watchdog caught
collective operation timeout: WorkNCCL(SeqNum=.., OpType=.., Timeout(ms)=..)``, blocking-wait
timeouts), progress lines (``last enqueued NCCL work: N, last completed NCCL work: M`` in the
watchdog exception and dump-signal messages), flight-recorder analyses (``Not all ranks joining
collective ...`` / ``missing ranks: {..}``), NCCL ``comm 0x.. rank R nranks N`` lines (rank ->
host, by process id), launcher prefixes (``srun -l`` ``12:``, torchrun ``[rank12]:``, mpirun
``[1,12]<stdout>:``) and an optional hostfile. The conclusion after a test run is made by
:mod:`fabriccheck.inference.job_log`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from fabriccheck.probes._text import NCCL_LINE_RE
from fabriccheck.probes.log_lines import unwrap_lines
from fabriccheck.probes.nccl_log import scan_nccl_log
from fabriccheck.probes.results import NcclLogScan, ToolError

#: error kinds that say something about a rank's host (symptoms of the timeout itself excluded)
ERROR_KINDS = ("gpu_lost", "xid", "ib_completion", "link_flap", "link_down", "ibv", "nccl",
               "cuda", "segfault", "nccl_error", "socket", "nccl_warn", "connection_closed")
#: of these, the ones that point at the fabric (a NIC, a link, a peer)
FABRIC_KINDS = ("ib_completion", "link_flap", "link_down", "ibv", "socket")

_LAUNCHER_RE = re.compile(
    r"^\s*(?:(?P<srun>\d+): |\[(?P<mpi_job>\d+),(?P<mpi>\d+)\]<std(?:out|err)>:)")
_RANK_TAG_RE = re.compile(r"\[rank(\d+)\]:")
_PT_RANK_RE = re.compile(r"\[(?:PG[^\]]*?)?Rank\s+(\d+)\]")
_COMM_RE = re.compile(r"\bcomm 0x[0-9a-fA-F]+ rank (\d+) nranks (\d+)")
_WATCHDOG_RE = re.compile(r"Watchdog\s+caught\s+collective\s+operation\s+timeout"
                          r"|WorkNCCL\([^)]*\)\s+timed\s+out\s+in\s+blocking\s+wait")
_WORK_RE = re.compile(r"WorkNCCL\((?P<args>(?:[^()]|\(ms\))*)")
_ARG_RE = re.compile(r"SeqNum=(?P<seq>\d+)|OpType=(?P<op>\w+)|Timeout\(ms\)=(?P<tmo>\d+)")
_PROGRESS_RE = re.compile(r"last\s+enqueued\s+(?:NCCL\s+)?work:\s*(\d+),\s*last\s+completed\s+"
                          r"(?:NCCL\s+)?work:\s*(\d+)", re.IGNORECASE)
_AT_WORK_RE = re.compile(r"detected\s+by\s+watchdog\s+at\s+work(?:\s+sequence\s+id)?:\s*(\d+)")
_FR_HEAD_RE = re.compile(r"Not all ranks joining collective(?:,? sequence number:? | )?(\d+)?")
_FR_MISSING_RE = re.compile(r"missing[ _]ranks(?: are|:)?\s*\{([\d,\s]*)\}", re.IGNORECASE)
_FR_OP_RE = re.compile(r"^\s*collective:\s*(?:\w+:)?(\w+)")
_FR_SIZE_RE = re.compile(r"^\s*(?:world size|expected ranks):\s*(\d+)")
_FR_ROW_RE = re.compile(r"\s(?:nccl|gloo|xccl|hccl):(\w+)\s+\w+\s+\{([\d,\s]+)\}")
_IBV_RE = re.compile(r"\bibv_\w+\b.*\b(?:fail|error|Error|ERROR)", re.IGNORECASE)
_HCA_RE = re.compile(r"\b(mlx5_\d+|bnxt_re\d+|irdma\d+|efa_\d+|hfi1_\d+)\b")


@dataclass(frozen=True)
class JobLog:
    """What a job log says about a collective timeout; ``conclusion`` is ``unknown`` until a
    test run decides ``fabric`` or ``not-fabric`` (:func:`fabriccheck.inference.job_log.conclude`).
    """

    collective: dict[str, Any] | None = None  # {"op", "seq", "timeout_ms"}
    nranks: int | None = None
    missing_ranks: tuple[int, ...] = ()  # of nranks, never reported the timeout
    lagging_ranks: tuple[int, ...] = ()  # lowest last-completed SeqNum / never enqueued it
    error_ranks: tuple[dict[str, Any], ...] = ()  # {rank, host, kind, hca, message}
    rank_hosts: dict[int, str] = field(default_factory=dict)
    suspect_hosts: tuple[str, ...] = ()
    conclusion: str = "unknown"
    why: str = ""
    reported_ranks: tuple[int, ...] = ()  # ranks that reported the timeout
    hosts: tuple[str, ...] = ()  # every host the log names (NCCL lines, syslog, torchrun)
    rank_pids: dict[int, str] = field(default_factory=dict)  # from NCCL ``host:pid:tid`` lines

    def to_json(self) -> dict[str, Any]:
        """The ``job_log`` dict of the run JSON and of ``parse --json``."""
        return {
            "collective": self.collective, "nranks": self.nranks,
            "missing_ranks": list(self.missing_ranks), "lagging_ranks": list(self.lagging_ranks),
            "error_ranks": [dict(e) for e in self.error_ranks],
            "rank_hosts": {str(r): h for r, h in sorted(self.rank_hosts.items())},
            "suspect_hosts": list(self.suspect_hosts), "conclusion": self.conclusion,
            "why": self.why, "reported_ranks": list(self.reported_ranks),
            "rank_pids": {str(r): p for r, p in sorted(self.rank_pids.items())},
        }  # fmt: skip

    def host_of(self, rank: int) -> str | None:
        return self.rank_hosts.get(rank)


@dataclass
class _Facts:
    comms: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)  # (host,pid)->
    tagged: dict[int, str] = field(default_factory=dict)  # [rankN]: / mpirun tag + NCCL host
    srun: dict[int, str] = field(default_factory=dict)  # srun -l task id + NCCL host
    line_rank: dict[int, int] = field(default_factory=dict)  # line number -> rank
    line_pid: dict[int, tuple[str, str]] = field(default_factory=dict)  # line -> (host, pid)
    works: dict[int, dict[str, str]] = field(default_factory=dict)  # rank -> timed-out work
    progress: dict[int, tuple[int, int]] = field(default_factory=dict)  # rank -> (enq, done)
    fr_missing: set[int] = field(default_factory=set)
    fr_ops: list[tuple[str, int | None]] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    ibv: list[ToolError] = field(default_factory=list)
    fr_open: bool = False


def scan_with_triage(text: str, *, hostfile: str | None = None) -> NcclLogScan:
    """:func:`~fabriccheck.probes.nccl_log.scan_nccl_log` with ``job_log`` filled in."""
    return scan_nccl_log(text, hostfile=hostfile, triage=triage_job_log)


def triage_job_log(text: str, *, errors: tuple[ToolError, ...] | None = None,
                   hostfile: str | None = None, ip_hosts: dict[str, str] | None = None
                   ) -> JobLog:
    """Triage a job log after a NCCL timeout, from the text alone.

    Parameters
    ----------
    text
        The job's stdout/stderr (any launcher prefixes, NCCL debug lines, kernel lines).
    errors
        The errors :func:`~fabriccheck.probes.nccl_log.scan_nccl_log` found (scanned when None).
    hostfile
        A hostfile's text (``host slots=8``, ``host:8`` or one host a line, repeats count):
        ranks fill its slots in order where the log does not say where a rank ran.
    ip_hosts
        Address -> host, for socket errors that name their peer.

    Returns
    -------
    JobLog
        ``conclusion`` is ``unknown``: only a test run can say ``fabric`` or ``not-fabric``.

    Examples
    --------
    >>> log = "\\n".join(
    ...     [f"n{r // 2}:{100 + r}:1 [0] NCCL INFO comm 0x1 rank {r} nranks 4 - Init COMPLETE"
    ...      for r in range(4)]
    ...     + [f"[rank{r}]:[E1 1 ProcessGroupNCCL.cpp:1] [Rank {r}] Watchdog caught collective "
    ...        f"operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=600000)"
    ...        for r in (0, 1, 3)])
    >>> t = triage_job_log(log)
    >>> t.collective, t.missing_ranks, t.rank_hosts[2], t.suspect_hosts
    ({'op': 'ALLREDUCE', 'seq': 7, 'timeout_ms': 600000}, (2,), 'n1', ('n1',))
    """
    if errors is None:  # scan first: the scan triages with its errors and address map
        return scan_with_triage(text, hostfile=hostfile).job_log
    facts = _Facts()
    for lineno, raw in unwrap_lines(text):
        _read_line(facts, lineno, raw)
    nranks = max(facts.sizes, default=None)
    rank_hosts = _rank_hosts(facts, nranks, hostfile)
    collective = _collective(facts)
    reported = tuple(sorted(facts.works))
    missing = _missing(facts, nranks, reported)
    lagging = _lagging(facts, collective)
    err_ranks = _error_ranks(facts, (*errors, *facts.ibv), rank_hosts, ip_hosts or {})
    hosts = tuple(dict.fromkeys([*(h for h, _ in facts.comms), *rank_hosts.values(),
                                 *(e.host for e in errors if e.host)]))
    suspects = _suspect_hosts(err_ranks, missing, lagging, rank_hosts)
    pids = {r: pid for (_h, pid), (r, n) in _by_rank(facts.comms) if n == nranks}
    tri = JobLog(collective, nranks, missing, lagging, err_ranks, rank_hosts, suspects,
                 reported_ranks=reported, hosts=hosts, rank_pids=pids)
    return replace(tri, why=log_summary(tri))


def _by_rank(comms: dict[tuple[str, str], tuple[int, int]]):
    """Communicator entries ordered by rank."""
    return sorted(comms.items(), key=lambda kv: kv[1])


def _read_line(f: _Facts, lineno: int, raw: str) -> None:
    m = _LAUNCHER_RE.match(raw)
    tag = _RANK_TAG_RE.search(raw)
    rank = int(tag.group(1)) if tag else (int(m["mpi"]) if m and m["mpi"] else None)
    srun = int(m["srun"]) if m and m["srun"] else None
    n = NCCL_LINE_RE.search(raw)
    if n:
        key = (n["host"], n["pid"])
        f.line_pid[lineno] = key
        c = _COMM_RE.search(n["msg"])
        if c and int(c.group(2)) > f.comms.get(key, (0, 0))[1]:  # the widest comm of a process
            f.comms[key] = (int(c.group(1)), int(c.group(2)))
            f.sizes.append(int(c.group(2)))
        if rank is not None:
            f.tagged.setdefault(rank, n["host"])
        elif srun is not None:
            f.srun.setdefault(srun, n["host"])
    pt = _PT_RANK_RE.findall(raw)
    if rank is None and pt:
        rank = int(pt[-1])
    if rank is None:
        rank = srun
    if rank is not None:
        f.line_rank[lineno] = rank
    _read_pytorch(f, raw, rank)
    _read_flight_recorder(f, raw)
    if "ibv_" in raw and not n and _IBV_RE.search(raw):
        hca = _HCA_RE.search(raw)
        f.ibv.append(ToolError("ibv", raw.strip()[:200], hca=hca.group(1) if hca else None,
                               rank=rank, line=lineno))


def _read_pytorch(f: _Facts, raw: str, rank: int | None) -> None:
    if rank is None:
        return
    if _WATCHDOG_RE.search(raw):
        w = _WORK_RE.search(raw)
        args: dict[str, str] = {}
        for a in _ARG_RE.finditer(w["args"] if w else raw):
            args.update({k: v for k, v in a.groupdict().items() if v and k not in args})
        if rank not in f.works or len(args) > len(f.works[rank]):
            f.works[rank] = args
    p = _PROGRESS_RE.search(raw)
    if p:
        f.progress[rank] = (int(p.group(1)), int(p.group(2)))
    a = _AT_WORK_RE.search(raw)
    if a and rank not in f.works:
        f.works[rank] = {"seq": a.group(1)}


def _read_flight_recorder(f: _Facts, raw: str) -> None:
    h = _FR_HEAD_RE.search(raw)
    if h:
        f.fr_open = True
        f.fr_ops.append(("", int(h.group(1)) if h.group(1) else None))
    m = _FR_MISSING_RE.search(raw)
    if m:
        f.fr_missing.update(int(x) for x in re.findall(r"\d+", m.group(1)))
    op = _FR_OP_RE.match(raw)
    if op and f.fr_open and f.fr_ops and not f.fr_ops[-1][0]:
        f.fr_ops[-1] = (op.group(1).upper(), f.fr_ops[-1][1])
    size = _FR_SIZE_RE.match(raw)
    if size and f.fr_open:
        f.sizes.append(int(size.group(1)))
    row = _FR_ROW_RE.search(raw) if "{" in raw and "issing" not in raw else None
    if row:
        f.fr_missing.update(int(x) for x in re.findall(r"\d+", row.group(2)))


def _rank_hosts(f: _Facts, nranks: int | None, hostfile: str | None) -> dict[int, str]:
    """rank -> host: world communicator lines first, then rank tags, srun task ids, hostfile."""
    out: dict[int, str] = {}
    for (host, _pid), (rank, size) in f.comms.items():
        if nranks is None or size == nranks:
            out.setdefault(rank, host)
    for rank, host in f.tagged.items():
        out.setdefault(rank, host)
    if not out:
        out.update(f.srun)
    if hostfile:
        slots = parse_hostfile(hostfile, nranks)
        for rank, host in enumerate(slots):
            out.setdefault(rank, host)
    return dict(sorted(out.items()))


def parse_hostfile(text: str, nranks: int | None = None) -> list[str]:
    """The host of each rank slot, in order, from an Open MPI / MPICH / plain hostfile.

    Without slot counts, ``nranks`` (when known) is spread over the hosts in equal blocks.

    >>> parse_hostfile("a slots=2\\nb slots=2\\n")
    ['a', 'a', 'b', 'b']
    >>> parse_hostfile("a\\nb\\n", nranks=4)
    ['a', 'a', 'b', 'b']
    """
    hosts: list[tuple[str, int | None]] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"([\w.-]+)(?::(\d+)|.*\bslots\s*=\s*(\d+))?", line)
        if m:
            n = m.group(2) or m.group(3)
            hosts.append((m.group(1), int(n) if n else None))
    if hosts and all(n is None for _, n in hosts) and nranks and nranks >= len(hosts):
        per = -(-nranks // len(hosts))
        hosts = [(h, per) for h, _ in hosts]
    return [h for h, n in hosts for _ in range(n or 1)]


def _collective(f: _Facts) -> dict[str, Any] | None:
    """The op, SeqNum and timeout most ranks reported (the flight recorder's when none did)."""
    keys = Counter((w.get("op"), w.get("seq"), w.get("tmo")) for w in f.works.values())
    if keys:
        (op, seq, tmo), _ = max(keys.items(), key=lambda kv: (kv[1], sum(x is not None
                                                                           for x in kv[0])))
        return {"op": op, "seq": int(seq) if seq else None,
                "timeout_ms": int(tmo) if tmo else None}
    if f.fr_ops:
        op, seq = f.fr_ops[0]
        return {"op": op or None, "seq": seq, "timeout_ms": None}
    return None


def _missing(f: _Facts, nranks: int | None, reported: tuple[int, ...]) -> tuple[int, ...]:
    out = set(f.fr_missing)
    if nranks and reported:
        out |= set(range(nranks)) - set(reported)
    return tuple(sorted(out))


def _lagging(f: _Facts, collective: dict[str, Any] | None) -> tuple[int, ...]:
    """Ranks that never enqueued the timed-out SeqNum, or whose last completed one is lowest."""
    if not f.progress:
        return ()
    seq = (collective or {}).get("seq")
    done = {r: d for r, (_e, d) in f.progress.items()}
    low = min(done.values())
    out = {r for r, d in done.items() if d == low and low < max(done.values())}
    if seq is not None:
        out |= {r for r, (e, _d) in f.progress.items() if e < seq}
    return tuple(sorted(out))


def _error_ranks(f: _Facts, errors, rank_hosts: dict[int, str], ip_hosts: dict[str, str]
                 ) -> tuple[dict[str, Any], ...]:
    by_pid = {key: r for key, (r, n) in f.comms.items()}
    out: dict[tuple, dict[str, Any]] = {}
    for e in errors:
        if e.kind not in ERROR_KINDS:
            continue
        rank = e.rank
        if rank is None and e.line is not None:
            rank = by_pid.get(f.line_pid.get(e.line, ("", "")), f.line_rank.get(e.line))
        host = e.host or (rank_hosts.get(rank) if rank is not None else None)
        d = {"rank": rank, "host": host, "kind": e.kind, "hca": e.hca,
             "message": e.message[:200]}
        if e.peer:
            d["peer"] = e.peer
            if ip_hosts.get(e.peer):
                d["peer_host"] = ip_hosts[e.peer]
        out.setdefault((rank, host, e.kind, e.hca), {k: v for k, v in d.items()
                                                     if v is not None})
    return tuple(out.values())


def _suspect_hosts(err_ranks, missing, lagging, rank_hosts: dict[int, str]) -> tuple[str, ...]:
    """Fabric errors' hosts (a socket error's peer, not its printer), then the hosts of missing
    and lagging ranks, then the other error hosts."""
    fabric = [e.get("peer_host") if e["kind"] == "socket" and e.get("peer") else e.get("host")
              for e in err_ranks if e["kind"] in FABRIC_KINDS]
    ranks = [rank_hosts.get(r) for r in (*missing, *lagging)]
    other = [e.get("host") for e in err_ranks if e["kind"] not in FABRIC_KINDS]
    return tuple(dict.fromkeys(h for h in (*fabric, *ranks, *other) if h))


def rank_phrase(log: JobLog, ranks: tuple[int, ...], limit: int = 6) -> str:
    """``rank 28 on node-004`` / ``ranks 3, 5 on node-001; rank 28 on node-004``.

    >>> rank_phrase(JobLog(rank_hosts={28: "node-004"}), (28,))
    'rank 28 on node-004'
    """
    by_host: dict[str, list[int]] = {}
    for r in ranks[:limit]:
        by_host.setdefault(log.rank_hosts.get(r, "an unknown host"), []).append(r)
    parts = [f"rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))} on {h}"
             for h, rs in by_host.items()]
    more = f" (+{len(ranks) - limit} more)" if len(ranks) > limit else ""
    return "; ".join(parts) + more


def collective_phrase(log: JobLog) -> str:
    """``ALLREDUCE SeqNum=4021`` (what is known of it), or ``the collective``."""
    c = log.collective or {}
    parts = [c.get("op") or "", f"SeqNum={c['seq']}" if c.get("seq") is not None else ""]
    return " ".join(p for p in parts if p) or "the collective"


def log_summary(log: JobLog) -> str:
    """One sentence: what the log alone says (before any test)."""
    bits = []
    if log.collective:
        tmo = log.collective.get("timeout_ms")
        bits.append(f"{collective_phrase(log)} timed out"
                    + (f" after {tmo / 1000:g} s" if tmo else "")
                    + (f" on {len(log.reported_ranks)} of {log.nranks} ranks" if log.nranks
                       else f" on {len(log.reported_ranks)} rank(s)"))
    if log.missing_ranks:
        bits.append(f"{rank_phrase(log, log.missing_ranks)} never reported it")
    if log.lagging_ranks:
        bits.append(f"{rank_phrase(log, log.lagging_ranks)} lagged behind")
    fabric = [e for e in log.error_ranks if e["kind"] in FABRIC_KINDS]
    if fabric:
        e = fabric[0]
        where = "/".join(x for x in (e.get("host"), e.get("hca")) if x) or "an unknown host"
        if e["kind"] == "socket" and e.get("peer"):
            where = f"{e.get('peer_host') or e['peer']} (peer of {where})"
        bits.append(f"{len(fabric)} fabric error(s), first {e['kind']} on {where}")
    return "; ".join(bits) or "no collective timeout or fabric error in the log"
