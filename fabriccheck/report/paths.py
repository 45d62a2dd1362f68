"""Where the failing tests went: the switch links each one crossed, and per link how many (pure).

A failing test's path comes from its flows: a learned path (a traceroute on the flow's own
5-tuple, RoCE) or the InfiniBand route is *known*; otherwise the flow took one of its equal-cost
paths (RoCE ECMP) and the links that are not on every candidate are *maybe* links, "one of N".
Only switch-to-switch links are kept: a NIC's own cable shows as the NIC's state.

A failing test is ``contention`` when the run judged it possible ECMP contention
(``extra["contention"]``) and no verdict blames anything with it: the report draws it apart so
an operator is not alarmed where the verdict blames nobody. Glitches (failures that did not
reproduce) and tests that never reached their hosts are not drawn.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from fabriccheck.models import HEALTHY, PASS, UNREACHABLE, Flow, LinkKey, Observation, RunResult
from fabriccheck.topology.model import Topology

#: test ids kept per link for its tooltip
TESTS_PER_LINK = 6


@dataclass(frozen=True)
class TestPath:
    """One failing test and the switch links it crossed.

    ``known``: links it surely crossed; ``maybe``: links of its candidate (ECMP) paths that not
    every candidate uses; ``ways``: the most candidate paths any of its flows had (1: known).
    """

    test_id: str
    label: str
    known: frozenset[LinkKey]
    maybe: frozenset[LinkKey]
    ways: int
    contention: bool
    blamed: bool


@dataclass
class LinkLoad:
    """The failing tests on one switch link: how many surely, how many maybe (one of ``ways``)."""

    known: int = 0
    maybe: int = 0
    ways: int = 0
    contention: int = 0
    tests: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.known + self.maybe

    def describe(self) -> str:
        """The tooltip's count: ``3 failing test(s) crossed it, 2 may have (one of 8 paths)``."""
        parts = []
        if self.known:
            parts.append(f"{self.known} failing test(s) crossed it")
        if self.maybe:
            parts.append(f"{self.maybe} may have (one of {self.ways} paths)")
        if self.contention:
            parts.append(f"{self.contention} of them possible contention, nobody blamed")
        more = "…" if self.total > len(self.tests) else ""
        return "; ".join(parts) + f"; tests {', '.join(self.tests)}{more}"


@dataclass(frozen=True)
class FailPaths:
    """Every drawn failing test's path and the per-link tally."""

    tests: tuple[TestPath, ...]
    links: dict[LinkKey, LinkLoad]

    @property
    def max_total(self) -> int:
        return max((ld.total for ld in self.links.values()), default=0)


def glitch_ids(result: RunResult) -> set[str]:
    """Test ids the run judged transient (``extra["glitches"]``, set by the orchestrator)."""
    return {str(t) for t in result.extra.get("glitches") or ()}


def contention_ids(result: RunResult) -> set[str]:
    """Failing tests the run judged possible ECMP contention and no verdict blames anything with.

    >>> from fabriccheck.models import RunResult, Verdict
    >>> r = RunResult("sweep", [], extra={"contention": ["t1", "t2"]},
    ...               verdicts=[Verdict("nic", "n/x", "bad", evidence=("t2",))])
    >>> sorted(contention_ids(r))
    ['t1']
    """
    blamed = blamed_ids(result)
    return {str(t) for t in result.extra.get("contention") or ()} - blamed


def blamed_ids(result: RunResult) -> set[str]:
    """Test ids that are evidence of a verdict that is not healthy."""
    return {t for v in result.verdicts if v.state != HEALTHY for t in v.evidence}


def _switch_links(path: Iterable[LinkKey], topo: Topology) -> frozenset[LinkKey]:
    sw = topo.switches
    return frozenset(k for k in path if k[0] in sw and k[1] in sw)


#: a flow's switch links: (surely crossed, maybe crossed, number of candidate paths)
FlowLinks = tuple[frozenset[LinkKey], frozenset[LinkKey], int]


def flow_links(flow: Flow, topo: Topology,
               cache: dict[tuple[str, str], FlowLinks] | None = None) -> FlowLinks:
    """A flow's switch links: (surely crossed, maybe crossed, number of candidate paths).

    ``cache`` keeps a RoCE flow's candidates per (source switch, destination switch): the
    switch links of the equal-cost paths depend on nothing else.
    """
    if flow.path is not None:
        return _switch_links(flow.path, topo), frozenset(), 1
    if topo.fabric == "infiniband":
        route = topo.route(flow.src, flow.dst)
        return (_switch_links(route, topo) if route else frozenset()), frozenset(), 1
    key = (topo.attachment.get(flow.src, flow.src), topo.attachment.get(flow.dst, flow.dst))
    if cache is not None and flow.partial is None and key in cache:
        return cache[key]
    got = _ecmp_links(flow, topo)
    if cache is not None and flow.partial is None:
        cache[key] = got
    return got


def _ecmp_links(flow: Flow, topo: Topology) -> FlowLinks:
    cands = [_switch_links(p, topo) for p in topo.paths(flow.src, flow.dst)]
    if flow.partial is not None:  # the trace stopped part-way: the paths through what is left
        rest = set(flow.partial)
        cands = [c for c in cands if c & rest] or cands
    if not cands:
        return frozenset(), frozenset(), 1
    common = frozenset.intersection(*cands)
    union = frozenset().union(*cands)
    ways = len(set(cands))
    return common, union - common, ways


def _label(obs: Observation) -> str:
    t = obs.test
    nodes = " ".join(t.nodes) if len(t.nodes) <= 4 else f"{t.nodes[0]} … {t.nodes[-1]}"
    ratio = ""
    if obs.value is not None and (obs.expected or obs.floor):
        ratio = f": {obs.value / (obs.expected or obs.floor):.2f}× expected"  # type: ignore[operator]
    return f"{t.test_id} {t.probe} {nodes} ({obs.status}{ratio})"


def failing_paths(result: RunResult, topo: Topology) -> FailPaths:
    """The switch links of every failing test of ``result`` and how many failing tests each got.

    Parameters
    ----------
    result
        The run; its observations' flows carry learned paths where the run learned them.
    topo
        The fabric: InfiniBand routes and RoCE equal-cost candidate paths.

    Returns
    -------
    FailPaths
        Failing tests (not glitches, not unreachable) in run order, and per switch link the
        failing tests that surely or maybe crossed it.
    """
    glitches = glitch_ids(result)
    contention = contention_ids(result)
    blamed = blamed_ids(result)
    tests: list[TestPath] = []
    links: dict[LinkKey, LinkLoad] = {}
    cache: dict[tuple[str, str], FlowLinks] = {}
    for obs in result.observations:
        tid = obs.test.test_id
        if obs.status in (PASS, UNREACHABLE) or tid in glitches or not obs.test.flows:
            continue
        known: set[LinkKey] = set()
        maybe: set[LinkKey] = set()
        ways = 1
        for k, m, w in _distinct(obs.test.flows, topo, cache):
            known |= k
            maybe |= m
            ways = max(ways, w)
        maybe -= known
        if not known and not maybe:
            continue  # stayed on its leaf: no switch link to draw
        tp = TestPath(tid, _label(obs), frozenset(known), frozenset(maybe), ways,
                      tid in contention, tid in blamed)
        tests.append(tp)
        _tally(links, tp)
    return FailPaths(tuple(tests), links)


def _distinct(flows: Iterable[Flow], topo: Topology,
              cache: dict[tuple[str, str], FlowLinks]) -> list[FlowLinks]:
    """The switch links of each flow, once per switch pair for RoCE flows without a path (a
    collective's flows share few leaf pairs: this keeps 4,096-node runs fast)."""
    out = []
    seen: set[tuple[str, str]] = set()
    att = topo.attachment
    ecmp = topo.fabric != "infiniband"
    for flow in flows:
        if ecmp and flow.path is None and flow.partial is None:
            key = (att.get(flow.src, flow.src), att.get(flow.dst, flow.dst))
            if key in seen:
                continue
            seen.add(key)
        out.append(flow_links(flow, topo, cache))
    return out


def _tally(links: dict[LinkKey, LinkLoad], tp: TestPath) -> None:
    for key, sure in [*((k, True) for k in tp.known), *((k, False) for k in tp.maybe)]:
        ld = links.setdefault(key, LinkLoad())
        if sure:
            ld.known += 1
        else:
            ld.maybe += 1
            ld.ways = max(ld.ways, tp.ways)
        ld.contention += tp.contention
        if len(ld.tests) < TESTS_PER_LINK:
            ld.tests.append(tp.test_id)
