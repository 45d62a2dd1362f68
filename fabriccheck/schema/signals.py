"""The signals model (docs/design.md "Signals"): user checks run through the probe path."""

from __future__ import annotations

import re
import string
from typing import Annotated, Literal

from pydantic import Field, model_validator

from fabriccheck.schema.base import Name, Positive, StrictModel, fail, suggest

#: placeholders a signal command may use, and what each needs
PLACEHOLDERS = ("host", "hosts", "peer", "peer_addr", "nic", "peer_nic", "gpus", "np")
_NEEDS_NIC = ("nic", "peer_nic")
_NEEDS_PEER = ("peer", "peer_addr", "peer_nic")


class PassRule(StrictModel):
    """When a signal's value passes: at least ``min``, at most ``max`` (one or both)."""

    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _one_bound(self) -> PassRule:
        if self.min is None and self.max is None:
            raise fail("needs 'min' or 'max'", hint="e.g. pass: {min: 400}")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise fail(f"min {self.min:g} is above max {self.max:g}", at=("min",))
        return self


class SignalModel(StrictModel):
    """One user signal: a command per node (or NIC) whose printed value must pass a bound."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][\w.-]*$")] = Field(
        description="unique; letters, digits, . _ -"
    )
    level: Literal[1, 2, 4, 8] = Field(description="nodes per test")
    per: Literal["node", "nic"] = Field("node", description="run once per node or per NIC")
    command: Name = Field(description="shell command; placeholders {host} {nic} ...")
    value: Name | None = Field(None, description="regex with a group named 'value'")
    parser: Name | None = Field(None, description="a parser from entry points fabriccheck.signals")
    unit: str = Field("", description="shown with the value")
    pass_: PassRule = Field(alias="pass", description="{min: X} and/or {max: Y}")
    timeout_s: Positive = Field(30.0, description="the command is killed after it")

    @model_validator(mode="after")
    def _consistent(self) -> SignalModel:
        if (self.value is None) == (self.parser is None):
            raise fail("give exactly one of 'value' (a regex) or 'parser'", at=("value",))
        if self.value is not None:
            _check_regex(self.value)
        for name in _placeholders(self.command):
            if name not in PLACEHOLDERS:
                raise fail(f"unknown placeholder {{{name}}}", at=("command",),
                           hint=suggest(name, PLACEHOLDERS))  # fmt: skip
            if name in _NEEDS_NIC and self.per != "nic":
                raise fail(f"{{{name}}} needs per: nic", at=("command",))
            if name in _NEEDS_PEER and self.level < 2:
                raise fail(f"{{{name}}} needs level 2 or more", at=("command",))
        return self


def _check_regex(pattern: str) -> None:
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise fail(f"not a regular expression: {exc}", at=("value",)) from None
    if "value" not in rx.groupindex:
        raise fail("the regex has no group named 'value'", at=("value",),
                   hint=r"e.g. '(?P<value>\d+) Gb/sec'")  # fmt: skip


def _placeholders(command: str) -> list[str]:
    try:
        parsed = list(string.Formatter().parse(command))
    except ValueError as exc:
        raise fail(f"bad placeholder: {exc}", at=("command",),
                   hint="write literal braces as {{ and }}") from None  # fmt: skip
    return [field for _, field, _, _ in parsed if field is not None]


def unique_names(signals: list[SignalModel]) -> None:
    """Refuse two signals with one name (raised at ``signals[i].name``)."""
    seen: set[str] = set()
    for i, s in enumerate(signals):
        if s.name in seen:
            raise fail(f"duplicate signal name {s.name!r}", at=("signals", i, "name"))
        seen.add(s.name)


class SignalsFile(StrictModel):
    """A signals file (``--signals FILE``)."""

    signals: list[SignalModel] = Field(min_length=1, description="as in a test spec")

    @model_validator(mode="after")
    def _unique(self) -> SignalsFile:
        unique_names(self.signals)
        return self
