"""The report's ladder view (levels x nodes): per-node cells on simulated sweeps, skipped levels
with their reasons, aggregation on a large cluster, escaping."""

from __future__ import annotations

import pytest

from fabriccheck.faults import FaultSet, load_faults
from fabriccheck.models import FAIL, PASS, Observation, RunResult, Test
from fabriccheck.policy import SweepPolicy, spec_probes
from fabriccheck.report import render_html
from fabriccheck.report.ladder_table import LADDER_MAX_NODES, ladder_context, ladder_table
from fabriccheck.specs import resolve_spec
from fabriccheck.topology import load_topology
from tests.conftest import REPO
from tests.report.dom import El, parse

orchestrator = pytest.importorskip("fabriccheck.orchestrator")
sim = pytest.importorskip("fabriccheck.executors.sim.executor")


def _sweep(topo_name: str, faults: FaultSet) -> tuple[RunResult, El]:
    topo = load_topology(topo_name)
    spec = resolve_spec(None, topo)
    executor = sim.SimExecutor(topo, spec, faults, seed=1)
    try:
        result = orchestrator.run("sweep", sorted(topo.nodes), topo, spec, executor,
                                  SweepPolicy(**spec_probes(spec)))  # fmt: skip
    finally:
        executor.close()
    return result, parse(render_html(result, topo))


def _rows(dom: El) -> dict[str, El]:
    table = dom.find("table", id="ladder-table")
    return {tr.find("td").text().strip(): tr for tr in table.find("tbody").find_all("tr")}


def _cells(row: El) -> dict[str, El]:
    return {td.attrs["data-lnode"]: td for td in row.find_all("td") if "data-lnode" in td.attrs}


@pytest.fixture(scope="module")
def demo():
    faults = load_faults(REPO / "topologies" / "faults" / "demo-roce-64.yaml")
    return _sweep("roce-rail-64", faults)


def test_demo_sweep_has_a_row_per_level_and_a_column_per_node(demo):
    result, dom = demo
    assert dom.find("h2", id="ladder") is not None
    rows = _rows(dom)
    levels = [r for r in rows if "follow-up" not in r]
    assert levels == ["1x nccl", "2x ib_write_bw", "2x collective (nccl)", "4x nccl", "8x nccl"]
    # groups of other sizes (bisection, follow-ups) get rows of their own, in size order
    sizes = [int(r.split("x")[0].split()[0]) for r in rows]
    assert sizes == sorted(sizes)
    assert set(_cells(rows["1x nccl"])) == set(result.nodes)
    head = [th.text() for th in dom.find("table", id="ladder-table").find("thead").find_all("th")]
    assert head[1:] == sorted(result.nodes)


def test_demo_gpu_link_fault_fails_its_1x_cell_only(demo):
    result, dom = demo
    one = _cells(_rows(dom)["1x nccl"])
    bad = one["node-058"]
    passed, total = (int(x) for x in bad.text().split("/"))
    assert passed < total and {"bad", "some"} & bad.classes()
    assert "r1-" in bad.attrs["title"]  # names its failing tests
    assert "bad" in bad.classes() and passed == 0  # every 1x retest of it failed too
    # the other nodes' 1x passed, except the faulted ones (hung, unreachable, slow) and a
    # transient glitch, which its retest passed (a mixed cell, never an all-fail one)
    faulted = {"node-033", "node-050", "node-040"}
    all_fail = {n for n, td in one.items() if "bad" in td.classes()}
    assert all_fail - {"node-058"} <= faulted
    some = {n for n, td in one.items() if "some" in td.classes()} - faulted
    assert all(int(one[n].text().split("/")[0]) >= 1 for n in some)
    ok = [n for n, td in one.items() if "ok" in td.classes()]
    assert len(ok) >= len(result.nodes) - len(faulted) - 3 and len(some) <= 2  # 1% glitches
    # NVLink is 1x only: node-058's NIC pairs mostly pass (a pair fails with a faulted partner)
    pair_cell = _cells(_rows(dom)["2x ib_write_bw"])["node-058"]
    p_ok, p_all = (int(x) for x in pair_cell.text().split("/"))
    assert p_ok >= 0.75 * p_all
    # and the cell counts are the observations'
    n1 = [o for o in result.observations
          if o.test.probe == "nccl" and o.test.nodes == ("node-058",)]  # fmt: skip
    assert total == len(n1) and passed == sum(o.status == PASS for o in n1)


def test_lab_tcp_sweep_shows_skipped_levels_with_reasons():
    result, dom = _sweep("lab-4", FaultSet())
    rows = _rows(dom)
    assert "skipped: no GPUs in the spec" in rows["1x"].text()
    assert "skipped: only 4 node(s) in scope" in rows["8x"].text()
    assert not _cells(rows["1x"])
    assert "2x iperf3" in rows and "4x allreduce-cpu" in rows
    assert set(_cells(rows["4x allreduce-cpu"])) == set(result.nodes)


def _big(n: int, bad: set[str], evil: str = "") -> RunResult:
    nodes = [f"n{i:03d}" for i in range(n)] + ([evil] if evil else [])
    obs = []
    for i, node in enumerate(nodes):
        # 1x: two tests a node; a bad node fails both, n001 fails one
        for k in range(2):
            st = FAIL if node in bad or (node == "n001" and k == 0) else PASS
            obs.append(Observation(Test(f"s{k}-{i}", "nccl", (node,), round=1 + k), st))
    for i in range(0, len(nodes) - 1, 2):
        pair = (nodes[i], nodes[i + 1])
        obs.append(Observation(Test(f"p-{i}", "ib_write_bw", pair, round=1), PASS))
    ladder = {"levels": [1, 2], "skipped": {"4": "<b>no</b> collective", "8": "x"}}
    return RunResult(mode="sweep", nodes=nodes, observations=obs, extra={"ladder": ladder})


def test_large_cluster_is_aggregated_per_level():
    n = LADDER_MAX_NODES + 36
    result = _big(n, {"n007", "n050"})
    ctx = ladder_context(ladder_table(result, list(result.nodes)))
    assert ctx is not None and ctx["aggregated"]
    one = next(r for r in ctx["rows"] if r["label"] == "1x nccl")
    assert one["tally"] == {"all pass": n - 3, "some fail": 1, "all fail": 2, "not tested": 0}
    assert one["failing"] == ["n001", "n007", "n050"]
    pairs = next(r for r in ctx["rows"] if r["label"] == "2x ib_write_bw")
    assert pairs["tally"]["all pass"] == n and not pairs["failing"]
    dom = parse(render_html(result))
    rows = _rows(dom)
    assert not _cells(rows["1x nccl"])  # no per-node cells past the limit
    tds = [td.text() for td in rows["1x nccl"].find_all("td")]
    assert tds[1:5] == [str(n - 3), "1", "2", "0"] and tds[5] == "n001, n007, n050"
    assert "skipped: <b>no</b> collective" in rows["4x"].text()  # shown as text


def test_ladder_cells_and_reasons_are_escaped():
    evil = '"><script>alert(1)</script>'
    result = _big(4, {evil}, evil=evil)
    html = render_html(result)
    assert "<script>alert(1)" not in html and "<b>no</b>" not in html
    cells = _cells(_rows(parse(html))["1x nccl"])
    assert cells[evil].text() == "0/2" and "bad" in cells[evil].classes()


def test_no_ladder_section_without_a_ladder():
    result = _big(4, set())
    result.extra.clear()
    assert ladder_table(result, list(result.nodes)) is None
    assert 'id="ladder"' not in render_html(result)
