"""The public surface: pinned names, the error tree and its exit codes."""

from __future__ import annotations

import ast
from pathlib import Path

import fabriccheck
from fabriccheck import errors

PACKAGE = Path(fabriccheck.__file__).parent

PUBLIC_NAMES = [
    "AuthError",
    "ConfigError",
    "ConnectError",
    "ExecutorError",
    "FabricCheckError",
    "ParseError",
    "RemoteCommandError",
    "TaskTimeout",
    "__version__",
]


def test_public_names_are_pinned():
    """Adding or removing a public name is a deliberate change: update PUBLIC_NAMES with it."""
    assert fabriccheck.__all__ == PUBLIC_NAMES == sorted(PUBLIC_NAMES)
    for name in fabriccheck.__all__:
        assert hasattr(fabriccheck, name), name


def test_error_tree_exit_codes():
    assert errors.ConfigError("x").exit_code == 2
    executor_errors = (
        errors.ConnectError, errors.AuthError, errors.TaskTimeout, errors.RemoteCommandError
    )
    for cls in executor_errors:
        assert issubclass(cls, errors.ExecutorError)
        assert cls("x").exit_code == 3


def test_config_error_names_file_and_field():
    exc = errors.ConfigError(
        "unknown node 'n9'", source="t.yaml", field="links[3].b", hint="fix it"
    )
    assert str(exc).startswith("t.yaml:links[3].b: unknown node 'n9'")
    assert exc.hint == "fix it"


def test_every_module_opens_with_a_one_line_docstring():
    """STYLE: every module's docstring names its concept in its first line."""
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        first = doc.strip().splitlines()[0] if doc and doc.strip() else ""
        if not first or len(first) > 100:
            missing.append(str(path.relative_to(PACKAGE)))
    assert not missing, f"modules without a one-line docstring: {missing}"
