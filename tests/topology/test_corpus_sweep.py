"""A simulated sweep on every real fabric of ``../shared/corpus/topologies`` blames nothing and
exits 0 (issue 16: what ``check.py --sweep`` checks, run in CI when the corpus is present).

The dumps are third-party text, read where they are (never copied here); skipped when
``../shared`` is absent. Each dump goes through the real CLI in process: ``topology import``
then ``sweep --executor sim --json`` with no faults and the default noise, as an operator would
first try fabriccheck on their own fabric. Exit 0 means every node and NIC in scope was tested
(rails without a partner by cross-rail, same-node or loopback tests) and judged healthy, the
preflight's port bars followed each NIC's own speed, and no link was blamed.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from tests.conftest import REPO

CORPUS = REPO.parent / "shared" / "corpus" / "topologies"
ENTRIES = json.loads((CORPUS / "expected.json").read_text()) if CORPUS.is_dir() else []
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(),
                                reason=f"third-party corpus not present at {CORPUS}")


#: dumps this large are fabrics of hundreds to thousands of nodes: the slow tier, with time
#: for a whole sweep (the 2,328-node director's follow-up rounds search thousands of its
#: internal links: minutes)
LARGE_BYTES = 500_000


def _param(entry: dict):
    large = (CORPUS / entry["file"]).stat().st_size > LARGE_BYTES
    marks = [pytest.mark.slow, pytest.mark.timeout(1800)] if large else []
    return pytest.param(entry, id=entry["file"], marks=marks)


@pytest.mark.parametrize("entry", [_param(e) for e in ENTRIES if e["format"] != "bad-input"])
def test_a_sweep_on_the_imported_real_fabric_blames_nothing(entry, tmp_path):
    out = tmp_path / "fabric.yaml"
    flag = "--lldp" if entry["format"] == "lldp" else "--ibnetdiscover"
    runner = CliRunner()
    imp = runner.invoke(app, ["topology", "import", flag, str(CORPUS / entry["file"]),
                              "--name", "corpus", "-o", str(out),
                              *entry.get("import_args", [])])
    assert imp.exit_code == 0, imp.output
    r = runner.invoke(app, ["sweep", "--topology", str(out), "--executor", "sim", "--json",
                            "--no-history", "-q"])
    result = json.loads(r.stdout)
    assert (result["exit_code"], r.exit_code) == (0, 0), {
        k: result.get(k) for k in ("suspects", "untested", "drain", "link_suspects",
                                   "fabric_warnings", "preflight_skipped")}
    assert result["healthy"] and not result["drain"] and not result["bad_links"]
