"""``fabriccheck config show``: the merged config-file values and the file each came from."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from fabriccheck.cli.app import app, exit_on_error, out, write_json

config = typer.Typer(help="The config file: merged values and where each came from.",
                     no_args_is_help=True)
app.add_typer(config, name="config")


#: built-in defaults that differ by command (run_cmd: gate's budget, bisect's group size)
COMMAND_DEFAULTS = {"gate.budget_s": 300.0, "bisect.scale": 8}


def _builtin() -> dict[str, Any]:
    """Built-in defaults of the keys a config file may set (per command where they differ)."""
    from fabriccheck.cli.config import KEYS
    from fabriccheck.cli.run_options import SHARED

    values = {k: SHARED[k][1] for k in KEYS if k in SHARED}
    values.update(partition=None, selector=None, skip_tested_within=0.0, scale=0)
    return values


def _rows() -> tuple[list[dict[str, Any]], list[str]]:
    from fabriccheck.cli.config import config_files, load_config, user_config_path

    with exit_on_error(one_line=True):
        cfg = load_config()
        searched = [str(p) for p in (*_system(), user_config_path())]
        searched += [str(p) for p in config_files() if str(p) not in searched]
    rows = []
    top = cfg.values.get("", {})
    for key, default in sorted(_builtin().items()):
        value, source = top.get(key, (default, "built-in default"))
        rows.append({"key": key, "value": value, "source": source})
    for scope in sorted(k for k in cfg.values if k):
        for key, (value, source) in sorted(cfg.values[scope].items()):
            rows.append({"key": f"{scope}.{key}", "value": value, "source": source})
    for scoped, value in COMMAND_DEFAULTS.items():
        scope, key = scoped.split(".")
        if key not in cfg.values.get(scope, {}) and key not in top:
            rows.append({"key": scoped, "value": value, "source": "built-in default"})
    return rows, [p if Path(p).is_file() else f"{p} (absent)" for p in searched]


def _system():
    from fabriccheck.cli.config import SYSTEM_CONFIG

    return (SYSTEM_CONFIG,)


@config.command("show")
def show(json_: Annotated[bool, typer.Option("--json", help="Print only JSON.")] = False
         ) -> None:  # fmt: skip
    """Print the merged config values of sweep/gate/bisect and where each came from.

    Files, later ones win: /etc/fabriccheck/config.toml, the user config
    (~/.config/fabriccheck/config.toml), $FABRICCHECK_CONFIG; flags win over all of them.
    """
    rows, searched = _rows()
    if json_:
        write_json({"files": searched, "values": rows})
        return
    out.print("config files (later ones win): " + ", ".join(searched), highlight=False,
              markup=False)
    t = Table(title=None)
    for col in ("key", "value", "source"):
        t.add_column(col, no_wrap=True)
    for r in rows:
        t.add_row(r["key"], "-" if r["value"] is None else str(r["value"]), r["source"])
    out.print(t)
