"""Attribution on hand-made observations: the right component, with evidence, and no one else."""

from __future__ import annotations

from dataclasses import replace

from fabriccheck.inference import attribute
from fabriccheck.inference.attribute import infer
from fabriccheck.models import Flow, Observation, RawResult, Test
from tests.planning.fabrics import make_view

VIEW = make_view()  # IB, 64 nodes, 16 per leaf, 4 rails, 4 spines
ROCE = make_view(fabric="roce")
_n = iter(range(100_000))


def flow_obs(a, b, rail, status="pass", *, rnd=1, purpose="sweep", value=None, **params):
    view = params.pop("view", VIEW)
    src, dst = view.rails_of[a][rail], view.rails_of[b][rail]
    t = Test(f"r{rnd}-{next(_n):05d}", "ib_write_bw", (a, b), (Flow(src, dst),), round=rnd,
             purpose=purpose, params={"rails": (rail,), **params})
    if value is None:
        value = 391.0 if status == "pass" else 98.0
    raw = RawResult(t.test_id, timed_out=status == "hang",
                    unreachable=(b,) if status == "unreachable" else ())
    v = value if status in ("pass", "fail") else None
    return Observation(t, status, value=v, unit="Gb/s", floor=335.0, expected=385.0, raw=raw)


def healthy_round(nodes, rails=range(4), rnd=1, shift=1):
    out = []
    for r in rails:
        for i in range(0, len(nodes) - 1, 2):
            a, b = nodes[i], nodes[(i + shift) % len(nodes)] if shift != 1 else nodes[i + 1]
            if a != b:
                out.append(flow_obs(a, b, r, rnd=rnd))
    return out


def test_infer_runs_its_named_rules_once_each_in_order_over_one_work(monkeypatch):
    """Issue 31: attribution is an ordered tuple of named rules (``RULES``) over one working
    state; a new rule is a function of that state and one line there."""
    names = [name for name, _ in attribute.RULES]
    assert len(set(names)) == len(names)
    seen: list[tuple[str, int]] = []

    def traced(name, rule):
        return lambda w: (seen.append((name, id(w))), rule(w))

    monkeypatch.setattr(attribute, "RULES",
                        tuple((name, traced(name, rule)) for name, rule in attribute.RULES))
    obs = [flow_obs("node-001", "node-002", 1, "fail"), flow_obs("node-003", "node-004", 1)]
    inf = infer(obs, VIEW)
    assert [name for name, _ in seen] == names
    assert len({w for _, w in seen}) == 1
    assert "node-003" in inf.good_nodes and "node-001" in inf.node_suspects


def test_nic_needs_two_partners_and_a_confirmation():
    obs = [flow_obs("node-001", "node-002", 1, "fail"), flow_obs("node-003", "node-001", 1, "fail",
                                                                  rnd=2)]
    obs += [flow_obs("node-001", "node-004", r) for r in (0, 2, 3)]  # other rails pass
    obs += [flow_obs("node-002", "node-005", 1, rnd=2), flow_obs("node-003", "node-006", 1)]
    obs += [flow_obs("node-007", "node-009", 1, rnd=2), flow_obs("node-010", "node-008", 1)]
    inf = infer(obs, VIEW)
    assert "node-001/mlx5_1" in inf.nic_suspects and not inf.bad_nics, "no blame before confirm"
    obs += [flow_obs("node-001", "node-007", 1, "fail", rnd=3, purpose="confirm"),
            flow_obs("node-008", "node-001", 1, "fail", rnd=3, purpose="confirm")]
    inf = infer(obs, VIEW)
    v = inf.bad_nics["node-001/mlx5_1"]
    assert v.state == "bad" and len(v.evidence) == 4 and "98.0 Gb/s" in v.reason
    assert not inf.bad_nodes and not inf.node_suspects
    assert "node-001" not in inf.known_good() and "node-002" in inf.known_good()


def test_a_passing_confirmation_clears_a_nic():
    obs = [flow_obs("node-001", "node-002", 1, "fail"), flow_obs("node-003", "node-001", 1, "fail",
                                                                  rnd=2),
           flow_obs("node-001", "node-007", 1, rnd=3, purpose="confirm")]
    obs += [flow_obs("node-002", "node-005", 1, rnd=2), flow_obs("node-003", "node-006", 1)]
    inf = infer(obs, VIEW)
    assert not inf.bad_nics and not inf.nic_suspects
    assert sorted(inf.glitches) == sorted(o.test.test_id for o in obs[:2])


def test_slow_node_fails_everywhere_with_many_partners():
    nodes = [f"node-{i:03d}" for i in range(1, 17)]
    obs = healthy_round(nodes)
    for r in range(4):
        obs.append(flow_obs("node-040", f"node-{20 + r:03d}", r, "fail", value=196.0))
        obs.append(flow_obs(f"node-{30 + r:03d}", "node-040", r, "fail", rnd=2, value=196.0))
        obs.append(flow_obs(f"node-{20 + r:03d}", f"node-{50 + r:03d}", r, rnd=2))
        obs.append(flow_obs(f"node-{30 + r:03d}", f"node-{60 + r:03d}", r))
    inf = infer(obs, VIEW)
    assert set(inf.bad_nodes) == {"node-040"}
    assert not inf.bad_nics and not inf.nic_suspects and not inf.node_suspects
    assert "8 partner" in inf.bad_nodes["node-040"].reason


def test_single_low_test_that_passes_elsewhere_is_a_glitch():
    obs = healthy_round([f"node-{i:03d}" for i in range(1, 17)])
    glitch = flow_obs("node-001", "node-002", 0, "fail", rnd=2, value=150.0)
    obs += [glitch, flow_obs("node-001", "node-003", 0, rnd=3), flow_obs("node-004", "node-002",
                                                                            0, rnd=3)]
    inf = infer(obs, VIEW)
    assert glitch.test.test_id in inf.glitches
    assert not (inf.bad_nodes or inf.bad_nics or inf.nic_suspects or inf.node_suspects)
    assert not inf.links  # same-leaf pair: no switch link to blame


def test_hung_node_needs_two_partners_and_partners_are_cleared():
    obs = [flow_obs("node-033", "node-034", 0, "hang"), flow_obs("node-035", "node-033", 1, "hang"),
           flow_obs("node-034", "node-036", 1), flow_obs("node-035", "node-037", 0)]
    inf = infer(obs, VIEW)
    assert set(inf.hung) == {"node-033"} and not inf.hang_suspects
    one = infer(obs[:1] + obs[2:], VIEW)
    assert set(one.hang_suspects) == {"node-033"} and not one.hung


def test_unreachable_is_reported_apart():
    obs = [flow_obs("node-001", "node-050", 0, "unreachable"), flow_obs("node-001", "node-002", 1)]
    inf = infer(obs, VIEW)
    assert set(inf.unreachable) == {"node-050"} and not inf.bad_nodes and not inf.hung


def _cross_pair_through(link_up):
    """Two node pairs whose rail-0 IB routes cross the switch link ``link_up``."""
    found = []
    for a in sorted(VIEW.topology.nodes)[:16]:
        for b in sorted(VIEW.topology.nodes)[16:32]:
            if link_up in VIEW.route_links(VIEW.rails_of[a][0], VIEW.rails_of[b][0]):
                found.append((a, b))
    return found


def test_ib_link_is_found_exactly_and_nics_are_not_blamed():
    link = ("leaf-0-0", "spine-1")
    pairs = _cross_pair_through(link)
    (a1, b1), (a2, b2) = pairs[0], next(p for p in pairs if not set(p) & set(pairs[0]))
    obs = [flow_obs(a1, b1, 0, "fail", value=196.0), flow_obs(a2, b2, 0, "fail", rnd=2,
                                                               value=196.0)]
    # their NICs pass elsewhere (leaf-local), other uplinks were crossed by passing flows
    obs += [flow_obs(a1, "node-003", 0, rnd=2), flow_obs(b1, "node-020", 0, rnd=2),
            flow_obs(a2, "node-004", 0), flow_obs(b2, "node-021", 0)]
    other = ("leaf-1-0", "spine-1")
    for a, b in [(x, y) for x in sorted(VIEW.topology.nodes)[32:48]
                 for y in sorted(VIEW.topology.nodes)[16:32]]:
        if other in VIEW.route_links(VIEW.rails_of[b][0], VIEW.rails_of[a][0]):
            obs.append(flow_obs(b, a, 0, rnd=2))
            break
    inf = infer(obs, VIEW)
    assert not inf.bad_nics and not inf.nic_suspects and not inf.node_suspects
    assert inf.links and link in inf.links[0].candidates and not inf.links[0].bad
    obs.append(flow_obs(a1, b1, 0, "fail", rnd=3, purpose="localize", value=196.0,
                        retest_of=obs[0].test.test_id))
    inf = infer(obs, VIEW)
    assert not inf.links[0].bad  # a retest of the same pair is no independent confirmation
    fresh = [p for p in pairs if not set(p) & {a1, b1, a2, b2}][:2]
    obs.append(flow_obs(*fresh[0], 0, "fail", rnd=3, purpose="localize", value=196.0))
    assert not infer(obs, VIEW).links[0].bad  # one fresh probe: still a suspect
    obs.append(flow_obs(*fresh[1], 0, "fail", rnd=3, purpose="localize", value=196.0))
    inf = infer(obs, VIEW)
    assert inf.links[0].bad and inf.links[0].candidates == (link,)


def test_ib_link_glitches_are_cleared_by_a_passing_retest():
    link = ("leaf-0-0", "spine-1")
    (a1, b1) = _cross_pair_through(link)[0]
    first = flow_obs(a1, b1, 0, "fail", value=150.0)
    obs = [first, flow_obs(a1, "node-003", 0, rnd=2), flow_obs(b1, "node-020", 0, rnd=2),
           flow_obs(a1, b1, 0, rnd=3, purpose="localize", retest_of=first.test.test_id)]
    inf = infer(obs, VIEW)
    assert first.test.test_id in inf.glitches and not inf.links


def test_roce_possible_collisions_are_set_aside():
    nodes = sorted(ROCE.topology.nodes)
    a = flow_obs(nodes[0], nodes[20], 0, "fail", value=196.0, view=ROCE)
    b = flow_obs(nodes[1], nodes[21], 0, "fail", value=196.0, view=ROCE)
    inf = infer([a, b], ROCE)
    assert set(inf.ambiguous) == {a.test.test_id, b.test.test_id}
    assert not inf.links, "a possible collision implicates no link"
    assert not inf.bad_nodes and not inf.bad_nics  # devices: only suspects, to be confirmed
    cleared = [a, b] + [flow_obs(n, m, 0, view=ROCE, rnd=2) for n, m in
                        [(nodes[0], nodes[5]), (nodes[20], nodes[25]), (nodes[1], nodes[6]),
                         (nodes[21], nodes[26])]]
    inf = infer(cleared, ROCE)
    assert not (inf.nic_suspects or inf.node_suspects or inf.links or inf.glitches)


def test_roce_contention_is_told_from_a_fault_by_fair_share():
    """Two flows on one link share it: set aside when their values fit in one link together.
    A flow failing alone at its leaf ends, or too fast to have shared, is evidence."""
    nodes = sorted(ROCE.topology.nodes)
    alone = flow_obs(nodes[0], nodes[20], 0, "fail", value=196.0, view=ROCE)
    assert infer([alone], ROCE).ambiguous == []
    a = flow_obs(nodes[0], nodes[20], 0, "fail", value=270.0, view=ROCE)
    b = flow_obs(nodes[1], nodes[21], 0, "fail", value=196.0, view=ROCE)
    # 270 + 196 do not fit in one 385 Gb/s link: the 270 is no contention (a slow device);
    # the 196 could have shared a link with a third flow of the round only
    assert infer([a, b], ROCE).ambiguous == []
    c = flow_obs(nodes[2], nodes[22], 0, "fail", view=ROCE)  # no number: the tool failed
    d = flow_obs(nodes[3], nodes[23], 0, "fail", value=190.0, view=ROCE)
    c = replace(c, value=None)
    assert c.test.test_id not in infer([c, d], ROCE).ambiguous


def test_roce_link_candidates_are_a_set_with_its_size():
    nodes = sorted(ROCE.topology.nodes)
    obs = [flow_obs(nodes[0], nodes[20], 0, "fail", value=196.0, view=ROCE),
           flow_obs(nodes[21], nodes[2], 0, "fail", rnd=2, value=196.0, view=ROCE)]
    obs += [flow_obs(n, m, 0, view=ROCE, rnd=3) for n, m in
            [(nodes[0], nodes[5]), (nodes[20], nodes[25]), (nodes[21], nodes[26]),
             (nodes[2], nodes[6])]]
    inf = infer(obs, ROCE)
    assert not inf.nic_suspects
    g = inf.links[0]
    assert len(g.candidates) == 8 and not g.bad  # the 4+4 uplinks of the two leaves
    assert g.to_json()["size"] == 8


def test_failures_with_a_dead_partner_nic_and_one_glitch_do_not_convict():
    """node-002's rail-1 NIC is down: it failed with three partners and confirmations. node-001
    failed twice with node-002 (both ways) and once, a confirmation, against proven-good
    node-007 (a glitch). The dead NIC explains the first two: node-001's NIC is a suspect to
    confirm again, never bad on one low test."""
    obs = [flow_obs("node-001", "node-002", 1, "fail"),
           flow_obs("node-002", "node-001", 1, "fail", rnd=2)]
    obs += [flow_obs("node-002", "node-003", 1, "fail", rnd=1),
            flow_obs("node-004", "node-002", 1, "fail", rnd=2),
            flow_obs("node-002", "node-005", 1, "fail", rnd=3, purpose="confirm"),
            flow_obs("node-006", "node-002", 1, "fail", rnd=3, purpose="confirm")]
    obs += [flow_obs("node-001", "node-009", r) for r in (0, 2, 3)]  # node-001's other rails
    obs += [flow_obs("node-002", "node-010", r) for r in (0, 2, 3)]  # node-002's other rails
    obs += [flow_obs(a, b, 1, rnd=2) for a, b in (("node-003", "node-005"),
                                                  ("node-004", "node-006"),
                                                  ("node-007", "node-008"))]
    obs += [flow_obs("node-001", "node-007", 1, "fail", rnd=3, purpose="confirm")]
    inf = infer(obs, VIEW)
    assert "node-002/mlx5_1" in inf.bad_nics
    assert "node-001/mlx5_1" not in inf.bad_nics
    assert "node-001/mlx5_1" in inf.nic_suspects
    assert "found bad itself" in inf.nic_suspects["node-001/mlx5_1"].reason


def test_failures_with_a_slow_partner_node_and_one_glitch_do_not_convict():
    """As above with a slow node (every rail at 60 %, many partners: a bad node) for the
    partner: a held-out 6-node gate (small_jobs, ib-fat3, seed 133) drained the healthy
    leaf-mate of a slow node, whose NIC failed with it and once, a glitch, elsewhere."""
    slow = dict(value=235.0)
    obs = [flow_obs("node-001", "node-002", 1, "fail", **slow),
           flow_obs("node-002", "node-001", 1, "fail", rnd=2, purpose="confirm", **slow)]
    for r in range(4):  # node-002 is slow on every rail, with every partner
        obs += [flow_obs("node-002", "node-003", r, "fail", **slow),
                flow_obs("node-004", "node-002", r, "fail", rnd=2, **slow),
                flow_obs("node-002", "node-005", r, "fail", rnd=3, purpose="confirm", **slow)]
    obs += [flow_obs("node-001", "node-009", r) for r in (0, 2, 3)]  # node-001's other rails
    obs += [flow_obs(a, b, r, rnd=2) for r in range(4) for a, b in (
        ("node-003", "node-005"), ("node-004", "node-006"), ("node-007", "node-008"))]
    obs += [flow_obs("node-001", "node-007", 1, "fail", rnd=3, purpose="confirm")]
    inf = infer(obs, VIEW)
    assert "node-002" in inf.bad_nodes
    assert "node-001/mlx5_1" not in inf.bad_nics
    assert "node-001/mlx5_1" in inf.nic_suspects
    assert "node found bad itself" in inf.nic_suspects["node-001/mlx5_1"].reason


def test_a_two_node_job_convicts_a_nic_on_confirmations_in_two_rounds():
    """A gate whose only other node is reachable: one partner NIC on the rail, proven good by
    its passes with this node's other NICs (another rail, through the switch). Confirmations
    pinned to the NIC failed against it in two rounds: bad. In one round only: a suspect."""
    def run(rounds):
        obs = [flow_obs("node-001", "node-002", 1, "fail")]
        obs += [flow_obs("node-001", "node-002", r) for r in (0, 2, 3)]
        obs += [flow_obs("node-001", "node-002", 1, "fail", rnd=rnd, purpose="confirm")
                for rnd in rounds]
        # node-002's rail-1 NIC passes with node-001's rail-0 NIC: proven good
        t = Test("r2-99999", "ib_write_bw", ("node-002", "node-001"),
                 (Flow(VIEW.rails_of["node-002"][1], VIEW.rails_of["node-001"][0]),), round=2,
                 purpose="confirm", params={"rails": (0, 1)})
        obs.append(Observation(t, "pass", value=391.0, unit="Gb/s", floor=335.0,
                               expected=385.0, raw=RawResult(t.test_id)))
        return infer(obs, VIEW)

    inf = run((2, 3))
    assert "node-001/mlx5_1" in inf.bad_nics
    assert "failed in 2 rounds" in inf.bad_nics["node-001/mlx5_1"].reason
    inf = run((2, 2))
    assert "node-001/mlx5_1" not in inf.bad_nics


def test_a_switch_nothing_crossed_cleanly_is_a_rival_to_the_star():
    """A NIC whose failures (three partners, three rounds) all crossed un-cleared links of a
    spine that also failed for two node pairs without it, and that no passing test crossed:
    the dead spine explains them (their links differ path by path, so no single link is on
    every failing path). The star does not convict it; without the spine's other failures it
    does."""
    from fabriccheck.inference.attribute import Inference
    from fabriccheck.inference.nic_rivals import star_reason as _star

    nic = "node-001/mlx5_0"
    obs = []
    for r, peer in ((1, "node-020"), (2, "node-030"), (3, "node-040")):
        t = Test(f"r{r}-x", "ib_write_bw", ("node-001", peer),
                 (Flow(nic, f"{peer}/mlx5_0"),), round=r, purpose="confirm")
        obs.append(Observation(t, "fail", None, "Gb/s"))
    inf = Inference()
    inf.good_nodes |= {"node-001", "node-020", "node-030", "node-040"}
    switch_of = {o.test.test_id: frozenset({"spine-2"}) for o in obs}
    alone = {"spine-2": {frozenset({"node-001", p}) for p in ("node-020", "node-030")}}
    assert _star(nic, obs, {}, inf, VIEW, 64, switch_of=switch_of, dark=alone)
    dead = {"spine-2": alone["spine-2"] | {frozenset({"node-050", "node-060"}),
                                           frozenset({"node-051", "node-061"})}}
    assert _star(nic, obs, {}, inf, VIEW, 64, switch_of=switch_of, dark=dead) == ""
