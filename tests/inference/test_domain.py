"""Judging and localizing NVLink-domain tests (inference/domain_judge.py, domain_state.py,
domain.py): a domain test that rode the network fails as a configuration fault whatever its
bandwidth; the intersection of two carvings leaves the tray; per-GPU tests name the GPU; the
same ports down on most trays of a rack name the switch tray (or chip), never a tray."""

from __future__ import annotations

from pathlib import Path

from fabriccheck.inference.domain import localize_domains
from fabriccheck.inference.domain_judge import judge_domain_round
from fabriccheck.inference.domain_state import domain_state
from fabriccheck.inference.nvl_hints import NvlHints
from fabriccheck.models import FAIL, PASS, Observation, Purpose, RawResult, Test
from fabriccheck.planning.domain_level import DOMAIN_STEPS, carve_domain
from fabriccheck.specs import load_spec
from fabriccheck.topology import generate

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nvl72"
SPEC = load_spec("gb200-ndr400-ib")


def domain_test(nodes, carve="full", carving=0, gpu=None, tid="t1"):
    return Test(tid, "nccl", tuple(nodes), purpose=Purpose.DOMAIN,
                params={"size_bytes": 1 << 30, "gpus_per_node": 1 if gpu is not None else 4,
                        "domain": "rack-0", "carve": carve, "carving": carving, "gpu": gpu})


def judge(text, exit_code=0):
    t = domain_test(["node-001", "node-002"])
    return judge_domain_round([t], [RawResult("t1", stdout=text, exit_code=exit_code)], SPEC)[0]


def test_a_proven_fast_domain_test_passes():
    o = judge((FIX / "nccl_mnnvl_2tray_ok.txt").read_text())
    assert o.status == PASS and o.value > 685 and o.facts["transport"]["proven"]


def test_a_fast_test_that_rode_the_network_is_a_config_fault():
    text = (FIX / "nccl_mnnvl_2tray_ok.txt").read_text().replace(
        "3[3] -> 4[0] via P2P/MNNVL", "3[3] -> 4[0] [send] via NET/IB/0/GDRDMA", 1)
    o = judge(text)
    assert o.value > 685  # the bandwidth would pass
    assert o.status == FAIL and o.reason.startswith("config: the domain test rode the network")
    assert "NET/IB" in o.reason and "node-001" in o.reason


def test_imex_failure_names_the_tray():
    o = judge((FIX / "nccl_mnnvl_imex_not_working.txt").read_text(), exit_code=3)
    assert o.status == FAIL and "node-002" in o.reason and "IMEX" in o.reason


def obs(t: Test, ok: bool, value: float = 790.0) -> Observation:
    p = t.params
    return Observation(t, PASS if ok else FAIL, value if ok else 400.0, "GB/s",
                       facts={"rack": p.domain, "carve": p.carve, "carving": p.carving,
                              "gpu": p.gpu, "transport": {"proven": True}})


def rack_run(trays, bad=(), bad_gpu=None):
    """Every carve of one rack judged by whether it holds a bad tray, then per-GPU tests of
    the candidates with two good trays."""
    out, k = [], 0
    for carve, carving in DOMAIN_STEPS[:-1]:
        for g in carve_domain(trays, carve, carving):
            k += 1
            out.append(obs(domain_test(g, carve, carving, tid=f"c{k}"), not set(g) & set(bad)))
    st = domain_state(out)
    good = st.good("rack-0")
    for cand in st.candidates():
        for gpu in range(4):
            k += 1
            t = domain_test((cand, *good[:2]), "gpu", 0, gpu, tid=f"g{k}")
            out.append(obs(t, gpu != bad_gpu))
    return out


def test_the_two_carvings_leave_exactly_the_slow_tray_and_its_gpu():
    topo = generate({"kind": "nvl72", "racks": 1}, name="t", fabric="infiniband")
    trays = list(topo.domains["rack-0"].trays)
    for i in range(18):
        st = domain_state(rack_run(trays, bad=[trays[i]], bad_gpu=2))
        assert st.candidates() == [trays[i]]
        rep = localize_domains(st, topo, NvlHints())
        assert rep.components == [f"{trays[i]}/gpu2"]
        assert [(t.tray, t.state, t.fault) for t in rep.trays] == [(trays[i], "bad", "nvlink")]


def test_every_gpu_passing_with_good_peers_is_only_a_suspect():
    topo = generate({"kind": "nvl72", "racks": 1}, name="t", fabric="infiniband")
    trays = list(topo.domains["rack-0"].trays)
    rep = localize_domains(domain_state(rack_run(trays, bad=[trays[5]], bad_gpu=None)), topo,
                           NvlHints())
    assert [(t.tray, t.state) for t in rep.trays] == [(trays[5], "suspect")]


def test_slow_over_the_network_too_is_the_tray_itself():
    topo = generate({"kind": "nvl72", "racks": 1}, name="t", fabric="infiniband")
    trays = list(topo.domains["rack-0"].trays)
    st = domain_state(rack_run(trays, bad=[trays[3]], bad_gpu=1))
    rep = localize_domains(st, topo, NvlHints(), frozenset({trays[3]}))
    assert rep.trays[0].fault == "node"


def test_the_switch_side_names_a_switch_tray_or_a_chip_and_no_tray():
    topo = generate({"kind": "nvl72", "racks": 1}, name="t", fabric="infiniband")
    trays = list(topo.domains["rack-0"].trays)
    st = domain_state(rack_run(trays))
    both = NvlHints(switch_side={t: frozenset({6, 7}) for t in trays})
    rep = localize_domains(st, topo, both)
    assert [s["name"] for s in rep.switches] == ["rack-0-nvsw-3"] and not rep.trays
    one = NvlHints(switch_side={t: frozenset({7}) for t in trays})
    assert [s["name"] for s in localize_domains(st, topo, one).switches] == ["rack-0-nvsw-3/1"]
    few = NvlHints(switch_side={t: frozenset({6, 7}) for t in trays[:3]})
    assert localize_domains(st, topo, few).switches == []  # 3 of 18 trays: not the switch


def test_a_trays_own_port_is_named_with_its_chip():
    topo = generate({"kind": "nvl72", "racks": 1}, name="t", fabric="infiniband")
    trays = list(topo.domains["rack-0"].trays)
    hints = NvlHints(ports={trays[2]: {2: {17}}})
    rep = localize_domains(domain_state(rack_run(trays)), topo, hints)
    assert rep.ports == [{"port": f"{trays[2]}/gpu2/nvl17", "chip": "rack-0-nvsw-8/1",
                          "tray": trays[2], "gpu": 2, "domain": "within the bar"}]
