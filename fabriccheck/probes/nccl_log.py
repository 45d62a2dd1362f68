"""Job-log scanner: what a bisection after a NCCL timeout needs from a training job's logs.

Reads NCCL INFO/WARN lines (hosts, rank -> host, HCAs, IB completion and socket errors),
PyTorch ProcessGroupNCCL watchdog timeouts (every published format, hard-wrapped lines too),
torchrun ``ChildFailedError`` failure blocks, kernel logs (``dmesg`` / ``journalctl -k``: Xid
lines, GPUs fallen off the bus, libnccl segfaults, mlx5 link state changes) and nccl-tests
failure lines. ``suspects`` ranks the hosts the errors name, most implicated first; a socket
error that names its peer (``Connect to <ip><port> failed``) blames the peer, not the printer.
Hard-wrapped records are joined first (:func:`unwrap_lines`); ``job_log`` is the triage of the
timeout (:mod:`fabriccheck.probes.job_triage`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from fabriccheck.probes._text import (
    NCCL_LINE_RE,
    clean_line,
    dedupe_errors,
    ib_completion_error,
    nccl_line_error,
    ordered_unique,
)
from fabriccheck.probes.log_lines import unwrap_lines
from fabriccheck.probes.results import INCOMPLETE, OK, NcclLogScan, ToolError

#: how strongly one error of a kind implicates the host it names (0: listed, not implicating)
WEIGHTS = {
    "gpu_lost": 10.0, "xid": 5.0, "ib_completion": 4.0, "link_flap": 4.0, "link_down": 4.0,
    "root_cause": 4.0,
    "nccl": 3.0, "cuda": 3.0, "segfault": 3.0, "process_exit": 2.0, "nccl_error": 2.0,
    "socket": 1.0, "connection_closed": 1.0, "nccl_warn": 1.0, "process_abort": 1.0,
    "watchdog_dump": 0.5, "watchdog_timeout": 0.5, "link_state": 0.0,
}  # fmt: skip

_SYSLOG_RE = re.compile(
    r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT[\d:.,+-]+Z?) (?P<host>[\w.-]+) "
    r"(?:kernel|[\w.@-]+(?:\[\d+\])?):"
)
_XID_RE = re.compile(r"\bXid \((?:PCI:)?(?P<pci>[^)\s]+)\):\s*(?P<xid>\d+)\b,?\s*(?P<rest>.*)$")
_PCI_RE = re.compile(r"\b(?:PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)\b")
_SEGV_RE = re.compile(r"(?P<proc>[\w.-]+)\[\d+\]: segfault at .* in (?P<lib>libnccl\S*?)\[")
_MLX_RE = re.compile(
    r"mlx5_core (?P<pci>[0-9a-fA-F:.]+) (?P<dev>[\w.-]+): (?:Port: \d+ )?Link (?P<state>\w+)")
_NET_IB_USING_RE = re.compile(r"NET/IB ?: Using ((?:\[\d+\]\S+ ?)+)")
_HCA_RE = re.compile(r"\b(mlx5_\d+|bnxt_re\d+|irdma\d+|efa_\d+|hfi1_\d+)\b")
_OOB_IP_RE = re.compile(r"(?:OOB|Bootstrap ?: Using) \w[\w.-]*:(?P<ip>[\d.]+|[0-9a-fA-F:]+)<")
_COMM_RANK_RE = re.compile(r"\bcomm 0x[0-9a-f]+ rank (\d+) nranks (\d+)")
_LOCAL_RANK_CLOSED_RE = re.compile(r"Connection closed by localRank (\d+)")
_RANK_LINE_RE = re.compile(
    r"#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device")
_TEST_FAIL_RE = re.compile(
    r"(?P<host>[A-Za-z0-9][\w.-]*): Test (?P<what>NCCL|CUDA) failure \S+ '(?P<msg>.*?)(?: / )?'")
_PT_RANK_RE = re.compile(r"\[(?:PG[^\]]*?)?Rank (\d+)\]")
_WATCHDOG_RE = re.compile(
    r"\[Rank\s+(\d+)\]\s+Watchdog\s+caught\s+collective\s+operation\s+timeout")
_BLOCKING_RE = re.compile(r"\[Rank\s+(\d+)\]\s+Work\s+WorkNCCL\((?P<args>[^)]*)\)\s+timed\s+out"
                          r"\s+in\s+blocking\s+wait")
_WORK_ARGS_RE = re.compile(r"SeqNum=(?P<seq>\d+)|OpType=(?P<op>\w+)|Timeout\(ms\)=(?P<tmo>\d+)")
_RAN_FOR_RE = re.compile(r"ran\s+for\s+(\d+)\s+milliseconds")
_TORCHRUN_ENTRY_RE = re.compile(r"^\s*\[(\d+)\]:\s*$")
_TORCHRUN_FIELD_RE = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s*(.*)$")
_CONNECT_FAIL_RE = re.compile(r"\bConnect to (?P<peer>[^\s<]+)<\d+> failed\s*:\s*(?P<why>.*)$")
#: PyTorch ``RuntimeError`` / ``DistBackendError``: ``NCCL error in: <file>:<line>, <what>, ...``
_PT_NCCL_ERROR_RE = re.compile(
    r"(?P<exc>\w+(?:Error|Exception))?:?\s*NCCL error in: \S+?,\s*(?P<what>[^,(]+?)\s*"
    r"(?:\(run with[^)]*\))?\s*(?:,|$)")


@dataclass
class _State:
    hosts: list[str] = field(default_factory=list)
    ranks: dict[int, str] = field(default_factory=dict)
    hcas: list[tuple[str, str]] = field(default_factory=list)
    errors: list[ToolError] = field(default_factory=list)
    links: dict[tuple[str | None, str], list[tuple[str, str, int]]] = field(
        default_factory=lambda: defaultdict(list))
    socket_traces: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    entry: dict[str, str] | None = None
    root_cause: bool = False
    last_pci: str | None = None
    last_rank: int | None = None  # the `[Rank N]` of the latest PyTorch line
    ip_hosts: dict[str, str] = field(default_factory=dict)  # from NCCL bootstrap/OOB lines


def scan_nccl_log(text: str, *, hostfile: str | None = None,
                  triage: Callable[..., Any] | None = None) -> NcclLogScan:
    """Scan a job log (training stdout/stderr, NCCL debug output, dmesg, journalctl).

    Parameters
    ----------
    text
        Any mix of the log formats above, in any order; lines may carry launcher prefixes.
    hostfile
        The job's hostfile text, for ``job_log``'s rank -> host where the log is silent.
    triage
        Fills ``job_log`` (:func:`fabriccheck.probes.job_triage.triage_job_log`, which is what
        :func:`fabriccheck.probes.job_triage.scan_with_triage` passes); None leaves it empty.

    Returns
    -------
    NcclLogScan
        hosts, rank -> host, (host, hca) pairs, IB peers, errors (``ib_completion``,
        ``watchdog_timeout``, ``xid``, ``gpu_lost``, ``link_flap``, ``process_exit``,
        ``root_cause``, ``socket``, ...) and ``suspects``. Status ``ok`` unless the text is
        empty (``incomplete``).

    Examples
    --------
    >>> s = scan_nccl_log("n7:1:2 [3] net_ib.cc:1 NCCL WARN NET/IB : Got completion from "
    ...                   "peer 10.0.0.9<3> with status=12 opcode=0 len=0 vendor err 129 (Recv) "
    ...                   "hca mlx5_3")
    >>> s.suspects, s.hcas, s.peers, s.errors[0].status
    (('n7',), (('n7', 'mlx5_3'),), ('10.0.0.9',), '12')
    """
    st = _State()
    for lineno, raw in unwrap_lines(text):
        _feed(st, clean_line(raw), lineno)
    _flush_entry(st)
    _scan_watchdogs(st, text)
    _link_errors(st)
    for host, n in st.socket_traces.items():
        st.errors.append(ToolError("socket", f"{n} NCCL socket error trace(s) (misc/socket.cc)",
                                   host=host))
    errors = [_with_rank_host(e, st.ranks) for e in st.errors]
    errors_t = dedupe_errors(errors)
    peers = ordered_unique(e.peer for e in errors_t)
    hosts = ordered_unique([*st.hosts, *(e.host for e in errors_t), *st.ranks.values()])
    reason = "" if errors_t else ("no output" if not text.strip() else "no errors found")
    return NcclLogScan(
        hosts=hosts,
        ranks=dict(sorted(st.ranks.items())) or None,
        hcas=tuple(dict.fromkeys([*st.hcas, *((e.host, e.hca) for e in errors_t
                                               if e.host and e.hca)])),
        peers=peers,
        errors=errors_t,
        suspects=_suspects(errors_t, st.ip_hosts),
        status=OK if text.strip() else INCOMPLETE,
        reason=reason,
        job_log=(triage(text, errors=errors_t, hostfile=hostfile, ip_hosts=st.ip_hosts)
                 if triage is not None else None),
    )


def _feed(st: _State, line: str, lineno: int) -> None:
    s = line.strip()
    if not s:
        return
    sys_m = _SYSLOG_RE.match(s) if s[0].isalnum() else None
    sys_host = sys_m["host"] if sys_m else None
    if sys_host:
        st.hosts.append(sys_host)
    if st.entry is not None or _TORCHRUN_ENTRY_RE.match(s) or "Root Cause" in s:
        if _feed_torchrun(st, s):
            return
    if "NCCL" in s:
        m = NCCL_LINE_RE.search(s)
        if m:
            _feed_nccl(st, m, lineno)
            return
    if "Got completion from peer" in s:  # `Last error:` blocks repeat it without a host
        e = ib_completion_error(s, None, lineno)
        if e:
            st.errors.append(replace(e, rank=st.last_rank))
            return
    if "NCCL error in:" in s:
        m = _PT_NCCL_ERROR_RE.search(s)
        if m:
            what = m["what"].strip()
            st.errors.append(ToolError("nccl_error", f"{m['exc'] or 'NCCL error'}: {what}"[:300],
                                       rank=st.last_rank, line=lineno))
            return
    if "Test " in s:
        m = _TEST_FAIL_RE.search(s)
        if m:
            st.errors.append(ToolError(m["what"].lower(), f"Test {m['what']} failure: {m['msg']}",
                                       host=m["host"], line=lineno))
            return
    m = _RANK_LINE_RE.match(s) if "Rank" in s else None
    if m:
        st.ranks.setdefault(int(m.group(1)), m.group(2))
        return
    if "NVRM" in s or "Xid" in s or "segfault" in s or "mlx5_core" in s or "nvidia" in s:
        _feed_kernel(st, s, sys_host, lineno)
    _feed_pytorch(st, s, lineno)


def _feed_nccl(st: _State, m: re.Match[str], lineno: int) -> None:
    host, msg = m["host"], m["msg"]
    st.hosts.append(host)
    cf = _CONNECT_FAIL_RE.search(msg) if "Connect to" in msg else None
    err = ToolError("socket", msg.strip()[:200], host=host, peer=cf["peer"], line=lineno) \
        if cf else nccl_line_error(m, lineno)
    if err is not None:
        st.errors.append(err)
    elif "misc/socket.cc" in msg and "->" in msg:
        st.socket_traces[host] += 1
    elif m["level"] in ("WARN", "ERROR"):
        hca = _HCA_RE.search(msg)
        st.errors.append(ToolError("nccl_warn", msg.strip()[:300], host=host,
                                   hca=hca.group(1) if hca else None, line=lineno))
    c = _COMM_RANK_RE.search(msg)
    if c:
        st.ranks.setdefault(int(c.group(1)), host)
    ip = _OOB_IP_RE.search(msg)
    if ip:
        st.ip_hosts.setdefault(ip["ip"], host)
    u = _NET_IB_USING_RE.search(msg)
    if u:
        for dev in re.findall(r"\[\d+\]([\w.-]+?)(?::\d+)?(?:/\w+)?(?:\s|$)", u.group(1) + " "):
            st.hcas.append((host, dev))
    c = _LOCAL_RANK_CLOSED_RE.search(msg)
    if c:
        st.errors.append(ToolError("connection_closed", f"connection closed by localRank "
                                   f"{c.group(1)} (that process died)", host=host, line=lineno))


def _feed_kernel(st: _State, s: str, host: str | None, lineno: int) -> None:
    p = _PCI_RE.search(s)
    if p and ("NVRM" in s or "nvidia" in s):
        st.last_pci = p.group(1)
    m = _XID_RE.search(s)
    if m:
        xid, rest = int(m["xid"]), m["rest"].strip()
        st.errors.append(ToolError("xid", f"Xid {xid}: {rest}"[:300], host=host, xid=xid,
                                   pci=m["pci"], line=lineno))
        return
    if "fallen off the bus" in s and "Xid" not in s and st.last_pci:
        pci = st.last_pci
        if not any(e.kind == "xid" and e.xid == 79 and pci.startswith(e.pci or "~")
                   for e in st.errors):
            st.errors.append(ToolError("gpu_lost", f"GPU {pci} has fallen off the bus",
                                       host=host, pci=pci, line=lineno))
        return
    m = _SEGV_RE.search(s)
    if m:
        st.errors.append(ToolError("segfault", f"{m['proc']} segfault in {m['lib']}",
                                   host=host, line=lineno))
        return
    m = _MLX_RE.search(s)
    if m:
        st.links[(host, m["dev"])].append((m["state"].upper(), m["pci"], lineno))
        if m["dev"].startswith("mlx5_") and host:
            st.hcas.append((host, m["dev"]))


def _feed_pytorch(st: _State, s: str, lineno: int) -> None:
    if "Rank" not in s:
        return
    r = _PT_RANK_RE.search(s)
    if not r:
        return
    rank = st.last_rank = int(r.group(1))
    if "watchdog thread terminated with exception" in s:
        detail = s.split("exception:", 1)[1].strip()
        st.errors.append(ToolError("nccl_error", f"watchdog terminated: {detail}"[:300],
                                   rank=rank, line=lineno))
    elif "Some NCCL operations have failed or timed out" in s or "entire process down" in s:
        st.errors.append(ToolError("process_abort", "ProcessGroupNCCL took the process down",
                                   rank=rank, line=lineno))
    elif "preparing to dump debug info" in s:
        st.errors.append(ToolError("watchdog_dump", "flight recorder dump (watchdog fired)",
                                   rank=rank, line=lineno))


def _feed_torchrun(st: _State, s: str) -> bool:
    if "Root Cause" in s:
        _flush_entry(st)
        st.root_cause = True
        return True
    m = _TORCHRUN_ENTRY_RE.match(s)
    if m:
        _flush_entry(st)
        st.entry = {"index": m.group(1)}
        return True
    if st.entry is None:
        return False
    f = _TORCHRUN_FIELD_RE.match(s)
    if f:
        st.entry[f.group(1)] = f.group(2).strip()
        return True
    _flush_entry(st)
    return s.startswith(("===", "---"))


def _flush_entry(st: _State) -> None:
    e, st.entry = st.entry, None
    if not e or ("host" not in e and "rank" not in e):
        return
    rank_m = re.match(r"(-?\d+)", e.get("rank", ""))
    rank = int(rank_m.group(1)) if rank_m else None
    host = e.get("host")
    if rank is not None and host:
        st.ranks.setdefault(rank, host)
    kind = "root_cause" if st.root_cause else "process_exit"
    code = e.get("exitcode", "?").split(" ")[0]
    msg = f"rank {rank} exited with code {code}" + (
        f": {e['traceback']}" if e.get("traceback", "").startswith("Signal") else "")
    st.errors.append(ToolError(kind, msg[:300], host=host, rank=rank, status=code))


def _scan_watchdogs(st: _State, text: str) -> None:
    """Watchdog timeouts, matched over the whole text so hard-wrapped records still count."""
    seen: set[tuple[int, str | None]] = set()
    matches = list(_WATCHDOG_RE.finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else min(len(text), m.end() + 600)
        window = text[m.end():end]
        st.errors.append(_timeout_error(int(m.group(1)), window, seen, text, m.start()))
    for m in _BLOCKING_RE.finditer(text):
        err = _timeout_error(int(m.group(1)), m["args"], seen, text, m.start())
        if err.message:
            st.errors.append(err)
    st.errors[:] = [e for e in st.errors if e.message]


def _timeout_error(rank: int, window: str, seen: set, text: str, pos: int) -> ToolError:
    args: dict[str, str] = {}
    for a in _WORK_ARGS_RE.finditer(window.split("[Rank", 1)[0]):
        for k, v in a.groupdict().items():
            if v and k not in args:
                args[k] = v
    key = (rank, args.get("seq"))
    if key in seen:
        return ToolError("watchdog_timeout", "")
    seen.add(key)
    ran = _RAN_FOR_RE.search(window)
    parts = [f"rank {rank} collective timeout"]
    if "op" in args:
        parts.append(f"{args['op']} SeqNum={args.get('seq', '?')}")
    if "tmo" in args:
        parts.append(f"timeout {int(args['tmo']) / 1000:g} s")
    if ran:
        parts.append(f"ran {int(ran.group(1)) / 1000:g} s")
    return ToolError("watchdog_timeout", ", ".join(parts), rank=rank,
                     line=text.count("\n", 0, pos) + 1)


def _link_errors(st: _State) -> None:
    for (host, dev), events in st.links.items():
        states = [e[0] for e in events]
        ups = sum(x in ("UP", "ACTIVE") for x in states)
        went_down = "DOWN" in states or any(
            x == "INIT" and "ACTIVE" in states[:i] for i, x in enumerate(states))
        if ups >= 2 or (went_down and ups):
            kind = "link_flap"
        elif went_down:
            kind = "link_down"
        else:
            kind = "link_state"  # e.g. INIT -> ACTIVE at boot
        msg = f"{dev} link " + " -> ".join(states[:8]) + (" ..." if len(states) > 8 else "")
        count = len(events) if len(events) > 1 else None
        st.errors.append(ToolError(kind, msg, host=host, hca=dev, pci=events[0][1],
                                   line=events[0][2], count=count))


def _with_rank_host(e: ToolError, ranks: dict[int, str]) -> ToolError:
    if e.host is None and e.rank is not None and e.rank in ranks:
        return replace(e, host=ranks[e.rank])
    return e


def _suspects(errors: tuple[ToolError, ...], ip_hosts: dict[str, str]) -> tuple[str, ...]:
    """Hosts ranked by the weight of the errors naming them; the far end of an IB completion
    error (its peer address, when the log's bootstrap lines say whose it is) gets half. A socket
    error naming its peer (connect refused, closed by the remote peer) blames only the peer."""
    score: dict[str, float] = {}
    for e in errors:
        w = WEIGHTS.get(e.kind, 1.0) * (e.count or 1) ** 0.5
        peer_host = ip_hosts.get(e.peer or "") or _host_name(e.peer)
        if e.kind == "socket" and e.peer:
            if peer_host and w > 0:
                score[peer_host] = score.get(peer_host, 0.0) + w
            continue
        if e.host and w > 0:
            score[e.host] = score.get(e.host, 0.0) + w
        if e.kind == "ib_completion" and peer_host and peer_host != e.host:
            score[peer_host] = score.get(peer_host, 0.0) + w / 2
    order = {h: i for i, h in enumerate(score)}
    return tuple(sorted(score, key=lambda h: (-score[h], order[h])))


def _host_name(peer: str | None) -> str | None:
    """``peer`` when it is a host name rather than an address (``n5``, not ``10.0.0.5``)."""
    import ipaddress

    if not peer:
        return None
    try:
        ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return peer
    return None
