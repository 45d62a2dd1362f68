"""What the observations so far say (:class:`Inference`): the one value attribution builds and
planning, the loop and the result builder read. Kept apart from :mod:`~fabriccheck.inference.
attribute` so the rules that fill it (and planning) can name it without importing the rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabriccheck.inference.flaky import Flakiness
from fabriccheck.inference.intra import MAX_FAILS, MIN_FAILS
from fabriccheck.inference.localize import LinkGroup
from fabriccheck.models import LinkKey, Verdict, nic_node

__all__ = ["Inference"]


@dataclass
class Inference:
    """What the observations so far say. ``*_suspects`` need confirmation before blame."""

    bad_nodes: dict[str, Verdict] = field(default_factory=dict)
    bad_nics: dict[str, Verdict] = field(default_factory=dict)
    hung: dict[str, Verdict] = field(default_factory=dict)
    unreachable: dict[str, Verdict] = field(default_factory=dict)
    node_suspects: dict[str, Verdict] = field(default_factory=dict)
    #: nodes whose 1x test failed, awaiting a 1x retest (:mod:`fabriccheck.inference.intra`)
    intra_suspects: dict[str, Verdict] = field(default_factory=dict)
    #: failing 1x tests that convict in this run (:func:`fabriccheck.inference.intra.fails_needed`)
    intra_needed: int = MIN_FAILS
    nic_suspects: dict[str, Verdict] = field(default_factory=dict)
    hang_suspects: dict[str, Verdict] = field(default_factory=dict)
    links: list[LinkGroup] = field(default_factory=list)
    glitches: list[str] = field(default_factory=list)
    ambiguous: list[str] = field(default_factory=list)
    good_nodes: set[str] = field(default_factory=set)
    good_nics: set[str] = field(default_factory=set)
    completed: set[str] = field(default_factory=set)
    #: switch links a passing test surely crossed (exonerated)
    cleared_links: frozenset[LinkKey] = frozenset()
    #: intermittent parts (fail beyond noise, pass otherwise) and NICs worth another look
    flakiness: Flakiness = field(default_factory=Flakiness)
    #: suspect NIC -> the un-cleared switch links on every one of its failing paths: a link
    #: there explains its failures as well (a confirmation that avoids them separates the two)
    nic_rival_links: dict[str, frozenset[LinkKey]] = field(default_factory=dict)

    @property
    def flaky(self) -> dict[str, Verdict]:
        return self.flakiness.flaky

    @property
    def blamed_nodes(self) -> set[str]:
        """Nodes that must not be used as known-good partners."""
        out = set(self.bad_nodes) | set(self.hung) | set(self.unreachable)
        out |= set(self.node_suspects) | set(self.hang_suspects) | set(self.intra_suspects)
        out |= {nic_node(n) for n in (*self.bad_nics, *self.nic_suspects)}
        out |= {nic_node(n) for n, v in self.flaky.items() if v.kind in ("node", "nic")}
        return out

    def known_good(self) -> set[str]:
        return self.good_nodes - self.blamed_nodes

    def solo_retests(self) -> int:
        """1x retests a suspect gets: enough to reach :attr:`intra_needed` failures (two at
        least; none past what could convict)."""
        return max(2, min(self.intra_needed, MAX_FAILS) - 1)
