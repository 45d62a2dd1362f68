"""The namespace lab for tests: built once per session (lab-4), healed between tests, torn down.

The fixtures are imported by tests/lab/conftest.py and by tests/executors/test_contract.py;
pytest registers them twice, so the lab itself is a module-level singleton with a user count:
built by the first user, removed by the last.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest


def lab_skip_reason() -> str | None:
    """Why lab tests cannot run here (None: they can)."""
    if os.name != "posix" or os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "tc", "unshare", "iperf3", "setsid", "ss"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (make apt)"
    if shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists():
        return "sshd not installed (make apt)"
    return None


@dataclass(frozen=True)
class Lab:
    name: str
    dir: Path
    inventory: Path
    netns: dict[str, str]


_SHARED: dict = {"lab": None, "users": 0}
TEST_LAB_RE = re.compile(r"^[tdces]\d{1,5}$")  # names the lab tests give their labs


def reap_stale_test_labs() -> list[str]:
    """Remove labs left by crashed test runs (test-style name, creator process gone)."""
    from fabriccheck import lab

    reaped = []
    for name, state in lab.lab.registered_labs().items():
        pid = state.get("creator_pid")
        if not TEST_LAB_RE.match(name) or not pid:
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            lab.down(name)
            reaped.append(name)
        except (PermissionError, ValueError):
            continue
    return reaped


@pytest.fixture(scope="session")
def lab4(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    from fabriccheck import lab

    if _SHARED["lab"] is None:
        reap_stale_test_labs()
        name = f"t{os.getpid() % 100000}"  # unique per test run: parallel runs do not collide
        info = lab.up("lab-4", name=name, directory=tmp_path_factory.mktemp("lab4"))
        _SHARED["lab"] = Lab(name, Path(info.dir), Path(info.inventory), dict(info.netns))
    _SHARED["users"] += 1
    try:
        yield _SHARED["lab"]
    finally:
        _SHARED["users"] -= 1
        if _SHARED["users"] == 0:
            lab.down(_SHARED["lab"].name)
            _SHARED["lab"] = None


@pytest.fixture
def lab(lab4: Lab) -> Lab:
    """lab-4 with no faults; whatever a test injects is healed afterwards."""
    from fabriccheck import lab as lab_mod

    yield lab4
    lab_mod.apply_faults(lab4.name, None)


def inject(lab: Lab, *faults: dict) -> None:
    from fabriccheck import lab as lab_mod
    from fabriccheck.faults import FaultSet

    lab_mod.apply_faults(lab.name, FaultSet.from_dict({"faults": list(faults)}))


def stray_processes(lab: Lab) -> dict[str, list[str]]:
    """host -> commands of processes in its namespace other than sshd (should be none idle)."""
    from fabriccheck.lab.netns import netns_pids

    out: dict[str, list[str]] = {}
    for host, ns in lab.netns.items():
        names = []
        for pid in netns_pids(ns):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if not cmd.startswith(("sshd", "/usr/sbin/sshd")):
                names.append(cmd.strip())
        if names:
            out[host] = names
    return out
