"""Every discovery dump of ``../shared/corpus/topologies`` imports as its ``expected.json`` says,
and every bad input is refused with a one-line error.

The corpus is third-party text, never copied here: read where it is, skipped when absent. The
comparison reuses the corpus's ``check.py`` (its ``actual_metrics``) in process; the CLI path
(exit codes, one ``error:`` line, no file written) is covered for one bad input.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from fabriccheck.errors import FabricCheckError
from fabriccheck.topology.discovery.ibnetdiscover import import_ibnetdiscover
from fabriccheck.topology.discovery.lldp import import_lldp
from fabriccheck.topology.fields import parse_yaml
from fabriccheck.topology.load import topology_from_dict
from tests.conftest import REPO

CORPUS = REPO.parent / "shared" / "corpus" / "topologies"
ENTRIES = json.loads((CORPUS / "expected.json").read_text()) if CORPUS.is_dir() else []
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(),
                                reason=f"third-party corpus not present at {CORPUS}")


def _check_module():
    spec = importlib.util.spec_from_file_location("corpus_topo_check", CORPUS / "check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _import(entry, flag: str, args: list[str]) -> str:
    path = CORPUS / entry["file"]
    if flag == "--lldp":
        spines = int(args[args.index("--spines") + 1]) if "--spines" in args else 0
        return import_lldp([path], name=path.stem, spines=spines)[0]
    return import_ibnetdiscover(path, name=path.stem)[0]


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["format"] != "bad-input"],
                         ids=lambda e: e["file"])
def test_corpus_dump_imports_as_expected(entry, tmp_path):
    flag = "--lldp" if entry["format"] == "lldp" else "--ibnetdiscover"
    text = _import(entry, flag, entry.get("import_args", []))
    out = tmp_path / "t.yaml"
    out.write_text(text)
    topo = topology_from_dict(parse_yaml(text, str(out)), source=str(out))
    act = _check_module().actual_metrics(topo.to_contract(), str(out))
    exp = entry["expected"]
    for key in ("switches", "hosts", "switch_links", "host_links", "leaf_switches"):
        if key in exp:
            assert act[key] == exp[key], key
    assert act["nics"] == exp.get("nic_ports", exp.get("hcas"))
    for key in ("switch_link_gbps_total", "host_link_gbps_total"):
        if key in exp:
            assert act[key] == pytest.approx(exp[key], rel=0.05), key
    assert not set(exp.get("nic_endpoints", [])) - act["endpoints"]
    assert topo.gpus_per_node == 0  # discovery cannot see GPUs


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["format"] == "bad-input"],
                         ids=lambda e: f"{e['file']}{e['import_flag']}")
def test_corpus_bad_input_is_refused(entry):
    with pytest.raises(FabricCheckError) as exc:
        _import(entry, entry["import_flag"], [])
    assert str(CORPUS / entry["file"]) in str(exc.value)  # the error names the file
    assert "\n" not in str(exc.value)


def test_cli_bad_input_one_line_no_output(tmp_path):
    out = tmp_path / "o.yaml"
    r = CliRunner().invoke(app, ["topology", "import", "--ibnetdiscover",
                                 str(CORPUS / "bad_duplicate_guid_ibm_sdr.txt"), "-o", str(out)])
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error:")
    assert "used twice" in lines[0] and not out.exists()
