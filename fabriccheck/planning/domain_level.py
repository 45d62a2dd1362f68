"""The ladder's ``domain`` level (docs/nvl72.md "The domain level"): nccl all_reduce over each
NVLink domain with multi-node NVLink on and the network off, then over its halves and quarters
in two carvings, then per GPU for the trays every group failed with (pure).

Carvings of a rack's trays ``t0 .. t(n-1)`` (its trays in scope, rack order):

========  =============================  ==========================================
carving   halves                         quarters
========  =============================  ==========================================
1         contiguous: ``t0..t8``, ...    contiguous: ``t0..t4``, ``t5..t9``, ...
2         ``(i + i // 4) mod 2``         ``i mod 4``
========  =============================  ==========================================

Two trays in the same quarter of both carvings are four apart (``i`` and ``i + 4``), and the
second carving's halves put those in different halves: no two trays share every group (up to 32
trays a rack; NVL72 has 18), so a
tray that failed in every group it was in is the one (each tray meets different partners in
each carving). A rack's tests run at once (disjoint trays), every rack in the same round:
NVLink domains share no cable. Localization (the round after the carvings): each candidate
tray runs once per GPU index ``g`` with two proven-good trays of its rack, one rank per tray
on GPU ``g`` (four tests at once, on disjoint GPUs).
"""

from __future__ import annotations

from collections.abc import Sequence

from fabriccheck.errors import ConfigError
from fabriccheck.inference.domain_state import domain_state
from fabriccheck.inference.state import Inference
from fabriccheck.models import Purpose, Test
from fabriccheck.planning.context import RunContext
from fabriccheck.run_history import RunHistory

__all__ = ["DOMAIN_STEPS", "carve_domain", "plan_domain_round"]

#: the domain level's rounds: (carve, carving); ``localize``: the per-GPU round
DOMAIN_STEPS = (("full", 0), ("half", 1), ("quarter", 1), ("half", 2), ("quarter", 2),
                ("localize", 0))
#: proven-good trays a candidate tray is tested with, per GPU index
PEERS = 2


def carve_domain(trays: Sequence[str], carve: str, carving: int) -> list[tuple[str, ...]]:
    """The groups of one carve of a rack's trays (groups of two trays at least).

    >>> t = [f"t{i}" for i in range(8)]
    >>> carve_domain(t, "half", 1)
    [('t0', 't1', 't2', 't3'), ('t4', 't5', 't6', 't7')]
    >>> carve_domain(t, "half", 2)
    [('t0', 't2', 't5', 't7'), ('t1', 't3', 't4', 't6')]
    >>> carve_domain(t, "quarter", 2)
    [('t0', 't4'), ('t1', 't5'), ('t2', 't6'), ('t3', 't7')]
    """
    n = len(trays)
    if carve == "full":
        return [tuple(trays)] if n >= 2 else []
    parts = 2 if carve == "half" else 4
    if n < 2 * parts:
        return []
    if carving == 1:
        size, extra = divmod(n, parts)
        out, i = [], 0
        for k in range(parts):
            j = i + size + (1 if k < extra else 0)
            out.append(tuple(trays[i:j]))
            i = j
        return out
    key = (lambda i: (i + i // 4) % 2) if parts == 2 else (lambda i: i % 4)
    return [tuple(t for i, t in enumerate(trays) if key(i) == c) for c in range(parts)]


def _rack_trays(ctx: RunContext, inf: Inference) -> dict[str, list[str]]:
    """Per NVLink domain its trays in scope that can be reached (blamed ones too: the domain
    level judges the NVLink apart from what the network found)."""
    gone = set(inf.hung) | set(inf.unreachable)
    scope = set(ctx.nodes)
    out = {}
    for name, d in sorted(ctx.view.topology.domains.items()):
        trays = [t for t in d.trays if t in scope and t not in gone]
        if len(trays) >= 2:
            out[name] = trays
    return out


def _test(ctx: RunContext, round_no: int, k: int, nodes: Sequence[str], **params: object
          ) -> Test:
    try:
        size = ctx.spec.lookup("nccl", 1).size_bytes
    except ConfigError:  # no nccl bar in the spec: nccl-tests' usual large size
        size = 1 << 30
    gpus = 1 if params.get("gpu") is not None else (ctx.spec.gpus_per_node or 4)
    return Test(f"r{round_no}-nvl{k:04d}", "nccl", tuple(nodes), (), round_no, Purpose.DOMAIN,
                float(ctx.policy.timeout_s or ctx.spec.timeout_s),
                {"size_bytes": size, "collective": "all_reduce", "gpus_per_node": gpus,
                 "iters": 20, **params})


def plan_domain_round(carve: str, carving: int, ctx: RunContext, history: RunHistory,
                      inf: Inference) -> list[Test]:
    """The tests of one domain round (``carve`` from :data:`DOMAIN_STEPS`). The gate carves
    only the racks whose whole-domain test failed."""
    round_no = history.round_count + 1
    racks = _rack_trays(ctx, inf)
    if carve == "localize":
        return _localize(ctx, history, racks, round_no)
    if ctx.mode == "gate" and carve != "full":
        state = domain_state(history.domain_observations)
        racks = {r: t for r, t in racks.items()
                 if any(not ok for _, ok, _ in state.racks.get(r, ()))}
    tests: list[Test] = []
    for rack, trays in racks.items():
        for group in carve_domain(trays, carve, carving):
            tests.append(_test(ctx, round_no, len(tests) + 1, group, domain=rack,
                               carve=carve, carving=carving))
    return tests


def _localize(ctx: RunContext, history: RunHistory, racks: dict[str, list[str]],
              round_no: int) -> list[Test]:
    """Per candidate tray (not already named by NCCL's lines) and GPU index: the tray with
    two proven-good trays of its rack, one rank each on that GPU."""
    state = domain_state(history.domain_observations)
    g = ctx.spec.gpus_per_node or 4
    tests: list[Test] = []
    for rack, trays in racks.items():
        pool = [t for t in state.good(rack) if t in trays]
        for cand in state.candidates(rack):
            ev = state.trays[cand]
            if cand not in trays or len(ev.named) >= 2 or len(pool) < PEERS:
                continue
            peers, pool = pool[:PEERS], pool[PEERS:]
            for gpu in range(g):
                tests.append(_test(ctx, round_no, len(tests) + 1, (cand, *peers), domain=rack,
                                   carve="gpu", carving=0, gpu=gpu))
    return tests
