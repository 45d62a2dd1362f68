"""The rack picture of the HTML report (docs/nvl72.md "The report"): each NVLink domain drawn as
its rack beside the topology, with what a simulated run found marked -- drained trays, the
failing GPU, the inactive port as a line to the switch chip it is wired to, the switch tray
down -- and nothing marked on a fault-free run. Topologies without domains get no rack picture
and the rest of the page is the same with or without it."""

from __future__ import annotations

import dataclasses
import re

import pytest

from fabriccheck.executors.sim import SimExecutor
from fabriccheck.faults import FaultSet
from fabriccheck.models import RunResult
from fabriccheck.orchestrator import run
from fabriccheck.policy import SweepPolicy
from fabriccheck.report import render_html
from fabriccheck.report.rack_svg import RACKS_MAX, render_racks
from fabriccheck.report.svg import STATE_COLOURS
from fabriccheck.report.view import build_view
from fabriccheck.specs import load_spec
from fabriccheck.topology import generate, load_topology
from tests.report.dom import El, parse

NOISE = {"jitter": 0.03, "glitch_rate": 0.01}
FAULTS = [{"kind": "nvlink_port_down", "node": "node-003", "gpu": 2, "port": 17},
          {"kind": "nvswitch_down", "rack": "rack-1", "tray": 3},
          {"kind": "nvlink_degraded", "node": "node-030", "gpu": 0, "factor": 0.5}]
RED = STATE_COLOURS["bad"]


def sweep(topo, faults, seed=4) -> RunResult:
    spec = load_spec("gb200-ndr400-ib")
    fs = FaultSet.from_dict({"noise": NOISE, "faults": faults}).validate(topo)
    res = run("sweep", sorted(topo.nodes), topo, spec, SimExecutor(topo, spec, fs, seed),
              SweepPolicy(seed=seed))
    res.extra["started_at"] = "2025-03-04 09:12 UTC"  # the page's time: the same every render
    return res


@pytest.fixture(scope="module")
def racks2():
    return generate({"kind": "nvl72", "racks": 2}, name="nvl-2", fabric="infiniband")


@pytest.fixture(scope="module")
def faulty(racks2):
    res = sweep(racks2, FAULTS)
    return res, render_html(res, racks2)


def rack_svgs(dom: El) -> dict[str, El]:
    return {svg.attrs["aria-label"].split()[-1]: svg for svg in dom.find_all("svg")
            if "rack" in svg.classes()}


def marks(svg: El) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for el in svg.iter():
        if "data-mark" in el.attrs:
            name = next((el.attrs[k] for k in ("data-tray", "data-gpu", "data-port", "data-nvsw",
                                               "data-chip") if k in el.attrs), "")
            out.setdefault(el.attrs["data-mark"], set()).add(name)
    return out


def centre(el: El) -> tuple[float, float]:
    return (float(el.attrs["x"]) + float(el.attrs["width"]) / 2,
            float(el.attrs["y"]) + float(el.attrs["height"]) / 2)


def test_each_rack_is_drawn_with_its_trays_and_switch_trays(faulty, racks2):
    _, html = faulty
    dom = parse(html)
    assert dom.find("h3", id="racks").text() == "NVLink domains (racks)"
    svgs = rack_svgs(dom)
    assert list(svgs) == ["rack-0", "rack-1"]
    for name, svg in svgs.items():
        d = racks2.domains[name]
        assert [g.attrs["data-tray"] for g in svg.find_all("g") if "data-tray" in g.attrs] == \
            list(d.trays)
        assert len([r for r in svg.find_all("rect") if "data-gpu" in r.attrs]) == 18 * 4
        assert [g.attrs["data-nvsw"] for g in svg.find_all("g") if "data-nvsw" in g.attrs] == \
            list(d.switch_tray_names())
        assert len([r for r in svg.find_all("rect") if "data-chip" in r.attrs]) == 18


def test_the_found_faults_are_marked_and_nothing_else(faulty):
    res, html = faulty
    assert res.drain == ["node-003", "node-030"]
    svgs = rack_svgs(parse(html))
    assert marks(svgs["rack-0"]) == {"tray": {"node-003"}, "port": {"node-003/gpu2/nvl17"},
                                     "port-gpu": {"node-003/gpu2"}}
    assert marks(svgs["rack-1"]) == {"tray": {"node-030"}, "gpu": {"node-030/gpu0"},
                                     "switch": {"rack-1-nvsw-3"}}
    # the switch tray's two chips are drawn down, the other chips not
    chips = {r.attrs["data-chip"]: r.attrs["fill"] for r in svgs["rack-1"].find_all("rect")
             if "data-chip" in r.attrs}
    assert {c for c, fill in chips.items() if fill == RED} == {"rack-1-nvsw-3/0",
                                                                 "rack-1-nvsw-3/1"}


def test_the_inactive_port_runs_from_its_gpu_to_the_chip_it_is_wired_to(faulty):
    _, html = faulty
    svg = rack_svgs(parse(html))["rack-0"]
    (line,) = [el for el in svg.find_all("line") if el.attrs.get("data-port")]
    assert "node-003/gpu2/nvl17 -> rack-0-nvsw-8/1: inactive" in line.find("title").text()
    gpu = svg.find("rect", data_gpu="node-003/gpu2")
    chip = svg.find("rect", data_chip="rack-0-nvsw-8/1")
    assert float(line.attrs["x1"]) == pytest.approx(centre(gpu)[0])
    assert float(line.attrs["x2"]) == pytest.approx(centre(chip)[0])
    # node-003 sits above the switch trays: the line leaves the GPU's bottom, enters the chip's top
    assert float(gpu.attrs["y"]) < float(line.attrs["y1"]) <= float(gpu.attrs["y"]) + 11
    assert float(chip.attrs["y"]) <= float(line.attrs["y2"]) < centre(chip)[1]
    assert "NVLink 17 inactive" in svg.find("g", data_tray="node-003").find("title").text()


def test_a_fault_free_run_marks_nothing(racks2):
    res = sweep(racks2, [], seed=2)
    assert res.exit_code == 0
    svgs = rack_svgs(parse(render_html(res, racks2)))
    assert len(svgs) == 2
    for svg in svgs.values():
        assert marks(svg) == {}
        assert {g.attrs["class"] for g in svg.find_all("g") if "data-tray" in g.attrs} == {
            "tray st-healthy"}
        assert not [r for r in svg.find_all("rect") if r.attrs.get("fill") == RED]
        assert not svg.find_all("line")


def _without_racks(html: str) -> str:
    html = html.replace('<a href="#racks">racks</a>', "", 1)
    return re.sub(r'\n  <h3 id="racks">.*?</svg>\n  (?=\n</div>)', "", html, count=1,
                  flags=re.S)


def test_without_domains_no_rack_picture_and_the_page_is_otherwise_the_same(faulty, racks2):
    res, html = faulty
    plain = dataclasses.replace(racks2, domains={})
    other = render_html(res, plain)
    assert 'id="racks"' not in other and 'class="fig rack"' not in other
    assert _without_racks(html) == other
    # a bundled fabric without domains
    rail = load_topology("roce-rail-64")
    view = build_view(RunResult(mode="sweep", nodes=sorted(rail.nodes)), rail)
    assert render_racks(RunResult(mode="sweep", nodes=sorted(rail.nodes)), view, rail) == (
        [], None, "")


def test_marked_racks_come_first_and_chips_and_unsettled_racks_are_marked():
    topo = generate({"kind": "nvl72", "racks": RACKS_MAX + 2}, name="big", fabric="infiniband")
    last = f"rack-{RACKS_MAX + 1}"
    res = RunResult(mode="sweep", nodes=sorted(topo.nodes))
    res.extra["nvlink"] = {
        "switches": [{"name": f"{last}-nvsw-2/1", "rack": last, "ports": [5],
                      "reason": "port 5 inactive on every GPU <of the rack>"},
                     {"name": "elsewhere-nvsw-1", "rack": "elsewhere", "reason": "not ours"}],
        "rack_suspects": [{"rack": "rack-3", "failed": ["r9-nvl0001"],
                           "reason": "every test failed, no tray proven good"}]}
    svgs, legend, caption = render_racks(res, build_view(res, topo), topo)
    assert len(svgs) == RACKS_MAX and legend is not None
    assert "2 rack(s) with nothing marked are not drawn" in caption
    first, second = (parse(str(s)) for s in svgs[:2])
    assert first.find("svg").attrs["aria-label"] == "NVLink domain rack-3"
    assert marks(first) == {"rack": {""}}
    assert second.find("svg").attrs["aria-label"] == f"NVLink domain {last}"
    assert marks(second) == {"chip": {f"{last}-nvsw-2/1"}}
    assert "&lt;of the rack&gt;" in str(svgs[1]) and "<of the rack>" not in str(svgs[1])
