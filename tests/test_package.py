"""The public surface: pinned names, the error tree and its exit codes."""

from __future__ import annotations

import fabriccheck
from fabriccheck import errors


def test_public_names_are_pinned():
    assert fabriccheck.__all__ == sorted(fabriccheck.__all__)
    assert set(fabriccheck.__all__) >= {"FabricCheckError", "ConfigError", "ExecutorError"}


def test_error_tree_exit_codes():
    assert errors.ConfigError("x").exit_code == 2
    for cls in (errors.ConnectError, errors.AuthError, errors.TaskTimeout, errors.RemoteCommandError):
        assert issubclass(cls, errors.ExecutorError)
        assert cls("x").exit_code == 3


def test_config_error_names_file_and_field():
    exc = errors.ConfigError("unknown node 'n9'", source="t.yaml", field="links[3].b", hint="fix it")
    assert str(exc).startswith("t.yaml:links[3].b: unknown node 'n9'")
    assert exc.hint == "fix it"
