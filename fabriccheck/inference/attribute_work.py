"""The working state attribution's rules share (:class:`Work`): one per ``infer`` call.

:func:`~fabriccheck.inference.attribute.infer` runs its rules
(:data:`~fabriccheck.inference.attribute.RULES`) in order over one :class:`Work`: the call's
inputs, the :class:`Inference` the rules fill, and what each rule finds that later ones weigh
(a field is filled by the rule that first knows it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from fabriccheck.inference.candidates import Failures
from fabriccheck.inference.nic_rivals import Comp
from fabriccheck.inference.state import Inference
from fabriccheck.models import LinkKey, Observation
from fabriccheck.topology.view import FabricView


@dataclass
class Work:
    """What the rules share while they attribute one set of observations."""

    observations: list[Observation]  # every test but the 1x ones
    solo: list[Observation]  # the 1x (single-node) tests: judged apart
    view: FabricView
    node_min_fails: int
    confirmed_min_fails: int
    #: run the sequential link screen (an InfiniBand sweep that tops links up:
    #: :func:`fabriccheck.inference.link_screen.screens_links`)
    screen_links: bool = False
    inf: Inference = field(default_factory=Inference)
    #: switch links a passing test surely crossed
    good_links: set[LinkKey] = field(default_factory=set)
    #: failing tests a same-route retest passed (glitches)
    retested_ok: set[str] = field(default_factory=set)
    #: the failures left to explain with their candidates
    fx: Failures = field(default_factory=Failures)
    #: the hitting set: index into ``fx.live`` -> the part chosen to explain that failure
    chosen: dict[int, Comp] = field(default_factory=dict)
    #: candidate part -> the failures it could explain
    by_comp: defaultdict[Comp, list[Observation]] = field(
        default_factory=lambda: defaultdict(list))
    #: failing test id -> its candidates
    cands_of: dict[str, list[Comp]] = field(default_factory=dict)
    #: failing test id -> the one node it can only come from
    pinned: dict[str, str] = field(default_factory=dict)
    #: failing test id -> the switches of the un-cleared links on its path(s)
    switch_of: dict[str, frozenset[str]] = field(default_factory=dict)
    #: switch no passing test crossed -> the node pairs of the failures across it
    dark: defaultdict[str, set[frozenset[str]]] = field(
        default_factory=lambda: defaultdict(set))
    #: node -> its passing tests
    passes_of: defaultdict[str, list[Observation]] = field(
        default_factory=lambda: defaultdict(list))
    #: failing tests that ECMP contention may explain (RoCE)
    unsure: set[str] = field(default_factory=set)
    #: NICs the tests touched (the Bonferroni count of a star)
    n_nics: int = 0
    #: a suspect's failures a switch or link explains as well: both hypotheses stay open
    rivalled: list[Observation] = field(default_factory=list)
