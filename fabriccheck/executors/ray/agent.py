"""The host agent the Ray executor places on each node: start, wait for and kill host commands.

Plain Python (no Ray import): the executor wraps :class:`HostAgent` with ``ray.remote`` and pins
one instance to each Ray node; the agent runs the probe's commands there as local processes.

Every command runs in its own session (``setsid``), so its whole process tree is one process
group that :meth:`HostAgent.kill` ends (SIGTERM, then SIGKILL). Three dead man's switches bound it
even if the agent's Ray worker dies (driver killed, actor killed, worker crashed) first:

- ``timeout -k 2 -s KILL <guard_s>`` (coreutils; it signals the whole group) ends it after
  ``guard_s``, whatever happens;
- ``setpriv --pdeathsig TERM`` makes that ``timeout`` receive SIGTERM as soon as the agent dies; it
  passes it to the group and sends SIGKILL 2 s later (covers a crashed worker);
- a per-agent *reaper* (a detached ``sh`` loop, not a child of the worker) kills every process
  group still listed in the agent's ``pgids`` file once the agent's pid is gone. It is needed
  because a Ray worker that exits SIGKILLs its direct children (``timeout`` included), which would
  orphan the rest of the group (Ray's ``RAY_kill_child_processes_on_worker_exit``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: stdout/stderr kept per command (the tools print far less; a runaway command is cut here)
MAX_OUTPUT_BYTES = 4 * 1024 * 1024
#: seconds between SIGTERM and SIGKILL when a command is killed
KILL_GRACE_S = 1.0


@dataclass
class _Running:
    popen: subprocess.Popen
    out_path: Path
    err_path: Path
    argv: tuple[str, ...]
    started: float
    cleaned: bool = False  # kill() saw its process group empty


def _read(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_OUTPUT_BYTES)
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``, from ``/proc``.

    Zombies are left out: an orphan killed under a Ray worker (a child subreaper) stays a zombie
    until reaped, but it no longer runs. Without ``/proc`` falls back to ``killpg(pgid, 0)``.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            return [pgid]
        return [pgid]
    out = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()  # after "pid (comm)": state ppid pgrp ...
        if len(fields) >= 3 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            out.append(int(entry.name))
    return out


def _group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wrap_guarded(argv: Sequence[str], guard_s: float) -> list[str]:
    """``argv`` under the dead man's switches of the module docstring (those installed here).

    >>> wrap_guarded(["iperf3", "-s"], 90)[-8:]
    ['timeout', '-k', '2', '-s', 'KILL', '90', 'iperf3', '-s']
    """
    out: list[str] = []
    if shutil.which("setpriv"):
        out += ["setpriv", "--pdeathsig", "TERM", "--"]
    if shutil.which("timeout"):
        out += ["timeout", "-k", "2", "-s", "KILL", f"{max(1.0, guard_s):.0f}"]
    return out + list(argv)


#: the reaper: wait for the agent to go, then TERM and KILL every group left in the pgids file
_REAPER = (
    'agent=$1; dir=$2; '
    'while kill -0 "$agent" 2>/dev/null && [ -d "$dir" ] && [ ! -e "$dir/stop" ]; do sleep 0.3; '
    'done; if [ ! -d "$dir" ] || [ -e "$dir/stop" ]; then exit 0; fi; '
    'for g in $(cat "$dir/pgids" 2>/dev/null); do kill -TERM "-$g" 2>/dev/null; done; sleep 1; '
    'for g in $(cat "$dir/pgids" 2>/dev/null); do kill -KILL "-$g" 2>/dev/null; done; '
    'rm -rf "$dir"'
)


def start_reaper(agent_pid: int, directory: Path) -> None:
    """Start the detached reaper for ``agent_pid`` (module docstring); it is not our child."""
    if shutil.which("sh") is None:
        return
    launcher = f'sh -c {shlex_quote(_REAPER)} reaper {agent_pid} {shlex_quote(str(directory))} &'
    subprocess.run(["sh", "-c", launcher], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, start_new_session=True, check=False, timeout=10)


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


class HostAgent:
    """Runs commands on the host it lives on; handles are small integers.

    Parameters
    ----------
    name : str
        The fabriccheck host this agent stands for (reported back by :meth:`info`).
    reaper : bool
        Start the detached reaper (module docstring) that cleans up if this process dies.
    """

    def __init__(self, name: str = "", reaper: bool = True) -> None:
        self.name = name
        self._dir = Path(tempfile.mkdtemp(prefix="fcagent-"))
        self._procs: dict[int, _Running] = {}
        self._next = 0
        self._lock = threading.Lock()
        self._write_pgids()
        if reaper:
            start_reaper(os.getpid(), self._dir)

    def _write_pgids(self) -> None:
        """Record the process groups that may still run, for the reaper (atomic replace)."""
        if not self._dir.exists():
            return
        live = [str(r.popen.pid) for r in self._procs.values() if not r.cleaned]
        tmp = self._dir / "pgids.tmp"
        tmp.write_text("\n".join(live) + "\n")
        tmp.replace(self._dir / "pgids")

    def info(self) -> dict[str, Any]:
        """Where this agent runs: host name, hostname, pid, and the process groups it owns."""
        return {
            "name": self.name,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "running": [p.popen.pid for p in self._procs.values() if p.popen.poll() is None],
        }

    def start(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        guard_s: float = 600.0,
    ) -> int:
        """Start ``argv`` in a new session and return its handle at once.

        ``env`` is added to the agent's environment. ``guard_s`` bounds the command's life even if
        this agent dies (``timeout -s KILL``). Raises OSError when the command cannot start.
        """
        with self._lock:
            handle = self._next
            self._next += 1
        out_path = self._dir / f"{handle}.out"
        err_path = self._dir / f"{handle}.err"
        full_env = {**os.environ, **(env or {})}
        guarded = wrap_guarded(argv, guard_s)
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            popen = subprocess.Popen(
                guarded, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=full_env,
                start_new_session=True, close_fds=True,
            )
        with self._lock:
            self._procs[handle] = _Running(popen, out_path, err_path, tuple(argv),
                                           time.monotonic())
            self._write_pgids()
        return handle

    def _output(self, handle: int) -> dict[str, Any]:
        run = self._procs[handle]
        code = run.popen.poll()
        return {
            "stdout": _read(run.out_path),
            "stderr": _read(run.err_path),
            "exit_code": code,
            "finished": code is not None,
            "pid": run.popen.pid,
        }

    def wait(self, handle: int, timeout_s: float) -> dict[str, Any]:
        """Wait up to ``timeout_s`` for the command to exit; return its output so far."""
        run = self._procs[handle]
        try:
            run.popen.wait(timeout=max(0.0, timeout_s))
        except subprocess.TimeoutExpired:
            pass
        return self._output(handle)

    def kill(self, handle: int) -> dict[str, Any]:
        """End the command's whole process group (TERM, grace, KILL); idempotent.

        The result's ``exit_code`` is None if the command had to be killed, and ``leftover`` counts
        processes of its group still alive afterwards (0 unless something escaped the kill).
        """
        run = self._procs[handle]
        pgid = run.popen.pid
        finished_before = run.popen.poll() is not None
        if _group_alive(pgid):
            _signal_group(pgid, signal.SIGTERM)
            deadline = time.monotonic() + KILL_GRACE_S
            while time.monotonic() < deadline and _group_alive(pgid):
                run.popen.poll()
                time.sleep(0.02)
            _signal_group(pgid, signal.SIGKILL)
        try:
            run.popen.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + 2.0
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.02)
        out = self._output(handle)
        if not finished_before:
            out["exit_code"] = None
        out["leftover"] = len(group_members(pgid))
        with self._lock:
            run.cleaned = out["leftover"] == 0
            self._write_pgids()
        return out

    def kill_all(self) -> int:
        """Kill every command this agent started that is still running; return how many."""
        live = [h for h, r in list(self._procs.items()) if _group_alive(r.popen.pid)]
        for handle in live:
            self.kill(handle)
        return len(live)

    def forget(self, handle: int) -> None:
        """Drop a finished command's files (after its output was collected)."""
        with self._lock:
            run = self._procs.pop(handle, None)
            self._write_pgids()
        if run is not None:
            for path in (run.out_path, run.err_path):
                path.unlink(missing_ok=True)

    def shutdown(self) -> int:
        """Kill everything still running, stop the reaper, remove the agent's files.

        Returns how many commands had to be killed.
        """
        killed = self.kill_all()
        if self._dir.exists():
            (self._dir / "stop").touch()  # the reaper exits on "stop" or on a missing directory
            shutil.rmtree(self._dir, ignore_errors=True)
        return killed
