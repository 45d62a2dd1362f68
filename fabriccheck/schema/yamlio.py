"""The strict YAML reader: safe tags only, duplicate keys refused with the key and both lines."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from fabriccheck.errors import ConfigError

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StrictLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """A safe YAML loader that refuses duplicate keys (PyYAML silently keeps the last one)."""


def _construct_mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    explicit = sum(1 for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge")
    loader.flatten_mapping(node)  # merged (<<: *anchor) pairs come first; they may be overridden
    merged = len(node.value) - explicit
    out: dict = {}
    lines: dict = {}
    for i, (key_node, value_node) in enumerate(node.value):
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError(
                None, None, f"a key must be a scalar, got {type(key).__name__}",
                key_node.start_mark,
            )
        if key in lines and i >= merged:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {lines[key]})",
                key_node.start_mark,
            )
        if i >= merged:
            lines[key] = key_node.start_mark.line + 1
        out[key] = loader.construct_object(value_node, deep=deep)
    return out


StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping  # type: ignore[arg-type]
)


def read_yaml(path: str | Path, *, what: str = "file") -> Any:
    """Parse a YAML file; a missing file or a syntax error is a one-line :class:`ConfigError`.

    Parameters
    ----------
    path
        The file to read.
    what
        What the file is, for the "cannot read" message (``faults file``, ``inventory``).

    Returns
    -------
    The parsed document (any YAML value).
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        raise ConfigError(f"cannot read {what}: {reason}", source=source,
                          hint="check the path") from exc  # fmt: skip
    return parse_yaml(text, source)


def parse_yaml(text: str, source: str) -> Any:
    """Parse YAML text; a syntax error or a duplicate key names its line and column.

    A key given by a merge (``<<: *defaults``) may be overridden; a key written twice may not.

    >>> parse_yaml("d: &d {u: root, p: 22}\\ns: {<<: *d, u: admin}\\n", "f.yaml")["s"]
    {'u': 'admin', 'p': 22}
    >>> parse_yaml("a: 1\\nb: 2\\na: 3\\n", "f.yaml")
    Traceback (most recent call last):
    ...
    fabriccheck.errors.ConfigError: f.yaml:line 3: malformed YAML: duplicate key 'a' (first at \
line 1) at column 1 (fix the YAML syntax)
    """
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f"line {mark.line + 1}" if mark is not None else None
        raise ConfigError(
            f"malformed YAML: {problem}" + (f" at column {mark.column + 1}" if mark else ""),
            source=source,
            field=where,
            hint="fix the YAML syntax",
        ) from exc
    except RecursionError as exc:  # pathologically nested flow collections
        raise ConfigError("malformed YAML: nested too deeply", source=source) from exc
