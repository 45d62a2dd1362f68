"""The console summary names the cable to pull under link and switch verdicts."""

from __future__ import annotations

import doctest

from rich.console import Console

from fabriccheck.cli import run_summary
from fabriccheck.cli.run_summary import print_summary
from fabriccheck.inference.cables import cables
from fabriccheck.models import Link, RunResult, Verdict
from fabriccheck.serialize import run_result_to_dict
from tests.report.test_report_paths import BAD_LINK, degraded_run, ported


def _printed(result: RunResult) -> str:
    console = Console(record=True, width=240, color_system=None)
    print_summary(result, console)
    return console.export_text()


def test_simulated_bad_link_names_cable_with_ports():
    topo, result = degraded_run("infiniband", 1)
    link = topo.links[Link.of(*BAD_LINK)]
    text = _printed(result)
    assert (f"pull cable {link.a} port {link.a_port[0]} <-> {link.b} port {link.b_port[0]}"
            in text)
    assert run_result_to_dict(result)["cables"] == result.extra["cables"]  # in --json


def test_suspect_set_and_switch_list_their_cables():
    topo = ported("infiniband")
    keys = [Link.of("leaf-0-1", "spine-3"), Link.of("leaf-1-1", "spine-3")]
    suspect = Verdict("link", " | ".join(str(k) for k in keys), "suspect", "two explain it")
    down = [Link.of(f"leaf-{g}-2", "spine-1") for g in range(4)]
    switch = Verdict("switch", "spine-1", "bad", "4 of its links are bad")
    entries = cables([suspect, switch, Verdict("node", "node-001", "healthy")],
                     {"spine-1": down}, topo)
    assert [(e["verdict"], tuple(e["link"]), e["of"]) for e in entries] == [
        *((suspect.name, tuple(k), 2) for k in keys), *(("spine-1", tuple(k), 4) for k in down)]
    result = RunResult("sweep", sorted(topo.nodes), tests=1, verdicts=[suspect, switch],
                       extra={"cables": entries})
    text = _printed(result)
    a, b = (topo.links[k] for k in keys)
    assert (f"one of 2 cables: {a.a} port {a.a_port[0]} <-> {a.b} port {a.b_port[0]}, "
            f"{b.a} port {b.a_port[0]} <-> {b.b} port {b.b_port[0]}") in text
    assert "its bad cables: leaf-0-2 port" in text and "(+0 more)" not in text


def test_without_ports_says_so_and_old_results_print_no_cable_line():
    topo, result = degraded_run("infiniband", 1)
    for e in result.extra["cables"]:
        e.update(a_port=[], b_port=[], cable=" -- ".join(e["link"]))
    assert "ports unknown: import the topology from ibnetdiscover" in _printed(result)
    result.extra.pop("cables")
    assert "<->" not in _printed(result)


def test_doctests():
    assert doctest.testmod(run_summary).failed == 0
