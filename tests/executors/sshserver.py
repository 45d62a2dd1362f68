"""An in-process SSH server (paramiko) that runs exec requests as local processes, for fast tests.

Each :class:`FakeHost` listens on its own 127.0.0.1 port with its own ed25519 host key and
accepts one client key, so several "hosts" with a known_hosts file and an inventory can be made
in milliseconds. Commands run as ``sh -c <command>`` in a new session, like sshd does. It counts
connections and the most exec sessions running at once, so tests can check reuse and bounds.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def new_key(path: Path) -> paramiko.Ed25519Key:
    """Write a fresh ed25519 private key (OpenSSH format) to ``path`` and return it."""
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    path.write_bytes(pem)
    path.chmod(0o600)
    return paramiko.Ed25519Key.from_private_key_file(str(path))


class _Iface(paramiko.ServerInterface):
    def __init__(self, host: FakeHost) -> None:
        self.host = host

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return paramiko.OPEN_SUCCEEDED
        return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        ok = username == "root" and key.get_base64() == self.host.client_key.get_base64()
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        deadline = time.monotonic() + 30
        while self.host.freeze and time.monotonic() < deadline:
            time.sleep(0.05)
        threading.Thread(target=self.host._exec, args=(channel, command.decode()),
                         daemon=True).start()
        return True


@dataclass
class FakeHost:
    """One SSH "host" on 127.0.0.1 (see the module docstring)."""

    name: str
    key_dir: Path
    client_key: paramiko.PKey
    host_key: paramiko.PKey = field(init=False)
    port: int = field(init=False)
    connections: int = 0
    active: int = 0
    max_active: int = 0
    commands: list[str] = field(default_factory=list)
    #: when set, probe binaries on this host's PATH hang (the lab's node_hang, in miniature)
    hang_bin: Path | None = None
    #: when set, connections are accepted and dropped at once (an sshd that is not there)
    refuse: bool = False
    #: when set, exec requests are never answered (a wedged sshd) until cleared
    freeze: bool = False

    def __post_init__(self) -> None:
        self.host_key = new_key(self.key_dir / f"hostkey-{self.name}")
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self._lock = threading.Lock()
        self._transports: list[paramiko.Transport] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            if self.refuse:
                conn.close()
                continue
            with self._lock:
                self.connections += 1
            t = paramiko.Transport(conn)
            t.add_server_key(self.host_key)
            self._transports.append(t)
            try:
                t.start_server(server=_Iface(self))
            except (paramiko.SSHException, EOFError, OSError):
                t.close()

    def _exec(self, chan: paramiko.Channel, command: str) -> None:
        with self._lock:
            self.commands.append(command)
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            env = dict(os.environ)
            if self.hang_bin is not None:
                env["PATH"] = f"{self.hang_bin}:{env.get('PATH', '/usr/bin:/bin')}"
            proc = subprocess.Popen(["sh", "-c", command], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True, env=env)

            def pump(src, send) -> None:
                for chunk in iter(lambda: src.read1(65536), b""):
                    try:
                        send(chunk)
                    except OSError:
                        return

            t_err = threading.Thread(target=pump, args=(proc.stderr, chan.sendall_stderr))
            t_err.start()
            pump(proc.stdout, chan.sendall)
            t_err.join()
            rc = proc.wait()
            chan.send_exit_status(rc if rc >= 0 else 128 - rc)
            chan.shutdown_write()
            chan.close()
        except OSError:
            chan.close()
        finally:
            with self._lock:
                self.active -= 1

    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_key.get_name()} {self.host_key.get_base64()}"

    def stop(self) -> None:
        """Refuse new connections and drop open ones (the host becomes unreachable)."""
        self._stop = True
        self.refuse = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked accept(); close() alone won't
        except OSError:
            pass
        self._sock.close()
        for t in self._transports:
            t.close()


@dataclass
class FakeCluster:
    """Several FakeHosts plus the client key, known_hosts and an inventory file for them."""

    root: Path
    hosts: dict[str, FakeHost]
    client_key_path: Path
    known_hosts_path: Path
    inventory_path: Path

    def stop(self) -> None:
        for h in self.hosts.values():
            h.stop()


def make_cluster(root: Path, names: list[str], *, connect_timeout_s: float = 3.0) -> FakeCluster:
    """Start one FakeHost per name; every NIC ``eth0`` is 127.0.0.1 (loopback only)."""
    root.mkdir(parents=True, exist_ok=True)
    key_path = root / "id_ed25519"
    client_key = new_key(key_path)
    hosts = {n: FakeHost(n, root, client_key) for n in names}
    known = root / "known_hosts"
    known.write_text("".join(h.known_hosts_line() + "\n" for h in hosts.values()))
    inv = {
        "name": "fake",
        "ssh": {"user": "root", "key": key_path.name, "known_hosts": known.name,
                "connect_timeout_s": connect_timeout_s},
        "hosts": {
            n: {"address": "127.0.0.1", "port": h.port,
                "nics": {"eth0": {"ip": "127.0.0.1", "rail": 0}}}
            for n, h in hosts.items()
        },
    }
    inv_path = root / "inventory.yaml"
    inv_path.write_text(yaml.safe_dump(inv, sort_keys=False))
    return FakeCluster(root, hosts, key_path, known, inv_path)


def free_port_pair() -> int:
    """A loopback port ``p`` with ``p + 1`` free too (a round of two tests uses both)."""
    for _ in range(50):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            try:
                with socket.socket() as b:
                    b.bind(("127.0.0.1", port + 1))
                    return port
            except OSError:
                continue
    raise RuntimeError("no free pair of loopback ports")
