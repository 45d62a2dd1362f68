"""Exclude-list files: Slurm hostlist and hostfile formats, merge/remove, bad content."""

from __future__ import annotations

import hostlist
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.actions.exclude import (
    guess_format,
    parse_exclude,
    render_exclude,
    update_exclude_file,
)
from fabriccheck.errors import ConfigError


def test_hostlist_file_merges_and_removes(tmp_path):
    path = tmp_path / "exclude.txt"
    path.write_text("node-[001-003],gpu7\n")
    hosts = update_exclude_file(path, add=["node-017"], remove=["node-002"])
    assert hosts == ["gpu7", "node-001", "node-003", "node-017"]
    assert path.read_text() == "gpu7,node-[001,003,017]\n"
    # the text is what `sbatch --exclude=` takes: Slurm's own hostlist syntax
    assert hostlist.expand_hostlist(path.read_text().strip()) == hosts


def test_hostfile_format_is_kept_and_comments_ignored(tmp_path):
    path = tmp_path / "bad.hosts"
    path.write_text("# drained by fabriccheck\nnode-005 slots=8\nnode-009\n")
    assert guess_format(path) == "hostfile"
    assert update_exclude_file(path, add=["node-001"]) == ["node-001", "node-005", "node-009"]
    assert path.read_text() == "node-001\nnode-005\nnode-009\n"
    assert update_exclude_file(path, remove=["node-001", "node-005", "node-009"]) == []
    assert path.read_text() == ""
    assert guess_format(tmp_path / "new-hostfile") == "hostfile"
    assert guess_format(tmp_path / "exclude") == "hostlist"


def test_bad_line_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match=r"x\.txt:line 2: bad host list 'node-\[3-'"):
        parse_exclude("node-1\nnode-[3-\n", source=str(tmp_path / "x.txt"))
    with pytest.raises(ConfigError, match="unknown exclude format"):
        render_exclude(["a"], "yaml")


@settings(max_examples=50, deadline=None)
@given(st.sets(st.from_regex(r"[a-z]{1,3}-?[0-9]{1,3}", fullmatch=True), max_size=30),
       st.sampled_from(["hostlist", "hostfile"]))  # fmt: skip
def test_property_render_then_parse_is_identity(hosts, fmt):
    assert set(parse_exclude(render_exclude(hosts, fmt))) == hosts
