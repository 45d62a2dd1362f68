"""A signals file in the contract format over real SSH on the namespace lab: the one host whose
value fails is drained, nobody else.

The signal reads each NIC's MTU with ``ip -o link show dev {nic}`` (netlink: the host's own
network namespace, as an SSH session on it sees it); the test lowers host3's eth0 MTU to 1400
inside its namespace. The lab (lab-4) is this module's own, named ``sigl``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.lab.labfixtures import lab_skip_reason

pytestmark = pytest.mark.lab

SIGNALS = """signals:
  - name: nic-mtu
    level: 1
    per: nic
    command: "ip -o link show dev {nic}"
    value: 'mtu (?P<value>\\d+)'
    unit: bytes
    pass: {min: 1500}
    timeout_s: 10
  - name: hostname-len
    level: 1
    per: node
    command: "hostname | tr -d '\\\\n' | wc -c"
    value: '(?P<value>\\d+)'
    unit: chars
    pass: {min: 5, max: 5}
    timeout_s: 10
"""


@pytest.fixture(scope="module")
def sigl(tmp_path_factory):
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    from fabriccheck import lab

    name = f"s{os.getpid() % 100000}"  # unique per run (xdist worker): runs at once never collide
    info = lab.up("lab-4", name=name, directory=tmp_path_factory.mktemp("sigl"))
    try:
        yield info
    finally:
        lab.down(name)


@pytest.mark.slow
def test_signal_file_over_ssh_drains_exactly_the_failing_host(sigl, tmp_path):
    ns = dict(sigl.netns)["host3"]
    subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "dev", "eth0", "mtu", "1400"],
                   check=True, timeout=30)
    path = tmp_path / "signals.yaml"
    path.write_text(SIGNALS)
    proc = subprocess.run(
        [sys.executable, "-m", "fabriccheck", "sweep", "--executor", "ssh", "--topology", "lab-4",
         "--inventory", str(sigl.inventory), "--probe", "iperf3", "--signals", str(path),
         "--no-history", "--json"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["drain"] == ["host3"], result
    assert result["bad_nics"] == ["host3/eth0"]
    mtu = result["signals"]["nic-mtu"]["values"]
    assert mtu["host3/eth0"]["value"] == 1400 and mtu["host3/eth0"]["status"] == "fail"
    assert {t: v["value"] for t, v in mtu.items() if t != "host3/eth0"} == {
        "host1/eth0": 1500, "host2/eth0": 1500, "host4/eth0": 1500}
    # a per-node signal over real SSH: each host's own hostname ("hostN": 5 characters)
    names = result["signals"]["hostname-len"]["values"]
    assert {t: v["status"] for t, v in names.items()} == {f"host{i}": "pass" for i in range(1, 5)}
    # the lab's hosts have no GPUs and no RDMA ports: the preflight says why it was skipped
    assert any("no GPUs" in s for s in result["preflight_skipped"])
    bad = [v for v in result["verdicts"] if v["name"] == "host3/eth0"]
    assert "signal nic-mtu: 1400 bytes fails >= 1500 bytes" in bad[0]["reason"]
