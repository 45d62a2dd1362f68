"""Reading YAML config files field by field, with one-line errors naming file, field and problem."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from fabriccheck.errors import ConfigError

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """A safe YAML loader that refuses duplicate keys (PyYAML silently keeps the last one)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    out: dict = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in out:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        out[key] = loader.construct_object(value_node, deep=deep)
    return out


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping  # type: ignore[arg-type]
)


def read_yaml(path: str | Path) -> Any:
    """Parse a YAML file; a missing file or a syntax error is a one-line :class:`ConfigError`.

    Parameters
    ----------
    path
        The file to read.

    Returns
    -------
    The parsed document (any YAML value).
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read file: {exc.strerror or exc}", source=source, hint="check the path"
        ) from exc
    return parse_yaml(text, source)


def parse_yaml(text: str, source: str) -> Any:
    """Parse YAML text; a syntax error names its line and column."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
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


def join(prefix: str, key: str | int) -> str:
    """A field path: ``links`` + 3 -> ``links[3]``; ``links[3]`` + ``b`` -> ``links[3].b``."""
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    if not re.fullmatch(r"[\w.\-\[\]]+", key):
        key = repr(key)  # a key with spaces or newlines stays on one line
    return f"{prefix}.{key}" if prefix else key


class Fields:
    """Typed access to one mapping of a config file; every problem raises a ConfigError.

    ``Fields(data, source, "links[3]", allowed=...)`` rejects keys not in ``allowed``.
    """

    def __init__(
        self, data: Any, source: str, path: str, *, allowed: tuple[str, ...] | None = None
    ) -> None:
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"expected a mapping, got {type_name(data)}", source=source, field=path or None
            )
        self.data = data
        self.source = source
        self.path = path
        if allowed is not None:
            for key in data:
                if key not in allowed:
                    raise self.error(
                        f"unknown field {key!r}",
                        key if isinstance(key, int) else str(key),
                        hint="allowed: " + ", ".join(allowed),
                    )

    def error(self, message: str, key: str | int | None = None, hint: str | None = None):
        field = join(self.path, key) if key is not None else (self.path or None)
        return ConfigError(message, source=self.source, field=field, hint=hint)

    def has(self, key: str) -> bool:
        return key in self.data and self.data[key] is not None

    def require(self, key: str) -> Any:
        if key not in self.data or self.data[key] is None:
            raise self.error("missing required field", key)
        return self.data[key]

    def str(self, key: str, default: str | None = None, *, choices: tuple[str, ...] = ()) -> str:
        value = self.require(key) if default is None else self.data.get(key, default)
        if value is None:
            value = default
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"expected a non-empty string, got {type_name(value)}", key)
        if choices and value not in choices:
            raise self.error(f"unknown value {value!r}", key, hint="one of: " + ", ".join(choices))
        return value

    def int(self, key: str, default: int | None = None, *, minimum: int | None = 1) -> int:
        value = self.require(key) if default is None else self.data.get(key, default)
        if value is None:
            value = default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"expected an integer, got {type_name(value)}", key)
        if minimum is not None and value < minimum:
            raise self.error(f"must be >= {minimum}, got {value}", key)
        return value

    def number(self, key: str, default: float | None = None, *, positive: bool = True) -> float:
        value = self.require(key) if default is None else self.data.get(key, default)
        if value is None:
            value = default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(f"expected a number, got {type_name(value)}", key)
        if positive and not value > 0:
            raise self.error(f"must be positive, got {value}", key)
        return float(value)

    def list(self, key: str, default: list | None = None) -> list:
        value = self.require(key) if default is None else self.data.get(key, default)
        if value is None:
            value = default
        if not isinstance(value, list):
            raise self.error(f"expected a list, got {type_name(value)}", key)
        return value


def type_name(value: Any) -> str:
    """A human name for a YAML value's type."""
    if value is None:
        return "nothing"
    return {
        dict: "a mapping",
        list: "a list",
        str: f"the string {str(value)[:40]!r}",
        bool: f"the boolean {value}",
        int: f"the integer {value}",
        float: f"the number {value}",
    }.get(type(value), type(value).__name__)
