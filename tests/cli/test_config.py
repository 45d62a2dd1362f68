"""The config file: layers (system < user < $FABRICCHECK_CONFIG < flags), per-command tables,
one-line errors naming file and key, and ``config show`` saying where each value came from."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from fabriccheck.cli import config as cfgmod
from fabriccheck.cli.main import app


@pytest.fixture(autouse=True)
def _layers(tmp_path, monkeypatch):
    """A system file and a user dir of this test's own (never the machine's /etc or ~)."""
    monkeypatch.setattr(cfgmod, "SYSTEM_CONFIG", tmp_path / "etc" / "config.toml")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "user"))
    monkeypatch.delenv("FABRICCHECK_CONFIG", raising=False)
    monkeypatch.setenv("FABRICCHECK_DB", str(tmp_path / "h.sqlite"))


def _write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_config_supplies_defaults_and_flags_win(tmp_path, monkeypatch):
    _write(tmp_path / "etc" / "config.toml", 'topology = "roce-rail-64"\nseed = 1\n')
    _write(tmp_path / "user" / "fabriccheck" / "config.toml", "seed = 2\n[gate]\nbudget-s = 1\n")
    env_file = _write(tmp_path / "env.toml", "seed = 3\n")
    monkeypatch.setenv("FABRICCHECK_CONFIG", str(env_file))
    # no --topology: it comes from /etc; seed from the env file (the last layer)
    r = invoke("sweep", "node-[001-004]", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["seed"] == 3
    assert json.loads(invoke("sweep", "node-[001-004]", "--json", "--seed", "9").stdout)[
        "seed"] == 9  # the flag wins
    gate = invoke("gate", "node-[001-004]", "--json")  # [gate] budget 1 s: no round fits
    assert gate.exit_code == 3 and json.loads(gate.stdout)["budget_exhausted"] is True
    assert invoke("gate", "node-[001-004]", "--budget-s", "300").exit_code == 0


def test_config_show_says_where_each_value_came_from(tmp_path, monkeypatch):
    system = _write(tmp_path / "etc" / "config.toml", 'topology = "lab-4"\nexecutor = "ssh"\n')
    env_file = _write(tmp_path / "env.toml", 'executor = "sim"\n[sweep]\nmax_drain = 0.05\n')
    monkeypatch.setenv("FABRICCHECK_CONFIG", str(env_file))
    r = invoke("config", "show", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    got = {v["key"]: (v["value"], v["source"]) for v in d["values"]}
    assert got["topology"] == ("lab-4", str(system))
    assert got["executor"] == ("sim", str(env_file))
    assert got["sweep.max_drain"] == (0.05, str(env_file))
    assert got["seed"] == (0, "built-in default")
    assert got["gate.budget_s"] == (300.0, "built-in default")
    assert d["files"][-1] == str(env_file) and d["files"][1].endswith("(absent)")
    table = invoke("config", "show")
    assert "sweep.max_drain" in table.stdout and str(env_file) in table.stdout


@pytest.mark.parametrize("text,needle", [
    ("bogus = 1\n", "config.toml:bogus: unknown option"),
    ("seed = 'x'\n", "config.toml:seed: must be an integer, got 'x'"),
    ("[gate]\npartition = 'gpu'\n", "config.toml:gate.partition: unknown option"),
    ("topology = \n", "config.toml: not valid TOML"),
])
def test_a_bad_config_is_one_line_and_exit_2(tmp_path, text, needle):
    _write(tmp_path / "user" / "fabriccheck" / "config.toml", text)
    for args in (["sweep", "node-001"], ["config", "show"]):
        r = invoke(*args)
        assert r.exit_code == 2, r.output
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], lines


def test_a_missing_fabriccheck_config_file_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICCHECK_CONFIG", str(tmp_path / "nope.toml"))
    r = invoke("history", "runs")
    assert r.exit_code == 2 and "nope.toml: no such config file" in r.stderr


def test_db_applies_to_history_and_report(tmp_path, monkeypatch):
    db = tmp_path / "elsewhere.sqlite"
    _write(tmp_path / "user" / "fabriccheck" / "config.toml", f'db = "{db}"\n')
    monkeypatch.delenv("FABRICCHECK_DB")
    assert invoke("sweep", "node-[001-004]", "-t", "roce-rail-64").exit_code == 0
    rows = json.loads(invoke("history", "runs", "--json").stdout)
    assert len(rows) == 1 and db.exists()


def test_history_commands_list_is_complete():
    group = typer.main.get_command(app).commands["history"]
    assert set(group.commands) == set(cfgmod.HISTORY_COMMANDS)
