"""Kubernetes inventory and actions on recorded kubectl JSON.

No Kubernetes API server can run here (none in apt or PyPI that starts without containers), so
kubectl is replaced by a recording runner: it returns JSON in the exact layout `kubectl get -o
json` prints (tests/fixtures/kubernetes/, source line says how it was made) and records every
argv, which the tests compare with the kubectl commands an operator would type.
"""

from __future__ import annotations

import json

import pytest

from fabriccheck.actions.kubernetes import KubernetesActions
from fabriccheck.errors import ExecutorError, ParseError
from fabriccheck.inventory.kubernetes import (
    KubernetesInventory,
    gpu_requests_by_node,
    idle_gpu_nodes,
    parse_nodes,
)
from tests.conftest import read_fixture

NODES = read_fixture("kubernetes/kubectl_get_nodes_o_json_eks_h100.json")
PODS = read_fixture("kubernetes/kubectl_get_pods_A_o_json_gpu_jobs.json")
N = "ip-10-0-1-{}.us-east-2.compute.internal"


class RecordingKubectl:
    """Stands in for kubectl: canned JSON for `get`, success for mutations; records argv."""

    def __init__(self, fail_on: str | None = None):
        self.calls: list[list[str]] = []
        self.fail_on = fail_on

    def __call__(self, argv, timeout_s):
        argv = list(argv)
        self.calls.append(argv)
        if self.fail_on and self.fail_on in argv:
            msg = (  # what kubectl prints for a missing taint / a server-side failure
                'error: taint "fabriccheck.io/health:NoSchedule" not found'
                if argv[1] == "taint"
                else "Error from server (InternalError): etcdserver: request timed out"
            )
            raise ExecutorError(f"`{' '.join(argv)}` exited 1: {msg}")
        if argv[1:3] == ["get", "nodes"]:
            return NODES
        if argv[1:3] == ["get", "pods"]:
            return PODS
        if argv[1:3] == ["get", "node"]:
            names = argv[3:-2]
            items = [i for i in json.loads(NODES)["items"] if i["metadata"]["name"] in names]
            return json.dumps(items[0] if len(names) == 1 else {"kind": "List", "items": items})
        return f"node/{argv[3] if len(argv) > 3 else argv[2]} labeled\n"


def test_parse_nodes_exact_values():
    nodes = parse_nodes(NODES)
    assert [n.name for n in nodes] == [N.format(i) for i in (11, 12, 13, 14, 15)] + [
        "ip-10-0-2-21.us-east-2.compute.internal"
    ]
    by = {n.name: n for n in nodes}
    assert by[N.format(11)].gpus == 8 and by[N.format(11)].ready
    assert not by[N.format(13)].ready
    assert by[N.format(14)].unschedulable
    assert "fabriccheck.io/health=bad:NoSchedule" in by[N.format(14)].taints
    assert by["ip-10-0-2-21.us-east-2.compute.internal"].gpus == 0
    assert by[N.format(11)].labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


def test_gpu_requests_skip_finished_pods_and_count_init_containers():
    req = gpu_requests_by_node(PODS)
    assert req == {N.format(11): 0, N.format(12): 8, N.format(15): 2}


def test_idle_means_ready_schedulable_gpu_node_with_no_gpu_request():
    nodes, req = parse_nodes(NODES), gpu_requests_by_node(PODS)
    assert idle_gpu_nodes(nodes, req) == [N.format(11)]
    # a node fabriccheck cordoned earlier is re-tested so it can be returned
    assert idle_gpu_nodes(nodes, req, recovering=[N.format(14), N.format(13)]) == [
        N.format(11), N.format(14),
    ]  # fmt: skip


def test_inventory_commands_selector_and_recheck():
    kubectl = RecordingKubectl()
    inv = KubernetesInventory(selector="nvidia.com/gpu.present=true", runner=kubectl)
    assert inv.idle_nodes() == [N.format(11)]
    assert kubectl.calls[0] == [
        "kubectl", "get", "nodes", "-o", "json", "-l", "nvidia.com/gpu.present=true",
    ]  # fmt: skip
    assert kubectl.calls[1] == [
        "kubectl", "get", "pods", "-A", "-o", "json",
        "--field-selector=status.phase!=Succeeded,status.phase!=Failed",
    ]  # fmt: skip
    assert inv.recheck_idle([N.format(12), N.format(11)]) == [N.format(11)]
    assert inv.idle_nodes(exclude=[N.format(11)]) == []


def test_under_test_label_is_removed_even_on_error():
    kubectl = RecordingKubectl()
    inv = KubernetesInventory(runner=kubectl)
    with pytest.raises(RuntimeError):
        with inv.reserve([N.format(11), N.format(15)], name="run-42"):
            raise RuntimeError("executor crashed")
    assert kubectl.calls == [
        ["kubectl", "label", "nodes", N.format(11), "fabriccheck.io/under-test=run-42",
         "--overwrite"],
        ["kubectl", "label", "nodes", N.format(15), "fabriccheck.io/under-test=run-42",
         "--overwrite"],
        ["kubectl", "label", "nodes", N.format(11), "fabriccheck.io/under-test-"],
        ["kubectl", "label", "nodes", N.format(15), "fabriccheck.io/under-test-"],
    ]  # fmt: skip


def test_bad_kubectl_output_is_a_parse_error():
    with pytest.raises(ParseError, match="kubectl: not JSON"):
        parse_nodes("error: You must be logged in to the server (Unauthorized)")
    with pytest.raises(ParseError, match="expected a NodeList"):
        parse_nodes('{"kind": "Status"}')


def test_actions_cordon_taint_label_and_reverse_only_when_ours():
    kubectl = RecordingKubectl()
    acts = KubernetesActions(kubectl)
    assert acts.take_out(N.format(11), "fabriccheck: mlx5_3 ib_write_bw 96 Gb/s < 380") == (
        "cordoned+tainted+labelled"
    )
    n11 = N.format(11)
    assert kubectl.calls == [
        ["kubectl", "cordon", n11],
        ["kubectl", "taint", "nodes", n11, "fabriccheck.io/health=bad:NoSchedule", "--overwrite"],
        ["kubectl", "label", "nodes", n11, "fabriccheck.io/health=bad", "--overwrite"],
        ["kubectl", "annotate", "nodes", n11,
         "fabriccheck.io/reason=fabriccheck: mlx5_3 ib_write_bw 96 Gb/s < 380", "--overwrite"],
    ]  # fmt: skip
    kubectl.calls.clear()
    # .11 in the recorded JSON has no fabriccheck label: leave it alone
    assert acts.give_back(n11) == "not marked by fabriccheck"
    assert kubectl.calls == [["kubectl", "get", "node", n11, "-o", "json"]]
    kubectl.calls.clear()
    n14 = N.format(14)
    assert acts.give_back(n14) == "returned"
    assert kubectl.calls[1:] == [
        ["kubectl", "uncordon", n14],
        ["kubectl", "taint", "nodes", n14, "fabriccheck.io/health=bad:NoSchedule-"],
        ["kubectl", "label", "nodes", n14, "fabriccheck.io/health=healthy", "--overwrite"],
        ["kubectl", "annotate", "nodes", n14, "fabriccheck.io/reason-"],
    ]


def test_taint_already_gone_is_fine_other_errors_are_not():
    acts = KubernetesActions(RecordingKubectl(fail_on="fabriccheck.io/health=bad:NoSchedule-"))
    assert acts.give_back(N.format(14)) == "returned"
    acts = KubernetesActions(RecordingKubectl(fail_on="uncordon"))
    with pytest.raises(ExecutorError):
        acts.give_back(N.format(14))


def test_taking_out_many_nodes_batches_kubectl_calls():
    """Issue 18: not four kubectl processes per node; one cordon/taint/label call per batch."""
    kubectl = RecordingKubectl()
    nodes = [N.format(i) for i in (11, 12, 13, 14, 15)]
    reasons = {n: "fabriccheck: NIC slow" for n in nodes[:4]} | {nodes[4]: "fabriccheck: hung"}
    outcome = KubernetesActions(kubectl).take_out_many(reasons)
    assert outcome == dict.fromkeys(nodes, "cordoned+tainted+labelled")
    assert [c[1] for c in kubectl.calls] == ["cordon", "taint", "label", "annotate", "annotate"]
    assert kubectl.calls[2] == ["kubectl", "label", "nodes", *nodes, "fabriccheck.io/health=bad",
                                "--overwrite"]  # fmt: skip
    assert kubectl.calls[4] == ["kubectl", "annotate", "nodes", nodes[4],
                                "fabriccheck.io/reason=fabriccheck: hung", "--overwrite"]
    kubectl.calls.clear()
    KubernetesActions(kubectl, batch_size=2).take_out_many(reasons)
    assert sum(c[1] == "label" for c in kubectl.calls) == 3  # ceil(5 / 2)


def test_a_failing_node_in_a_batch_is_pinned_on_it_and_the_others_go_on():
    bad = N.format(13)
    kubectl = RecordingKubectl(fail_on=bad)
    nodes = [N.format(i) for i in (11, 12, 13)]
    outcome = KubernetesActions(kubectl).take_out_many(dict.fromkeys(nodes, "slow"))
    assert isinstance(outcome[bad], ExecutorError)
    assert outcome[N.format(11)] == outcome[N.format(12)] == "cordoned+tainted+labelled"
    # later steps skip the failed node: only the cordon batch and its one-by-one retry saw it
    assert sum(bad in c for c in kubectl.calls) == 2
    with pytest.raises(ExecutorError):
        KubernetesActions(RecordingKubectl(fail_on=bad)).take_out(bad, "slow")


def test_giving_back_many_reads_labels_once_and_skips_unmarked_nodes():
    kubectl = RecordingKubectl()
    n11, n14 = N.format(11), N.format(14)
    outcome = KubernetesActions(kubectl).give_back_many([n11, n14])
    assert outcome == {n11: "not marked by fabriccheck", n14: "returned"}
    assert kubectl.calls[0] == ["kubectl", "get", "node", n11, n14, "-o", "json"]
    assert all(n11 not in c for c in kubectl.calls[1:])
    assert len(kubectl.calls) == 5
