"""The catalogue of node-local evidence: data (``catalogue/*.yaml``), each entry with its
severity, the part it names, the fix and its source (docs/node-checks.md lists them all).

An entry::

    - id: xid-79
      severity: fault            # fault | warn | info
      part: gpu                  # what it names: gpu, nic, port, pcie, node, ...
      what: GPU has fallen off the bus
      fix: reset the GPU (nvidia-smi -r) or reboot; RMA when it recurs
      source: NVIDIA Xid catalogue, Xid 79 (resolution RESET_GPU)
      match: {xid: 79}           # how a tool module recognises it (module-specific keys)
      params: {}                 # thresholds the module reads (rates per hour, ...)

A test spec may override entries by id (``node_checks: {xid-63: {severity: fault}}``) or add
its own; :func:`load_catalogue` validates both and names the file and field of a bad one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Any, TypeVar

from fabriccheck.errors import ConfigError
from fabriccheck.probes.node.findings import SEVERITIES, Finding

_FIELDS = {"id", "severity", "part", "what", "fix", "source", "match", "params"}
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_T = TypeVar("_T")


@dataclass(frozen=True)
class Entry:
    """One catalogue entry (see the module doc)."""

    id: str
    severity: str
    part: str
    what: str
    fix: str
    source: str
    match: Mapping[str, Any] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Catalogue:
    """Entries by id, in file order (never changed once made: an override makes a new one)."""

    entries: Mapping[str, Entry]

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the :meth:`derived` tables (rebuilt on first use)."""
        return {k: v for k, v in self.__dict__.items() if k != "_derived"}

    def derived(self, build: Callable[[Catalogue], _T]) -> _T:
        """``build(self)``, computed once per catalogue object: the lookup tables a judge
        derives from the entries (its patterns, the entries of a prefix). They live on this
        catalogue, so a spec's catalogue never sees another's."""
        memo = self.__dict__.setdefault("_derived", {})
        try:
            return memo[build]
        except KeyError:
            memo[build] = value = build(self)
            return value

    def __contains__(self, check_id: str) -> bool:
        return check_id in self.entries

    def entry(self, check_id: str) -> Entry:
        """The entry ``check_id`` (a module asking for one that is not there is a bug)."""
        try:
            return self.entries[check_id]
        except KeyError:
            raise KeyError(f"no catalogue entry {check_id!r}") from None

    def with_prefix(self, prefix: str) -> list[Entry]:
        """Entries whose id starts with ``prefix``, in file order."""
        by_prefix = self.derived(_prefix_memo)
        if prefix not in by_prefix:
            by_prefix[prefix] = tuple(e for i, e in self.entries.items() if i.startswith(prefix))
        return list(by_prefix[prefix])

    def param(self, check_id: str, name: str, default: Any = None) -> Any:
        """``params[name]`` of entry ``check_id`` (``default`` when absent)."""
        return self.entry(check_id).params.get(name, default)

    def finding(self, check_id: str, *, part: str | None = None, what: str | None = None,
                line: str = "", severity: str | None = None) -> Finding:
        """A finding judged by entry ``check_id``; ``part``/``what`` refine the entry's own
        (``gpu 0000:18:00.0`` for ``gpu``), ``severity`` overrides it (a module that grades by
        a rate passes the grade it computed from the entry's params)."""
        e = self.entry(check_id)
        return Finding(severity or e.severity, e.id, part or e.part, what or e.what,
                       line.strip()[:300], e.fix, e.source)


def _prefix_memo(_: Catalogue) -> dict[str, tuple[Entry, ...]]:
    """A catalogue's entries by id prefix, filled as :meth:`Catalogue.with_prefix` asks."""
    return {}


def _entry(raw: Any, where: str) -> Entry:
    if not isinstance(raw, Mapping):
        raise ConfigError("a catalogue entry must be a mapping", source=where,
                          hint="write '- {id: ..., severity: ..., part: ..., what: ...}'")
    extra = set(raw) - _FIELDS
    if extra:
        raise ConfigError(f"unknown field(s) {', '.join(sorted(map(str, extra)))}",
                          source=where, hint=f"allowed: {', '.join(sorted(_FIELDS))}")
    for key in ("id", "severity", "part", "what"):
        if not isinstance(raw.get(key), str) or not raw.get(key):
            raise ConfigError(f"field {key!r} is required (a non-empty string)", source=where,
                              field=key)
    if not _ID.match(raw["id"]):
        raise ConfigError(f"id {raw['id']!r}: lowercase letters, digits, '.', '_', '-'",
                          source=where, field="id")
    if raw["severity"] not in SEVERITIES:
        raise ConfigError(f"severity {raw['severity']!r} is not one of {', '.join(SEVERITIES)}",
                          source=where, field="severity")
    for key in ("match", "params"):
        if raw.get(key) is not None and not isinstance(raw[key], Mapping):
            raise ConfigError(f"field {key!r} must be a mapping", source=where, field=key)
    return Entry(raw["id"], raw["severity"], raw["part"], raw["what"], str(raw.get("fix", "")),
                 str(raw.get("source", "")), dict(raw.get("match") or {}),
                 dict(raw.get("params") or {}))


def parse_entries(data: Any, source: str) -> list[Entry]:
    """The entries of one catalogue file's parsed YAML (a list of mappings)."""
    if not isinstance(data, list):
        raise ConfigError("a catalogue file is a list of entries", source=source)
    return [_entry(raw, f"{source}[{i}]") for i, raw in enumerate(data)]


@lru_cache(maxsize=1)
def builtin_catalogue() -> Catalogue:
    """The catalogue shipped in the package (every ``catalogue/*.yaml``, by file name)."""
    import yaml

    entries: dict[str, Entry] = {}
    folder = resources.files("fabriccheck.probes.node") / "catalogue"
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if not item.name.endswith(".yaml"):
            continue
        for e in parse_entries(yaml.safe_load(item.read_text(encoding="utf-8")),
                               f"catalogue/{item.name}"):
            if e.id in entries:
                raise ConfigError(f"duplicate catalogue id {e.id!r}",
                                  source=f"catalogue/{item.name}", field="id")
            entries[e.id] = e
    return Catalogue(entries)


def load_catalogue(overrides: Mapping[str, Any] | None = None, *,
                   source: str = "node_checks") -> Catalogue:
    """The built-in catalogue with ``overrides`` applied (a test spec's ``node_checks:``).

    ``overrides`` maps an id to the fields to change (``{xid-63: {severity: fault}}``); an id
    that is not built in is a new entry and needs every required field.

    >>> load_catalogue({"xid-63": {"severity": "fault"}}).entry("xid-63").severity
    'fault'
    """
    base = builtin_catalogue()
    if not overrides:
        return base
    if not isinstance(overrides, Mapping):
        raise ConfigError("node_checks must map a check id to its fields", source=source,
                          hint="e.g. node_checks: {xid-63: {severity: fault}}")
    entries = dict(base.entries)
    for check_id, fields in overrides.items():
        where = f"{source}.{check_id}"
        if not isinstance(fields, Mapping):
            raise ConfigError("an override is a mapping of fields", source=where,
                              hint="e.g. {severity: warn}")
        old = entries.get(str(check_id))
        if old is None:
            entries[str(check_id)] = _entry({**fields, "id": str(check_id)}, where)
            continue
        merged = {"id": old.id, "severity": old.severity, "part": old.part, "what": old.what,
                  "fix": old.fix, "source": old.source, "match": dict(old.match),
                  "params": {**old.params, **dict(fields.get("params") or {})}}
        merged.update({k: v for k, v in fields.items() if k != "params"})
        entries[old.id] = replace(_entry(merged, where))
    return Catalogue(entries)
