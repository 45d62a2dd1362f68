"""Prometheus metrics: parsed back with prometheus_client's own parser; file and HTTP endpoint."""

from __future__ import annotations

import socket
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from fabriccheck.actions.metrics import render_metrics, serve_metrics, write_metrics
from fabriccheck.models import Verdict
from fabriccheck.topology.generators import generate
from tests.runfactory import build_run, nodes


def _families(text):
    return {f.name: f for f in text_string_to_metric_families(text)}


def _samples(fam):
    return {tuple(sorted(s.labels.items())): s.value for s in fam.samples}


def _result():
    r = build_run(nodes(8), node_gbps={"node-003": 96.0}, seed=11)
    r.extra["actions"] = {"withheld": False}
    r.verdicts.append(Verdict("link", "leaf-0 -- spine-0", "bad", link=("leaf-0", "spine-0")))
    return r


def test_metrics_text_parses_back_with_the_expected_series():
    r = _result()
    fams = _families(render_metrics(r, actions=[{"action": "drain", "status": "dry-run"}],
                                    now_s=1_700_000_000.0))  # fmt: skip
    health = _samples(fams["fabriccheck_node_health"])
    assert health[(("node", "node-003"),)] == 0.0
    assert health[(("node", "node-000"),)] in (0.5, 1.0)
    assert len(health) == 8
    state = _samples(fams["fabriccheck_node_state"])
    assert state[(("node", "node-003"), ("state", "bad"))] == 1.0
    assert state[(("node", "node-003"), ("state", "healthy"))] == 0.0
    nic = _samples(fams["fabriccheck_nic_bandwidth_gbps"])
    key = (("nic", "mlx5_0"), ("node", "node-003"), ("probe", "ib_write_bw"))
    assert 85 < nic[key] < 105
    assert len(nic) == 8
    assert _samples(fams["fabriccheck_run_duration_seconds"]) == {(("mode", "sweep"),): 12.0}
    assert _samples(fams["fabriccheck_run_tests"]) == {(("mode", "sweep"),): 8.0}
    assert _samples(fams["fabriccheck_run_timestamp_seconds"])[(("mode", "sweep"),)] == 1.7e9
    counts = _samples(fams["fabriccheck_nodes"])
    assert counts[(("mode", "sweep"), ("state", "bad"))] == 1.0
    assert sum(counts.values()) == 8
    assert _samples(fams["fabriccheck_link_health"]) == {(("a", "leaf-0"), ("b", "spine-0")): 0.0}
    acts = _samples(fams["fabriccheck_actions"])
    assert acts == {(("action", "drain"), ("status", "dry-run")): 1}
    assert _samples(fams["fabriccheck_actions_withheld"]) == {(("mode", "sweep"),): 0.0}
    assert fams["fabriccheck_node_health"].type == "gauge"


def test_link_bandwidth_from_the_topology_routes():
    topo = generate(
        {"kind": "fat-tree", "nodes": 8, "gpus_per_node": 1, "rails": 1, "nodes_per_leaf": 4,
         "spines": 2, "nic_gbps": 400, "uplink_gbps": 400},
        name="t8", fabric="infiniband",
    )  # fmt: skip
    names = sorted(topo.nodes)
    r = build_run(names, node_gbps={names[1]: 96.0}, seed=2, nic_of=lambda n: topo.nic(n, 0))
    fams = _families(render_metrics(r, topology=topo))
    links = _samples(fams["fabriccheck_link_bandwidth_gbps"])
    assert links, "IB routes give every flow's links"
    slow_nic = topo.nic(names[1], 0)
    access = [v for k, v in links.items() if slow_nic in dict(k).values()]
    assert access and max(access) < 110  # the slow node's own cable shows its speed
    assert max(links.values()) > 350


def test_textfile_is_written_atomically_and_replaced(tmp_path):
    path = tmp_path / "textfile" / "fabriccheck.prom"
    write_metrics(path, _result())
    first = path.read_text()
    assert "fabriccheck_node_health" in first
    write_metrics(path, build_run(nodes(4), seed=1))
    assert list(path.parent.iterdir()) == [path]  # no temp file left behind
    fams = _families(path.read_text())
    assert len(_samples(fams["fabriccheck_node_health"])) == 4


def test_http_endpoint_serves_the_same_metrics():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server, thread = serve_metrics(_result(), port=port, addr="127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            body = resp.read().decode()
        fams = _families(body)
        assert _samples(fams["fabriccheck_node_health"])[(("node", "node-003"),)] == 0.0
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
