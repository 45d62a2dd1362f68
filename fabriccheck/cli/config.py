"""The config file: TOML defaults of the run options from system, user and $FABRICCHECK_CONFIG.

Layers, later ones win: built-in defaults < ``/etc/fabriccheck/config.toml`` < the user config
(``$XDG_CONFIG_HOME/fabriccheck/config.toml``, default ``~/.config/...``) < the file named by
``$FABRICCHECK_CONFIG`` < flags on the command line. Top-level keys apply to sweep, gate and
bisect (``db`` also to ``history`` and ``report``); a ``[sweep]``, ``[gate]`` or ``[bisect]``
table overrides them for that command::

    topology = "/etc/fabriccheck/fabric.yaml"
    executor = "ssh"
    inventory = "/etc/fabriccheck/hosts.yaml"
    [gate]
    budget_s = 240
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabriccheck.errors import ConfigError

SYSTEM_CONFIG = Path("/etc/fabriccheck/config.toml")
RUN_COMMANDS = ("sweep", "gate", "bisect")
#: the ``history`` subcommands that take ``--db`` (tests/cli/test_config.py checks the list)
HISTORY_COMMANDS = ("nodes", "runs", "drift", "actions", "metrics", "prune")

_STR, _INT, _FLOAT, _BOOL = "a string", "an integer", "a number", "true or false"
#: every key a config file may set, and what its value must be
KEYS: dict[str, str] = {
    **dict.fromkeys(("topology", "spec", "executor", "faults", "inventory", "ray_address",
                     "probe", "report", "db", "scheduler", "exclude_file", "metrics",
                     "partition", "selector"), _STR),
    **dict.fromkeys(("seed", "scale"), _INT),
    **dict.fromkeys(("budget_s", "max_drain", "skip_tested_within"), _FLOAT),
    **dict.fromkeys(("no_history", "apply"), _BOOL),
}  # fmt: skip
#: keys only some run commands have
ONLY = {"partition": ("sweep",), "selector": ("sweep",), "skip_tested_within": ("sweep",),
        "scale": ("sweep", "bisect")}  # fmt: skip


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "fabriccheck" / "config.toml"


def config_files() -> list[Path]:
    """The config files to read, lowest priority first (missing ones are left out)."""
    files = [SYSTEM_CONFIG, user_config_path()]
    env = os.environ.get("FABRICCHECK_CONFIG")
    if env:
        if not Path(env).is_file():
            raise ConfigError("no such config file", source=env,
                              hint="fix or unset $FABRICCHECK_CONFIG")  # fmt: skip
        files.append(Path(env))
    return [f for f in files if f.is_file()]


@dataclass
class Config:
    """Merged values: ``values[scope][key] = (value, source file)``; scope "" is top level."""

    values: dict[str, dict[str, tuple[Any, str]]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def for_command(self, command: str) -> dict[str, Any]:
        """The defaults of one run command (top level, then its table)."""
        merged = {k: v for k, (v, _) in self.values.get("", {}).items()
                  if command in ONLY.get(k, RUN_COMMANDS)}  # fmt: skip
        merged.update({k: v for k, (v, _) in self.values.get(command, {}).items()})
        return merged

    def default_map(self, history_commands: list[str]) -> dict[str, Any]:
        """click's ``default_map`` for the root context: flags still win over it."""
        dm: dict[str, Any] = {c: self.for_command(c) for c in RUN_COMMANDS}
        db = self.values.get("", {}).get("db")
        if db is not None:
            dm["report"] = {"db": db[0]}
            dm["history"] = {c: {"db": db[0]} for c in history_commands}
        return {k: v for k, v in dm.items() if v}


def _load_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", source=str(path)) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", source=str(path)) from exc


def _check(path: Path, scope: str, key: str, value: Any) -> tuple[str, Any]:
    """The normalized key (``budget-s`` -> ``budget_s``) and its checked value."""
    name = key.replace("-", "_")
    where = f"{scope}.{key}" if scope else key
    if name not in KEYS or (scope and scope not in ONLY.get(name, RUN_COMMANDS)):
        raise ConfigError("unknown option", source=str(path), field=where,
                          hint=f"known: {', '.join(sorted(KEYS))}; tables: "
                               f"{', '.join(RUN_COMMANDS)}")  # fmt: skip
    want = KEYS[name]
    ok = {_STR: isinstance(value, str), _BOOL: isinstance(value, bool),
          _INT: isinstance(value, int) and not isinstance(value, bool),
          _FLOAT: isinstance(value, (int, float)) and not isinstance(value, bool)}[want]
    if not ok:
        raise ConfigError(f"must be {want}, got {value!r}", source=str(path), field=where)
    return name, float(value) if want == _FLOAT else value


def load_config(files: list[Path] | None = None) -> Config:
    """Read and merge the config files (a bad file, key or value is a :class:`ConfigError`)."""
    cfg = Config()
    for path in config_files() if files is None else files:
        cfg.files.append(str(path))
        for key, value in _load_toml(path).items():
            if isinstance(value, dict) and key in RUN_COMMANDS:
                for k, v in value.items():
                    name, v = _check(path, key, k, v)
                    cfg.values.setdefault(key, {})[name] = (v, str(path))
            else:
                name, value = _check(path, "", key, value)
                cfg.values.setdefault("", {})[name] = (value, str(path))
    return cfg
