"""The SSH executor: runs each test's host commands over SSH (paramiko) and returns raw text.

Security and robustness rules (docs/design.md "Real parts"): host keys are checked against the
inventory's known_hosts with :class:`paramiko.RejectPolicy` (never auto-added); key auth only;
one connection per host, reused; at most ``max_parallel`` tests at once; every command has a hard
timeout; a command runs in its own session (``setsid``) and on timeout its whole process group
and session are killed on the host, not just its channel closed. paramiko is imported lazily,
here only, and its exceptions become fabriccheck's in :func:`map_ssh_error`.
"""

from __future__ import annotations

import select
import shlex
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fabriccheck.errors import (
    AuthError,
    ConnectError,
    ExecutorError,
    RemoteCommandError,
    TaskTimeout,
)
from fabriccheck.executors.launch_runner import StepOutput, run_tests
from fabriccheck.inventory.file import Inventory, load_inventory
from fabriccheck.models import RawResult, Test
from fabriccheck.probes.commands import DEFAULT_PORT, CommandOptions, build_launch
from fabriccheck.probes.launch import HostCommand, ProbeLaunch

#: first stderr line of every wrapped command: the pid (= process group = session id) to kill
PGID_MARKER = "@@fcpgid "
_WRAP = f'echo "{PGID_MARKER}$$" >&2; exec "$@"'
_KILL = (
    'p=$1; kill -TERM -- "-$p" 2>/dev/null; i=0; '
    'while kill -0 -- "-$p" 2>/dev/null && [ "$i" -lt 20 ]; do sleep 0.05; i=$((i+1)); done; '
    'kill -KILL -- "-$p" 2>/dev/null; pkill -KILL -s "$p" 2>/dev/null; true'
)


def map_ssh_error(exc: BaseException, host: str, *, stage: str = "connect") -> ExecutorError:
    """The fabriccheck error for a paramiko/socket exception (the one mapping point).

    Parameters
    ----------
    exc : BaseException
        What paramiko or the socket layer raised.
    host : str
        The host it concerns.
    stage : str
        ``connect`` (opening the connection) or ``command`` (running / killing a command).

    Returns
    -------
    ExecutorError
        :class:`AuthError` for host-key and authentication failures, :class:`ConnectError` for
        network failures, :class:`TaskTimeout` for a timeout while a command runs,
        :class:`RemoteCommandError` for a channel that cannot be opened or used.
    """
    import paramiko

    kind = type(exc).__name__
    if isinstance(exc, ExecutorError):
        return exc
    if isinstance(exc, paramiko.BadHostKeyException):
        return AuthError(f"host key does not match known_hosts ({exc})", host=host,
                         hint="if the host was reinstalled, update known_hosts after checking it")
    if isinstance(exc, paramiko.AuthenticationException):
        return AuthError(f"authentication failed ({kind}: {exc})", host=host,
                         hint="check ssh.key and ssh.user in the inventory")
    if isinstance(exc, paramiko.ChannelException):
        return RemoteCommandError(f"cannot open a channel ({exc})", host=host,
                                  hint="the server may limit sessions (sshd MaxSessions)")
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return ConnectError(f"connection refused or unreachable ({exc})", host=host)
    if isinstance(exc, socket.gaierror):
        return ConnectError(f"cannot resolve address ({exc})", host=host,
                            hint="check hosts.<name>.address in the inventory")
    if isinstance(exc, (socket.timeout, TimeoutError)):
        if stage == "command":
            return TaskTimeout(f"timed out talking to the host ({exc})", host=host)
        return ConnectError(f"timed out connecting ({exc})", host=host)
    if isinstance(exc, paramiko.SSHException):
        if "known_hosts" in str(exc):
            return AuthError(f"host key not in known_hosts ({exc})", host=host,
                             hint="add the host's key to the inventory's known_hosts")
        if stage == "command":
            return RemoteCommandError(f"SSH error while running a command ({kind}: {exc})",
                                      host=host)
        return ConnectError(f"SSH connection failed ({kind}: {exc})", host=host)
    if isinstance(exc, (EOFError, ConnectionError, OSError)):
        return ConnectError(f"connection lost or refused ({kind}: {exc})", host=host)
    return RemoteCommandError(f"unexpected {kind}: {exc}", host=host)


def wrap_command(step: HostCommand) -> str:
    """The remote shell line for ``step``: its own session, pid announced on stderr, env set.

    >>> wrap_command(HostCommand("h", ("sleep", "1")))[:28]
    'exec setsid -w sh -c \\'echo "'
    """
    argv = list(step.argv)
    if step.env:
        argv = ["env", *(f"{k}={v}" for k, v in sorted(step.env.items())), *argv]
    return "exec " + shlex.join(["setsid", "-w", "sh", "-c", _WRAP, "sh", *argv])


class _Handle:
    """One running remote command: its channel, a reader thread and what it printed so far."""

    def __init__(self, host: str, chan: Any) -> None:
        self.host = host
        self.chan = chan
        self.out = bytearray()
        self.err = bytearray()
        self.pgid: int | None = None
        self.pgid_seen = threading.Event()
        self.done = threading.Event()
        self.exit_code: int | None = None
        self.killed = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        chan = self.chan
        while chan.recv_ready():
            data = chan.recv(65536)
            if not data:
                break
            self.out += data
        while chan.recv_stderr_ready():
            self.err += chan.recv_stderr(65536)
        if self.pgid is None and b"\n" in self.err:
            first, _, rest = bytes(self.err).partition(b"\n")
            if first.startswith(PGID_MARKER.encode()):
                self.pgid = int(first[len(PGID_MARKER):])
                self.err = bytearray(rest)
                self.pgid_seen.set()

    def _read(self) -> None:
        chan = self.chan
        try:
            while True:
                select.select([chan], [], [], 1.0)
                self._drain()
                if chan.eof_received or chan.closed:
                    chan.status_event.wait()
                    self._drain()
                    if chan.exit_status_ready():
                        self.exit_code = chan.recv_exit_status()
                    break
        except (OSError, EOFError, ValueError):
            pass  # the channel went away; exit_code stays None
        finally:
            self.pgid_seen.set()
            self.done.set()

    def output(self) -> StepOutput:
        finished = self.done.is_set() and self.exit_code is not None and not self.killed
        stderr = self.err.decode("utf-8", "replace")
        if self.killed:  # setsid -w complains that its child was killed: our doing, not news
            stderr = "".join(line for line in stderr.splitlines(keepends=True)
                             if not line.startswith("setsid: child "))
        return StepOutput(
            stdout=self.out.decode("utf-8", "replace"),
            stderr=stderr,
            exit_code=self.exit_code if finished else None,
            finished=finished,
        )


class SSHHostRunner:
    """The :class:`~fabriccheck.executors.launch_runner.HostRunner` over SSH (paramiko)."""

    def __init__(self, inventory: Inventory, *, kill_timeout_s: float = 10.0) -> None:
        self.inventory = inventory
        self.kill_timeout_s = kill_timeout_s
        self._clients: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {h: threading.Lock() for h in inventory.hosts}
        self._global = threading.Lock()

    # ---- connections -----------------------------------------------------------------------
    def _lock(self, host: str) -> threading.Lock:
        with self._global:
            return self._locks.setdefault(host, threading.Lock())

    def client(self, host: str) -> Any:
        """The (cached) connected SSHClient for ``host``; raises ConnectError/AuthError."""
        import paramiko

        entry = self.inventory.host(host)
        with self._lock(host):
            cached = self._clients.get(host)
            if cached is not None:
                transport = cached.get_transport()
                if transport is not None and transport.is_active():
                    return cached
                cached.close()
            inv = self.inventory
            client = paramiko.SSHClient()
            try:
                if inv.known_hosts_path is not None:
                    client.load_host_keys(str(inv.known_hosts_path))
                else:
                    client.load_system_host_keys()
                client.set_missing_host_key_policy(paramiko.RejectPolicy())
                t = inv.connect_timeout_s
                client.connect(
                    entry.address, port=entry.port, username=entry.user,
                    key_filename=str(inv.key_path) if inv.key_path else None,
                    timeout=t, banner_timeout=t, auth_timeout=t, channel_timeout=t,
                    look_for_keys=inv.key_path is None, allow_agent=False,
                )
            except Exception as exc:  # every failure is mapped; nothing is swallowed
                client.close()
                raise map_ssh_error(exc, host, stage="connect") from exc
            transport = client.get_transport()
            if transport is not None:
                transport.set_keepalive(15)
            self._clients[host] = client
            return client

    def _open(self, host: str, command: str) -> Any:
        """Open a channel and exec ``command``; a host that does not answer within the connect
        timeout has its connection closed (paramiko's exec_command would wait forever)."""
        client = self.client(host)
        transport = client.get_transport()
        limit_s = self.inventory.connect_timeout_s
        watchdog = threading.Timer(limit_s, transport.close)
        watchdog.daemon = True
        watchdog.start()
        try:
            chan = transport.open_session(timeout=limit_s)
            chan.exec_command(command)
            return chan
        except Exception as exc:  # mapped to fabriccheck errors at this boundary
            if watchdog.finished.is_set():
                raise ConnectError(f"no answer to a command request within {limit_s:g} s",
                                   host=host) from exc
            raise map_ssh_error(exc, host, stage="command") from exc
        finally:
            watchdog.cancel()

    # ---- HostRunner ------------------------------------------------------------------------
    def start(self, step: HostCommand, tag: str) -> _Handle:
        return _Handle(step.host, self._open(step.host, wrap_command(step)))

    def wait(self, handle: _Handle, timeout_s: float) -> StepOutput:
        handle.done.wait(max(0.0, timeout_s))
        return handle.output()

    def kill(self, handle: _Handle) -> StepOutput:
        """Kill the command's process group and session on its host, then close its channel."""
        if handle.done.is_set() and handle.exit_code is not None:
            return handle.output()
        handle.killed = True
        handle.pgid_seen.wait(3.0)
        problem = None
        if handle.pgid is not None:
            try:
                chan = self._open(handle.host, shlex.join(["sh", "-c", _KILL, "sh",
                                                           str(handle.pgid)]))
                deadline = time.monotonic() + self.kill_timeout_s
                while not chan.exit_status_ready() and time.monotonic() < deadline:
                    chan.status_event.wait(0.2)
                if not chan.exit_status_ready():
                    problem = "kill command did not finish"
                chan.close()
            except ExecutorError as exc:
                problem = str(exc)
        handle.done.wait(2.0)
        handle.chan.close()
        handle.done.wait(1.0)
        if problem:
            raise RemoteCommandError(
                f"could not kill process group {handle.pgid}: {problem}", host=handle.host)
        return handle.output()

    def run(self, host: str, argv: Sequence[str], timeout_s: float = 30.0) -> StepOutput:
        """Run one command on ``host`` and wait for it (killed after ``timeout_s``)."""
        from fabriccheck.executors.launch_runner import run_command

        return run_command(self, HostCommand(host=host, argv=tuple(argv)), timeout_s, "run")

    def close(self) -> None:
        with self._global:
            clients, self._clients = self._clients, {}
        for c in clients.values():
            c.close()


class SSHExecutor:
    """Run rounds of tests over SSH on the hosts of an inventory (see the module docstring).

    Parameters
    ----------
    inventory : Inventory or path
        Hosts, addresses, NIC IPs and SSH settings (``fabriccheck.inventory.file``).
    max_parallel : int
        Most tests running at the same time.
    options : CommandOptions, optional
        Probe binaries and launcher; ``python`` and ``env`` default to the inventory's.
    port_base : int
        TCP port of a round's first test; test ``i`` of a round uses ``port_base + i``.
    """

    name = "ssh"

    def __init__(
        self,
        inventory: Inventory | str | Path,
        *,
        max_parallel: int = 32,
        options: CommandOptions | None = None,
        port_base: int = DEFAULT_PORT,
        kill_timeout_s: float = 10.0,
    ) -> None:
        if not isinstance(inventory, Inventory):
            inventory = load_inventory(inventory)
        self.inventory = inventory
        self.max_parallel = max_parallel
        self.options = options or CommandOptions(python=inventory.python, env=dict(inventory.env),
                                                 **inventory.probe_options)
        self.port_base = port_base
        self.runner = SSHHostRunner(inventory, kill_timeout_s=kill_timeout_s)
        self._nic_ips = inventory.nic_ips()

    def launch_for(self, test: Test, index: int = 0) -> ProbeLaunch:
        """The host commands test ``index`` of a round runs (see :func:`build_launch`)."""
        for node in test.nodes:
            self.inventory.host(node)  # unknown host -> ConfigError before anything runs
        return build_launch(test, self._nic_ips, port=self.port_base + index, options=self.options)

    def run_round(self, tests: Sequence[Test]) -> list[RawResult]:
        return run_tests(self.runner, tests, self.launch_for, max_parallel=self.max_parallel)

    def hop_names(self) -> dict[str, str]:
        """Router interface address -> switch (the inventory's ``hops:``; {} when not given)."""
        return dict(self.inventory.hops)

    def close(self) -> None:
        self.runner.close()

    def __enter__(self) -> SSHExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
