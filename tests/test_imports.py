"""The import contract (.importlinter): arrows point one way, and no module imports itself back.

import-linter builds the package's import graph (grimp) and checks the layers of
docs/architecture.md; a broken contract prints the offending import chain.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")


@pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed (.[test] extra)")
def test_import_contract_is_kept():
    proc = subprocess.run([str(LINT), "--no-cache", str(REPO / ".importlinter")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


@pytest.mark.parametrize("type_only", [False, True], ids=["run-time", "type-only-included"])
def test_no_import_cycles_between_modules(type_only):
    """No two fabriccheck modules import each other, directly or through others; nor through
    an import under TYPE_CHECKING (it never runs, but a reader still walks in a circle)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("fabriccheck", exclude_type_checking_imports=not type_only)
    cycles = []
    for mod in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(mod):
            if imported != mod and graph.chain_exists(imported=mod, importer=imported):
                cycles.append(f"{mod} <-> {imported}")
    assert not cycles, "\n".join(cycles[:20])
