"""The docs' output samples are real: each marked sample is what a fresh run prints now.

Every ``<!-- sample: CMD -->`` block of README.md and docs/*.md (``tests/docs/samples.py``) is
run again and compared with the block, numbers included: a test count, a round, a verdict or a
name that differs makes the sample stale (``make docs`` rewrites it). Only wall-clock seconds,
run ids, dates and paths may differ. Samples whose commands take more than ~10 CPU s are in the
slow tier (``samples.SLOW``). Program output outside a marker is refused, so a new sample cannot
be pasted by hand.
"""

from __future__ import annotations

import re

import pytest

from tests.docs import samples
from tests.docs.doctool import blocks

SAMPLES = samples.find_all()
#: lines that only a run prints: a text block holding one is a pasted sample
RUN_OUTPUT = re.compile(r"^(round \d+ \(|faults found: |healthy: |healthy with |incomplete: |"
                        r"error: |warning: |job log: |drain: )")


def _param(s: samples.Sample):
    return pytest.param(s, id=s.where, marks=[pytest.mark.slow] if s.slow else [])


@pytest.mark.parametrize("sample", [_param(s) for s in SAMPLES])
def test_sample_is_what_a_fresh_run_prints(sample, tmp_path):
    if sample.needs_shared and not samples.SHARED_FIXTURES.is_dir():
        pytest.skip(f"shared fixtures not found at {samples.SHARED_FIXTURES}")
    try:
        fresh, _ = samples.generate(sample, tmp_path)
    except samples.SampleError as exc:
        pytest.fail(str(exc))
    if not samples.same(sample.body, fresh):
        pytest.fail(f"{sample.where}: the sample is stale; run `make docs` (or `python -m "
                    f"tests.docs.samples {sample.doc.name}`) and review the diff:\n"
                    + samples.diff(sample.body, fresh, sample.where), pytrace=False)


def test_the_readme_and_the_pages_are_generated():
    where = {s.doc.name for s in SAMPLES}
    assert {"README.md", "bisect.md", "how-it-finds-faults.md", "topologies.md",
            "troubleshooting.md", "gate.md"} <= where
    readme = {c.text.split()[1] for s in SAMPLES if s.doc.name == "README.md" for c in s.commands}
    assert {"demo", "gate", "bisect"} <= readme
    assert len(SAMPLES) >= 30


def _has_output(lines: list[str]) -> bool:
    """A console block's lines hold more than ``$ command`` lines (and their ``\\`` tails)."""
    more = False
    for ln in lines:
        if not (more or ln.startswith("$ ")):
            return True
        more = ln.rstrip().endswith("\\")
    return False


def test_no_output_is_pasted_outside_a_marker():
    """A console block with output, or a text block with a run's lines, must be a sample
    (blocks marked doc-test: skip need root or a real cluster and are kept by hand)."""
    marked = {(s.doc, s.first) for s in SAMPLES}
    pasted = []
    for doc in samples.DOCS:
        for b in blocks(doc):
            if b.skip or (doc, b.line) in marked:  # b.line: the fence's 1-based line
                continue
            body = [ln for ln in b.body if ln.strip()]
            if b.lang == "console" and _has_output(body):
                pasted.append(f"{doc.name}:{b.line}")
            elif b.lang in ("text", "") and any(RUN_OUTPUT.match(ln) for ln in body):
                pasted.append(f"{doc.name}:{b.line}")
    assert not pasted, ("program output pasted by hand; mark it <!-- sample: CMD --> ... "
                        "<!-- /sample --> and run `make docs`:\n" + "\n".join(pasted))


def test_a_changed_number_is_stale_a_changed_wall_time_is_not():
    doc = ["round 1 (sweep): 3200 tests (2880 preflight, 320 sweep), 121 not passing · test "
           "time 32 s (total 32 s) · wall 1.8 s",
           "faults found: sweep of 64 nodes in 10 rounds, 4389 tests, 169 s of test time "
           "(3.84 s wall)",
           "run id: 20261128T101500-1a2b3c (fabriccheck report 20261128T101500-1a2b3c)"]
    fresh = [doc[0].replace("wall 1.8 s", "wall 12.3 s"),
             doc[1].replace("(3.84 s wall)", "(17.02 s wall)"),
             doc[2].replace("101500-1a2b3c", "093000-ffee00")]
    assert samples.same(doc, fresh)
    for old, new in (("4389 tests", "4390 tests"), ("10 rounds", "11 rounds"),
                     ("121 not passing", "120 not passing"), ("64 nodes", "63 nodes")):
        edited = [ln.replace(old, new) for ln in doc]
        assert not samples.same(edited, fresh), old
        assert new in samples.diff(edited, fresh)


def test_show_and_drop_pick_lines():
    out = ["a", "round 1", "round 2", "round 3", "", "faults found", "  evidence: x", "end"]
    assert samples.select("t", out, "1-2, /^faults/-$") == [
        "a", "round 1", "...", "faults found", "  evidence: x", "end"]
    assert samples.select("t", out, "/^round 2/") == ["...", "round 2", "..."]
    assert samples.select("t", out, "1-4, /^faults/") == [
        "a", "round 1", "round 2", "round 3", "", "faults found", "..."]
    with pytest.raises(samples.SampleError):
        samples.select("t", out, "/^nothing/")
    with pytest.raises(samples.SampleError):
        samples.select("t", out, "4, 2")


def test_markers_are_read(tmp_path):
    doc = tmp_path / "page.md"
    doc.write_text("text\n<!-- sample: fabriccheck parse x.txt   # exits 2: why\n"
                   "     show: 1-2\n     sample: fabriccheck parse y.txt\n"
                   "     stream: stdout -->\n```console\n$ old\n```\n<!-- /sample -->\n",
                   encoding="utf-8")
    (s,) = samples.find_samples(doc)
    assert [c.text for c in s.commands] == ["fabriccheck parse x.txt", "fabriccheck parse y.txt"]
    assert [c.expect for c in s.commands] == [2, 0]
    assert s.commands[0].show == "1-2" and s.commands[1].stream == "stdout"
    assert s.body == ["$ old"] and s.console
    doc.write_text("<!-- sample: fabriccheck parse x.txt -->\n```text\n```\n", encoding="utf-8")
    with pytest.raises(samples.SampleError, match="/sample"):
        samples.find_samples(doc)
