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


# ---- mutating a file's text: typos, wrong types, missing and duplicate keys ----------------
#: scalars and small containers of the wrong type for almost any field
WRONG_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 70000), st.floats(allow_nan=True),
              st.text(max_size=6), st.sampled_from(["5s", "22.9", "NCCL_DEBUG=INFO", "8M", "a/b"])),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)  # fmt: skip


def typo(data: st.DataObject, key: str) -> str:
    """A misspelling of ``key``: a letter dropped, doubled, swapped or changed (never ``key``)."""
    i = data.draw(st.integers(0, max(len(key) - 1, 0)))
    edits = [key[:i] + key[i + 1:], key[:i] + key[i:i + 1] * 2 + key[i + 1:],
             key[:i] + key[i + 1:i + 2] + key[i:i + 1] + key[i + 2:], key[:i] + "x" + key[i + 1:]]
    out = [e for e in edits if e and e != key]
    return data.draw(st.sampled_from(out)) if out else key + "x"


def rename_key(data: st.DataObject, doc: Any) -> tuple | None:
    """Misspell one drawn mapping key of ``doc`` in place; returns its new path (or None)."""
    paths = [p for p in doc_paths(doc) if p and isinstance(p[-1], str)]
    if not paths:
        return None
    path = data.draw(st.sampled_from(paths))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    new = typo(data, path[-1])
    if new in parent:
        return None
    parent[new] = parent.pop(path[-1])
    return (*path[:-1], new)


def duplicate_a_key(data: st.DataObject, text: str) -> str:
    """Repeat one ``key: value`` line of block-style YAML right below itself (same mapping)."""
    lines = text.splitlines()
    keyed = [i for i, ln in enumerate(lines) if ":" in ln and not ln.lstrip().startswith("#")]
    i = data.draw(st.sampled_from(keyed))
    line = lines[i]
    stripped = line.lstrip()
    indent = line[: len(line) - len(stripped)]
    if stripped.startswith("- "):
        indent, stripped = indent + "  ", stripped[2:]
    if ":" not in stripped:
        return text
    lines.insert(i + 1, indent + stripped)
    return "\n".join(lines) + "\n"


def mutated_text(data: st.DataObject, good_text: str) -> str:
    """``good_text`` with 1-3 mutations: typos, wrong types, deletions, or one duplicate key."""
    import yaml

    doc = yaml.safe_load(good_text)
    kind = data.draw(st.sampled_from(["mangle", "typo", "duplicate", "mixed"]))
    if kind in ("mangle", "mixed"):
        mangle(data, doc, WRONG_VALUES)
    if kind in ("typo", "mixed"):
        rename_key(data, doc)
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)
    return duplicate_a_key(data, text) if kind == "duplicate" else text


def assert_config_error_names_file_and_field(load: Callable[[str], Any], path: str) -> None:
    """``load(path)`` works, or raises a one-line ConfigError naming the file and a field."""
    try:
        load(path)
    except ConfigError as exc:
        msg = str(exc)
        assert msg.startswith(f"{path}:") and "\n" not in msg, msg
        assert exc.source == path and exc.field, msg
