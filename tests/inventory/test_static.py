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


def test_a_bad_hostlist_in_a_node_file_names_the_file_and_line(tmp_path):
    p = tmp_path / "nodes.txt"
    p.write_text("node-[001-003]\nnode-[009-007]\n")
    with pytest.raises(ConfigError) as info:
        load_node_file(p)
    assert str(info.value).startswith(f"{p}:line 2: bad hostlist 'node-[009-007]'")
    assert "--nodes" not in str(info.value)
    p.write_text("node-[001-003\n")  # unbalanced brackets: the file again, not --nodes
    with pytest.raises(ConfigError, match=f"^{p}:line 1: bad hostlist"):
        load_node_file(p)


def test_one_hostlist_implementation():
    """inventory/static.py has no hand-written hostlist splitting left (issue 18)."""
    import inspect

    from fabriccheck.inventory import static

    assert "_split_top_level" not in inspect.getsource(static)
    assert expand_nodes("n[1-2]x[1-2] m1") == ["n1x1", "n1x2", "n2x1", "n2x2", "m1"]


def test_doctests():
    import doctest

    from fabriccheck.inventory import static

    assert doctest.testmod(static).failed == 0


def test_cli_node_file_error_names_the_file(tmp_path, capsys):
    """``--node-file`` with a bad hostlist: exit 2, the message names the file (not --nodes)."""
    from fabriccheck.cli.main import main

    p = tmp_path / "nodes.txt"
    p.write_text("host[1-2\n")
    code = main(["gate", "--topology", "lab-4", "--node-file", str(p), "--json"])
    err = capsys.readouterr().err
    assert code == 2 and f"{p}:line 1: bad hostlist" in err and "--nodes" not in err, err
