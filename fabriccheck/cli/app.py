"""The typer application object and the shared console helpers every command module uses."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape

from fabriccheck.errors import FabricCheckError

app = typer.Typer(
    name="fabriccheck",
    help="Active fabric health checks for GPU training clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: lines are never hard-wrapped when the output is not a terminal (a pipe, a file, a CI log)
PIPE_WIDTH = 4096


def _width(stream) -> int | None:
    """None (rich asks the terminal) on a terminal or with $COLUMNS; else :data:`PIPE_WIDTH`."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return None if tty or os.environ.get("COLUMNS") else PIPE_WIDTH


class _Console(Console):
    """A rich Console whose width follows its stream (CliRunner swaps sys.stdout per call)."""

    @property
    def size(self) -> ConsoleDimensions:  # type: ignore[override]
        dims = Console.size.fget(self)  # type: ignore[attr-defined]
        w = _width(self.file)
        return dims if w is None else ConsoleDimensions(w, dims.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


#: progress and human output go to stderr when --json owns stdout; use err for progress
out = _Console(soft_wrap=True, emoji=False)  # a "file:nose:" error is text, not 👃
err = _Console(stderr=True, soft_wrap=True, emoji=False)

#: -q: no progress on stderr; -v: more (INFO logs), -vv: debug
VERBOSITY = {"level": 0}


class _StderrHandler(logging.StreamHandler):
    """Log lines as ``warning: message`` on whatever ``sys.stderr`` is at the time."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


def set_verbosity(verbose: int = 0, quiet: bool = False) -> None:
    """Set how much goes to stderr: logs at WARNING (default), INFO (-v), DEBUG (-vv), or only
    errors (-q). Progress lines check :func:`quiet`."""
    now = VERBOSITY["level"]
    level = -1 if quiet or now < 0 else max(verbose, now)
    VERBOSITY["level"] = level
    log_level = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(level, logging.DEBUG)
    logger = logging.getLogger("fabriccheck")
    logger.setLevel(log_level)
    if not any(getattr(h, "_fabriccheck", False) for h in logger.handlers):
        handler = _StderrHandler()
        handler._fabriccheck = True  # type: ignore[attr-defined]
        logger.addHandler(handler)


def quiet() -> bool:
    """Whether -q asked for no progress."""
    return VERBOSITY["level"] < 0


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print one error line to stderr and return the Exit to raise."""
    err.print(f"[bold red]error:[/] {message}", highlight=False, markup=True)
    return typer.Exit(code)


def print_error(exc: FabricCheckError, *, one_line: bool = False) -> None:
    """Print a fabriccheck error to stderr, its text verbatim (never read as rich markup).

    ``error: what`` and ``  hint: ...`` on a line of its own; with ``one_line`` the hint goes in
    parentheses on the same line (``error: file:field: what (hint)``).
    """
    if one_line:
        err.print(f"error: {exc}", highlight=False, markup=False)
        return
    err.print(f"[bold red]error:[/] {escape(exc.message)}", highlight=False)
    if exc.hint:
        err.print(f"  hint: {exc.hint}", highlight=False, markup=False)


@contextmanager
def exit_on_error(*, one_line: bool = False) -> Iterator[None]:
    """A :class:`FabricCheckError` inside the block is printed (:func:`print_error`) and becomes
    ``typer.Exit`` with its exit code (so the command behaves the same under ``CliRunner``)."""
    try:
        yield
    except FabricCheckError as exc:
        print_error(exc, one_line=one_line)
        raise typer.Exit(exc.exit_code) from exc


def write_json(obj: object) -> None:
    """Write ``obj`` as the only thing on stdout (the --json contract)."""
    import json

    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


@app.command("version")
def version() -> None:
    """Print fabriccheck's version."""
    from fabriccheck import __version__

    out.print(__version__)


def _print_version(value: bool) -> None:
    if value:
        from fabriccheck import __version__

        out.print(f"fabriccheck {__version__}", highlight=False)
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print fabriccheck's version and exit.")] = False,
    verbose: Annotated[int, typer.Option(
        "--verbose", "-v", count=True, help="More on stderr (-vv: debug).")] = 0,
    quiet_: Annotated[bool, typer.Option(
        "--quiet", "-q", help="Nothing on stderr but errors.")] = False,
) -> None:  # fmt: skip
    """Active fabric health checks for GPU training clusters.

    Defaults of the run options can come from a TOML config file ($FABRICCHECK_CONFIG,
    /etc/fabriccheck/config.toml, ~/.config/fabriccheck/config.toml; flags win):
    see `fabriccheck config show`.
    """
    VERBOSITY["level"] = 0
    set_verbosity(verbose, quiet_)
    _apply_config(ctx)


def _apply_config(ctx: typer.Context) -> None:
    """Config files become click's default_map: every command's defaults, flags still win."""
    from fabriccheck.cli.config import HISTORY_COMMANDS, load_config

    if ctx.resilient_parsing or ctx.invoked_subcommand == "config":
        return  # completion; `config show` reads (and reports errors in) the files itself
    with exit_on_error(one_line=True):
        dm = load_config().default_map(list(HISTORY_COMMANDS))
    if dm:
        ctx.default_map = {**(ctx.default_map or {}), **dm}
