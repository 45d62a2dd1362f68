"""Entry point: registers every command module and maps fabriccheck errors to exit codes.

Exit codes (docs/design.md): 0 ok · 1 faults found · 2 usage/config error · 3 could not test.
"""

from __future__ import annotations

import importlib
import sys

from fabriccheck.cli.app import app, err, print_error
from fabriccheck.errors import FabricCheckError

#: every command module under fabriccheck.cli, imported in this order; each defines
#: its commands on ``app`` when imported (tests/cli/test_main.py checks none is left out)
COMMAND_MODULES = (
    "topology_cmd",
    "parse_cmd",
    "run_cmd",
    "lab_cmd",
    "history_cmd",
    "report_cmd",
    "config_cmd",
)


def _register() -> None:
    """Import every command module; a missing or broken one is an error, never skipped."""
    for name in COMMAND_MODULES:
        importlib.import_module(f"fabriccheck.cli.{name}")


_register()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; a FabricCheckError becomes one line on stderr and its exit code."""
    try:
        app(args=argv, prog_name="fabriccheck")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except FabricCheckError as exc:
        print_error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    return 0


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
