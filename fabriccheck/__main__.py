"""``python -m fabriccheck``."""

from fabriccheck.cli.main import run

run()
