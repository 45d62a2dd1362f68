"""Failure lines around nccl-tests output: ``Test NCCL failure`` & co., usage, launcher deaths."""

from __future__ import annotations

import re
from dataclasses import replace

from fabriccheck.probes._text import ib_completion_error
from fabriccheck.probes.results import ToolError

_FAILURE_RE = re.compile(
    r"(?P<host>[A-Za-z0-9][\w.-]*)(?: pid (?P<pid>\d+))?: Test (?P<what>NCCL failure|CUDA failure"
    r"|failure|timeout)\s*(?P<rest>.*)$"
)
_KINDS = {"NCCL failure": "nccl", "CUDA failure": "cuda", "failure": "test_failure",
          "timeout": "timeout"}
_USAGE_RE = re.compile(r"invalid option|^\s*USAGE:|invalid sizes? (?:specified )?for|"
                       r"Invalid number of GPUs|Please check the number of processes")
_LAUNCHER_EXIT_RE = re.compile(r"^\s*Exit code:\s*(\d+)|exited with exit code (\d+)", re.I)
_LAUNCHER_HOST_RE = re.compile(
    r"srun: error: (?P<h1>[\w.-]+): tasks? (?P<r1>\d+)[\d,-]*: Exited with exit code (?P<code>\d+)"
    r"|process rank (?P<r2>\d+) with PID \d+ on node (?P<h2>[\w.-]+) exited on signal "
    r"(?P<sig>\d+)|\*\*\* STEP \S+ ON (?P<h3>[\w.-]+) CANCELLED")


def test_failure_error(s: str, lineno: int) -> ToolError | None:
    """The error of a ``<host>: Test NCCL|CUDA failure|failure|timeout ...`` line, or None.

    >>> e = test_failure_error("n3: Test NCCL failure common.cu:345 'unhandled system error'", 1)
    >>> e.kind, e.host, e.message
    ('nccl', 'n3', 'NCCL failure: unhandled system error')
    """
    m = _FAILURE_RE.search(s)
    if not m:
        return None
    what, rest, host = m["what"], m["rest"].strip(), m["host"]
    kind = _KINDS[what]
    quoted = re.search(r"'(.*)'", rest)
    detail = quoted.group(1).rstrip(" /") if quoted else rest
    message = f"Test {what} {rest}".strip() if kind == "test_failure" else f"{what}: {detail}"
    ib = ib_completion_error(rest, host, lineno) if "Got completion" in rest else None
    if ib is not None:  # NCCL >= 2.13 appends ncclGetLastError: the IB completion it died of
        return replace(ib, message=message[:300])
    return ToolError(kind, message[:300], host=host, line=lineno)


test_failure_error.__test__ = False  # a parser, not a pytest test


def usage_error(s: str, lineno: int) -> ToolError | None:
    """Bad flags or too few GPUs (nccl-tests prints usage and may still exit 0)."""
    if not _USAGE_RE.search(s):
        return None
    kind = "setup" if "GPUs" in s or "processes" in s else "usage"
    return ToolError(kind, s[:200], line=lineno)


def launcher_error(s: str, lineno: int) -> ToolError | None:
    """mpirun / srun / slurmstepd saying a process died, with host and rank when named.

    >>> launcher_error("srun: error: node-b: task 3: Exited with exit code 3", 9).host
    'node-b'
    """
    m = _LAUNCHER_HOST_RE.search(s)
    if m:
        host = m["h1"] or m["h2"] or m["h3"]
        rank = m["r1"] or m["r2"]
        kind = "timeout" if m["h3"] and "TIME LIMIT" in s else "launcher"
        return ToolError(kind, s.strip()[:300], host=host, rank=int(rank) if rank else None,
                         status=m["code"] or m["sig"], line=lineno)
    m = _LAUNCHER_EXIT_RE.search(s)
    if m and int(m.group(1) or m.group(2)) != 0:
        code = m.group(1) or m.group(2)
        return ToolError("launcher", f"a process exited with code {code}", status=code,
                         line=lineno)
    return None
