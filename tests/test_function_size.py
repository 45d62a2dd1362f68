"""No function over 60 lines (issue 31): every ``def`` in ``fabriccheck/`` is read with ``ast``.

A function's length runs from its ``def`` line to the last line of its body (decorators are not
counted; a nested function counts on its own and within its parent). Past :data:`MAX_LINES`
a function is split at its real stages (validate / gather / compute / render), not chopped.

:data:`ALLOWED` is empty: the rule holds everywhere (the last four long functions, under
``planning/`` and ``inference/``, were split too). Should an exception ever be needed, it is
listed there by ``path::qualified.name``; the list may only shrink: a listed function that is
now short enough, or gone, fails the test until its entry is removed, so the list never names
more than is true.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "fabriccheck"
MAX_LINES = 60

#: long functions still to split (issue 31): none; remove an entry once its function is split
ALLOWED: frozenset[str] = frozenset()


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines from ``def`` to the end of the body) of every function in
    ``tree``, methods and nested functions included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            yield name, node.end_lineno - node.lineno + 1
            yield from _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def function_lengths(package: Path = PACKAGE) -> dict[str, int]:
    """``path::qualified.name`` -> its length in lines, for every function under ``package``
    (the longest where one name is defined twice in a module)."""
    out: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        for name, lines in _functions(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            key = f"{rel}::{name}"
            out[key] = max(lines, out.get(key, 0))
    return out


def test_the_walk_sees_functions_methods_and_nested_ones():
    tree = ast.parse("class C:\n    def m(self):\n        def inner():\n            pass\n"
                     "        return inner\n\n\n@decorated\nasync def f():\n    pass\n")
    assert dict(_functions(tree)) == {"C.m": 4, "C.m.inner": 2, "f": 2}


def test_no_function_over_the_limit_outside_the_allow_list():
    long = {k: n for k, n in function_lengths().items() if n > MAX_LINES and k not in ALLOWED}
    assert not long, (
        f"functions over {MAX_LINES} lines (split each at its stages into well-named helpers; "
        "see issue 31):\n" + "\n".join(f"  fabriccheck/{k}: {n} lines"
                                       for k, n in sorted(long.items()))
    )


def test_the_allow_list_only_names_functions_still_too_long():
    lengths = function_lengths()
    stale = {k: lengths.get(k) for k in ALLOWED if lengths.get(k, 0) <= MAX_LINES}
    assert not stale, (
        "allow-listed functions now short enough or gone; remove them from ALLOWED in "
        "tests/test_function_size.py:\n" + "\n".join(
            f"  fabriccheck/{k}: {'gone' if n is None else f'{n} lines'}"
            for k, n in sorted(stale.items()))
    )
