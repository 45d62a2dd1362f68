"""``fabriccheck lab up --ray`` end to end: a real Ray cluster over the namespace lab (root).

One lab-4 with Ray for the module, built by the real CLI (``lab up --ray --json``): a head on
the management gateway, one raylet inside each host's namespaces. The sweeps are the real CLI too
(``fabriccheck sweep --executor ray --inventory DIR/inventory.yaml``, no ``--ray-address``: the
inventory carries it), so the driver, the placement and the iperf3 traffic between the hosts'
data NICs through the lab's tc-shaped links are all real:

- a NIC throttled to a quarter rate (the lab's faults) is found, nobody else blamed;
- a host whose raylet (with everything else on it but sshd) is killed once the first round's
  iperf3 runs there ends unreachable, the others judged: no crash, no hang;
- ``lab faults`` brings a killed raylet back; ``lab down`` leaves no Ray process and no Ray
  directory (checked when the module's lab is taken down).

Lab names carry the xdist worker (``y<worker><pid>``), and every port the head opens is a free
one, so parallel workers do not collide.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.lab.labfixtures import lab_skip_reason

pytestmark = [pytest.mark.lab, pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "fabriccheck"]
RAY_LAB_RE = re.compile(r"^y\d{5}$")  # the names this module gives its labs


def _skip_reason() -> str | None:
    reason = lab_skip_reason()
    if reason:
        return reason
    if not Path(sys.executable).with_name("ray").exists():
        return f"no ray CLI beside {sys.executable} (pip install ray)"
    if not Path("/usr/bin/nsenter").exists() and not Path("/bin/nsenter").exists():
        return "nsenter not installed (util-linux)"
    return None


def _lab_name() -> str:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    digit = int(re.sub(r"\D", "", worker) or 0) % 10
    return f"y{digit}{os.getpid() % 10000:04d}"


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=str(REPO))


def _reap_stale() -> None:
    """Ray labs left by crashed runs of this module (creator process gone)."""
    from fabriccheck import lab

    for name, state in lab.lab.registered_labs().items():
        pid = state.get("creator_pid")
        if RAY_LAB_RE.match(name) and pid:
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                lab.down(name)


def _leftovers(name: str) -> dict:
    from fabriccheck.lab import netns, raylets

    return {"ray_pids": raylets.lab_ray_pids(name), "netns": netns.lab_netns(name),
            "root": raylets.ray_root(name).exists()}


@pytest.fixture(scope="module")
def ray_lab():
    """lab-4 with ``--ray`` for this module; taken down (and checked empty) at the end."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    _reap_stale()
    name = _lab_name()
    t0 = time.monotonic()
    up = _run("lab", "up", "lab-4", "--name", name, "--ray", "--json")
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        info = json.loads(up.stdout)
        info["up_s"] = time.monotonic() - t0
        yield info
    finally:
        down = _run("lab", "down", "--name", name, "--json", timeout=120)
        left = _leftovers(name)
        assert down.returncode == 0, down.stderr[-2000:]
        assert left == {"ray_pids": [], "netns": [], "root": False}, left


def _heal(name: str, faults: list[dict] | None = None) -> None:
    from fabriccheck import lab
    from fabriccheck.faults import FaultSet

    lab.apply_faults(name, FaultSet.from_dict({"faults": faults}) if faults else None)


def _sweep_argv(info: dict) -> list[str]:
    return [*CLI, "sweep", "--executor", "ray", "--inventory", info["inventory"],
            "--topology", "lab-4", "--probe", "iperf3", "--levels", "2", "--no-history",
            "--json"]


def _result(proc_stdout: str, stderr: str) -> dict:
    assert proc_stdout.strip(), stderr[-3000:]
    return json.loads(proc_stdout)


def _ns_inode(path: str) -> int:
    return os.stat(path).st_ino


def test_raylets_run_inside_their_hosts(ray_lab: dict) -> None:
    """Each host's raylet lives in that host's network namespace and names the host."""
    ray = ray_lab["ray"]
    assert ray["address"].startswith(ray_lab["gateway"] + ":")
    assert sorted(ray["raylets"]) == sorted(ray_lab["hosts"])
    for host, entry in ray["raylets"].items():
        assert entry["resource"] == f"fchost_{host}" and entry["ip"] == ray_lab["hosts"][host]
        ns = _ns_inode(f"/run/netns/{ray_lab['netns'][host]}")
        assert _ns_inode(f"/proc/{entry['pgid']}/ns/net") == ns, host
    assert _ns_inode(f"/proc/{ray['head']['pgid']}/ns/net") == _ns_inode("/proc/self/ns/net")
    inventory = Path(ray_lab["inventory"]).read_text()
    assert f"ray_address: {ray['address']}" in inventory


def test_ray_sweep_over_lab_up_ray_finds_the_throttled_nic(ray_lab: dict) -> None:
    _heal(ray_lab["name"], [{"kind": "nic_degraded", "nic": "host2/eth0", "factor": 0.25}])
    try:
        proc = subprocess.run(_sweep_argv(ray_lab), capture_output=True, text=True, timeout=400,
                              cwd=str(REPO))
    finally:
        _heal(ray_lab["name"])
    result = _result(proc.stdout, proc.stderr)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert result["executor"] == "ray"
    assert result["drain"] == ["host2"], result
    assert "host2/eth0" in result["bad_nics"] or "host2" in result["bad_nodes"]
    assert result["unreachable"] == [] and result["bad_links"] == []


def _iperf3_running(ns: str) -> bool:
    from fabriccheck.lab.netns import netns_pids

    for pid in netns_pids(ns):
        try:
            if b"iperf3" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def _kill_host_but_sshd(ns: str) -> int:
    """SIGKILL every process in namespace ``ns`` but sshd: the raylet, its workers, probes."""
    from fabriccheck.lab.netns import netns_pids

    killed = 0
    for pid in netns_pids(ns):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if cmd.startswith((b"sshd", b"/usr/sbin/sshd")):  # its title: "sshd: ... [listener]"
            continue
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except ProcessLookupError:
            pass
    return killed


def test_a_raylet_killed_mid_sweep_ends_unreachable_and_the_rest_is_judged(
    ray_lab: dict,
) -> None:
    victim = "host3"
    ns = ray_lab["netns"][victim]
    _heal(ray_lab["name"])
    proc = subprocess.Popen(_sweep_argv(ray_lab), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(REPO))
    try:
        deadline = time.monotonic() + 180
        while not _iperf3_running(ns):  # the first round's test runs on the victim now
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no iperf3 ever ran on the victim"
            time.sleep(0.1)
        killed_at = time.monotonic()
        assert _kill_host_but_sshd(ns) > 0
        out, err = proc.communicate(timeout=400)
        finished_s = time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    result = _result(out, err)
    assert proc.returncode == 1, err[-3000:]
    assert result["unreachable"] == [victim], result
    assert victim not in result["drain"] and not result["bad_links"]
    assert result["drain"] == [] and result["bad_nodes"] == [] and result["bad_nics"] == []
    # the rest judged: every host tested, nothing else open (no suspect, no hung, no untested)
    assert [(v["name"], v["state"]) for v in result["verdicts"]] == [(victim, "unreachable")]
    assert result["untested"] == [] and result["suspects"] == [] and result["hung"] == []
    assert result["rounds"] > 1  # the sweep went on after the kill
    assert finished_s < 300
    from fabriccheck import lab

    assert lab.status(ray_lab["name"])["ray"]["raylets"][victim] is False
    _heal(ray_lab["name"])  # `lab faults --clear` starts a fresh raylet on the victim
    assert lab.status(ray_lab["name"])["ray"]["raylets"][victim] is True


def test_stop_never_signals_what_only_looks_like_the_labs(tmp_path: Path) -> None:
    """A group id from a stale state file (a recycled pid: somebody else's process now) and a
    ``tail`` of one of the lab's Ray logs are not the lab's: ``lab down`` leaves them alone."""
    from fabriccheck.lab import raylets

    name = "zz9"
    root = raylets.ray_root(name)
    log = tmp_path / "x.log"
    log.write_text("")
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    tail = subprocess.Popen(["sh", "-c", f"exec tail -f {log} {root}/h0.log 2>/dev/null"],
                            start_new_session=True)
    try:
        entry = {"pgid": other.pid, "log": f"{root}/h0.log"}
        assert raylets.raylet_alive(entry) is False
        assert raylets.lab_ray_pids(name, [other.pid, tail.pid]) == []
        raylets.stop(name, {"head": entry, "raylets": {"h0": {**entry, "pgid": tail.pid}}},
                     grace_s=0.2)
        raylets.stop_group(entry, grace_s=0.2)
        assert other.poll() is None and tail.poll() is None
    finally:
        for p in (other, tail):
            p.kill()
            p.wait()
