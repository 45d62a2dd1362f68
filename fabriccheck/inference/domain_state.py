"""What the NVLink-domain tests so far say per tray (pure): which trays every domain group
failed with (the candidates, intersected over both carvings), which trays passed with someone
(proven good: the peers localization pairs candidates with), and which trays NCCL's own lines
named (an IMEX tray's WARN, a tray in another clique, a tray whose channels rode the network).

A failing test that names trays is explained by them: its other members are not blamed for
it. A test that names nobody (slow) blames all its members; the intersection of the halves and
quarters of two carvings leaves the tray (docs/nvl72.md "How a verdict is reached").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fabriccheck.models import PASS, Observation

__all__ = ["DomainState", "TrayEvidence", "domain_state", "named_trays"]

#: carve kinds of the domain's group tests (``gpu``: a per-GPU localization test)
GROUP_CARVES = ("full", "half", "quarter")


@dataclass
class TrayEvidence:
    """One tray's domain tests: ``tests`` its group tests, ``blamed`` the failing ones that
    blame it, ``named`` the failing ones whose NCCL lines named it (with why), ``gpu`` per GPU
    index its per-GPU tests as (test id, passed)."""

    tray: str
    rack: str
    tests: list[str] = field(default_factory=list)
    blamed: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)
    named: dict[str, str] = field(default_factory=dict)
    carvings_failed: set[int] = field(default_factory=set)
    gpu: dict[int, list[tuple[str, bool]]] = field(default_factory=dict)

    @property
    def candidate(self) -> bool:
        """No group test it was in passed, and two at least failed blaming it (a failure NCCL's
        lines pinned on another tray neither blames nor clears it)."""
        return not self.passed and len(self.blamed) >= 2

    @property
    def proven_good(self) -> bool:
        return bool(self.passed)


@dataclass
class DomainState:
    """Per tray its evidence; per rack its group tests (id, passed, busbw)."""

    trays: dict[str, TrayEvidence] = field(default_factory=dict)
    racks: dict[str, list[tuple[str, bool, float | None]]] = field(default_factory=dict)

    def candidates(self, rack: str | None = None) -> list[str]:
        return sorted(t for t, e in self.trays.items()
                      if e.candidate and (rack is None or e.rack == rack))

    def good(self, rack: str) -> list[str]:
        return sorted(t for t, e in self.trays.items() if e.rack == rack and e.proven_good)


def named_trays(o: Observation) -> dict[str, str]:
    """Trays a failing domain test's NCCL lines name, with why (``imex``, ``clique``,
    ``network``); an IMEX or clique naming outranks the network (its channels fall to NET)."""
    tr = o.facts.get("transport") or {}
    nodes = set(o.test.nodes)
    out: dict[str, str] = {}
    for why, key in (("network", "net_hosts"), ("clique", "odd_clique_hosts"),
                     ("imex", "imex_hosts")):
        hosts = {h for h in tr.get(key, ()) if h in nodes}
        if why == "network" and tr.get("odd_clique_hosts"):
            continue  # the odd clique's ring neighbours ride NET because of it
        out.update(dict.fromkeys(sorted(hosts), why))
    return out


def domain_state(observations: Sequence[Observation]) -> DomainState:
    """The evidence of every domain test so far (``observations``: purpose ``domain``)."""
    st = DomainState()
    for o in observations:
        rack = str(o.facts.get("rack") or o.test.params.domain or "")
        carve = o.facts.get("carve") or o.test.params.carve
        for n in o.test.nodes:
            st.trays.setdefault(n, TrayEvidence(n, rack))
        if carve == "gpu":
            _add_gpu_test(st, o)
            continue
        st.racks.setdefault(rack, []).append((o.test.test_id, o.status == PASS, o.value))
        _add_group_test(st, o)
    return st


def _add_group_test(st: DomainState, o: Observation) -> None:
    tid, ok = o.test.test_id, o.status == PASS
    named = {} if ok else named_trays(o)
    for n in o.test.nodes:
        ev = st.trays[n]
        ev.tests.append(tid)
        if ok:
            ev.passed.append(tid)
        elif not named or n in named:
            ev.blamed.append(tid)
            ev.carvings_failed.add(int(o.facts.get("carving") or 0))
        if n in named:
            ev.named[tid] = named[n]


def _add_gpu_test(st: DomainState, o: Observation) -> None:
    """A per-GPU test judges its first tray (the candidate; the others are proven good)."""
    gpu = o.facts.get("gpu")
    if gpu is None or not o.test.nodes:
        return
    st.trays[o.test.nodes[0]].gpu.setdefault(int(gpu), []).append(
        (o.test.test_id, o.status == PASS))
