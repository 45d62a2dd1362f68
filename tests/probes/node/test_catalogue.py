"""The node-local catalogue: data that loads and validates, overrides by id, the severities'
order, and the generated table in docs/node-checks.md."""

from __future__ import annotations

import pytest

from fabriccheck.errors import ConfigError
from fabriccheck.probes.node import NODE_TOOLS, catalogue_doc
from fabriccheck.probes.node.catalogue import builtin_catalogue, load_catalogue, parse_entries
from fabriccheck.probes.node.findings import Finding, NodeReport, worst
from fabriccheck.probes.node.judge import DETECTORS, JUDGES

GOOD = {"id": "x-1", "severity": "warn", "part": "gpu", "what": "w", "fix": "f", "source": "s"}


def test_every_builtin_entry_is_complete_and_sourced():
    cat = builtin_catalogue()
    assert len(cat.entries) >= 30
    for e in cat.entries.values():
        assert e.severity in ("fault", "warn", "info"), e.id
        assert e.what and e.part, e.id
        assert e.source.strip(), f"{e.id} names no source"
        assert e.severity == "info" or e.fix.strip(), f"{e.id}: a fault or warn needs a fix"


@pytest.mark.parametrize("bad, words", [
    ({**GOOD, "severity": "critical"}, "severity 'critical'"),
    ({**GOOD, "colour": "red"}, "unknown field(s) colour"),
    ({k: v for k, v in GOOD.items() if k != "what"}, "'what' is required"),
    ({**GOOD, "id": "Bad Id"}, "lowercase"),
    ({**GOOD, "params": [1, 2]}, "'params' must be a mapping"),
])
def test_a_bad_entry_is_one_line_naming_where(bad, words):
    with pytest.raises(ConfigError) as exc:
        parse_entries([GOOD, bad], "catalogue/x.yaml")
    assert words in str(exc.value) and "catalogue/x.yaml[1]" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_overrides_change_one_entry_and_add_new_ones():
    base = builtin_catalogue()
    some = next(iter(base.entries.values()))
    other = "fault" if some.severity != "fault" else "info"
    cat = load_catalogue({some.id: {"severity": other, "params": {"extra": 3}},
                          "site-local-1": {**GOOD, "id": "the-key-wins"}})
    assert cat.entry(some.id).severity == other
    assert cat.entry(some.id).params["extra"] == 3
    assert cat.entry(some.id).source == some.source  # the rest is kept
    assert cat.entry("site-local-1").severity == "warn"
    assert base.entry(some.id).severity == some.severity  # the built-in one is untouched


def test_a_bad_override_names_the_spec_field():
    with pytest.raises(ConfigError, match=r"spec.yaml:node_checks\.xid-63.*severity"):
        load_catalogue({"xid-63": {"severity": "drain"}}, source="spec.yaml:node_checks")
    with pytest.raises(ConfigError, match="required"):
        load_catalogue({"brand-new": {"severity": "warn"}})
    with pytest.raises(ConfigError, match="must map a check id"):
        load_catalogue(["xid-63"])  # type: ignore[arg-type]


def test_the_verdict_is_the_worst_finding_and_incomplete_is_never_healthy():
    info, warn, fault = (Finding(s, "c", "node", s) for s in ("info", "warn", "fault"))
    assert worst([]) == worst([info]) == "healthy"
    assert worst([info, warn]) == "warn" and worst([warn, fault, info]) == "fault"
    assert NodeReport("x", (info,), complete=False).node_verdict == "warn"
    assert NodeReport("x", (fault,), complete=False).node_verdict == "fault"
    assert NodeReport("x", (info,)).to_json()["node_verdict"] == "healthy"


def test_every_tool_has_a_judge_and_a_detector():
    assert set(JUDGES) == set(NODE_TOOLS) == {t for t, _, _ in DETECTORS}
    for module, name in JUDGES.values():
        mod = __import__(f"fabriccheck.probes.node.{module}", fromlist=[name])
        assert callable(getattr(mod, name)), f"{module}.{name}"


def test_the_docs_table_is_generated_from_the_catalogue():
    text = catalogue_doc.DOC.read_text(encoding="utf-8")
    assert catalogue_doc.rewrite(text, builtin_catalogue()) == text, (
        "docs/node-checks.md is stale: run python -m fabriccheck.probes.node.catalogue_doc")
    for check_id in builtin_catalogue().entries:
        assert f"`{check_id}`" in text
