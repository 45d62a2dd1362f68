"""The Ray host agent on its own (no Ray): start, wait, kill process groups, dead man's switches."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from fabriccheck.executors.ray.agent import HostAgent, group_members, wrap_guarded


def procs_with(token: str) -> list[int]:
    """Live (non-zombie) pids whose command line starts with ``token`` (``exec -a token``)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if cmd.startswith(token) and state not in ("Z", "X"):
            out.append(int(entry.name))
    return out


def wait_gone(token: str, timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := procs_with(token)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.fixture
def agent():
    a = HostAgent("h-test")
    yield a
    a.shutdown()


def test_runs_a_command_and_returns_its_output_and_exit_code(agent):
    h = agent.start(["sh", "-c", "echo out; echo err >&2; exit 3"], {"FOO": "bar"})
    out = agent.wait(h, 10)
    assert out["finished"] and out["exit_code"] == 3
    assert out["stdout"] == "out\n" and out["stderr"] == "err\n"


def test_env_is_added_to_the_command(agent):
    out = agent.wait(agent.start(["sh", "-c", "echo $FC_X"], {"FC_X": "from-driver"}), 10)
    assert out["stdout"].strip() == "from-driver"


def test_wait_returns_partial_output_while_running(agent):
    h = agent.start(["sh", "-c", "echo first; sleep 30"])
    time.sleep(0.3)
    out = agent.wait(h, 0.2)
    assert not out["finished"] and out["exit_code"] is None
    assert out["stdout"] == "first\n"
    assert agent.kill(h)["exit_code"] is None


def test_kill_ends_the_whole_process_group_even_if_term_is_ignored(agent):
    token = f"fcagent-{uuid.uuid4().hex[:8]}"
    script = f"trap '' TERM; sleep 1000 & exec -a {token} sleep 1000"
    h = agent.start(["bash", "-c", script])
    time.sleep(0.3)
    assert len(procs_with(token)) == 1
    t0 = time.monotonic()
    out = agent.kill(h)
    assert time.monotonic() - t0 < 5.0
    assert out["finished"] and out["exit_code"] is None and out["leftover"] == 0
    assert group_members(out["pid"]) == []
    assert wait_gone(token, 2.0) == []


def test_kill_is_idempotent_and_keeps_a_real_exit_code(agent):
    h = agent.start(["true"])
    agent.wait(h, 5)
    first, second = agent.kill(h), agent.kill(h)
    assert first["exit_code"] == 0 and second["exit_code"] == 0


def test_missing_binary_raises_oserror(agent):
    # the wrapper execs the binary, so a missing one shows as exit 127 from timeout/setpriv;
    # without wrappers Popen itself raises. Either way it is never a silent success.
    if shutil.which("timeout") or shutil.which("setpriv"):
        out = agent.wait(agent.start(["/nonexistent/fc-binary"]), 5)
        assert out["exit_code"] in (126, 127)
    else:
        with pytest.raises(OSError):
            agent.start(["/nonexistent/fc-binary"])


def test_kill_all_and_shutdown_leave_nothing(agent):
    token = f"fcagent-{uuid.uuid4().hex[:8]}"
    for _ in range(3):
        agent.start(["bash", "-c", f"exec -a {token} sleep 1000"])
    time.sleep(0.3)
    assert len(procs_with(token)) == 3
    assert agent.shutdown() == 3
    assert wait_gone(token, 3.0) == []


def test_output_is_capped(agent, monkeypatch):
    monkeypatch.setattr("fabriccheck.executors.ray.agent.MAX_OUTPUT_BYTES", 1000)
    out = agent.wait(agent.start(["sh", "-c", "yes | head -c 100000"]), 10)
    assert out["finished"] and len(out["stdout"]) == 1000


def test_wrap_guarded_puts_the_switches_first():
    argv = wrap_guarded(["iperf3", "-s"], 12.4)
    assert argv[-2:] == ["iperf3", "-s"]
    if shutil.which("timeout"):
        assert argv[-8:-2] == ["timeout", "-k", "2", "-s", "KILL", "12"]


@pytest.mark.skipif(shutil.which("timeout") is None, reason="coreutils timeout missing")
def test_guard_kills_the_group_when_nobody_else_does(agent):
    token = f"fcagent-{uuid.uuid4().hex[:8]}"
    h = agent.start(["bash", "-c", f"sleep 1000 & exec -a {token} sleep 1000"], guard_s=1)
    out = agent.wait(h, 6)
    assert out["finished"]  # timeout fired
    assert wait_gone(token, 3.0) == []
    assert group_members(out["pid"]) == []


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="util-linux setpriv missing")
def test_commands_die_with_the_agent_process():
    """SIGKILL the process that hosts the agent: its commands must go (parent-death signal)."""
    token = f"fcagent-{uuid.uuid4().hex[:8]}"
    code = (
        "import sys, time\n"
        "from fabriccheck.executors.ray.agent import HostAgent\n"
        "a = HostAgent('x')\n"
        f"a.start(['bash', '-c', 'trap \"\" TERM; sleep 1000 & exec -a {token} sleep 1000'],"
        " guard_s=600)\n"
        "print('started', flush=True)\n"
        "time.sleep(1000)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "started"
        time.sleep(0.3)
        assert procs_with(token)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        # TERM at once (ignored by the trap), KILL 2 s later from timeout -k 2
        assert wait_gone(token, 6.0) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_reaper_kills_orphaned_groups_when_the_agent_dies_and_its_wrapper_is_killed_first():
    """What a Ray worker does on exit: SIGKILL its direct children, then die.

    The command's group then has no leader and ignores TERM; only the detached reaper can end it.
    """
    token = f"fcagent-{uuid.uuid4().hex[:8]}"
    code = (
        "import os, signal, sys, time\n"
        "from fabriccheck.executors.ray.agent import HostAgent\n"
        "a = HostAgent('x')\n"
        f"h = a.start(['bash', '-c', 'trap \"\" TERM; sleep 1000 & exec -a {token} sleep 1000'],"
        " guard_s=600)\n"
        "time.sleep(0.5)\n"
        "os.kill(a._procs[h].popen.pid, signal.SIGKILL)  # the wrapper (direct child) dies\n"
        "print(a._procs[h].popen.pid, flush=True)\n"
        "time.sleep(1000)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pgid = int(proc.stdout.readline())
        assert procs_with(token) and group_members(pgid)  # orphaned, still running
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert wait_gone(token, 5.0) == []
        deadline = time.monotonic() + 3
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert group_members(pgid) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _reapers_of(directory: Path) -> list[int]:
    """pids of reaper loops watching ``directory`` (argv: sh -c SCRIPT reaper PID DIR)."""
    out = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if len(argv) >= 6 and argv[3] == "reaper" and argv[5] == str(directory):
            out.append(int(entry.name))
    return out


def test_clean_shutdown_stops_the_reaper():
    a = HostAgent("r")
    deadline = time.monotonic() + 3
    while len(reaper := _reapers_of(a._dir)) != 1 and time.monotonic() < deadline:
        time.sleep(0.05)  # the detached loop may still be starting
    assert len(reaper) == 1
    a.shutdown()
    deadline = time.monotonic() + 3
    while Path(f"/proc/{reaper[0]}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    stat = Path(f"/proc/{reaper[0]}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z"
