"""Every published output of ``../shared/corpus/parsers`` is read as its ``expected.json`` says.

The corpus is third-party text and is never copied here: the test reads it where it is and
skips when ``../shared`` is absent. It reuses the corpus's own ``check.py`` comparison, run in
process (``parse_text`` + the JSON contract) rather than through one CLI process per file.
NCCL job logs (tool ``nccl-log``) are checked by the log scanner's own suite.
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from fabriccheck.errors import ParseError
from fabriccheck.probes.detect import parse_text
from fabriccheck.probes.to_json import result_to_json
from tests.conftest import REPO

CORPUS = REPO.parent / "shared" / "corpus" / "parsers"
ENTRIES = (json.loads((CORPUS / "expected.json").read_text()) if CORPUS.is_dir() else [])
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(),
                                reason=f"third-party corpus not present at {CORPUS}")


def _check_module():
    spec = importlib.util.spec_from_file_location("corpus_parsers_check", CORPUS / "check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["tool"] != "nccl-log"],
                         ids=lambda e: e["file"])
def test_corpus_file_parses_as_expected(entry):
    text = (CORPUS / entry["file"]).read_text(encoding="utf-8", errors="replace")
    try:
        data = result_to_json(parse_text(text))  # auto-detected, as check.py runs the CLI
    except ParseError as exc:
        pytest.fail(f"{entry['file']}: {exc}")
    assert data["status"] != "unparseable", data["reason"]
    problems = _check_module().compare(entry["expected"], data)
    assert not problems, os.linesep.join(problems)


SAMPLES = CORPUS.parent / "samples"


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.txt")) if SAMPLES.is_dir() else [],
                         ids=lambda p: p.name)
def test_corpus_sample_is_detected_and_read(path):
    """The six extra published samples have no expected values: each must at least be
    detected and read (not refused, not unparseable)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    data = result_to_json(parse_text(text))
    assert data["status"] != "unparseable", data["reason"]
    assert data.get("rows") or data["errors"] or data.get("latency_rows") or data["status"] != "ok"
