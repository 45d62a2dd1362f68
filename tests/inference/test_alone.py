"""A node judged on the tests it ran alone (loopback, NIC to NIC): a two-node job's slow or hung
node is named, a healthy one never is (issue 31: small jobs)."""

from __future__ import annotations

from fabriccheck.inference.attribute import infer
from fabriccheck.models import Flow, Observation, RawResult, Test
from tests.inference.test_attribute import VIEW, flow_obs

_n = iter(range(100_000))


def alone_obs(node: str, rail: int, status: str = "pass", *, rnd: int = 3,
              value: float | None = None) -> Observation:
    """HCA loopback of ``node``'s NIC on ``rail`` (a test with no other node on its path)."""
    nic = VIEW.rails_of[node][rail]
    t = Test(f"r{rnd}-a{next(_n):04d}", "ib_write_bw", (node,), (Flow(nic, nic),), round=rnd,
             purpose="confirm", params={"rails": (rail,)})
    raw = RawResult(t.test_id, timed_out=status == "hang")
    v = (value or (391.0 if status == "pass" else 190.0)) if status in ("pass", "fail") else None
    return Observation(t, status, value=v, unit="Gb/s", floor=335.0, expected=385.0, raw=raw)


def two_node_job(status_of_pairs: str = "fail") -> list[Observation]:
    """node-001 (slow) and node-002: every pair test between them failed, two rounds."""
    return [flow_obs("node-001", "node-002", r, status_of_pairs, rnd=k) for k in (1, 2)
            for r in range(4)]


def test_a_slow_node_of_a_two_node_job_is_named_by_its_loopbacks():
    obs = two_node_job() + [alone_obs("node-001", r, "fail") for r in range(4)]
    obs += [alone_obs("node-002", r) for r in range(4)]
    inf = infer(obs, VIEW)
    v = inf.bad_nodes["node-001"]
    assert "no other node on the path" in v.reason and "node-002 passed" in v.reason
    assert "node-002" not in inf.bad_nodes and "node-002" in inf.known_good()


def test_without_a_peer_that_passed_alone_the_loopbacks_convict_nobody():
    """Every loopback failed everywhere: the floor may be out of reach for loopback on this host
    type, not the node; both stay as they were (a suspect)."""
    obs = two_node_job() + [alone_obs(n, r, "fail") for n in ("node-001", "node-002")
                            for r in range(4)]
    inf = infer(obs, VIEW)
    assert not inf.bad_nodes and "node-001" in inf.node_suspects


def test_one_nic_alone_is_not_a_node():
    """Loopbacks failed on one NIC only (twice): too few NICs to say the node."""
    obs = two_node_job() + [alone_obs("node-001", 0, "fail", rnd=k) for k in (3, 4)]
    obs += [alone_obs("node-002", r) for r in range(4)]
    assert "node-001" not in infer(obs, VIEW).bad_nodes


def test_a_node_that_passed_one_loopback_is_cleared_not_drained():
    obs = two_node_job() + [alone_obs("node-001", r, "fail") for r in range(3)]
    obs += [alone_obs("node-001", 3)] + [alone_obs("node-002", r) for r in range(4)]
    inf = infer(obs, VIEW)
    assert "node-001" not in inf.bad_nodes and "node-001" in inf.good_nodes


def test_a_node_that_hangs_alone_on_two_nics_hangs():
    obs = [flow_obs("node-001", "node-002", r, "hang") for r in range(2)]
    inf = infer(obs, VIEW)
    assert set(inf.hang_suspects) == {"node-001", "node-002"} and not inf.hung
    obs += [alone_obs("node-001", r, "hang") for r in range(2)] + [alone_obs("node-002", 0)]
    inf = infer(obs, VIEW)
    assert set(inf.hung) == {"node-001"} and "loopback" in inf.hung["node-001"].reason
    assert "node-002" not in inf.hang_suspects


def test_one_hang_alone_is_still_a_suspect():
    obs = [flow_obs("node-001", "node-002", 0, "hang"), alone_obs("node-001", 0, "hang")]
    inf = infer(obs, VIEW)
    assert not inf.hung and "node-001" in inf.hang_suspects
