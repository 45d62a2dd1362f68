"""apply_run_outcome end to end: budget, dry-run, store log, exclude file, metrics, result extra."""

from __future__ import annotations

import logging

from prometheus_client.parser import text_string_to_metric_families

from fabriccheck.actions.pipeline import apply_run_outcome
from fabriccheck.serialize import run_result_to_dict
from fabriccheck.store import Store
from tests.runfactory import build_run, nodes


class Recorder:
    """An actuator that records calls (the Slurm one is exercised for real in
    test_slurm_actions_real.py; here the subject is the pipeline's bookkeeping)."""

    backend = "slurm"

    def __init__(self):
        self.calls = []

    def take_out(self, node, reason):
        self.calls.append(("take_out", node, reason))
        return "drained"

    def give_back(self, node):
        self.calls.append(("give_back", node))
        return "resumed"


def test_fabric_wide_fault_is_reported_and_nothing_is_drained(tmp_path, caplog):
    names = nodes(32)
    result = build_run(names, node_gbps={n: 110.0 for n in names[:24]}, seed=21)
    act = Recorder()
    store = Store(tmp_path / "h.sqlite")
    with caplog.at_level(logging.INFO, logger="fabriccheck.actions"):
        out = apply_run_outcome(
            result, store=store, backend=act, apply=True, max_drain=0.1,
            exclude_file=tmp_path / "exclude", metrics_path=tmp_path / "m" / "fc.prom",
        )  # fmt: skip
    assert act.calls == []  # not one node touched
    assert out["withheld"] is True and "fabric-wide problem" in out["reason"]
    assert result.extra["actions"]["withheld"] is True
    d = run_result_to_dict(result)
    assert d["actions"]["reason"].startswith("fabric-wide problem") and d["drain"]  # still reported
    assert {a["status"] for a in out["done"]} == {"withheld"}
    assert (tmp_path / "exclude").read_text() == ""
    logged = [a for a in store.actions() if a.status == "withheld"]
    assert len(logged) == len(out["drain"]) and all(len(a.evidence) >= 2 for a in logged)
    assert store.held_nodes() == {}
    assert store.run(result.extra["run_id"]).summary["actions"]["withheld"] is True
    text = (tmp_path / "m" / "fc.prom").read_text()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["fabriccheck_actions_withheld"].samples[0].value == 1.0
    assert any("withheld drain" in r.getMessage() and "evidence=" in r.getMessage()
               for r in caplog.records)  # fmt: skip
    store.close()


def test_dry_run_by_default_then_apply_then_give_back(tmp_path):
    names = nodes(16)
    bad = build_run(names, node_gbps={"node-005": 96.0}, seed=3)
    act = Recorder()
    store = Store(tmp_path / "h.sqlite")
    ex = tmp_path / "exclude.hosts"
    out = apply_run_outcome(bad, store=store, backend=act, exclude_file=ex)
    assert act.calls == [] and [a["status"] for a in out["done"]] == ["dry-run"]
    assert out["applied"] is False and ex.read_text() == "node-005\n"
    out = apply_run_outcome(bad, store=store, backend=act, apply=True, exclude_file=ex)
    assert act.calls == [("take_out", "node-005", out["drain"][0]["reason"])]
    assert out["drain"][0]["reason"].startswith("fabriccheck: ib_write_bw ")
    assert list(store.held_nodes("slurm")) == ["node-005"]
    good = build_run(names, seed=4)
    out = apply_run_outcome(good, store=store, backend=act, apply=True, exclude_file=ex)
    assert act.calls[-1] == ("give_back", "node-005")
    assert [(a["action"], a["status"]) for a in out["done"]] == [("resume", "applied")]
    assert store.held_nodes("slurm") == {} and ex.read_text() == ""
    assert [r.status for r in store.runs()] == ["finished"] * 3
    store.close()


def test_without_backend_or_store_it_only_plans(tmp_path):
    result = build_run(nodes(8), node_gbps={"node-001": 96.0}, seed=5)
    out = apply_run_outcome(result, max_drain=0.2)
    assert out["backend"] == "none" and [a["status"] for a in out["done"]] == ["dry-run"]
    assert out["done"][0]["detail"] == "no scheduler backend"


class BatchRecorder(Recorder):
    """An actuator with batched calls (as the Kubernetes one has): the pipeline must use them."""

    backend = "kubernetes"

    def take_out_many(self, reasons):
        self.calls.append(("take_out_many", sorted(reasons)))
        return dict.fromkeys(reasons, "cordoned+tainted+labelled")

    def give_back_many(self, nodes):
        self.calls.append(("give_back_many", sorted(nodes)))
        return dict.fromkeys(nodes, "returned")


def test_an_actuator_with_batched_calls_gets_one_call_per_kind(tmp_path):
    names = nodes(32)
    slow = {"node-005": 96.0, "node-011": 96.0, "node-020": 96.0}
    bad = build_run(names, node_gbps=slow, seed=3)
    act = BatchRecorder()
    store = Store(tmp_path / "h.sqlite")
    out = apply_run_outcome(bad, store=store, backend=act, apply=True, max_drain=0.2)
    drained = sorted(a["node"] for a in out["done"] if a["status"] == "applied")
    assert act.calls == [("take_out_many", drained)] and drained == sorted(slow)
    out = apply_run_outcome(build_run(names, seed=4), store=store, backend=act, apply=True)
    assert act.calls[-1] == ("give_back_many", sorted(slow))
    assert {a["status"] for a in out["done"]} == {"applied"}
    store.close()
