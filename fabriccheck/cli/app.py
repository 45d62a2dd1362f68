"""The typer application object and the shared console helpers every command module uses."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

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
