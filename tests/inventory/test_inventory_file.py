"""Inventory files: the YAML format, path resolution, round trip, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fabriccheck.errors import ConfigError
from fabriccheck.inventory.file import inventory_from_dict, inventory_to_dict, load_inventory

GOOD = """
name: lab-4
ssh: {user: root, port: 2222, key: keys/id_ed25519, known_hosts: /etc/kh, connect_timeout_s: 2}
python: /opt/venv/bin/python
env: {NCCL_DEBUG: INFO}
probes: {gid_index: 3, nccl_tests_dir: /opt/nccl-tests/build}
hosts:
  host1:
    address: 10.220.0.2
    nics: {eth0: {ip: 192.168.100.1, rail: 0}, eth1: {ip: 192.168.101.1, rail: 1}}
  host2:
    address: 10.220.0.3
    port: 22
    user: admin
    nics: {eth0: 192.168.100.2}
"""


def test_load_resolves_paths_and_defaults(tmp_path: Path) -> None:
    f = tmp_path / "inv.yaml"
    f.write_text(GOOD)
    inv = load_inventory(f)
    assert inv.key_path == tmp_path / "keys/id_ed25519"  # relative to the file
    assert inv.known_hosts_path == Path("/etc/kh")
    assert inv.connect_timeout_s == 2 and inv.python == "/opt/venv/bin/python"
    assert inv.env == {"NCCL_DEBUG": "INFO"}
    assert inv.probe_options == {"gid_index": 3, "nccl_tests_dir": "/opt/nccl-tests/build"}
    h1, h2 = inv.host("host1"), inv.host("host2")
    assert (h1.port, h1.user) == (2222, "root")  # ssh defaults apply
    assert (h2.port, h2.user) == (22, "admin")  # per-host overrides win
    assert h1.nic("eth1").rail == 1 and h2.nic("eth0").rail == 0
    assert inv.nic_ips() == {"host1/eth0": "192.168.100.1", "host1/eth1": "192.168.101.1",
                             "host2/eth0": "192.168.100.2"}
    assert inv.nodes() == ["host1", "host2"]


def test_round_trip(tmp_path: Path) -> None:
    f = tmp_path / "inv.yaml"
    f.write_text(GOOD)
    inv = load_inventory(f)
    again = inventory_from_dict(yaml.safe_load(yaml.safe_dump(inventory_to_dict(inv))),
                                base=tmp_path)
    assert again.hosts == inv.hosts and again.key_path == inv.key_path
    assert again.probe_options == inv.probe_options


def test_probe_settings_reach_the_commands(tmp_path: Path) -> None:
    from fabriccheck.executors.ssh import SSHExecutor
    from fabriccheck.models import Flow, Test

    f = tmp_path / "inv.yaml"
    f.write_text(GOOD.replace("eth0: {ip: 192.168.100.1, rail: 0}", "mlx5_0: {ip: 10.9.0.1}")
                 .replace("eth0: 192.168.100.2", "mlx5_0: 10.9.0.2"))
    ex = SSHExecutor(f)
    t = Test("t", "ib_write_bw", ("host1", "host2"), (Flow("host1/mlx5_0", "host2/mlx5_0"),))
    server, client = ex.launch_for(t, 3).steps
    assert client.argv[client.argv.index("-x") + 1] == "3"  # gid_index from probes:
    assert server.wait_port == ex.port_base + 3
    assert client.env == {"NCCL_DEBUG": "INFO"}  # env: from the inventory
    ex.close()


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("hosts: {}", "hosts"),
        ("hosts: {h: {port: 22}}", "hosts.h.address"),
        ("hosts: {h: {address: 1.2.3.4, port: x}}", "hosts.h.port"),
        ("hosts: {h: {address: 1.2.3.4, nics: [eth0]}}", "hosts.h.nics"),
        ("hosts: {h: {address: 1.2.3.4, nics: {eth0: {rail: 0}}}}", "hosts.h.nics.eth0.ip"),
        ("ssh: [1]\nhosts: {h: 1.2.3.4}", "ssh"),
        ("probes: {gpu: 1}\nhosts: {h: 1.2.3.4}", "probes.gpu"),
        ("[1, 2]", None),
        ("hosts: [", None),
    ],
)
def test_bad_files_give_one_line_naming_file_and_field(tmp_path: Path, text: str, field) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_inventory(f)
    msg = str(info.value)
    assert "\n" not in msg and str(f) in msg
    if field:
        assert field in msg


def test_missing_file_and_unknown_host(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read inventory"):
        load_inventory(tmp_path / "nope.yaml")
    inv = inventory_from_dict({"hosts": {"a": "10.0.0.1"}})
    with pytest.raises(ConfigError, match="'b' is not in the inventory"):
        inv.host("b")


def _edit(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


# the mistakes issue 18 found accepted: each is one line naming the file, the field and the fix
MISTAKES = [
    (_edit("user: root,", "usr: root,"), "ssh.usr", "did you mean 'user'"),
    (_edit("key: keys", "kee: keys"), "ssh.kee", "did you mean 'key'"),
    (_edit("address: 10.220.0.2", "adress: 10.220.0.2"), "hosts.host1.adress",
     "did you mean 'address'"),
    (_edit("rail: 1}", "rial: 1}"), "hosts.host1.nics.eth1.rial", "did you mean 'rail'"),
    (_edit("port: 2222", "port: true"), "ssh.port", "expected an integer, got the boolean True"),
    (_edit("port: 2222", "port: 22.9"), "ssh.port", "expected an integer, got the number 22.9"),
    (_edit("port: 22\n", "port: -22\n"), "hosts.host2.port", "must be >= 1"),
    (_edit("port: 2222", "port: 70000"), "ssh.port", "must be <= 65535"),
    (_edit("connect_timeout_s: 2", "connect_timeout_s: -2"), "ssh.connect_timeout_s",
     "must be positive"),
    (_edit("rail: 1}", "rail: 0}"), "hosts.host1.nics.eth1.rail", "two NICs on rail 0"),
    (_edit("gid_index: 3", "gid_index: 3, iperf3_duration_s: \"5s\""),
     "probes.iperf3_duration_s", "expected a number, got the string '5s'"),
    (_edit("gid_index: 3", "gid_index: 3, nccl_env: \"NCCL_DEBUG=INFO\""), "probes.nccl_env",
     "expected a mapping NAME: value"),
    (_edit("gid_index: 3", "gid_index: -1"), "probes.gid_index", "must be >= 0"),
    (_edit("gid_index: 3", "launcher: slurm"), "probes.launcher", "unknown value 'slurm'"),
    (_edit("ip: 192.168.100.1", "ip: 192.168.100"), "hosts.host1.nics.eth0.ip",
     "not an IP address"),
    (GOOD + "ssh: {user: admin}\n", "line 16", "duplicate key 'ssh' (first at line 3)"),
    (_edit("  host2:\n", "  host1:\n"), "line 11", "duplicate key 'host1' (first at line 8)"),
]


@pytest.mark.parametrize(("text", "field", "words"), MISTAKES)
def test_every_mistake_is_one_line_naming_file_and_field(tmp_path: Path, text, field, words):
    f = tmp_path / "inv.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_inventory(f)
    msg = str(info.value)
    assert msg.startswith(f"{f}:{field}: ") and words in msg and "\n" not in msg, msg


def test_typo_hint_names_the_right_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        inventory_from_dict({"ssh": {"usr": "root"}, "hosts": {"h": "10.0.0.1"}}, source="i.yaml")
    assert info.value.hint.startswith("did you mean 'user'?")


def test_numbers_in_env_are_text_and_probe_settings_typed(tmp_path: Path) -> None:
    inv = inventory_from_dict({
        "env": {"NCCL_IB_GID_INDEX": 3}, "hosts": {"h": "10.0.0.1"},
        "probes": {"nccl_env": {"NCCL_DEBUG": "INFO"}, "iperf3_duration_s": 2},
    })  # fmt: skip
    assert inv.env == {"NCCL_IB_GID_INDEX": "3"}
    assert inv.probe_options == {"nccl_env": {"NCCL_DEBUG": "INFO"}, "iperf3_duration_s": 2.0}


def test_probe_settings_match_command_options() -> None:
    """Every CommandOptions field the file may set has a typed model field, and no more."""
    from dataclasses import fields

    from fabriccheck.probes.commands import CommandOptions
    from fabriccheck.schema.inventory import ProbeSettings

    settable = {f.name for f in fields(CommandOptions)} - {"python", "env"}
    assert set(ProbeSettings.model_fields) == settable
    defaults = CommandOptions()
    for name in settable:
        assert ProbeSettings().model_dump()[name] == getattr(defaults, name), name


def test_cli_bad_inventory_is_exit_2_before_anything_connects(tmp_path: Path, capsys) -> None:
    """Through the real CLI: the inventory is checked at the door, exit 2, one line."""
    from fabriccheck.cli.main import main

    f = tmp_path / "inv.yaml"
    f.write_text(_edit("user: root,", "usr: root,"))
    code = main(["gate", "host[1-4]", "--topology", "lab-4", "--executor", "ssh",
                 "--inventory", str(f), "--json"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"error: {f}:ssh.usr: unknown field 'usr'") and "Traceback" not in err
    assert "did you mean 'user'?" in err
