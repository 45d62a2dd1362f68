"""Reading YAML config files field by field, with one-line errors naming file, field and problem."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fabriccheck.errors import ConfigError
from fabriccheck.schema.yamlio import parse_yaml, read_yaml

__all__ = ["Fields", "join", "parse_yaml", "read_yaml", "type_name"]


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
