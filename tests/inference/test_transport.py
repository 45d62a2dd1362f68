"""Transport fallbacks judged from the nccl tests' facts: sockets and host-memory staging name
their node with cause and fix, peers prove the fallback, the slow tests they cause are left out
of the bandwidth attribution, and a run-wide setting is a warning, never a drain."""

from __future__ import annotations

from fabriccheck.inference.attribute import Inference
from fabriccheck.inference.evaluate import evaluate
from fabriccheck.inference.transport import (
    explained_out,
    host_transport,
    judge_transport,
    merge_transport_verdicts,
    transport_facts,
)
from fabriccheck.models import FAIL, HANG, PASS, Observation, RawResult, Test, Verdict
from fabriccheck.probes.nccl_tests import parse_nccl_tests
from fabriccheck.probes.results import RankTransport
from fabriccheck.specs import load_spec
from tests.conftest import read_fixture

IB = {"net": "ib", "gdr": True, "ranks": "0-7", "hcas": ["mlx5_0"]}
SOCK = {"net": "socket", "gdr": False, "ranks": "8-15", "hcas": ["eth0"]}
NOGDR = {"net": "ib", "gdr": False, "ranks": "8-15", "hcas": ["mlx5_0"]}


def _obs(tid: str, hosts: dict, status: str = PASS, value: float | None = 370.0,
         probe: str = "nccl") -> Observation:
    return Observation(Test(tid, probe, tuple(hosts) or ("x", "y")), status, value,
                       facts={"transport": hosts} if hosts else {})


def test_socket_node_is_bad_with_cause_and_fix_even_when_its_test_passed():
    st = judge_transport([_obs("r3-00012", {"node-001": IB, "node-017": SOCK})])
    v = st.bad_nodes["node-017"]
    assert v.state == "bad" and v.evidence == ("r3-00012",)
    assert v.reason.startswith("NCCL used NET/Socket on node-017 (ranks 8-15) in r3-00012")
    assert "NCCL_IB_HCA" in v.reason and "ibstat" in v.reason and "NCCL_SOCKET_IFNAME" in v.reason
    assert set(st.bad_nodes) == {"node-017"}
    assert st.fallbacks == [{"node": "node-017", "to": "socket", "ranks": "8-15",
                             "tests": ["r3-00012"], "hcas": ["eth0"], "reason": v.reason}]
    assert st.explained == frozenset()  # it passed: nothing to explain


def test_every_node_on_sockets_is_a_warning_not_a_drain():
    st = judge_transport([_obs("t1", {"a": SOCK, "b": SOCK}), _obs("t2", {"c": SOCK, "a": SOCK})])
    assert st.bad_nodes == {} and st.fallbacks == []
    assert len(st.warnings) == 1 and "every node" in st.warnings[0]


def test_host_memory_node_is_bad_when_its_peers_have_gdrdma():
    st = judge_transport([_obs("t1", {"a": IB, "b": NOGDR}, FAIL, 240.0),
                          _obs("t2", {"b": NOGDR, "c": IB}, FAIL, 250.0),
                          _obs("t3", {"a": IB, "c": IB}, FAIL, 250.0)])
    assert set(st.bad_nodes) == {"b"}
    v = st.bad_nodes["b"]
    assert "GPUDirect RDMA off on b" in v.reason and "nvidia_peermem" in v.reason
    assert v.evidence == ("t1", "t2")
    assert st.fallbacks[0]["to"] == "host_memory"
    assert st.explained == frozenset({"t1", "t2"})  # t3 is a failure of its own
    assert st.nodes["b"] == {"net": "ib", "gdr": False, "tests": 2}


def test_no_gdrdma_anywhere_is_a_warning():
    st = judge_transport([_obs("t1", {"a": NOGDR, "b": NOGDR})])
    assert st.bad_nodes == {} and "every NET channel lacked GDRDMA" in st.warnings[0]


def test_gdr_on_in_one_test_and_off_in_another_is_not_a_node_setting():
    st = judge_transport([_obs("t1", {"a": IB, "b": NOGDR}), _obs("t2", {"b": IB, "c": IB})])
    assert st.bad_nodes == {} and st.nodes["b"]["gdr"] is None


def test_peers_on_a_net_plugin_prove_the_fallback_too():
    efa = {"net": "AWS Libfabric", "gdr": True, "ranks": "0-7", "hcas": ["#0"]}
    st = judge_transport([_obs("t1", {"a": efa, "b": SOCK})])
    assert set(st.bad_nodes) == {"b"} and "while its peers used their network" in (
        st.bad_nodes["b"].reason)
    assert st.nodes["a"]["net"] == "AWS Libfabric"


def test_only_inter_node_nccl_tests_count():
    single = _obs("t1", {"a": SOCK})  # one node: its NET lines say nothing
    pair_probe = _obs("t2", {"a": SOCK, "b": IB}, probe="ib_write_bw")
    assert judge_transport([single, pair_probe]).bad_nodes == {}


def test_explained_failures_are_slow_or_hung_tests_with_the_node():
    obs = [_obs("t1", {"a": IB, "b": SOCK}, HANG, None),
           _obs("t2", {"b": SOCK, "c": IB}, FAIL, 2.9),
           _obs("t3", {"b": SOCK, "d": IB}, FAIL, None),  # a tool error: not a slow test
           _obs("t4", {"c": IB, "d": IB}, FAIL, 200.0)]
    st = judge_transport(obs)
    assert st.explained == frozenset({"t1", "t2"})
    assert [o.test.test_id for o in explained_out(obs, st)] == ["t3", "t4"]


def test_merge_makes_the_node_bad_and_no_longer_a_suspect():
    inf = Inference()
    inf.node_suspects["b"] = Verdict("node", "b", "suspect", "needs confirmation")
    inf.bad_nodes["c"] = Verdict("node", "c", "bad", "failed 6 tests", ("t9",))
    st = judge_transport([_obs("t1", {"a": IB, "b": SOCK, "c": SOCK})])
    merge_transport_verdicts(inf, st)
    assert set(inf.bad_nodes) == {"b", "c"} and "b" not in inf.node_suspects
    assert inf.bad_nodes["c"].reason.startswith("NCCL used NET/Socket on c")
    assert inf.bad_nodes["c"].reason.endswith("; failed 6 tests")
    assert inf.bad_nodes["c"].evidence == ("t1", "t9")


def test_host_transport_keeps_the_fallen_back_ranks():
    hosts = host_transport([RankTransport("a", 0, "ib", True, ("mlx5_0",)),
                            RankTransport("a", 1, "ib", False, ("mlx5_1",)),
                            RankTransport("b", 2, None, None, ())])
    assert hosts == {"a": {"net": "ib", "gdr": False, "ranks": "1", "hcas": ["mlx5_1"]}}


def test_evaluate_keeps_the_transport_in_the_observation_facts():
    text = read_fixture("nccl-transport/nccl_allreduce_v2.20_socket_fallback_one_node_"
                        "synthetic.txt")
    spec = load_spec("h100-ndr400-ib")
    test = Test("t1", "nccl", ("dgx-01", "dgx-02"), params={"size_bytes": 268435456})
    o = evaluate(test, RawResult("t1", stdout=text), parse_nccl_tests(text), spec)
    assert o.facts == transport_facts(parse_nccl_tests(text))
    assert o.facts["transport"]["dgx-02"] == {"net": "socket", "gdr": False, "ranks": "2-3",
                                             "hcas": ["enp86s0f0"]}
    hung = evaluate(test, RawResult("t1", stdout=text, timed_out=True, exit_code=None),
                    parse_nccl_tests(text), spec)
    assert hung.status == HANG and hung.facts["transport"]["dgx-02"]["net"] == "socket"


def test_hosts_are_mapped_to_the_test_nodes_by_rank():
    """An inventory whose node names are not the hosts' names (NCCL prints the hostname): the
    ranks' places (consecutive ranks per node, in the test's node order) name the node."""
    text = read_fixture("nccl-transport/nccl_allreduce_v2.20_socket_fallback_one_node_"
                        "synthetic.txt")
    parsed = parse_nccl_tests(text)
    facts = transport_facts(parsed, Test("t1", "nccl", ("rack1-n1", "rack1-n2")))
    assert facts["transport"]["rack1-n2"]["net"] == "socket"
    assert facts["transport"]["rack1-n1"]["net"] == "ib"
    st = judge_transport([Observation(Test("t1", "nccl", ("rack1-n1", "rack1-n2")), PASS,
                                      facts=facts)])
    assert set(st.bad_nodes) == {"rack1-n2"}
    # ranks that fit no node of the test are left out, never judged under a foreign name
    assert transport_facts(parsed, Test("t1", "nccl", ("x", "y", "z"))) == {}
