"""The typer application object and the shared console helpers every command module uses."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape

from fabriccheck.errors import FabricCheckError

app = typer.Typer(
    name="fabriccheck",
    help="Active fabric health checks for GPU training clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: progress and human output go to stderr when --json owns stdout; use err for progress
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


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


@app.callback()
def _root() -> None:
    """Active fabric health checks for GPU training clusters."""
