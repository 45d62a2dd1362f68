"""The strict YAML reader: duplicate keys refused with both lines, merges allowed."""

from __future__ import annotations

import doctest

import pytest

from fabriccheck.errors import ConfigError
from fabriccheck.schema import base, yamlio
from fabriccheck.schema.yamlio import parse_yaml, read_yaml


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("a: 1\nb: 2\na: 3\n", "line 3", "duplicate key 'a' (first at line 1)"),
        ("hosts:\n  h1: {address: x}\n  h1: {address: y}\n", "line 3", "duplicate key 'h1'"),
        ("faults:\n  - {kind: nic_down, kind: node_hang}\n", "line 2", "duplicate key 'kind'"),
        ("groups:\n  2: {a: 1}\n  2: {a: 2}\n", "line 3", "duplicate key 2"),
        ("? [a, b]\n: 1\n", "line 1", "a key must be a scalar"),
        ("a: [1, 2\n", "line", "malformed YAML"),
        ("a: !!python/object:os.system {}\n", "line 1", "malformed YAML"),
    ],
)
def test_bad_yaml_is_one_line_naming_the_line(text, where, words):
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "f.yaml")
    msg = str(info.value)
    assert msg.startswith(f"f.yaml:{where}") and words in msg and "\n" not in msg, msg


def test_merge_keys_may_be_overridden():
    doc = parse_yaml("d: &d {user: root, port: 22}\nssh: {<<: *d, port: 2222}\n", "f.yaml")
    assert doc["ssh"] == {"user": "root", "port": 2222}


def test_unreadable_file_names_what_it_is(tmp_path):
    with pytest.raises(ConfigError, match="cannot read inventory"):
        read_yaml(tmp_path / "nope.yaml", what="inventory")
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="cannot read file"):
        read_yaml(tmp_path / "bin.yaml")


def test_doctests():
    assert doctest.testmod(yamlio).failed == 0
    assert doctest.testmod(base).failed == 0
