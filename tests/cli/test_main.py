"""The CLI entry point: every command module is registered, strictly, and each has a help line."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import fabriccheck.cli as cli_pkg
from fabriccheck.cli import main as cli_main
from fabriccheck.cli.app import app, exit_on_error, print_error
from fabriccheck.errors import ConfigError, ConnectError

CLI_DIR = Path(cli_pkg.__file__).parent


def test_every_command_module_is_registered():
    on_disk = {p.stem for p in CLI_DIR.glob("*_cmd.py")}
    assert on_disk == set(cli_main.COMMAND_MODULES)


def test_a_missing_command_module_is_an_error(monkeypatch):
    monkeypatch.setattr(cli_main, "COMMAND_MODULES", ("no_such_cmd",))
    with pytest.raises(ModuleNotFoundError, match="no_such_cmd"):
        cli_main._register()


def test_help_lists_every_command_with_a_one_line_help():
    group = typer.main.get_command(app)
    names = sorted(group.commands)
    assert {"topology", "parse", "sweep", "gate", "bisect", "lab", "history", "report"} <= set(
        names
    )
    res = CliRunner().invoke(app, ["--help"], terminal_width=200)
    assert res.exit_code == 0, res.output
    for name in names:
        short = group.commands[name].get_short_help_str(limit=200)
        assert short.strip(), f"command {name!r} has no help line"
        line = next((ln for ln in res.output.splitlines() if f" {name} " in ln), "")
        assert short.split()[0] in line, f"{name!r} not listed with its help in --help"


def test_error_lines_are_printed_verbatim(capsys):
    exc = ConfigError("bad rail [mlx5_0] [/x]", source="t.yaml", field="nics[0]", hint="fix [it]")
    print_error(exc)
    assert capsys.readouterr().err.splitlines() == [
        "error: t.yaml:nics[0]: bad rail [mlx5_0] [/x]",
        "  hint: fix [it]",
    ]
    print_error(exc, one_line=True)
    assert capsys.readouterr().err.splitlines() == [
        "error: t.yaml:nics[0]: bad rail [mlx5_0] [/x] (fix [it])"
    ]


def test_exit_on_error_maps_the_exit_code(capsys):
    with pytest.raises(typer.Exit) as info, exit_on_error():
        raise ConnectError("refused", host="node-003")
    assert info.value.exit_code == 3
    assert capsys.readouterr().err.strip() == "error: node-003: refused"
    with exit_on_error():  # no error: nothing printed, nothing raised
        pass
    assert capsys.readouterr().err == ""


def test_main_maps_errors_to_exit_codes(capsys):
    assert cli_main.main(["topology", "show", "no-such-topology-file"]) == 2
    assert capsys.readouterr().err.startswith("error: no-such-topology-file")
