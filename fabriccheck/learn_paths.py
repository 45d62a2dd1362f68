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
from fabriccheck.models import Flow, LinkKey, RawResult, Test
from fabriccheck.probes.traceroute import parse_traceroute, path_links
from fabriccheck.topology.view import FabricView

TRACE_PROBE = "traceroute"
TRACE_TIMEOUT_S = 30.0
#: probes whose one flow can be pinned by its ports
PINNABLE = ("iperf3", "ib_write_bw")

FlowKey = tuple[str, str, int, int]  # src, dst, sport, dport


@dataclass
class PathStats:
    """How path learning went in one run (``path_learning`` in the run result)."""

    pinned_flows: int = 0  # distinct pinned 5-tuples that needed a path
    learned: int = 0
    not_learned: int = 0  # trace incomplete or not one of the flow's equal-cost paths
    traces: int = 0  # traceroute tests run
    examples: list[str] = field(default_factory=list)  # why, for the first few not learned

    def to_json(self) -> dict[str, Any]:
        return {"pinned_flows": self.pinned_flows, "learned": self.learned,
                "not_learned": self.not_learned, "traces": self.traces,
                "not_learned_examples": list(self.examples)}


def pinned_key(test: Test) -> FlowKey | None:
    """The 5-tuple key of a pinnable test's flow (None: not pinned, or not one flow)."""
    p = test.params
    if test.probe not in PINNABLE or len(test.flows) != 1 or p.sport is None or p.dport is None:
        return None
    f = test.flows[0]
    return f.src, f.dst, int(p.sport), int(p.dport)


class PathLearner:
    """Learns and caches (per run) the paths of pinned flows (see the module docstring)."""

    def __init__(self, view: FabricView, hop_names: Mapping[str, str]) -> None:
        self.view = view
        self.hop_names = dict(hop_names)
        self.cache: dict[FlowKey, tuple[LinkKey, ...] | None] = {}
        self.stats = PathStats()

    @classmethod
    def for_executor(cls, view: FabricView, executor: object) -> PathLearner | None:
        """A learner when the fabric is RoCE and the executor can name traceroute hops."""
        if view.topology.fabric != "roce":
            return None
        names = getattr(executor, "hop_names", None)
        hops = dict(names()) if callable(names) else {}
        return cls(view, hops) if hops else None

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
            key = pinned_key(replace(t, probe=PINNABLE[0]))
            assert key is not None
            self.stats.pinned_flows += 1
            links, why = self._links(t.flows[0], raw)
            self.cache[key] = links
            if links is None:
                self.stats.not_learned += 1
                if len(self.stats.examples) < 5:
                    self.stats.examples.append(f"{t.flows[0].src} -> {t.flows[0].dst} "
                                               f"sport {key[2]}: {why}")
            else:
                self.stats.learned += 1

    def _links(self, flow: Flow, raw: RawResult) -> tuple[tuple[LinkKey, ...] | None, str]:
        if raw.unreachable or raw.timed_out or raw.error:
            return None, "traceroute did not run"
        try:
            trace = parse_traceroute(raw.stdout)
        except ParseError as exc:
            return None, str(exc)
        links = path_links(trace, self.hop_names)
        if links is None:
            return None, "incomplete trace (silent hop, unknown address or not reached)"
        sw = self.view.topology.switches
        candidates = {frozenset(lk for lk in p if lk[0] in sw and lk[1] in sw)
                      for p in self.view.topology.candidate_paths(flow.src, flow.dst)}
        if frozenset(links) not in candidates:
            return None, "the traced path is not one of the flow's equal-cost paths"
        return links, ""

    def annotate(self, tests: Sequence[Test]) -> tuple[Test, ...]:
        """``tests`` with ``Flow.path`` set on every pinned flow whose path is known (pure)."""
        out = []
        for t in tests:
            key = pinned_key(t)
            path = self.cache.get(key) if key is not None else None
            if path is None:
                out.append(t)
            else:
                f = t.flows[0]
                out.append(replace(t, flows=(Flow(f.src, f.dst, path),)))
        return tuple(out)

    def learn(self, tests: Sequence[Test], executor: Any) -> tuple[Test, ...]:
        """Trace the new pinned flows of ``tests`` on ``executor``; return them annotated."""
        traces = self.trace_tests(tests)
        if traces:
            self.absorb(traces, executor.run_round(traces))
            self.stats.traces += len(traces)
        return self.annotate(tests)
