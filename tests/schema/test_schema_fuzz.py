"""Every input file format: a mutated valid file is a one-line ConfigError naming file and field.

Mutations are what a person does to a hand-written file: misspell a key, give a wrong type or
value, delete a key, repeat a key. The property: loading either works (the mutation kept the
file valid) or raises :class:`ConfigError` whose message starts ``FILE:field`` on one line;
never another exception (no traceback reaches a user).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabriccheck.errors import ConfigError
from fabriccheck.faults import load_faults
from fabriccheck.inventory.file import load_inventory
from fabriccheck.specs import load_signals, load_spec
from fabriccheck.topology import load_topology
from tests.yamlfuzz import assert_config_error_names_file_and_field, mutated_text, rename_key

TOPOLOGY = """\
name: t
fabric: roce
gpus_per_node: 0
nodes:
  - {name: h1, nics: [{name: eth0, rail: 0, gbps: 1}]}
  - {name: h2, gpus: 0, nics: [eth0]}
switches:
  - {name: leaf-1, tier: leaf}
  - {name: spine-1, tier: spine}
links:
  - {a: h1/eth0, b: leaf-1, gbps: 1}
  - {a: h2/eth0, b: leaf-1, gbps: 1, count: 1}
  - {a: leaf-1, b: spine-1, gbps: 1}
"""
GENERATED = """\
name: g
fabric: infiniband
generator: {kind: fat-tree, tiers: 3, nodes: 16, gpus_per_node: 2, nodes_per_leaf: 2,
            leaves_per_pod: 2, spines_per_pod: 2, cores: 4, nic_gbps: 200, core_gbps: 400}
"""
FAULTS = """\
noise: {jitter: 0.03, glitch_rate: 0.01}
faults:
  - {kind: nic_degraded, nic: node-017/mlx5_3, factor: 0.25}
  - {kind: node_slow, node: node-040, factor: 0.5}
  - {kind: link_flapping, link: [leaf-1-2, spine-3], probability: 0.5}
"""
SIGNALS = """\
signals:
  - {name: port-rate, level: 1, per: nic, command: "cat /sys/class/infiniband/{nic}/ports/1/rate",
     value: '(?P<value>\\d+) Gb/sec', unit: Gb/s, pass: {min: 400}, timeout_s: 10}
  - {name: peer-ping, level: 2, command: "ping -c1 {peer_addr}", parser: ping, pass: {max: 5}}
"""
SPEC = """\
name: s
sku: test
fabric: infiniband
gpus_per_node: 8
nic_gbps: 400
timeout_s: 60
probes:
  nccl:
    collective: all_reduce
    groups:
      2: {size_bytes: 8G, expected: 370, warn: 340, floor: 315}
  ib_write_lat:
    unit: us
    groups:
      2: {size_bytes: 2, expected: 1.6, warn: 2.0, floor: 2.5}
""" + SIGNALS
INVENTORY = """\
name: lab-4
ssh: {user: root, port: 2222, key: id, known_hosts: kh, connect_timeout_s: 2}
python: python3
env: {NCCL_DEBUG: INFO}
probes: {gid_index: 3, launcher: mpirun, nccl_env: {NCCL_DEBUG: WARN}, iperf3_duration_s: 2}
hosts:
  host1:
    address: 10.220.0.2
    nics: {eth0: {ip: 192.168.100.1, rail: 0}, eth1: {ip: 192.168.101.1, rail: 1}}
  host2: {address: 10.220.0.3, port: 22, user: admin, nics: {eth0: 192.168.100.2}}
"""

FIXTURE = [HealthCheck.function_scoped_fixture]
FORMATS = {
    "topology": (TOPOLOGY, load_topology),
    "generated": (GENERATED, load_topology),
    "faults": (FAULTS, load_faults),
    "spec": (SPEC, load_spec),
    "signals": (SIGNALS, load_signals),
    "inventory": (INVENTORY, load_inventory),
}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_valid_files_load(tmp_path: Path, fmt: str) -> None:
    text, load = FORMATS[fmt]
    path = tmp_path / f"{fmt}.yaml"
    path.write_text(text)
    assert load(str(path))


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@settings(max_examples=60, deadline=None, suppress_health_check=FIXTURE)
@given(data=st.data())
def test_mutated_file_is_config_error_naming_file_and_field(tmp_path: Path, fmt, data) -> None:
    text, load = FORMATS[fmt]
    path = tmp_path / f"{fmt}.yaml"
    path.write_text(mutated_text(data, text))
    assert_config_error_names_file_and_field(load, str(path))


#: keys whose name is the user's own (host, NIC and probe names, group sizes): renaming is fine
_FREE_KEYS = {"hosts", "nics", "env", "nccl_env", "groups"}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURE)
@given(data=st.data())
def test_a_misspelt_key_is_refused_with_a_hint(tmp_path: Path, fmt, data) -> None:
    import yaml

    text, load = FORMATS[fmt]
    doc = yaml.safe_load(text)
    new_path = rename_key(data, doc)
    if new_path is None or _FREE_KEYS & {k for k in new_path[:-1] if isinstance(k, str)}:
        return
    path = tmp_path / f"{fmt}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ConfigError) as info:
        load(str(path))
    assert info.value.field.endswith(str(new_path[-1])), str(info.value)
    assert "unknown field" in str(info.value) and "allowed:" in (info.value.hint or "")


#: the CLI command that reads each format first (exit 2 before any test runs)
CLI = {
    "topology": lambda p: ["topology", "validate", p],
    "faults": lambda p: ["sweep", "--topology", "roce-rail-64", "--faults", p, "--json"],
    "spec": lambda p: ["gate", "host[1-4]", "--topology", "lab-4", "--spec", p, "--json"],
}


@pytest.mark.parametrize("fmt", sorted(CLI))
@settings(max_examples=15, deadline=None, suppress_health_check=FIXTURE)
@given(data=st.data())
def test_cli_mutated_file_is_exit_2_naming_file_and_field(tmp_path: Path, capsys, fmt, data):
    """Through the real CLI: exit 2 and an ``error: FILE:field: ...`` line; never a traceback."""
    from fabriccheck.cli.main import main

    path = tmp_path / f"{fmt}.yaml"
    path.write_text(mutated_text(data, FORMATS[fmt][0]))
    capsys.readouterr()
    code = main(CLI[fmt](str(path)))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code == 2:
        assert err.startswith(f"error: {path}:") and f"{path}: " not in err.splitlines()[0], err
    else:  # the mutation kept the file valid: the command ran
        assert code in (0, 1), err


def test_an_error_naming_an_emoji_code_is_printed_as_text(tmp_path: Path, capsys):
    """Hypothesis found it: ``faults.yaml:nose: unknown field`` was printed by rich as
    ``faults.yaml👃 unknown field`` (``:nose:`` is an emoji code). Errors are text."""
    from fabriccheck.cli.main import main

    path = tmp_path / "faults.yaml"
    path.write_text("nose: {jitter: 0.03}\nfaults: []\n")
    capsys.readouterr()
    code = main(CLI["faults"](str(path)))
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: {path}:nose: unknown field 'nose'"), err
