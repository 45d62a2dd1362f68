"""The published GPU outputs of ``../shared/corpus/node`` (nvidia-smi, rocm-smi, amd-smi) are
judged as ``expected.json`` says, with its ``facts``; no other file of the corpora is taken for
a GPU tool's output.

The corpus is third-party text, read where it is and never copied here; the tests skip when
``../shared`` is absent.
"""

from __future__ import annotations

import json

import pytest

from fabriccheck.probes.node.judge import detect_node_tool, judge_node_text
from tests.conftest import REPO

CORPORA = REPO.parent / "shared" / "corpus"
NODE = CORPORA / "node"
ENTRIES = json.loads((NODE / "expected.json").read_text()) if NODE.is_dir() else []
GPU = [e for e in ENTRIES if e["file"].startswith(("nvidia-smi", "rocm-smi", "amd-smi"))]
pytestmark = pytest.mark.skipif(not NODE.is_dir(),
                                reason=f"third-party corpus not present at {NODE}")

#: the tool detection must name, by the file name's prefix (longest first)
TOOLS = (("nvidia-smi-nvlink", "nvidia-smi-nvlink"), ("nvidia-smi-topo", "nvidia-smi-topo"),
         ("nvidia-smi-qx", "nvidia-smi-qx"), ("nvidia-smi-q", "nvidia-smi-q"),
         ("nvidia-smi-L", "nvidia-smi-L"), ("nvidia-smi_", "nvidia-smi"),
         ("rocm-smi", "rocm-smi"), ("amd-smi", "amd-smi"))


def _text(name: str) -> str:
    return (NODE / name).read_text(encoding="utf-8", errors="replace")


def test_the_corpus_has_the_gpu_entries():
    assert len(GPU) >= 19


@pytest.mark.parametrize("entry", GPU, ids=lambda e: e["file"])
def test_gpu_output_is_judged_as_expected(entry):
    text = _text(entry["file"])
    want_tool = next(t for prefix, t in TOOLS if entry["file"].startswith(prefix))
    assert detect_node_tool(text) == want_tool
    report = judge_node_text(text)
    want = entry["verdict"]
    got = report.node_verdict
    findings = [f.to_json() for f in report.findings if f.severity != "info"]
    if want == "benign-noise":
        assert got in ("healthy", "warn"), findings
    else:
        assert got == want, findings


@pytest.mark.parametrize("entry", GPU, ids=lambda e: e["file"])
def test_gpu_output_facts_match(entry):
    facts = judge_node_text(_text(entry["file"])).facts
    for key, want in entry["facts"].items():
        assert key in facts, f"fact {key!r} not read"
        got = facts[key]
        if isinstance(got, str) and got.endswith("...") and isinstance(want, str):
            assert want.startswith(got[:-3]), (key, got, want)  # the table truncates names
        else:
            assert got == want, (key, got, want)


def test_no_other_published_output_is_taken_for_a_gpu_tool():
    """nccl-tests, perftest, iperf3, NCCL job logs, kernel logs, ibstat, lspci ...: node-local
    tools are detected first, so a GPU detector that matched any of them would hide it."""
    others = [p for root in (CORPORA, CORPORA.parent / "fixtures") for p in root.rglob("*")
              if p.is_file() and p.suffix != ".py" and p.name not in {e["file"] for e in GPU}
              and p.stat().st_size < 20_000_000]
    assert len(others) > 100
    for p in others:
        tool = detect_node_tool(p.read_text(encoding="utf-8", errors="replace"))
        assert not (tool or "").startswith(("nvidia-smi", "rocm", "amd")), (p.name, tool)
