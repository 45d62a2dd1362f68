"""Scenarios through the real orchestrator and simulator: drain budget, lemons, resume."""

from __future__ import annotations

import pytest

pytest.importorskip("fabriccheck.orchestrator")

from fabriccheck.actions.session import OpsOptions, OpsSession  # noqa: E402
from fabriccheck.executors.factory import make_executor  # noqa: E402
from fabriccheck.faults import load_faults  # noqa: E402
from fabriccheck.orchestrator import run  # noqa: E402
from fabriccheck.policy import SweepPolicy  # noqa: E402
from fabriccheck.specs import resolve_spec  # noqa: E402
from fabriccheck.store import Store  # noqa: E402
from fabriccheck.topology import load_topology  # noqa: E402

TOPO = load_topology("roce-rail-64")
SPEC = resolve_spec(None, TOPO)
NODES = sorted(TOPO.nodes)


def _faults(tmp_path, slow, name="f.yaml", glitch=0.01):
    text = f"noise: {{jitter: 0.03, glitch_rate: {glitch}}}\nfaults:\n" + "".join(
        f"  - {{kind: node_slow, node: {n}, factor: 0.3}}\n" for n in slow
    )
    path = tmp_path / name
    path.write_text(text if slow else text.replace("faults:\n", "faults: []\n"))
    return load_faults(path)


def _sweep(tmp_path, opts, faults, seed):
    ops = OpsSession("sweep", opts, sku=SPEC.sku, fabric=TOPO.fabric)
    nodes = ops.select_nodes(NODES, explicit=True, known=TOPO.nodes)
    ops.begin(nodes)
    exe = ops.wrap(make_executor("sim", topology=TOPO, spec=SPEC, faults=faults, seed=seed), SPEC)
    result = run("sweep", nodes, TOPO, SPEC, exe, SweepPolicy(seed=seed))
    summary = ops.finish(result, topology=TOPO)
    ops.close()
    return result, summary


def test_many_bad_nodes_at_once_act_on_none_and_say_why(tmp_path):
    slow = NODES[:12]  # 19% of the fabric at once: not a node problem to answer by draining
    opts = OpsOptions(db=str(tmp_path / "h.sqlite"), metrics=str(tmp_path / "fc.prom"))
    result, summary = _sweep(tmp_path, opts, _faults(tmp_path, slow), seed=1)
    assert sorted(result.drain) == slow  # the verdicts stand ...
    assert summary["withheld"] is True  # ... but nothing is done about them
    assert summary["reason"].startswith("fabric-wide problem: 12 of 64 tested nodes (19%)")
    assert {a["status"] for a in summary["done"]} == {"withheld"}
    assert "fabriccheck_actions_withheld{mode=\"sweep\"} 1.0" in (tmp_path / "fc.prom").read_text()
    # with a budget that allows it, exactly the slow nodes would go (dry-run), no healthy one
    result, summary = _sweep(tmp_path, OpsOptions(no_history=True, max_drain=0.25),
                             _faults(tmp_path, slow), seed=1)  # fmt: skip
    assert not summary["withheld"]
    assert sorted(a["node"] for a in summary["drain"]) == slow
    assert all(len(a["evidence"]) >= 2 for a in summary["drain"])


@pytest.mark.slow
def test_flaky_node_rises_to_the_top_of_the_lemon_list(tmp_path):
    db = str(tmp_path / "h.sqlite")
    flaky = "node-020"
    for k in range(8):
        slow = [flaky] if k % 2 == 0 else []
        _sweep(tmp_path, OpsOptions(db=db), _faults(tmp_path, slow, f"f{k}.yaml", 0.02), seed=k)
    with Store(db) as store:
        lemons = store.lemon_nodes()
        assert len(store.runs(limit=100)) == 8
    assert lemons[0].node == flaky
    assert lemons[0].signals["bad_runs"] == 4 and lemons[0].signals["flaps"] >= 6
    others = [s.score for s in lemons[1:]]
    assert not others or max(others) < lemons[0].score / 3  # glitches stay far below
