"""Per-host sshd of the lab: keys, config, start (own hostname via a UTS namespace) and stop."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fabriccheck.errors import ExecutorError
from fabriccheck.lab.plan import HANG_COMMANDS, HostPlan

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# hostname, hide the user's ~/.bashrc (it may rewrite PATH), then become sshd
_START = (
    'hostname "$1" && if [ -f "$2" ]; then mount --bind "$3" "$2"; fi && '
    'exec "$4" -f "$5" -E "$6"'
)


def write_key(path: Path, comment: str = "") -> str:
    """Write a new ed25519 private key (OpenSSH format, mode 600); return its public line."""
    key = Ed25519PrivateKey.generate()
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                        serialization.PublicFormat.OpenSSH).decode()
    line = f"{pub} {comment}".strip()
    path.with_name(path.name + ".pub").write_text(line + "\n")
    return pub


def sshd_binary() -> str:
    path = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(path):
        raise ExecutorError("lab: sshd not found", hint="apt-get install openssh-server")
    return path


def write_hang_bin(lab_dir: Path) -> Path:
    """Scripts that never return, named like the probe binaries (a hung host's PATH has them)."""
    d = lab_dir / "hang-bin"
    d.mkdir(exist_ok=True)
    for name in HANG_COMMANDS:
        p = d / name
        p.write_text("#!/bin/sh\n# fabriccheck lab: node_hang fault\nexec sleep 2147483647\n")
        p.chmod(0o755)
    return d


def host_path(lab_dir: Path, hang: bool) -> str:
    """PATH of a host's SSH sessions: the Python env running the lab first (probes, torch)."""
    parts = [str(Path(sys.executable).parent), SYSTEM_PATH]
    if hang:
        parts.insert(0, str(lab_dir / "hang-bin"))
    return ":".join(parts)


def write_config(lab_dir: Path, host: HostPlan) -> Path:
    hdir = lab_dir / "hosts" / host.name
    hdir.mkdir(parents=True, exist_ok=True)
    cfg = hdir / "sshd_config"
    cfg.write_text(
        "\n".join([
            f"ListenAddress {host.mgmt_ip}:22",
            f"HostKey {hdir / 'ssh_host_ed25519_key'}",
            f"PidFile {hdir / 'sshd.pid'}",
            f"AuthorizedKeysFile {lab_dir / 'authorized_keys'}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "UseDNS no",
            "MaxSessions 200",
            "MaxStartups 200:30:400",
            "PrintMotd no",
            "LogLevel ERROR",
            f"SetEnv PATH={host_path(lab_dir, host.hang)}",
        ]) + "\n"
    )
    return cfg


def start_sshd(lab_dir: Path, host: HostPlan, *, wait_s: float = 10.0) -> int:
    """Start ``host``'s sshd in its namespace with its own hostname; return its pid."""
    hdir = lab_dir / "hosts" / host.name
    cfg = write_config(lab_dir, host)
    pidfile = hdir / "sshd.pid"
    pidfile.unlink(missing_ok=True)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    empty = lab_dir / "empty_bashrc"
    empty.touch()
    bashrc = os.path.expanduser("~root/.bashrc")
    argv = ["ip", "netns", "exec", host.netns, "unshare", "--uts", "--mount",
            "--propagation", "private", "sh", "-c", _START, "sh", host.name, bashrc,
            str(empty), sshd_binary(), str(cfg), str(hdir / "sshd.log")]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise ExecutorError(f"lab: sshd for {host.name} did not start: {proc.stderr.strip()}",
                            hint=f"see {hdir / 'sshd.log'}")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if pidfile.exists() and pidfile.read_text().strip():
            try:
                with socket.create_connection((host.mgmt_ip, 22), timeout=0.5):
                    return int(pidfile.read_text().strip())
            except OSError:
                pass
        time.sleep(0.05)
    raise ExecutorError(f"lab: sshd for {host.name} not listening on {host.mgmt_ip}:22",
                        hint=f"see {hdir / 'sshd.log'}")


def stop_sshd(lab_dir: Path, host: HostPlan) -> None:
    """Stop ``host``'s sshd listener (open sessions of it are left to the caller)."""
    pidfile = lab_dir / "hosts" / host.name / "sshd.pid"
    if not pidfile.exists():
        return
    try:
        pid = int(pidfile.read_text().strip())
        os.kill(pid, 15)
        for _ in range(100):
            os.kill(pid, 0)
            time.sleep(0.02)
        os.kill(pid, 9)
    except (ValueError, ProcessLookupError):
        pass
    pidfile.unlink(missing_ok=True)
