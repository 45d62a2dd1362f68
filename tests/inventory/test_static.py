"""Static inventory: hostlist expressions and node files."""

from __future__ import annotations

import pytest

from fabriccheck.errors import ConfigError
from fabriccheck.inventory.static import compress_nodes, expand_nodes, load_node_file


def test_hostlist_ranges_and_lists():
    assert expand_nodes("node[001-003,020]") == ["node001", "node002", "node003", "node020"]
    assert expand_nodes("node-[001-002], node-010 node-001") == [
        "node-001", "node-002", "node-010"]
    assert expand_nodes("  ") == []


def test_bad_hostlist_is_a_config_error():
    with pytest.raises(ConfigError, match="--nodes"):
        expand_nodes("node[003-001")


def test_node_file(tmp_path):
    p = tmp_path / "nodes.txt"
    p.write_text("# idle nodes\nnode-[001-003]\n- node-007\n\nnode-002  # dup\n")
    assert load_node_file(p) == ["node-001", "node-002", "node-003", "node-007"]
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(ConfigError, match="no nodes"):
        load_node_file(tmp_path / "empty.txt")
    with pytest.raises(ConfigError, match="cannot read"):
        load_node_file(tmp_path / "missing.txt")


def test_compress_roundtrip():
    names = [f"node-{i:03d}" for i in (1, 2, 3, 9)]
    assert expand_nodes(compress_nodes(names)) == names
