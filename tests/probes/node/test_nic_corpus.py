"""Published ``ibstat``/``ibstatus``/``perfquery``/``lspci``/``ethtool -S`` outputs
(``../shared/corpus/node``) get the verdict and facts its ``expected.json`` gives them.

The corpus is third-party text and is never copied here: the test reads it where it is and
skips when ``../shared`` is absent.
"""

from __future__ import annotations

import json

import pytest

from fabriccheck.probes.node import counters, pcie, ports
from fabriccheck.probes.node.judge import detect_node_tool, judge_node_text
from tests.conftest import REPO

CORPUS = REPO.parent / "shared" / "corpus" / "node"
ABSENT = f"third-party corpus not present at {CORPUS} (put shared/ beside the clone)"
pytestmark = pytest.mark.skipif(not (CORPUS / "expected.json").is_file(), reason=ABSENT)

#: the corpus's ``tool`` label -> the node tool that judges it
TOOLS = {"ibstat": "ibstat", "ibstatus": "ibstatus", "perfquery -x": "perfquery",
         "perfquery -E": "perfquery", "lspci -vvv": "lspci", "lspci -vv (excerpt)": "lspci",
         "lspci": "lspci", "ethtool -S": "ethtool-S"}
#: facts expected.json records that the text itself cannot give
NOT_IN_TEXT = {
    "exit_code": "the exit status is in the capture's file name, not in the output",
    "zero_counters_omitted": "the mail's author said so; the counters cannot",
}
PREDICATES = (ports.looks_like_ibstat, ports.looks_like_ibstatus, ports.looks_like_sysfs_text,
              ports.looks_like_ethtool, counters.looks_like_perfquery,
              counters.looks_like_ethtool_stats, pcie.looks_like_lspci)


def _entries() -> list[dict]:
    if not (CORPUS / "expected.json").is_file():
        return []
    return json.loads((CORPUS / "expected.json").read_text(encoding="utf-8"))


ENTRIES = _entries()
MINE = [e for e in ENTRIES if e["tool"] in TOOLS]
OTHERS = [e for e in ENTRIES if e["tool"] not in TOOLS]


def _text(entry: dict) -> str:
    return (CORPUS / entry["file"]).read_text(encoding="utf-8", errors="replace")


def test_the_corpus_holds_the_nic_entries():
    assert len(MINE) == 11, [e["file"] for e in MINE]


@pytest.mark.parametrize("entry", MINE, ids=[e["file"] for e in MINE])
def test_verdict_as_expected(entry):
    text = _text(entry)
    assert detect_node_tool(text) == TOOLS[entry["tool"]]
    report = judge_node_text(text)
    want = entry["verdict"]
    if want == "benign-noise":
        assert report.node_verdict in ("healthy", "warn"), [f.what for f in report.findings]
    else:
        assert report.node_verdict == want, [f.what for f in report.findings]


@pytest.mark.parametrize("entry", MINE, ids=[e["file"] for e in MINE])
def test_facts_as_expected(entry):
    facts = judge_node_text(_text(entry)).facts
    for key, value in entry["facts"].items():
        if key in NOT_IN_TEXT:
            continue
        assert facts.get(key) == value, (key, facts.get(key))


def test_the_ibpanic_capture_keeps_its_partial_ports():
    entry = next(e for e in MINE if "ibpanic" in e["file"])
    report = judge_node_text(_text(entry))
    assert not report.complete and "ibpanic" in report.reason
    assert {f.check for f in report.findings} == {"port-tool-error"}


def test_no_downgraded_line_of_the_xe9680_is_flagged_above_info():
    entry = next(e for e in MINE if e["file"].startswith("lspci-vvv"))
    report = judge_node_text(_text(entry))
    assert report.complete and not [f for f in report.findings if f.severity != "info"]
    assert len(report.findings) == entry["facts"]["downgraded_lines"]


@pytest.mark.parametrize("entry", OTHERS, ids=[e["file"] for e in OTHERS])
def test_other_tools_outputs_are_not_claimed(entry):
    text = _text(entry)
    assert not [p.__name__ for p in PREDICATES if p(text)]
