"""A Python child process for crash tests: its stdout a pipe, always killed and reaped."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tests.conftest import REPO


@contextmanager
def python_child(code: str) -> Iterator[subprocess.Popen]:
    """Run ``python -c code`` in the repo (text stdout pipe); on exit kill it if alive, reap it."""
    child = subprocess.Popen([sys.executable, "-c", code], cwd=str(REPO),
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=10)
        child.stdout.close()
