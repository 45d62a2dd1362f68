"""After a bisect run: was the job's NCCL timeout the fabric? (fabric / not-fabric / unknown).

Pure: a :class:`~fabriccheck.probes.job_triage.JobLog` (what the log says) and the run's result
(what the tests found) in, the same JobLog with ``conclusion`` and ``why`` out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fabriccheck.probes.job_triage import (
    FABRIC_KINDS,
    JobLog,
    collective_phrase,
    rank_phrase,
)

FABRIC, NOT_FABRIC, UNKNOWN = "fabric", "not-fabric", "unknown"
#: log errors that point at a GPU or the process, not the fabric
GPU_KINDS = ("xid", "gpu_lost", "cuda", "segfault")

#: how to see where a rank is stuck (said in every not-fabric conclusion)
FLIGHT_RECORDER = ("the PyTorch flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE=2000 "
                   "TORCH_NCCL_DUMP_ON_TIMEOUT=1, then `python -m torch.distributed."
                   "flight_recorder.fr_trace DUMP_DIR -p PREFIX`)")


def stack_hint(log: JobLog, ranks: tuple[int, ...]) -> str:
    """How to get the stack of the first of ``ranks``: py-spy with its host and pid when the log
    says them, else the flight recorder.

    >>> stack_hint(JobLog(rank_hosts={3: "n1"}, rank_pids={3: "4103"}), (3,))[:42]
    'look at its stack: `ssh n1 py-spy dump --p'
    """
    r = ranks[0] if ranks else None
    host, pid = log.rank_hosts.get(r) if r is not None else None, log.rank_pids.get(r)
    if host and pid:
        spy = f"`ssh {host} py-spy dump --pid {pid}` (while it runs; pid from the NCCL log)"
    else:
        spy = "`py-spy dump --pid PID` on its host"
    return f"look at its stack: {spy}, or {FLIGHT_RECORDER}"


def conclude(log: JobLog, result: Any, tested: list[str] | None = None,
             left_out: list[str] | None = None) -> JobLog:
    """Decide ``fabric`` / ``not-fabric`` / ``unknown`` from the log and a bisect run's result.

    Parameters
    ----------
    log
        The log's triage.
    result
        A :class:`~fabriccheck.models.RunResult` of the job's nodes (duck-typed: ``drain``,
        ``bad_nics``, ``bad_nodes``, ``bad_links``, ``link_suspects``, ``unreachable``,
        ``suspects``, ``fabric_warnings``, ``extra``).
    tested
        The nodes that were tested (default ``result.nodes``).
    left_out
        Nodes of the job that could not be tested (not in the topology).

    Returns
    -------
    JobLog
        ``fabric`` when a node, NIC or link is bad; ``not-fabric`` when every tested part is
        healthy (``why`` names the rank to look at and how); ``unknown`` with what is missing.

    Examples
    --------
    >>> from types import SimpleNamespace as R
    >>> log = JobLog({"op": "ALLREDUCE", "seq": 4021, "timeout_ms": 600000}, 32, (28,),
    ...              rank_hosts={28: "node-004"})
    >>> ok = R(nodes=["node-004"], drain=[], bad_nics=[], bad_nodes=[], bad_links=[],
    ...        link_suspects=[], unreachable=[], suspects=[], fabric_warnings=[], extra={})
    >>> c = conclude(log, ok)
    >>> c.conclusion, c.why.split(";")[0]
    ('not-fabric', 'rank 28 on node-004 never reached ALLREDUCE SeqNum=4021')
    """
    tested = list(tested if tested is not None else result.nodes)
    found = _fabric_findings(result)
    if found:
        return replace(log, conclusion=FABRIC, why=_fabric_why(log, found))
    missing = _open_items(log, result)
    stuck_hosts = {log.rank_hosts[r] for r in (*log.missing_ranks, *log.lagging_ranks)
                   if r in log.rank_hosts}
    away = sorted((stuck_hosts - set(tested)) | set(left_out or ()))
    if away:
        missing.insert(0, f"job node(s) not tested: {', '.join(away)}")
    if missing:
        return replace(log, conclusion=UNKNOWN, why="cannot decide: " + "; ".join(missing))
    return replace(log, conclusion=NOT_FABRIC, why=_not_fabric_why(log, tested))


def _fabric_findings(result: Any) -> list[str]:
    out = [f"NIC {n}" for n in result.bad_nics]
    drained_by_nic = {n.split("/", 1)[0] for n in result.bad_nics}
    out += [f"node {n}" for n in result.bad_nodes if n not in drained_by_nic]
    out += [f"node {n} (hung)" for n in getattr(result, "hung", []) if n not in result.bad_nodes]
    out += [f"link {' -- '.join(lk)}" for lk in result.bad_links]
    out += [f"switch {s}" for s in result.extra.get("bad_switches", []) or []]
    return out


def _fabric_why(log: JobLog, found: list[str]) -> str:
    hosts = {f.split()[1].split("/", 1)[0] for f in found if not f.startswith(("link", "switch"))}
    ranks = tuple(r for r, h in sorted(log.rank_hosts.items()) if h in hosts)
    why = f"bad: {', '.join(found)}"
    stuck = [r for r in (*log.missing_ranks, *log.lagging_ranks) if r in ranks]
    if stuck:
        why += f"; {rank_phrase(log, tuple(stuck))} never reached {collective_phrase(log)} there"
    elif ranks:
        why += f"; ranks {_span(ranks)} of the job ran there"
    bad = {f.split()[1] for f in found}
    agree = [e for e in log.error_ranks if f"{e.get('host')}/{e.get('hca')}" in bad
             or (e.get("host") in bad and e["kind"] in FABRIC_KINDS)]
    if agree:
        e = agree[0]
        where = "/".join(x for x in (e.get("host"), e.get("hca")) if x)
        why += f"; the log's {e['kind']} error on {where} agrees"
    return why + "; drain it and re-run the job without it"


def _open_items(log: JobLog, result: Any) -> list[str]:
    """What keeps a healthy-looking run from clearing the fabric."""
    out = []
    if result.unreachable:
        out.append(f"unreachable, not tested: {', '.join(result.unreachable)}")
    untested = [n for n in result.extra.get("untested", []) or []
                if n not in result.unreachable]
    if untested:
        out.append(f"no test finished on {', '.join(untested)}")
    if result.suspects or result.link_suspects:
        names = [*result.suspects, *(f"{len(s['candidates'])} candidate link(s)"
                                     for s in result.link_suspects)]
        more = ("add known-good nodes to --nodes so each end can meet a third partner"
                if len(result.nodes) < 4 else "run bisect again, or a sweep with more rounds")
        out.append(f"suspects still open: {', '.join(map(str, names))} ({more})")
    if result.fabric_warnings:
        out.append(f"fabric warning: {result.fabric_warnings[0]}")
    if result.extra.get("stop_reason"):
        out.append(f"stopped early: {result.extra['stop_reason']}")
    logged = [e for e in log.error_ranks if e["kind"] in FABRIC_KINDS
              and e.get("host") in set(result.nodes)]
    if logged and not out:
        e = logged[0]
        where = "/".join(x for x in (e.get("host"), e.get("hca")) if x)
        out.append(f"the log shows {e['kind']} errors on {where} but every test passed: a "
                   f"flapping link or port shows only sometimes; check its port counters "
                   f"and link-state history")
    return out


def _not_fabric_why(log: JobLog, tested: list[str]) -> str:
    gpu = [e for e in log.error_ranks if e["kind"] in GPU_KINDS]
    why = _stuck_why(log, tested)
    if gpu:
        e = gpu[0]
        why += (f"; the log shows a GPU/process error on {e.get('host') or 'a host'} "
                f"({e['message'][:80]}): check that node's GPUs (nvidia-smi, dmesg Xid)")
    return why


def _stuck_why(log: JobLog, tested: list[str]) -> str:
    head = f"every tested node, NIC and link of the job is healthy ({len(tested)} nodes)"
    stuck = tuple(dict.fromkeys((*log.missing_ranks, *log.lagging_ranks)))
    if stuck:
        verb = "never reached" if log.missing_ranks else "fell behind at"
        return (f"{rank_phrase(log, stuck)} {verb} {collective_phrase(log)}; "
                f"{stack_hint(log, stuck)}. Not the fabric: {head}")
    if log.collective:
        return (f"{head} and every rank reported {collective_phrase(log)} timing out: the hang "
                f"is in the program or the collective's inputs; "
                + stack_hint(log, ()).replace("its stack", "every rank's stack"))
    return head + "; the log names no stuck rank: look at the application, storage, the rank " \
                  "that died first"


def _span(ranks: tuple[int, ...]) -> str:
    """``24-31`` for a contiguous run, else a short list.

    >>> _span((24, 25, 26)), _span((1, 5))
    ('24-26', '1, 5')
    """
    if len(ranks) > 2 and ranks[-1] - ranks[0] == len(ranks) - 1:
        return f"{ranks[0]}-{ranks[-1]}"
    return ", ".join(map(str, ranks))


def bisect_exit_code(log: JobLog | None, code: int) -> int:
    """The run's exit code, raised to 1 when the conclusion is ``unknown`` (never lowered).

    >>> bisect_exit_code(JobLog(conclusion="unknown"), 0), bisect_exit_code(None, 0)
    (1, 0)
    """
    if log is not None and log.conclusion == UNKNOWN and code == 0:
        return 1
    return code
