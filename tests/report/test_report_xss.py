"""Hostile names and tool output render as text: in HTML, in SVG, in the inline JSON."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.models import (
    BAD,
    FAIL,
    PASS,
    Flow,
    Observation,
    RawResult,
    RunResult,
    Test,
    Verdict,
    link_key,
)
from fabriccheck.report import render_html
from fabriccheck.report.svg import STATE_COLOURS
from fabriccheck.topology.model import Link, Nic, Node, Switch, Topology
from tests.report.dom import parse

EVIL_NODE = "<script>alert(1)</script>"
EVIL_NODE2 = 'n"2\' onmouseover="alert(2)'
EVIL_SWITCH = "</svg><img src=x onerror=alert(3)>"
EVIL_OUTPUT = "</pre></details><script>alert(4)</script>"
EVIL_CMD = "host: all_reduce_perf </textarea><b onclick=alert(5)>x</b>"


def evil_run() -> tuple[RunResult, Topology]:
    names = [EVIL_NODE, EVIL_NODE2, "node-003", "node-004"]
    nodes = {n: Node(n, (Nic(n, "mlx5_0", 0, 400.0),)) for n in names}
    switches = {EVIL_SWITCH: Switch(EVIL_SWITCH, "leaf"), "leaf-b": Switch("leaf-b", "leaf"),
                "spine&<0>": Switch("spine&<0>", "spine")}  # fmt: skip
    links = {}
    for i, n in enumerate(names):
        leaf = EVIL_SWITCH if i < 2 else "leaf-b"
        links[link_key(f"{n}/mlx5_0", leaf)] = Link(f"{n}/mlx5_0", leaf, 400.0)
    for leaf in (EVIL_SWITCH, "leaf-b"):
        links[link_key(leaf, "spine&<0>")] = Link(leaf, "spine&<0>", 400.0)
    topo = Topology("x<y>", "infiniband", nodes, switches, links)
    obs = []
    for k, (a, b) in enumerate([(EVIL_NODE, "node-003"), (EVIL_NODE2, "node-004"),
                                (EVIL_NODE, "node-004")]):  # fmt: skip
        t = Test(f"t{k}<i>", "ib_write_bw", (a, b), (Flow(f"{a}/mlx5_0", f"{b}/mlx5_0"),), 1)
        bad = a == EVIL_NODE
        raw = RawResult(t.test_id, stdout=EVIL_OUTPUT, stderr="<!-- x -->", commands=(EVIL_CMD,),
                        duration_s=5.0)  # fmt: skip
        obs.append(Observation(t, FAIL if bad else PASS, 90.0 if bad else 390.0, "Gb/s", 340.0,
                               390.0, f"slow: {EVIL_OUTPUT}" if bad else "", raw))  # fmt: skip
    evil_link = link_key(EVIL_SWITCH, "spine&<0>")
    run = RunResult(
        mode="sweep", nodes=names, rounds=1, tests=3, bad_nodes=[EVIL_NODE], drain=[EVIL_NODE],
        bad_links=[evil_link], suspects=[EVIL_NODE2], observations=obs,
        link_suspects=[{"candidates": [list(evil_link), ["leaf-b", "spine&<0>"]]}],
        fabric_warnings=["<marquee>warn</marquee>"],
        verdicts=[Verdict("node", EVIL_NODE, BAD, EVIL_OUTPUT, ("t0<i>",)),
                  Verdict("link", f"{evil_link[0]} -- {evil_link[1]}", BAD, "x", link=evil_link)],
        extra={"history": {EVIL_NODE: [{"time": "<t>", "ratio": 0.5, "state": "<s>"}]},
               "run_id": "</title><script>alert(6)</script>"},
    )  # fmt: skip
    return run, topo


def test_hostile_names_render_as_text_everywhere():
    run, topo = evil_run()
    html = render_html(run, topo)
    # exactly our two script elements: the JSON data block and the page script
    assert len(re.findall(r"<script", html, re.I)) == 2
    assert "<img" not in html and "<b onclick" not in html and "<marquee" not in html
    assert "</svg><img" not in html
    dom = parse(html)
    scripts = dom.find_all("script")
    assert [s.attrs.get("type") for s in scripts] == ["application/json", None]
    assert not dom.find_all("img") and not dom.find_all("marquee")
    assert not [b for b in dom.find_all("b") if b.text() == "x"]
    assert not [el for el in dom.iter() for a in el.attrs if a.startswith("on")]
    # the hostile strings are there, as text
    texts = [el.text() for el in dom.iter() if el.tag in ("td", "text", "title", "pre", "div")]
    assert any(t.strip() == EVIL_NODE for t in texts)
    assert any(EVIL_SWITCH in t for t in texts)
    assert any(EVIL_OUTPUT in t for t in texts)
    assert any(EVIL_CMD in t for t in texts)
    # SVG attributes keep the names intact (escaped in the source, decoded by the parser)
    node_el = next(el for el in dom.iter() if el.attrs.get("data-node") == EVIL_NODE)
    assert "st-bad" in node_el.classes()
    assert any(el.attrs.get("data-node") == EVIL_NODE2 for el in dom.iter())
    line = next(el for el in dom.iter() if el.attrs.get("data-link", "").startswith(EVIL_SWITCH))
    assert line.attrs["stroke"] == STATE_COLOURS["bad"]
    # the inline JSON parses back to the same names and contains no raw '<'
    data = dom.find("script", id="fc-data")
    raw_json = data.text()
    assert "<" not in raw_json
    assert json.loads(raw_json)["drain"] == [EVIL_NODE]


def test_csp_allows_only_our_script():
    run, topo = evil_run()
    dom = parse(render_html(run, topo))
    csp = dom.find("meta", **{"http-equiv": "Content-Security-Policy"}).attrs["content"]
    assert "default-src 'none'" in csp and "'unsafe-inline'" not in csp.split("script-src")[1]
    from fabriccheck.report.html import script_hash

    page_js = [s for s in dom.find_all("script") if "type" not in s.attrs][0].text()
    assert f"'{script_hash(page_js)}'" in csp


NAME_CHARS = st.characters(
    whitelist_categories=("Lu", "Ll", "Nd", "Po", "Ps", "Pe", "Sm", "Sc"),
    whitelist_characters="<>&\"'/= -_`",
)


@settings(max_examples=25, deadline=None)
@given(names=st.lists(st.text(NAME_CHARS, min_size=1, max_size=24), min_size=2, max_size=5,
                      unique=True))  # fmt: skip
def test_any_printable_names_round_trip_as_text(names):
    """Whatever a host is called, the page keeps exactly our two scripts and shows the name."""
    pairs = zip(names, names[1:], strict=False)
    obs = [Observation(Test(f"t{i}", "nccl", (a, b), (), 1), FAIL, 1.0, "GB/s", 300.0, 360.0,
                       f"{a} <> {b}") for i, (a, b) in enumerate(pairs)]  # fmt: skip
    verdicts = [Verdict("node", names[0], BAD, names[-1])]
    run = RunResult(mode="sweep", nodes=list(names), drain=[names[0]], bad_nodes=[names[0]],
                    observations=obs, verdicts=verdicts)  # fmt: skip
    html = render_html(run, None)
    assert len(re.findall(r"<script", html, re.I)) == 2
    dom = parse(html)
    assert len(dom.find_all("script")) == 2
    shown = {el.attrs["data-node"] for el in dom.iter() if "data-node" in el.attrs}
    assert shown == set(names)
    assert not [el for el in dom.iter() for a in el.attrs if a.startswith("on")]
    assert json.loads(dom.find("script", id="fc-data").text())["drain"] == [names[0]]
