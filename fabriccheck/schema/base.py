"""The strict model base and the one place pydantic errors become one-line ConfigErrors."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Sequence
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from fabriccheck.errors import ConfigError
from fabriccheck.schema.fields import join, type_name

M = TypeVar("M", bound=BaseModel)

#: a non-empty string without surrounding blanks' worth of nothing
Name = Annotated[str, Field(min_length=1, pattern=r"\S")]
#: a TCP port
Port = Annotated[int, Field(ge=1, le=65535)]
#: a positive number (int or float in the file)
Positive = Annotated[float, Field(gt=0)]


class InputProblem(ValueError):
    """A validator's finding: ``message`` verbatim, ``hint``, ``at`` the path below the model."""

    def __init__(self, message: str, hint: str | None = None, at: Sequence[str | int] = ()):
        super().__init__(message)
        self.message, self.hint, self.at = message, hint, tuple(at)


def fail(message: str, *, hint: str | None = None, at: Sequence[str | int] = ()) -> InputProblem:
    """An error for a validator to raise (pydantic carries it to :func:`describe`).

    >>> fail("two NICs on rail 0", at=("nics", "eth1", "rail")).at
    ('nics', 'eth1', 'rail')
    """
    return InputProblem(message, hint, at)


def suggest(key: object, allowed: Sequence[str]) -> str:
    """The hint for an unknown key: the closest allowed name, then all of them.

    >>> suggest("usr", ["user", "port", "key"])
    "did you mean 'user'? allowed: user, port, key"
    """
    close = difflib.get_close_matches(str(key), list(allowed), n=1, cutoff=0.6)
    listed = "allowed: " + ", ".join(allowed)
    return f"did you mean {close[0]!r}? {listed}" if close else listed


class StrictModel(BaseModel):
    """Unknown keys refused with a "did you mean" hint; no type coercion (``port: true`` fails)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @classmethod
    def input_names(cls) -> list[str]:
        """The keys a file may use for this model (aliases where set)."""
        return [f.alias or name for name, f in cls.model_fields.items()]

    @model_validator(mode="before")
    @classmethod
    def _refuse_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            allowed = cls.input_names()
            for key in data:
                if key not in allowed:
                    raise fail(f"unknown field {key!r}", hint=suggest(key, allowed), at=(str(key),))
        return data


def check(model: type[M], data: Any, *, source: str, prefix: str = "") -> M:
    """Validate ``data`` (a parsed YAML document) against ``model``.

    Parameters
    ----------
    model
        A :class:`StrictModel` subclass.
    data
        The parsed document.
    source
        The file name, first in the error message.
    prefix
        The field path of ``data`` inside its file (``generator``), "" for the whole file.

    Raises
    ------
    ConfigError
        ``FILE:field.path: problem`` for the first problem found, with a hint.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        raise to_config_error(errors[0], data, source=source, prefix=prefix) from exc


@functools.cache
def _adapter(annotation: Any) -> TypeAdapter:
    return TypeAdapter(annotation)


def check_type(annotation: Any, data: Any, *, source: str, prefix: str = "") -> Any:
    """:func:`check` for a type that is not a model (a union of models, a list of them)."""
    try:
        return _adapter(annotation).validate_python(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        raise to_config_error(errors[0], data, source=source, prefix=prefix) from exc


def to_config_error(err: Any, data: Any, *, source: str, prefix: str = "") -> ConfigError:
    """One pydantic error dict -> a :class:`ConfigError` naming the file and field path."""
    message, hint, extra = describe(err)
    key_error = "[key]" in err["loc"]
    path = field_path(data, [x for x in err["loc"] if x != "[key]"], missing=err["type"])
    for part in extra:
        path = join(path, part)
    if prefix:
        path = f"{prefix}.{path}" if path and not path.startswith("[") else prefix + path
    if key_error:
        message = f"bad key: {message}"
        hint = hint if isinstance((err.get("ctx") or {}).get("error"), InputProblem) else None
    return ConfigError(message, source=source, field=path or None, hint=hint)


def field_path(data: Any, loc: Sequence[Any], *, missing: str = "") -> str:
    """The file's field path of a pydantic ``loc``, walking the document alongside it.

    Pydantic adds union tags to locations (``faults.0.nic_down.nic``); an element that is not a
    key of the document at that point is such a tag and is dropped, except the last element of
    a ``missing`` error (the missing key itself). Our own callable discriminators' tags are
    written ``<name>`` and always dropped.
    """
    path, cur = "", data
    for i, el in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(el, str) and el.startswith("<") and el.endswith(">"):
            continue  # a tag of our callable discriminators
        if isinstance(cur, dict) and _has_key(cur, el):
            path, cur = join(path, str(el)), cur[el]
        elif isinstance(cur, list) and isinstance(el, int) and 0 <= el < len(cur):
            path, cur = join(path, el), cur[el]
        elif isinstance(cur, dict | list) and not (last and missing == "missing"):
            continue  # a union tag
        else:
            path, cur = join(path, el if isinstance(el, int) else str(el)), None
    return path


def _has_key(d: dict, key: Any) -> bool:
    try:
        return key in d
    except TypeError:
        return False


_TYPES = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number", "string_type": "a string",
    "bool_type": "true or false", "dict_type": "a mapping", "model_type": "a mapping",
    "model_attributes_type": "a mapping", "list_type": "a list", "tuple_type": "a list",
    "none_required": "nothing",
}
_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<",
           "less_than_equal": "<="}  # fmt: skip


def describe(err: Any) -> tuple[str, str | None, tuple]:
    """(message, hint, extra path parts) for one pydantic error dict."""
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    problem = ctx.get("error")
    if isinstance(problem, InputProblem):
        return problem.message, problem.hint, problem.at
    if kind in _TYPES:
        hint = None
        if isinstance(value, str) and kind.split("_")[0] in ("int", "float"):
            hint = "write the number alone: no quotes, no unit (the unit is in the field's name)"
        return f"expected {_TYPES[kind]}, got {type_name(value)}", hint, ()
    if kind == "missing":
        return "missing required field", None, ()
    if kind in _BOUNDS:
        op = _BOUNDS[kind]
        bound = next(iter(ctx.values()))
        if op == ">" and bound == 0:
            return f"must be positive, got {value!r}", None, ()
        return f"must be {op} {bound:g}, got {value!r}", None, ()
    if kind == "literal_error":
        return f"unknown value {value!r}", "one of: " + ctx.get("expected", ""), ()
    if kind == "union_tag_invalid":
        disc = ctx.get("discriminator", "").strip("'")
        hint = "one of: " + ctx.get("expected_tags", "").replace("'", "")
        tag = value.get(disc) if isinstance(value, dict) else ctx.get("tag")
        return f"unknown {disc} {tag!r}", hint, (disc,)
    if kind == "union_tag_not_found":
        disc = ctx.get("discriminator", "").strip("'")
        keys = [str(k) for k in value] if isinstance(value, dict) else []
        close = difflib.get_close_matches(disc, keys, n=1, cutoff=0.6)
        if close:  # a misspelt tag key: say so where it is
            hint = f"did you mean {disc!r}? allowed: {disc}, then the fields of that {disc}"
            return f"unknown field {close[0]!r}", hint, (close[0],)
        return "missing required field", None, (disc,)
    if kind == "string_too_short":
        return "must not be empty", None, ()
    if kind == "string_pattern_mismatch":
        return f"{value!r} is not allowed here", f"must match {ctx.get('pattern')}", ()
    if kind == "too_short":
        return f"needs at least {ctx.get('min_length')}, got {ctx.get('actual_length')}", None, ()
    if kind == "too_long":
        return f"takes at most {ctx.get('max_length')}, got {ctx.get('actual_length')}", None, ()
    msg = str(err.get("msg", kind))
    return msg.removeprefix("Value error, ").removeprefix("Assertion failed, "), None, ()
