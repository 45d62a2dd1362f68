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


# ---- dependencies: declared is imported, imported is declared (issue 18) --------------------
import re  # noqa: E402
import sys  # noqa: E402
from importlib import metadata  # noqa: E402

import pytest  # noqa: E402

PYPROJECT = PACKAGE.parent / "pyproject.toml"
#: declared but not (yet) imported by the package, each with its reason; keep this list empty
#: where possible: a dependency that nothing imports is dead weight for every user
DECLARED_NOT_IMPORTED: dict[str, str] = {}


def _dist(requirement: str) -> str:
    name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> tuple[set[str], set[str]]:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    extras = {_dist(r) for reqs in project.get("optional-dependencies", {}).values() for r in reqs}
    return {_dist(r) for r in project["dependencies"]}, extras


def _imported() -> dict[str, set[str]]:
    """Distribution -> package files importing it (every third-party top-level import)."""
    to_dist = metadata.packages_distributions()
    out: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == "fabriccheck":
                    continue
                for dist in to_dist.get(top, [top]):
                    out.setdefault(_dist(dist), set()).add(str(path.relative_to(PACKAGE)))
    return out


def test_every_import_is_declared():
    required, extras = _declared()
    undeclared = {d: sorted(f) for d, f in _imported().items() if d not in required | extras}
    assert not undeclared, f"imported but not in pyproject dependencies: {undeclared}"


def test_every_declared_dependency_is_imported():
    required, _ = _declared()
    unused = required - set(_imported()) - set(DECLARED_NOT_IMPORTED)
    assert not unused, f"declared in pyproject but imported nowhere in fabriccheck/: {unused}"
    stale = set(DECLARED_NOT_IMPORTED) & set(_imported())
    assert not stale, f"now imported: remove from DECLARED_NOT_IMPORTED: {stale}"


def test_only_public_ray_apis():
    """No ``ray._private`` & co: underscore modules change without notice between releases."""
    private = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                names = [f"{node.value.id}.{node.attr}"]
            hits = [n for n in names if n.split(".")[0] == "ray"
                    and any(part.startswith("_") for part in n.split(".")[1:])]  # fmt: skip
            private += [f"{path.relative_to(PACKAGE)}: {n}" for n in hits]
    assert not private, f"private Ray APIs used: {private}"
