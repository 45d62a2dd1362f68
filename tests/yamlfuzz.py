"""Fuzzing a loaded YAML document: delete or replace a few of its keys (hypothesis helpers).

Used by the "a mangled file is a one-line ConfigError, never a traceback" property tests of
every file format (topology, test spec).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import strategies as st

from fabriccheck.errors import ConfigError


def doc_paths(doc: Any, prefix: tuple = (), *, into_lists: bool = True) -> Iterator[tuple]:
    """Every key path of ``doc`` (mappings, and list items when ``into_lists``), root first."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from doc_paths(v, (*prefix, k), into_lists=into_lists)
    elif into_lists and isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from doc_paths(v, (*prefix, i), into_lists=into_lists)


def mangle(data: st.DataObject, doc: Any, values: st.SearchStrategy, *,
           into_lists: bool = True) -> None:  # fmt: skip
    """Delete or replace (with a drawn value) 1-3 drawn paths of ``doc``, in place."""
    paths = [p for p in doc_paths(doc, into_lists=into_lists) if p]
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        parent = doc
        try:  # an earlier change may have replaced a parent: that path is gone, skip it
            for key in path[:-1]:
                parent = parent[key]
            if data.draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = data.draw(values)
        except (KeyError, IndexError, TypeError, AttributeError):
            continue


def assert_one_line_config_error_or_ok(load: Callable[..., Any], doc: Any) -> None:
    """``load(doc, source="fuzz.yaml")`` works, or raises a one-line ConfigError naming the file."""
    try:
        load(doc, source="fuzz.yaml")
    except ConfigError as exc:
        assert str(exc).startswith("fuzz.yaml") and "\n" not in str(exc)
