"""Switch links no finished test crossed, and which of them the nodes in scope could have
crossed (InfiniBand: routes are known, so such a link is *untested*, not out of reach)."""

from __future__ import annotations

from collections.abc import Iterable

from fabriccheck.models import LinkKey, Observation, Status
from fabriccheck.topology.link_reach import LinkReach
from fabriccheck.topology.view import FabricView


def crossed_links(view: FabricView, observations: Iterable[Observation]) -> set[LinkKey]:
    """Switch links surely crossed by a test that ran to the end (pass or fail): the
    ``link_coverage`` numerator."""
    out: set[LinkKey] = set()
    for o in observations:
        if o.status in (Status.PASS, Status.FAIL):
            for f in o.test.flows:
                out |= view.flow_links(f)[0]
    return out & view.switch_links


def ladder_tests_links(levels: tuple[int, ...] | None) -> bool:
    """True when a run's ladder has pair or group levels (the default has): a 1x-only run
    tests no switch link, so none of them is left untested by it.

    >>> ladder_tests_links(None), ladder_tests_links((1, 2)), ladder_tests_links((1,))
    (True, True, False)
    """
    return levels is None or any(k >= 2 for k in levels)


def untested_links(view: FabricView, observations: Iterable[Observation],
                   nodes: Iterable[str], *, seed: int = 0) -> list[LinkKey]:
    """InfiniBand: switch links no finished test crossed although a pair of ``nodes``' NICs
    routes over them (:class:`~fabriccheck.topology.link_reach.LinkReach`). Links no pair
    in scope reaches (no node below them, or routes that never take them) are left out:
    nothing in scope could test them. Empty on RoCE (paths are a hash: coverage there is a
    share, see ``link_coverage``)."""
    if view.fabric != "infiniband":
        return []
    left = sorted(view.switch_links - crossed_links(view, observations))
    if not left:
        return []
    reach = LinkReach(view, [nic for n in nodes for nic in view.rails_of.get(n, {}).values()],
                      seed=seed)
    return [lk for lk in left if reach.find(lk) is not None]
