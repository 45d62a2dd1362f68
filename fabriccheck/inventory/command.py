"""Running scheduler commands (sinfo, scontrol, kubectl): one subprocess call with a hard timeout.

A :data:`Runner` takes an argv and a timeout and returns stdout; it raises
:class:`~fabriccheck.errors.ExecutorError` when the command is missing, fails or hangs. Inventories
and actions take a runner so tests can pass a recording double where no real scheduler runs.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence

from fabriccheck.errors import ExecutorError

#: argv, timeout_s -> stdout
Runner = Callable[[Sequence[str], float], str]


def run_command(
    argv: Sequence[str], timeout_s: float = 30.0, *, env: Mapping[str, str] | None = None
) -> str:
    """Run ``argv`` (no shell) and return its stdout.

    Parameters
    ----------
    argv : sequence of str
        The command and its arguments.
    timeout_s : float
        Hard limit; the process is killed when it is exceeded.
    env : mapping, optional
        Extra environment variables (merged over ``os.environ``).

    Raises
    ------
    ExecutorError
        The command is not installed, exits non-zero (stderr quoted) or times out.
    """
    cmd = shlex.join(argv)
    full_env = {**os.environ, **env} if env else None
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout_s, env=full_env
        )
    except FileNotFoundError as exc:
        raise ExecutorError(
            f"{argv[0]}: command not found", hint=f"install {argv[0]} or run where it is on PATH"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise ExecutorError(f"`{cmd}` did not finish within {timeout_s:g} s") from exc
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        detail = msg[-1] if msg else "no output"
        raise ExecutorError(f"`{cmd}` exited {proc.returncode}: {detail}")
    return proc.stdout
