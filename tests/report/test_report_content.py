"""The report's files and content: what is broken and what to do appear where an operator looks."""

from __future__ import annotations

import json

import hostlist
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabriccheck.models import RunResult
from fabriccheck.report import load_run_dir, render_csv, render_html, render_report
from fabriccheck.report.svg import STATE_COLOURS, ratio_colour
from fabriccheck.report.tabular import CSV_COLUMNS
from fabriccheck.serialize import run_result_to_dict
from tests.report.dom import El, parse
from tests.report.report_runs import Faults, build_run, rail_topology

BAD_NIC = "node-003/mlx5_3"
BAD_LINK = ("leaf-0-1", "spine-1")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    topo = rail_topology(8)
    run = build_run(topo, Faults(bad_nic=BAD_NIC, bad_link=BAD_LINK, unreachable="node-008"))
    out = tmp_path_factory.mktemp("small")
    index = render_report(run, topo, out)
    return run, topo, out, parse(index.read_text(encoding="utf-8"))


def drained_by(commands: list[str]) -> list[str]:
    """Every node the ``scontrol update ... State=DRAIN`` lines drain, sorted."""
    nodes = []
    for c in commands:
        if c.startswith("scontrol update") and "State=DRAIN" in c:
            nodes += hostlist.expand_hostlist(c.split("NodeName=", 1)[1].split()[0].strip("'"))
    return sorted(nodes)


def _row(table: El, first: str) -> list[El]:
    for tr in table.find_all("tr"):
        cells = tr.find_all("td")
        if len(cells) > 1 and cells[1].text().strip() == first:
            return cells
    raise AssertionError(f"no row for {first}")


def test_report_writes_the_three_files_and_json_is_the_contract(small):
    run, _, out, _ = small
    assert {p.name for p in out.iterdir()} >= {"index.html", "results.json", "observations.csv"}
    stored = json.loads((out / "results.json").read_text())
    assert stored == json.loads(json.dumps(run_result_to_dict(run, observations=True)))
    assert stored["drain"] == ["node-003"] and stored["bad_nics"] == [BAD_NIC]


def test_observations_csv_reads_in_pandas_one_row_per_test(small):
    run, _, out, _ = small
    df = pd.read_csv(out / "observations.csv")
    assert tuple(df.columns) == CSV_COLUMNS
    assert len(df) == run.tests == len(run.observations)
    failing = df[df.status != "pass"]
    assert set(failing.test_id) == {o.test.test_id for o in run.observations if not o.passed}
    unreach = df[df.status == "unreachable"]
    assert unreach.value.isna().all() and (unreach.nodes.str.contains("node-008")).all()
    first = run.observations[0]
    row = df[df.test_id == first.test.test_id].iloc[0]
    assert row.value == pytest.approx(first.value) and row.unit == first.unit
    assert row.nics.split() == list(first.test.nics)


def test_banner_says_what_is_broken(small):
    _, _, _, dom = small
    banner = dom.find("section", id="summary")
    assert "bad" in banner.classes()
    assert banner.find("div", **{"class": "verdict"}).text() == "DRAIN"
    what = banner.find("div", **{"class": "what"}).text()
    assert "1 node to drain" in what and "1 link to repair" in what and "1 node unreachable" in what


def test_first_step_drains_exactly_the_drain_list(small):
    run, _, _, dom = small
    steps = dom.find("ol", **{"class": "steps"}).find_all("li")
    first = steps[0]
    assert first.find("div", **{"class": "title"}).text().startswith("Drain 1 node: node-003")
    cmds = first.find("pre").text().splitlines()
    assert drained_by(cmds) == run.drain
    assert "Reason='fabriccheck: bad NIC mlx5_3'" in cmds[0]
    assert not any(c.startswith("kubectl") for c in cmds)  # one scheduler per block
    assert "kubectl cordon node-003" in steps[1].find("pre").text().splitlines()
    titles = [s.find("div", **{"class": "title"}).text() for s in steps]
    assert any(BAD_NIC in t for t in titles)
    assert any("leaf-0-1" in t and "spine-1" in t for t in titles)
    assert any("node-008" in t and "not tested" in t for t in titles)


def test_topology_svg_highlights_bad_node_nic_link_and_unreachable(small):
    _, _, _, dom = small
    fig = dom.find("section", id="summary").parent.find("h2", id="topology").parent
    svg = [s for s in fig.find_all("svg") if "topology" in s.attrs["aria-label"]][0]
    nodes = {el.attrs["data-node"]: el.classes() for el in svg.iter() if "data-node" in el.attrs}
    assert "st-bad" in nodes["node-003"]
    assert "st-unreachable" in nodes["node-008"]
    assert "st-healthy" in nodes["node-001"]
    nic = svg.find("rect", data_nic=BAD_NIC)
    assert nic.attrs["fill"] == STATE_COLOURS["bad"]
    assert svg.find("rect", data_nic="node-003/mlx5_2").attrs["fill"] != STATE_COLOURS["bad"]
    line = svg.find("line", data_link="leaf-0-1 -- spine-1")
    assert line.attrs["stroke"] == STATE_COLOURS["bad"]
    assert svg.find("rect", data_switch="spine-1").attrs["stroke"] == STATE_COLOURS["bad"]


def test_verdict_table_lists_blamed_components_and_evidence_links_resolve(small):
    run, _, _, dom = small
    table = dom.find("table", id="verdict-table")
    assert "bad" in _row(table, BAD_NIC)[2].text()
    assert "bad" in _row(table, "leaf-0-1 -- spine-1")[2].text()
    assert "unreachable" in _row(table, "node-008")[2].text()
    ids = {el.attrs["id"] for el in dom.iter() if "id" in el.attrs}
    hrefs = [a.attrs["href"] for a in table.find_all("a")]
    assert hrefs and all(h[1:] in ids for h in hrefs)
    nic_evidence = next(v for v in run.verdicts if v.name == BAD_NIC).evidence
    assert {a.text() for a in _row(table, BAD_NIC)[4].find_all("a")} == set(nic_evidence)


def test_failing_tests_carry_their_exact_commands(small):
    run, _, _, dom = small
    table = dom.find("table", id="failing-table")
    failing = [o for o in run.observations if not o.passed]
    assert failing
    for obs in failing:
        tr = table.find("tr", id=f"t-{obs.test.test_id}")
        assert tr.find("pre").text().splitlines() == list(obs.raw.commands)


def test_heatmaps_show_the_bad_nic_cell_and_the_unreachable_row(small):
    _, _, _, dom = small
    figs = {s.attrs["aria-label"]: s for s in dom.find_all("svg")}
    rail = next(s for k, s in figs.items() if k.startswith("node × rail"))
    cells = {
        r.find("title").text().split(":", 1)[0]: r.attrs["fill"]
        for r in rail.find_all("rect") if r.find_all("title")
    }  # fmt: skip
    assert cells["node-003 · rail 3"] == ratio_colour(0.25)
    assert cells["node-003 · rail 2"] == ratio_colour(1.0)
    pair = next(s for k, s in figs.items() if k.startswith("pair heatmap"))
    titled = [r.find("title").text() for r in pair.find_all("rect") if r.find_all("title")]
    n8 = [t for t in titled if t.startswith("node-008 ↔") and "not tested together" not in t]
    assert n8 and all("worst status unreachable" in t for t in n8)


def test_blamed_node_cards_have_nic_bars_with_floor(small):
    _, _, _, dom = small
    card = dom.find("div", id="node-node-003")
    bars = card.find("svg")
    nic_bars = [r for r in bars.find_all("rect") if r.find_all("title")]
    assert len(nic_bars) == 8
    assert any(line.attrs.get("stroke-dasharray") == "4 2" for line in bars.find_all("line"))


def test_history_sparkline_and_baseline_from_extra(tmp_path):
    topo = rail_topology(8)
    run = build_run(topo, Faults(bad_nic=BAD_NIC))
    run.extra["history"] = {"node-003": [
        {"time": "2026-11-20T03:00:00Z", "ratio": 1.0, "state": "healthy", "run_id": "r1"},
        {"time": "2026-11-21T03:00:00Z", "ratio": 0.7, "state": "suspect", "run_id": "r2"},
    ]}  # fmt: skip
    run.extra["baselines"] = {"ib_write_bw": {"*": 385.0}}
    dom = parse(render_html(run, topo))
    card = dom.find("div", id="node-node-003")
    spark = card.find("svg", **{"class": "spark"})
    assert len(spark.find_all("circle")) == 2
    assert any(ln.attrs.get("stroke") == "#2b6cb0" for ln in card.find_all("line"))


def test_healthy_gate_says_go_with_nothing_to_do():
    topo = rail_topology(4, rails=2, per_leaf=2, spines=1)
    run = build_run(topo, Faults())
    run.mode = "gate"
    dom = parse(render_html(run, topo))
    banner = dom.find("section", id="summary")
    assert "ok" in banner.classes() and banner.find("div", **{"class": "verdict"}).text() == "GO"
    assert not dom.find_all("ol", **{"class": "steps"})


def test_empty_run_and_no_topology_render():
    dom = parse(render_html(RunResult(mode="sweep", nodes=[]), None))
    assert dom.find("section", id="summary")
    topo = rail_topology(4, rails=2, per_leaf=2, spines=1)
    run = build_run(topo, Faults(slow_node="node-002"))
    dom = parse(render_html(run, None))
    tiles = {el.attrs["data-node"]: el.classes() for el in dom.iter() if "data-node" in el.attrs}
    assert "st-bad" in tiles["node-002"] and len(tiles) == 4


def test_large_cluster_aggregates_and_still_flags_the_faults():
    topo = rail_topology(1024, per_leaf=32, spines=16)
    nodes = sorted(topo.nodes)
    faults = Faults(bad_nic=f"{nodes[40]}/mlx5_5", hung_node=nodes[700], unreachable=nodes[-1],
                    bad_link=("leaf-3-5", "spine-2"))  # fmt: skip
    run = build_run(topo, faults)
    html = render_html(run, topo)
    dom = parse(html)
    topo_svg = next(s for s in dom.find_all("svg") if "by leaf group" in s.attrs["aria-label"])
    cls = {el.attrs["data-node"]: el.classes() for el in topo_svg.iter() if "data-node" in el.attrs}
    assert len(cls) == 1024
    assert "st-bad" in cls[nodes[40]] and "st-hung" in cls[nodes[700]]
    assert "st-unreachable" in cls[nodes[-1]]
    line = topo_svg.find("line", data_link="leaf-3-5 -- spine-2")
    assert line.attrs["stroke"] == STATE_COLOURS["bad"]
    pair = next(s for s in dom.find_all("svg") if s.attrs["aria-label"].startswith("pair heatmap"))
    assert "aggregated" in pair.attrs["aria-label"]
    assert not dom.find_all("table", id="test-table")  # 1,000+ tests: only failing ones listed
    assert len(html) < 2_000_000


def test_stored_run_renders_again_with_its_topology(small, tmp_path):
    run, _, out, _ = small
    again, topo, warnings = load_run_dir(out)
    assert warnings == [] and topo is not None and len(topo.nodes) == 8
    assert again.drain == run.drain and len(again.observations) == len(run.observations)
    index = render_report(again, topo, tmp_path)
    nic = parse(index.read_text()).find("rect", data_nic=BAD_NIC)
    assert nic.attrs["fill"] == STATE_COLOURS["bad"]
    assert render_csv(again) == (out / "observations.csv").read_text()


_FAULT_KINDS = ("bad_nic", "slow_node", "hung_node", "unreachable", "bad_link", "suspect_node")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.sampled_from([8, 16, 48]),
    kinds=st.sets(st.sampled_from(_FAULT_KINDS), max_size=4),
    seed=st.integers(0, 10_000),
)
def test_any_fault_mix_shows_in_banner_drain_and_svg(n, kinds, seed):
    import random

    rng = random.Random(seed)
    topo = rail_topology(n, rails=4, per_leaf=4, spines=2)
    victims = rng.sample(sorted(topo.nodes), 5)
    f = Faults()
    for kind, node in zip(sorted(kinds), victims, strict=False):
        if kind == "bad_nic":
            f.bad_nic = f"{node}/mlx5_{rng.randrange(4)}"
        elif kind == "bad_link":
            f.bad_link = ("leaf-0-1", "spine-1")
        else:
            setattr(f, kind, node)
    run = build_run(topo, f, seed)
    dom = parse(render_html(run, topo))
    verdict = dom.find("div", **{"class": "verdict"}).text()
    if run.drain or run.bad_links:
        assert verdict in ("DRAIN", "REPAIR")
    states = {el.attrs["data-node"]: el.classes() for el in dom.iter() if "data-node" in el.attrs}
    for node in run.drain:
        assert states[node] & {"st-bad", "st-hung"}
    for node in run.unreachable:
        assert "st-unreachable" in states[node]
    healthy = set(topo.nodes) - set(run.drain) - set(run.unreachable) - set(run.suspects)
    assert all("st-healthy" in states[n] for n in healthy)
    if run.drain:
        pre = dom.find("ol", **{"class": "steps"}).find("pre").text()
        assert drained_by(pre.splitlines()) == sorted(run.drain)


def test_failing_list_is_capped_but_keeps_every_verdicts_evidence(monkeypatch):
    import fabriccheck.report.html as html_mod

    topo = rail_topology(16)
    run = build_run(topo, Faults(bad_nic="node-003/mlx5_3", slow_node="node-012"))
    evidence = {t for v in run.verdicts if v.state != "healthy" for t in v.evidence}
    failing = [o for o in run.observations if not o.passed]
    assert len(failing) > 8
    monkeypatch.setattr(html_mod, "LISTED_MAX", len(evidence) + 1)
    dom = parse(render_html(run, topo))
    rows = {tr.attrs["id"][2:] for tr in dom.find("table", id="failing-table").find_all("tr")
            if "id" in tr.attrs}  # fmt: skip
    assert evidence <= rows and len(rows) == len(evidence) + 1
    assert "more failing tests are not listed" in dom.find("h2", id="failing").parent.text()
