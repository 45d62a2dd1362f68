"""What every planning step shares: the run's context (:class:`RunContext`) and bisection's
bookkeeping (:class:`BisectState`). The planner and the round planners it calls
(:mod:`~fabriccheck.planning.ladder`, :mod:`~fabriccheck.planning.sweep_round`,
:mod:`~fabriccheck.planning.followup_round`, :mod:`~fabriccheck.planning.cover_links`) import
them from here, so none of them imports the planner back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabriccheck.inference.link_screen import screens_links
from fabriccheck.inference.state import Inference
from fabriccheck.planning.bisect_steps import BisectTask
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.policy import SweepPolicy
from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.run_history import RunHistory
from fabriccheck.specs import SignalSpec, TestSpec
from fabriccheck.topology.view import FabricView

__all__ = ["PAIR_SETUP_S", "BisectState", "RunContext"]

#: setup time a pair test needs on top of its duration (perftest/iperf3 start, connect)
PAIR_SETUP_S = 2.0


@dataclass
class BisectState:
    """Bisection bookkeeping: parts still to narrow, parts in flight, and the nodes never to
    use as padding. Whether a part convicts, clears or splits is inference's to say
    (:func:`~fabriccheck.inference.bisection.judge_bisection`)."""

    tasks: list[BisectTask] = field(default_factory=list)
    halves: dict[str, tuple[BisectTask, tuple[str, ...]]] = field(default_factory=dict)
    #: the culprits inference found (:attr:`BisectVerdicts.culprits
    #: <fabriccheck.inference.bisection.BisectVerdicts.culprits>`): never padding
    convicted: set[str] = field(default_factory=set)
    #: nodes of failing group tests not yet cleared by a passing group (never padding)
    suspects: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class RunContext:
    """What every planning step reads: the run's scope, fabric, spec and policy."""

    mode: str
    nodes: tuple[str, ...]
    view: FabricView
    spec: TestSpec
    policy: SweepPolicy
    log_suspects: tuple[str, ...] = ()
    #: every signal the run reads (built-in preflight, the spec's, --signals files)
    signals: tuple[SignalSpec, ...] = ()
    #: RoCE: the executor traces pinned flows, so their paths are learned before a round runs
    learns_paths: bool = False
    #: the node-local catalogue (the built-in one with the spec's ``node_checks``)
    catalogue: Catalogue | None = None

    def builder(self, history: RunHistory) -> RoundBuilder:
        """A builder for the next round, its timeout cut to what the budget has left."""
        pol = self.policy
        timeout = float(pol.timeout_s or min(self.spec.timeout_s,
                                             3 * pol.duration_s + 15.0 + PAIR_SETUP_S))
        left = pol.budget_left(history.test_seconds)
        if left is not None:
            timeout = min(timeout, left)
        return RoundBuilder(history.round_count + 1, self.view, self.spec,
                            pol.with_(timeout_s=timeout))

    @property
    def screens_links(self) -> bool:
        """The run screens every switch link for intermittence and tops links up for it
        (:func:`fabriccheck.inference.link_screen.screens_links`)."""
        pol = self.policy
        return screens_links(self.mode, self.view.fabric, len(self.view.switch_links),
                             pol.link_topup_rounds, pol.link_screen_max_links)

    def active(self, inf: Inference) -> list[str]:
        """Nodes still worth testing (not bad, hung or unreachable)."""
        out = set(inf.bad_nodes) | set(inf.hung) | set(inf.unreachable)
        return [n for n in self.nodes if n not in out]
