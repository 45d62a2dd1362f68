"""``bisect``'s scope is the job: its nodes (flags, Slurm job, or log hosts), its log, its verdict.

Nodes come from ``--nodes``/``--node-file``, else ``--job JOBID`` (``scontrol show job``, then
``sacct`` once the job has left the controller), else the hosts the job log names; never silently
the whole topology. After the run the log's triage gets its conclusion (fabric / not-fabric /
unknown), goes into the run JSON as ``job_log`` and is printed first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabriccheck.errors import ConfigError, ExecutorError
from fabriccheck.probes.job_triage import JobLog

_HINT = ("pass --nodes/--node-file, --job JOBID (a Slurm job), or --job-log LOG naming the "
         "job's hosts; bisect never tests the whole topology on its own")


@dataclass
class BisectScope:
    """What bisect tests and why: the nodes, where they came from, the log's triage."""

    nodes: list[str]
    source: str  # "--nodes/--node-file", "--job 123", "job log"
    log: JobLog | None = None
    log_path: str | None = None
    notes: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # job nodes not in the topology

    def scale_for(self, scale: int) -> int:
        """The group size of the round at scale: ``scale``, or for a job with fewer nodes the
        largest power of two that fits it (the job's own shape, as far as groups go).

        >>> [BisectScope(list("abcd"), "log").scale_for(8), BisectScope(list("abc"), "x")
        ...  .scale_for(8), BisectScope(["a"], "x").scale_for(8)]
        [4, 2, 0]
        """
        n = len(self.nodes)
        if n >= scale or scale <= 0:
            return scale
        return 1 << (n.bit_length() - 1) if n >= 2 else 0

    def info(self) -> dict[str, Any]:
        """Run-JSON keys (kept from before: ``log_suspects``, ``log_hcas``)."""
        d: dict[str, Any] = {"nodes_from": self.source}
        if self.log is not None:
            d["log_suspects"] = list(self.log.suspect_hosts)
            d["log_hcas"] = [f"{e['host']}/{e['hca']}" for e in self.log.error_ranks
                             if e.get("host") and e.get("hca")]
        if self.notes:
            d["scope_notes"] = list(self.notes)
        return d


def resolve_scope(setup: Any, *, explicit: bool, job_log: str | None, job: str | None,
                  hostfile: str | None = None, runner=None) -> BisectScope:
    """Fix ``setup.nodes`` to the job's nodes; read and triage the job log.

    Parameters
    ----------
    setup
        The CLI's Setup (``topology``, ``nodes``, ``explicit``); ``nodes`` is replaced unless the
        user named them.
    explicit
        ``--nodes``/``--node-file`` were given.
    job_log, job, hostfile
        The flags of the same names.
    runner
        Runs ``scontrol``/``sacct`` (default: a subprocess with a timeout).

    Raises
    ------
    ConfigError
        No source gives nodes, none of the log's hosts is in the topology, or a file is missing.
    """
    known = set(setup.topology.nodes)
    notes: list[str] = []
    job_nodes: list[str] = []
    if job:
        job_nodes, log_from_job = slurm_job(job, runner)
        job_log = job_log or log_from_job
        if not job_log:
            notes.append(f"job {job}: Slurm names no readable log (StdOut); no log triage")
    log = _short_names(_triage(job_log, hostfile), known) if job_log else None
    if explicit:
        nodes, source = list(setup.nodes), "--nodes/--node-file"
    elif job:
        nodes, source = job_nodes, f"--job {job}"
    elif log is not None:
        nodes, source = _log_nodes(log, known, job_log or "", notes), "job log"
    else:
        raise ConfigError("no nodes to test: bisect tests a job's nodes",
                          source="bisect", hint=_HINT)
    outside = [n for n in nodes if n not in known]
    if outside and not explicit:
        notes.append(f"not in the topology, not tested: {', '.join(outside[:8])}")
        nodes = [n for n in nodes if n in known]
    if not nodes:
        raise ConfigError(f"none of the job's nodes is in topology {setup.topology.name}",
                          source=source, hint=_HINT)
    setup.nodes, setup.explicit = list(dict.fromkeys(nodes)), True
    left_out = outside if source.startswith("--job") else []
    return BisectScope(setup.nodes, source, log, job_log, notes, left_out)


def _triage(path: str, hostfile: str | None) -> JobLog:
    from fabriccheck.probes.job_triage import scan_with_triage

    text = _read(path, "--job-log")
    hosts = _read(hostfile, "--hostfile") if hostfile else None
    return scan_with_triage(text, hostfile=hosts).job_log


def _short_names(log: JobLog, known: set[str]) -> JobLog:
    """The log's host names as the topology writes them (``node-004.cluster`` -> ``node-004``).

    >>> _short_names(JobLog(rank_hosts={1: "n1.x"}, hosts=("n1.x",)), {"n1"}).rank_hosts
    {1: 'n1'}
    """
    from dataclasses import replace

    def name(h):
        return h if not h or h in known or h.split(".", 1)[0] not in known else h.split(".")[0]

    return replace(
        log, rank_hosts={r: name(h) for r, h in log.rank_hosts.items()},
        hosts=tuple(dict.fromkeys(name(h) for h in log.hosts)),
        suspect_hosts=tuple(dict.fromkeys(name(h) for h in log.suspect_hosts)),
        error_ranks=tuple({**e, "host": name(e["host"])} if e.get("host") else e
                          for e in log.error_ranks))


def _read(path: str, flag: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", source=flag,
                          hint="give a readable file") from exc


def _log_nodes(log: JobLog, known: set[str], path: str, notes: list[str]) -> list[str]:
    hosts = list(log.hosts)
    nodes = [h for h in hosts if h in known]
    if not nodes:
        named = ", ".join(hosts[:6]) or "no host"
        raise ConfigError(f"the log names {named}, none of them a node of the topology",
                          source=path, hint=_HINT)
    return sorted(nodes)


_FIELD_RE = re.compile(r"(?:^|\s)(NodeList|StdOut|StdErr|JobState)=(\S*)")


def parse_scontrol_job(text: str) -> dict[str, str]:
    """``NodeList``, ``StdOut``, ``StdErr``, ``JobState`` of ``scontrol show job`` output.

    >>> parse_scontrol_job("JobId=7 JobName=wrap\\n   JobState=FAILED Reason=None\\n"
    ...                    "   ReqNodeList=(null) ExcNodeList=(null)\\n   NodeList=gpu[01-02]\\n"
    ...                    "   StdOut=/home/u/slurm-7.out\\n")["NodeList"]
    'gpu[01-02]'
    """
    out: dict[str, str] = {}
    for key, value in _FIELD_RE.findall(text):
        out.setdefault(key, value)
    return out


def slurm_job(job: str, runner=None) -> tuple[list[str], str | None]:
    """The nodes and the stdout path of Slurm job ``job`` (``scontrol``, else ``sacct``)."""
    from fabriccheck.inventory.static import expand_nodes

    if not re.fullmatch(r"\d+(?:_\d+)?(?:\+\d+)?", job):
        raise ConfigError(f"not a Slurm job id: {job!r}", source="--job",
                          hint="give the numeric job id, e.g. --job 123456")
    run = runner or _default_runner()
    fields: dict[str, str] = {}
    try:
        fields = parse_scontrol_job(run(["scontrol", "show", "job", job], 30.0))
    except ExecutorError:
        pass  # finished jobs leave the controller after MinJobAge: ask the accounting
    nodelist = fields.get("NodeList", "")
    if nodelist in ("", "(null)", "None"):
        nodelist, workdir = _sacct_nodes(job, run)
        fields["StdOut"] = str(Path(workdir) / f"slurm-{job}.out") if workdir else ""
    if not nodelist:
        raise ConfigError(f"Slurm knows no nodes for job {job}", source="--job",
                          hint="check the id with `sacct -j JOBID`, or pass --nodes")
    log = next((fields[k] for k in ("StdOut", "StdErr")
                if fields.get(k) and Path(fields[k]).is_file()), None)
    return expand_nodes(nodelist, source="--job"), log


def _default_runner():
    from fabriccheck.inventory.command import run_command

    return run_command


def _sacct_nodes(job: str, run) -> tuple[str, str]:
    """NodeList and WorkDir from the accounting (the log is ``WorkDir/slurm-JOBID.out`` when the
    job kept Slurm's default output name)."""
    try:
        out = run(["sacct", "-j", job, "-X", "-n", "-P", "-o", "NodeList,WorkDir"], 30.0)
    except ExecutorError as exc:
        raise ConfigError(f"Slurm does not know job {job}: {exc.message}", source="--job",
                          hint="run where scontrol/sacct reach the cluster, or pass --nodes"
                          ) from exc
    for line in out.splitlines():
        nodes, _, workdir = line.strip().partition("|")
        if nodes and nodes != "None assigned":
            return nodes, workdir
    return "", ""


def finish(scope: BisectScope, result: Any, code: int, *, json_: bool, console) -> int:
    """Conclude, put ``job_log`` into the run JSON, print it (human output) and return the exit
    code (``unknown`` never exits 0)."""
    from fabriccheck.inference.job_log import bisect_exit_code, conclude

    result.extra.update(scope.info())
    if scope.log is None:
        return code
    log = conclude(scope.log, result, scope.nodes, scope.left_out)
    result.extra["job_log"] = log.to_json()
    if not json_:
        print_job_log(log, scope, console)
    return bisect_exit_code(log, code)


def print_job_log(log: JobLog, scope: BisectScope, console) -> None:
    """The conclusion first, then what the log said."""
    from rich.markup import escape

    style = {"fabric": "bold red", "not-fabric": "bold green"}.get(log.conclusion, "bold yellow")
    console.print(f"\n[{style}]job log: {log.conclusion}[/] — {escape(log.why)}", highlight=False,
                  markup=True)
    from fabriccheck.probes.job_triage import log_summary

    console.print(f"  log ({scope.log_path}): {log_summary(log)}", highlight=False,
                  markup=False)
    console.print(f"  tested {len(scope.nodes)} node(s) from {scope.source}"
                  + (f"; suspects first: {', '.join(log.suspect_hosts)}"
                     if log.suspect_hosts else ""), highlight=False, markup=False)
    for note in scope.notes:
        console.print(f"  note: {note}", highlight=False, markup=False)
