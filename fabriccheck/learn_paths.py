"""Path learning on ECMP fabrics: each pinned flow's path, by a traceroute on its own 5-tuple.

On RoCE a flow takes one of its equal-cost paths, chosen by the switches' hash of its 5-tuple.
A test whose flow is pinned (``params.sport`` and ``params.dport``: iperf3 ``--cport``/``-p``,
ib_write_bw ``--flow_label``) has a path that a traceroute with the same 5-tuple reveals (007,
R-Pingmesh). Before a round runs, :meth:`PathLearner.learn` runs one ``traceroute`` test per
pinned flow whose path is not cached yet, through the same executor as the round (executors
never parse: the traceroute text is read here by :mod:`fabriccheck.probes.traceroute`), maps
the answering addresses to switches with the executor's ``hop_names()`` (the inventory's
``hops:``, a routed lab's router addresses, the simulator's switch addresses) and hands the
round's tests back with ``Flow.path`` set. Inference then treats that path as exact
(:meth:`FabricView.flow_links`). A path is cached per run (same 5-tuple, same path).

Coverage: a flow whose learned path crosses a switch link another pinned flow of the run (or an
earlier flow of this round) already crossed is *dull*; like a colliding flow it is re-pinned
(``cover_tries`` other source ports), and the free alternative crossing the most links no flow
crossed yet is taken (a port whose trace died part-way counts the links beyond: a down link
is never covered by a whole path, and a flow sent at it fails there, as it should;
NetBouncer's path-aware probing, with the hash choosing the paths). So
the sweep's two rail-pair rounds spread their cross-leaf flows over every ECMP member instead
of sampling them at random (:attr:`PathLearner.covered`, ``covered_links`` in the stats).

Collisions: two flows of a round whose learned paths share a directed switch link would halve
each other and look like a fault. After learning, each such flow (all but the first on the link)
is re-pinned: ``repin_tries`` other source ports are traced and the first whose path is whole
and free this round is taken (the switches' hash decides, the learner only draws again). So a
round's cross-leaf flows spread over distinct equal-cost members, and every one of them is hit
as the rounds go on; flows that stay on a shared link keep the attribution's contention rules.

A path is *not* learned when the trace is incomplete (a silent hop, two answers on one hop, an
unknown address, the destination not reached) or does not match one of the flow's equal-cost
paths in the topology; such a flow keeps its candidate set, and :attr:`PathLearner.stats`
counts it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fabriccheck.errors import ParseError
from fabriccheck.models import Flow, LinkKey, ProbeParams, RawResult, Test, link_key
from fabriccheck.planning.pinning import PINNABLE, pinned_ports
from fabriccheck.probes.traceroute import TraceResult, parse_traceroute, path_links
from fabriccheck.topology.view import FabricView

TRACE_PROBE = "traceroute"
TRACE_TIMEOUT_S = 30.0

FlowKey = tuple[str, str, int, int]  # src, dst, sport, dport


@dataclass
class PathStats:
    """How path learning went in one run (``path_learning`` in the run result)."""

    pinned_flows: int = 0  # distinct pinned 5-tuples that needed a path
    learned: int = 0
    not_learned: int = 0  # trace incomplete or not one of the flow's equal-cost paths
    partial: int = 0  # of those, traces that stopped part-way and narrowed the candidates
    traces: int = 0  # traceroute tests run
    repinned: int = 0  # tests moved to another source port (a shared link, coverage, a target)
    covered_links: int = 0  # switch links crossed by at least one pinned flow with a known path
    examples: list[str] = field(default_factory=list)  # why, for the first few not learned

    def to_json(self) -> dict[str, Any]:
        return {"pinned_flows": self.pinned_flows, "learned": self.learned,
                "not_learned": self.not_learned, "partial": self.partial,
                "traces": self.traces,
                "repinned": self.repinned,
                "covered_links": self.covered_links,
                "not_learned_examples": list(self.examples)}


@dataclass(frozen=True)
class Learned:
    """What a trace taught: the exact path, or the links beyond where its probes died."""

    exact: tuple[LinkKey, ...] | None = None
    partial: tuple[LinkKey, ...] | None = None


def switch_paths(view: FabricView, flow: Flow
                 ) -> list[tuple[tuple[str, ...], tuple[LinkKey, ...]]]:
    """The flow's equal-cost paths as (switches in order, switch links in order)."""
    sw = view.topology.switches
    out = []
    for p in view.topology.candidate_paths(flow.src, flow.dst):
        cur, seq = flow.src, []
        for a, b in p:
            cur = b if a == cur else a
            if cur in sw:
                seq.append(cur)
        out.append((tuple(seq), tuple(lk for lk in p if lk[0] in sw and lk[1] in sw)))
    return out


def answered_prefix(trace: TraceResult, hop_names: Mapping[str, str]) -> tuple[str, ...]:
    """The switches of a trace up to its first silent or unknown hop, when every later hop is
    silent too (probes died there); () when the trace says nothing that clear."""
    seq: list[str] = []
    for i, hop in enumerate(trace.hops):
        if not hop.addresses:
            rest = trace.hops[i:]
            return tuple(seq) if all(not h.addresses for h in rest) else ()
        if len(hop.addresses) != 1 or hop.addresses[0] not in hop_names:
            return ()
        seq.append(hop_names[hop.addresses[0]])
    return ()


def pinned_key(test: Test) -> FlowKey | None:
    """The 5-tuple key of a pinnable test's flow (None: not pinned, or not one flow)."""
    p = test.params
    if test.probe not in PINNABLE or len(test.flows) != 1 or p.sport is None or p.dport is None:
        return None
    f = test.flows[0]
    return f.src, f.dst, int(p.sport), int(p.dport)


class PathLearner:
    """Learns and caches (per run) the paths of pinned flows (see the module docstring)."""

    def __init__(self, view: FabricView, hop_names: Mapping[str, str], seed: int = 0) -> None:
        self.view = view
        self.seed = seed
        self.hop_names = dict(hop_names)
        self.cache: dict[FlowKey, Learned | None] = {}
        #: switch links the pinned flows of earlier rounds crossed (known paths)
        self.covered: set[LinkKey] = set()
        #: runs the traceroute tests (None: the executor given to :meth:`learn`)
        self.tracer: Any = None
        self.stats = PathStats()

    @classmethod
    def for_executor(cls, view: FabricView, executor: object, seed: int = 0
                     ) -> PathLearner | None:
        """A learner when the fabric is RoCE and the executor can name traceroute hops."""
        if view.topology.fabric != "roce":
            return None
        inner = executor
        while getattr(inner, "inner", None) is not None:  # recording / idle-guard wrappers
            inner = inner.inner
        names = getattr(inner, "hop_names", None)
        hops = dict(names()) if callable(names) else {}
        if not hops:
            return None
        learner = cls(view, hops, seed)
        learner.tracer = inner  # traces are path facts, not rounds: not recorded as one
        return learner

    def _needs_path(self, flow: Flow) -> bool:
        """More than one equal-cost path (else the candidate set is already the path)."""
        return len(self.view.topology.candidate_paths(flow.src, flow.dst)) > 1

    def trace_tests(self, tests: Sequence[Test]) -> list[Test]:
        """One traceroute test per pinned flow of ``tests`` whose path is not cached (pure)."""
        out, seen = [], set()
        for t in tests:
            key = pinned_key(t)
            if key is None or key in self.cache or key in seen or not self._needs_path(t.flows[0]):
                continue
            seen.add(key)
            out.append(Test(f"{t.test_id}~path", TRACE_PROBE, t.nodes, t.flows[:1], round=t.round,
                            purpose=t.purpose, timeout_s=min(t.timeout_s, TRACE_TIMEOUT_S),
                            params={"sport": key[2], "dport": key[3]}))
        return out

    def absorb(self, traces: Sequence[Test], raws: Sequence[RawResult]) -> None:
        """Read the traceroute outputs of ``traces`` into the cache (pure)."""
        for t, raw in zip(traces, raws, strict=True):
            f = t.flows[0]
            key = (f.src, f.dst, int(t.params.sport or 0), int(t.params.dport or 0))
            self.stats.pinned_flows += 1
            got, why = self._links(t.flows[0], raw)
            self.cache[key] = got
            if got is not None and got.exact is not None:
                self.stats.learned += 1
                continue
            self.stats.not_learned += 1
            self.stats.partial += got is not None
            if len(self.stats.examples) < 5:
                self.stats.examples.append(f"{t.flows[0].src} -> {t.flows[0].dst} "
                                           f"sport {key[2]}: {why}")

    def _links(self, flow: Flow, raw: RawResult) -> tuple[Learned | None, str]:
        if raw.unreachable or raw.timed_out or raw.error:
            return None, "traceroute did not run"
        try:
            trace = parse_traceroute(raw.stdout)
        except ParseError as exc:
            return None, str(exc)
        paths = switch_paths(self.view, flow)
        links = path_links(trace, self.hop_names)
        if links is not None:
            if frozenset(links) not in {frozenset(lk) for _, lk in paths}:
                return None, "the traced path is not one of the flow's equal-cost paths"
            return Learned(exact=links), ""
        prefix = answered_prefix(trace, self.hop_names)
        fits = [lk for sws, lk in paths if prefix and sws[:len(prefix)] == prefix]
        if prefix and fits and len(fits) < len(paths):
            # the probes died after the last answering switch: the fault is beyond it
            beyond = tuple(sorted({k for lk in fits for k in lk[len(prefix) - 1:]}))
            return Learned(partial=beyond), "trace stopped after " + prefix[-1]
        return None, "incomplete trace (silent hop, unknown address or not reached)"

    def annotate(self, tests: Sequence[Test]) -> tuple[Test, ...]:
        """``tests`` with ``Flow.path`` set on every pinned flow whose path is known (pure)."""
        out = []
        for t in tests:
            key = pinned_key(t)
            got = self.cache.get(key) if key is not None else None
            if got is None:
                out.append(t)
            else:
                f = t.flows[0]
                out.append(replace(t, flows=(Flow(f.src, f.dst, got.exact, got.partial),)))
        return tuple(out)

    def learn(self, tests: Sequence[Test], executor: Any, *, repin_tries: int = 6,
              aim_tries: int = 16, cover_tries: int = 6) -> tuple[Test, ...]:
        """Trace the new pinned flows of ``tests`` on ``executor`` and return them annotated.

        A flow whose path collides with an earlier flow's is re-pinned (``repin_tries`` other
        ports, ``cover_tries`` if more) to a free path, the one crossing the most new links; a
        dull flow (its path crosses a link already covered) is
        re-pinned (``cover_tries`` ports) to the free path crossing the most new links; a
        localization flow aimed at a link (``params.probe_of``) is re-pinned (``aim_tries``
        ports) until its path crosses that link, and a free one if any.
        """
        self._trace(self.trace_tests(tests), executor)
        out = list(self.annotate(tests))
        clash = set(self.collisions(out))
        dull = set(self.dull(out, skip=clash))
        redo = sorted(clash | dull | {i for i, t in enumerate(out) if not _hits_target(t)})
        if redo:
            tries = {i: self._aim_tries(out[i], aim_tries) if _target(out[i]) else
                     cover_tries if i in dull else max(repin_tries, cover_tries) for i in redo}
            options = {i: [self._repinned(out[i], k) for k in range(1, 1 + tries[i])]
                       for i in redo}
            self._trace(self.trace_tests([t for alts in options.values() for t in alts]),
                        executor)
            # hops of the flows that stay; each re-pinned flow adds its pick's in turn (a dull
            # flow whose own path a pick took since is re-pinned like a colliding one)
            stay = [t for i, t in enumerate(out) if i not in set(redo)]
            used = set().union(*(directed_hops(self.view, f) for t in stay for f in t.flows))
            cov = self.covered | _links(stay)
            for i in redo:
                pick = self._pick(out[i], [out[i], *self.annotate(options[i])], used, cov)
                if pick is not None:
                    out[i] = pick
                    self.stats.repinned += 1
                used |= directed_hops(self.view, out[i].flows[0])
                cov |= _links([out[i]])
        self.covered |= _links(out)
        self.stats.covered_links = len(self.covered)
        return tuple(out)

    def _aim_tries(self, test: Test, least: int) -> int:
        """Ports to draw for a flow aimed at a link: six per equal-cost path (a hash misses one
        given path of ``w`` in ``6 w`` draws with chance ~e^-6), ``least`` at least."""
        f = test.flows[0]
        return max(least, 6 * len(self.view.topology.candidate_paths(f.src, f.dst)))

    def _pick(self, test: Test, every: Sequence[Test], used: set[tuple[str, str]],
              cov: set[LinkKey]) -> Test | None:
        """The alternative to take for ``test`` (None: keep it), from ``every``: ``test`` itself
        first (it wins ties), then its re-pinned versions."""
        alts = [a for a in every if a.flows[0].path is not None]
        free = [a for a in alts if not directed_hops(self.view, a.flows[0]) & used]
        if _target(test) is None:  # sweep, confirmation, sampling: free, then most new links
            # a trace that died part-way (a down link drops the probes) counts the links beyond
            # where it died: the flow will fail there, which is what the sweep is for
            died = [a for a in every if a.flows[0].path is None and a.flows[0].partial]
            best = max([*free, *died], key=lambda a: len(
                set(a.flows[0].path or a.flows[0].partial or ()) - cov), default=None)
            if best is None or best is test:
                return None
            return best
        aimed = [a for a in alts if _hits_target(a)]
        # aimed and free; else a trace that died on its way to the target (a down link
        # shows so), tightest first; else free (two aimed flows on one link would halve
        # each other); else aimed
        pick = next((a for a in free if _hits_target(a)), None) or min(
            _died_toward_target(every), key=lambda a: len(a.flows[0].partial or ()),
            default=None) or (free[0] if free else None) or (aimed[0] if aimed else None)
        return None if pick is test else pick

    def dull(self, tests: Sequence[Test], skip: set[int] = frozenset()) -> list[int]:  # type: ignore[assignment]
        """Indexes of free, non-aimed tests (not retests) whose learned path crosses a link
        that an earlier round's pinned flow or an earlier test of ``tests`` crosses (pure)."""
        cov = set(self.covered)
        out = []
        for i, t in enumerate(tests):
            if i in skip:
                continue
            links = _links([t])
            if (links & cov and _target(t) is None and not t.params.retest_of
                    and pinned_key(t) is not None):
                out.append(i)
            cov |= links
        return out

    def _trace(self, traces: Sequence[Test], executor: Any) -> None:
        if traces:
            self.absorb(traces, (self.tracer or executor).run_round(list(traces)))
            self.stats.traces += len(traces)

    def collisions(self, tests: Sequence[Test]) -> list[int]:
        """Indexes of tests whose learned path shares a directed switch link with an earlier
        test's learned path (pure)."""
        used: set[tuple[str, str]] = set()
        out = []
        for i, t in enumerate(tests):
            hops = set().union(*(directed_hops(self.view, f) for f in t.flows))
            if hops & used:
                out.append(i)
            else:
                used |= hops
        return out

    def _repinned(self, test: Test, attempt: int) -> Test:
        """``test`` with another source port (attempt ``attempt``), its path not yet known."""
        sport = pinned_ports(test.probe, f"{test.test_id}#{attempt}", self.seed)["sport"]
        f = test.flows[0]
        return replace(test, flows=(Flow(f.src, f.dst),),
                       params=ProbeParams.of({**dict(test.params), "sport": sport}))


def _links(tests: Sequence[Test]) -> set[LinkKey]:
    """The switch links of the learned paths of ``tests``' flows."""
    return {lk for t in tests for f in t.flows for lk in (f.path or ())}


def _target(test: Test) -> LinkKey | None:
    """The link a localization flow is aimed at (``params.probe_of`` "a -- b")."""
    if test.params.probe_of is None or " -- " not in test.params.probe_of:
        return None
    return link_key(*test.params.probe_of.split(" -- ", 1))


def _hits_target(test: Test) -> bool:
    """True unless the test is aimed at a link its learned path does not cross."""
    target = _target(test)
    return target is None or any(f.path is not None and target in f.path for f in test.flows)


def _died_toward_target(tests: Sequence[Test]) -> list[Test]:
    """Aimed tests whose trace died part-way with the target among the links beyond."""
    out = []
    for t in tests:
        target, f = _target(t), t.flows[0]
        if target is not None and f.path is None and f.partial and target in f.partial:
            out.append(t)
    return out


def directed_hops(view: FabricView, flow: Flow) -> set[tuple[str, str]]:
    """The directed switch-to-switch hops of a flow's learned path (empty when not learned)."""
    return set(view.learned_hops(flow) or ())
