"""Signal commands: placeholders filled, every value quoted (no injection through names)."""

from __future__ import annotations

import subprocess

from fabriccheck.models import Test
from fabriccheck.probes.commands import build_launch
from fabriccheck.probes.signal_command import render_signal, signal_values


def _test(nodes, nic=None, command="echo {host}"):
    params = {"signal": "s", "command": command, "gpus_per_node": 8}
    if nic:
        params["nic"] = nic
    return Test("t1", "signal", tuple(nodes), params=params)


def test_every_placeholder_has_its_value():
    t = _test(["n1", "n2"], nic="mlx5_3")
    v = signal_values(t, {"n2/mlx5_3": "10.4.0.2", "n2/mlx5_0": "10.1.0.2"}, 8)
    line = render_signal("x {host} {hosts} {peer} {peer_addr} {nic} {peer_nic} {gpus} {np}", v)
    assert line == "x n1 n1,n2 n2 10.4.0.2 mlx5_3 mlx5_3 8 16"


def test_hostile_names_stay_one_word_in_a_real_shell(tmp_path):
    marker = tmp_path / "pwned"
    host = f"x; touch {marker}"
    nic = f"$(touch {marker})`touch {marker}`"
    t = _test([host], nic=nic, command="printf '%s|' {host} {nic} {hosts}")
    launch = build_launch(t, {})
    step = launch.steps[0]
    assert step.host == host and step.argv[:2] == ("sh", "-c")
    out = subprocess.run(list(step.argv), capture_output=True, text=True, timeout=10)
    assert out.returncode == 0
    assert out.stdout == f"{host}|{nic}|{host}|"
    assert not marker.exists()


def test_build_launch_renders_a_pasteable_command():
    t = _test(["node-001"], nic="mlx5_0",
              command="cat /sys/class/infiniband/{nic}/ports/1/rate")
    assert build_launch(t, {}).rendered == (
        "node-001: sh -c 'cat /sys/class/infiniband/mlx5_0/ports/1/rate'",)
