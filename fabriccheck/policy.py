"""Run policies: probes, group sizes, rounds, timeouts and budgets of sweep/gate/bisect."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from fabriccheck.errors import ConfigError
from fabriccheck.models import PROBES

#: probes judged per NIC pair (one flow per test) vs per group (ring flows over all rails)
PAIR_PROBES = ("ib_write_bw", "iperf3")
GROUP_PROBES = ("nccl", "allreduce-cpu")


#: ``--link-screen`` values -> the :class:`SweepPolicy` fields they set (``auto``: the defaults)
LINK_SCREEN = {"auto": {}, "on": {"link_screen_max_links": 1 << 62},
               "off": {"link_topup_rounds": 0}}


def link_screen_policy(value: str | None, source: str = "--link-screen") -> dict[str, int]:
    """The :class:`SweepPolicy` fields ``--link-screen`` sets (a :class:`ConfigError` naming
    the choices otherwise).

    >>> link_screen_policy("off"), link_screen_policy(None)
    ({'link_topup_rounds': 0}, {})
    """
    if value is None:
        return {}
    if value not in LINK_SCREEN:
        raise ConfigError(f"unknown link screen {value!r}", source=source,
                          hint="one of auto (fabrics of up to 4,096 switch links), on, off")
    return dict(LINK_SCREEN[value])


@dataclass(frozen=True)
class SweepPolicy:
    """How a run plans its rounds.

    ``pair_probe`` runs per rail between two nodes (``ib_write_bw``/``iperf3``: one test per rail,
    the rails of a pair run at the same time on disjoint NICs) or as one 2-node collective
    (``nccl``/``allreduce-cpu``). ``sweep_rounds`` pairing rounds run first (each node gets a
    different partner over a different path each round), then confirmation / retest / localization
    and bisection rounds until every suspect is resolved or ``max_rounds`` / ``budget_s`` is hit.
    ``scale_group_size`` > 0 adds one collective round over groups of that many nodes
    (``scale_probe``) whose failing groups are bisected.

    ``levels`` is the ladder (:mod:`fabriccheck.planning.ladder`): nodes per test, climbed in
    order with two carvings per level >= 2; ``None`` is the mode's default (sweep and gate:
    1, 2, 4, 8; bisect: none), ``()`` the plain pairing rounds of ``sweep_rounds``.
    """

    mode: str = "sweep"
    pair_probe: str = "ib_write_bw"
    sweep_rounds: int = 2
    max_rounds: int = 8
    scale_probe: str = "nccl"
    scale_group_size: int = 0
    timeout_s: float | None = None  # None: the spec's timeout
    duration_s: float = 5.0  # ib_write_bw / iperf3 run time
    budget_s: float | None = None  # hard cap on summed round time (test_seconds)
    second_round_only_on_failure: bool = False  # gate: round 2 only if round 1 found something
    localize: bool = True
    #: peer comparison: a test is an outlier when below median by both this robust z and fraction
    peer_z: float = 4.0
    peer_min_drop: float = 0.10
    #: RoCE: cross-leaf flows per leaf, direction and round as a share of the leaf's uplinks
    #: (at least 1). Two flows leaving one leaf may hash onto the same uplink and halve each
    #: other: such failures clear no device and implicate no link (see inference.contention).
    roce_cross_share: float = 0.25
    #: RoCE with learned paths (a traceroute per pinned flow, :mod:`fabriccheck.learn_paths`):
    #: the rail-pair rounds' share instead; the learner re-pins colliding flows onto free paths
    #: and dull ones onto uncovered links, so twice the flows cover the ECMP members in two rounds
    roce_learned_cross_share: float = 0.5
    #: RoCE localization: flows each way per leaf pair and batch, and batches per leaf pair
    roce_probe_flows: int = 2
    roce_probe_rounds: int = 3
    #: RoCE: also probe leaf pairs whose only failures may be contention (more rounds, more hits)
    roce_probe_contention: bool = False
    #: RoCE: flows each way per matched leaf pair in one sampling batch after the sweep (0: off)
    roce_sample_flows: int = 2
    roce_sample_rounds: int = 3
    #: intermittence recheck (inference.flaky): samples per rechecked part, taken in one round
    #: as waves of short tests (two per wave: client and server against two proven-good
    #: partners), and each sample's run time
    recheck_samples: int = 32
    recheck_duration_s: float = 1.0
    #: sweep: finished tests every NIC should have before the run ends; one with fewer (a
    #: ladder level found no room for its node) gets short same-leaf samples up to this many,
    #: so a NIC failing one test in three is seen failing ((2/3)^12 ~ 0.8 % miss; eight
    #: missed one in 25, above the 2 % a 0.98 recall allows); 0: off
    screen_tests: int = 12
    #: sweep on InfiniBand: follow-up rounds whose waves give the switch links the link
    #: screen left open (neither cleared of failing one test in five nor beyond noise) short
    #: flows aimed at them (:mod:`fabriccheck.planning.link_topup`); 0: off
    link_topup_rounds: int = 6
    #: ... on fabrics of at most this many switch links (the top-up costs about 25 short
    #: flows a link: 2.5x the tests and 1.7x the test time of a 128-node fat-tree sweep;
    #: docs/sweep.md "What the top-up costs")
    link_screen_max_links: int = 4096
    seed: int = 0
    levels: tuple[int, ...] | None = None
    #: run the built-in preflight signals (docs/design.md "How faults are found" step 0)
    preflight: bool = True
    #: user signals (``--signals FILE``): :class:`fabriccheck.specs.SignalSpec` values
    signals: tuple[Any, ...] = ()
    #: warn-level node-local findings make the run exit 1 (``--strict``); else they are listed
    #: and the run exits 0
    strict: bool = False
    #: node -> ISO time: the end of the node's last judged kernel log (history); the preflight
    #: judges only what came after it. A node not here is read since boot, and the run says so
    kernel_since: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.levels is not None and any(lv not in (1, 2, 4, 8) for lv in self.levels):
            raise ConfigError(f"unknown level in {list(self.levels)}", field="--levels",
                              hint="levels are nodes per test: 1, 2, 4 or 8")
        if self.pair_probe not in PROBES:
            raise ConfigError(f"unknown probe {self.pair_probe!r}", field="pair_probe",
                              hint=f"one of {', '.join(PROBES)}")
        if self.scale_probe not in GROUP_PROBES:
            raise ConfigError(f"scale probe must be one of {GROUP_PROBES}", field="scale_probe")
        if self.sweep_rounds < 1 or self.max_rounds < self.sweep_rounds:
            raise ConfigError("need 1 <= sweep_rounds <= max_rounds", field="rounds")
        if self.scale_group_size not in (0, 2, 4, 8, 16, 32):
            raise ConfigError("scale group size must be 0 (off) or a power of two up to 32",
                              field="scale_group_size")
        if self.budget_s is not None and self.budget_s <= 0:
            raise ConfigError("budget must be positive", field="--budget-s")

    @property
    def per_rail(self) -> bool:
        """True when the pair probe runs one test per rail (NIC-level evidence)."""
        return self.pair_probe in PAIR_PROBES

    def budget_left(self, spent_s: float) -> float | None:
        """Test time the budget has left after ``spent_s`` (None: no budget; never below 0).
        The one budget reckoning: the loop's stop, each round's timeout, each signal's wait.

        >>> SweepPolicy(budget_s=60).budget_left(45.0), SweepPolicy().budget_left(45.0)
        (15.0, None)
        """
        return None if self.budget_s is None else max(0.0, self.budget_s - spent_s)

    def with_(self, **changes: object) -> SweepPolicy:
        return replace(self, **changes)  # type: ignore[arg-type]


def spec_probes(spec: object, pair_probe: str | None = None) -> dict[str, str]:
    """The pair and group probes a test spec defines: ``{"pair_probe": .., "scale_probe": ..}``.

    ``pair_probe`` (when given) wins; otherwise the first of ``ib_write_bw``, ``iperf3`` (per
    rail), ``nccl``, ``allreduce-cpu`` the spec has an entry for. The group probe is the first of
    ``nccl``, ``allreduce-cpu`` it defines. Keys are left out when the spec has no candidate, so
    the policy defaults stay.

    >>> from types import SimpleNamespace as NS
    >>> spec = NS(probes=(NS(probe="iperf3"), NS(probe="allreduce-cpu")))
    >>> spec_probes(spec)
    {'pair_probe': 'iperf3', 'scale_probe': 'allreduce-cpu'}
    """
    have = {p.probe for p in getattr(spec, "probes", ())}
    out: dict[str, str] = {}
    pair = pair_probe or next((p for p in (*PAIR_PROBES, *GROUP_PROBES) if p in have), None)
    if pair:
        out["pair_probe"] = pair
    group = next((p for p in GROUP_PROBES if p in have), None)
    if group:
        out["scale_probe"] = group
    return out


def GatePolicy(**changes: object) -> SweepPolicy:  # noqa: N802 - a policy preset, reads as a type
    """The gate preset: 1x beside one rail-pair round, one collective over the job's nodes,
    more only if something failed or a NIC is still untested (``max_rounds`` four, plus the
    ladder's rounds beyond the first: see ``Planner.round_limit``), inside a hard budget."""
    base = SweepPolicy(mode="gate", sweep_rounds=1, max_rounds=4,
                       second_round_only_on_failure=True, budget_s=300.0)
    return replace(base, **changes)  # type: ignore[arg-type]


def BisectPolicy(**changes: object) -> SweepPolicy:  # noqa: N802 - a policy preset
    """The post-timeout bisect preset: pairs first (log suspects first), then groups at scale."""
    base = SweepPolicy(mode="bisect", sweep_rounds=1, max_rounds=12, scale_group_size=8,
                       levels=())
    return replace(base, **changes)  # type: ignore[arg-type]
