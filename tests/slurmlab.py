"""A real single-machine Slurm for tests: munged + slurmctld + N slurmd (``slurmd -N name``).

Debian's ``slurm-wlm`` (slurmctld, slurmd, slurm-client, munge) runs here as root: each node is
one ``slurmd -N fcnK`` on its own port on 127.0.0.1, all under a private temp dir, private munge
socket and private ports, so nothing else on the machine is touched. Every daemon runs in the
foreground as our child process and is killed by pid on teardown. Job output
(``slurm-<id>.out``) and the jobs' working directory are inside that temp dir, never the repo.

A test module using it::

    pytestmark = REAL_SLURM
    lab = slurm_lab_fixture(nodes=4)
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from fabriccheck.inventory.command import run_command

BINARIES = ("munged", "slurmctld", "slurmd", "sinfo", "scontrol", "srun", "sbatch")


def unavailable_reason() -> str | None:
    """Why a real Slurm cannot start here, or None."""
    if os.geteuid() != 0:
        return "needs root (slurmd runs as root)"
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (make apt installs slurmctld slurmd munge)"
    return None


#: ``pytestmark`` of a module that starts a real Slurm (root, slurm-wlm installed)
REAL_SLURM = [
    pytest.mark.lab,
    pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason())),
]


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


@dataclass
class SlurmLab:
    root: Path
    nodes: list[str]
    env: dict[str, str]

    def run(self, *argv: str, check: bool = True, timeout_s: float = 30.0) -> str:
        proc = subprocess.run(
            list(argv), env=self.env, cwd=self.root, capture_output=True, text=True,
            timeout=timeout_s,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"{argv}: {proc.stderr.strip()}")
        return proc.stdout

    def runner(self):
        """fabriccheck's ``run_command`` pointed at this Slurm (for inventory/actions objects)."""
        return functools.partial(run_command, env={"SLURM_CONF": self.env["SLURM_CONF"]})

    def submit(self, node: str, command: str) -> str:
        """``sbatch --wrap command`` on ``node``, its output in the lab dir; return the job id."""
        out = self.run("sbatch", "--parsable", "-w", node, f"--output={self.root}/slurm-%j.out",
                       "--wrap", command)  # fmt: skip
        return out.strip()

    def wait_states(self, want: dict[str, str], timeout_s: float = 30.0) -> dict[str, str]:
        """Poll ``sinfo`` until every node in ``want`` shows that state; return the last reading."""
        deadline = time.monotonic() + timeout_s
        seen: dict[str, str] = {}
        while time.monotonic() < deadline:
            out = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
            seen = dict(line.split() for line in out.splitlines() if line.strip())
            if all(seen.get(n) == s for n, s in want.items()):
                return seen
            time.sleep(0.5)
        raise TimeoutError(f"slurm states {seen} never reached {want}")


def _conf(root: Path, nodes: int, ports: list[int]) -> str:
    ctld, *node_ports = ports
    lines = f"""ClusterName=fctest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld}
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=5
KillWait=2
Waittime=0
"""
    for i in range(nodes):
        lines += (
            f"NodeName=fcn{i + 1} NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=1 "
            f"RealMemory=100 State=UNKNOWN Port={node_ports[i]}\n"
        )
    lines += f"PartitionName=fcp Nodes=fcn[1-{nodes}] Default=YES MaxTime=INFINITE State=UP\n"
    return lines


@contextmanager
def slurm_lab(nodes: int = 4) -> Iterator[SlurmLab]:
    """Start munged, slurmctld and ``nodes`` slurmd; yield when every node is idle; stop all."""
    root = Path(tempfile.mkdtemp(prefix="fc-ops-slurm-"))
    procs: list[subprocess.Popen] = []
    env = dict(os.environ)
    try:
        for d in ("munge", "state", "spool", "log"):
            (root / d).mkdir()
        (root / "munge").chmod(0o700)
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        conf = root / "slurm.conf"
        conf.write_text(_conf(root, nodes, _free_ports(nodes + 1)))
        env = {**os.environ, "SLURM_CONF": str(conf)}
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
        m = root / "munge"
        procs.append(subprocess.Popen(
            ["munged", "-F", "-f", f"--socket={m}/munge.sock", f"--key-file={key}",
             f"--log-file={m}/munged.log", f"--pid-file={m}/munged.pid", f"--seed-file={m}/seed"],
            **quiet,
        ))  # fmt: skip
        deadline = time.monotonic() + 10
        while not (m / "munge.sock").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        procs.append(subprocess.Popen(["slurmctld", "-D", "-i"], **quiet))
        time.sleep(0.5)
        names = [f"fcn{i + 1}" for i in range(nodes)]
        for name in names:
            procs.append(subprocess.Popen(["slurmd", "-D", "-N", name], **quiet))
        lab = SlurmLab(root=root, nodes=names, env=env)
        lab.wait_states({n: "idle" for n in names}, timeout_s=45)
        yield lab
    finally:
        if len(procs) > 1:
            subprocess.run(["scancel", "--user=root"], env=env, capture_output=True, timeout=10)
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        shutil.rmtree(root, ignore_errors=True)


def slurm_lab_fixture(nodes: int = 4):
    """A module-scoped pytest fixture yielding a running :class:`SlurmLab` of ``nodes`` nodes."""

    @pytest.fixture(scope="module")
    def lab() -> Iterator[SlurmLab]:
        with slurm_lab(nodes=nodes) as running:
            yield running

    return lab


_TOPOLOGY = """name: slurm-{count}
fabric: roce
spec: lab-tcp
gpus_per_node: 0
nodes:
{nodes}
switches:
  - {{name: leaf-1, tier: leaf}}
  - {{name: leaf-2, tier: leaf}}
  - {{name: spine-1, tier: spine}}
links:
{links}
  - {{a: leaf-1, b: spine-1, gbps: 1}}
  - {{a: leaf-2, b: spine-1, gbps: 1}}
"""


def write_lab_topology(directory, count: int) -> str:
    """A topology file for the Slurm lab's nodes ``fcn1..fcnN``: one NIC each, half of them on
    each of two leaves under one spine. Returns its path."""
    names = [f"fcn{i}" for i in range(1, count + 1)]
    per_leaf = (count + 1) // 2
    text = _TOPOLOGY.format(
        count=count,
        nodes="\n".join(f"  - {{name: {n}, gpus: 0, nics: [{{name: eth0, rail: 0, gbps: 1}}]}}"
                        for n in names),
        links="\n".join(f"  - {{a: {n}/eth0, b: leaf-{1 + i // per_leaf}, gbps: 1}}"
                        for i, n in enumerate(names)),
    )  # fmt: skip
    path = Path(directory) / f"slurm-{count}.yaml"
    path.write_text(text)
    return str(path)
