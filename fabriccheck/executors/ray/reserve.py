"""Ray reservations: one STRICT_SPREAD placement group per set of a round's tests sharing nodes.

Each bundle is pinned to its node by the ``ray.io/node-id`` label and holds the node's whole
``reserve_resources`` so no other Ray work needing them lands there while fabriccheck tests it.
Ray errors are mapped by :func:`fabriccheck.inventory.ray_session.map_ray_error`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from fabriccheck.errors import ExecutorError
from fabriccheck.inventory.ray import RayNode
from fabriccheck.inventory.ray_session import map_ray_error
from fabriccheck.models import Test

#: Ray's built-in per-node label (bundle_label_selector pins a bundle to exactly that node)
NODE_ID_LABEL = "ray.io/node-id"
_PG_COUNTER = itertools.count()


def node_bundle(node: RayNode, resources: Sequence[str]) -> dict[str, float]:
    """The bundle that holds ``node``'s whole ``resources`` (its totals) and names the node."""
    # totals, not what looks free now: the free view lags, and a node in use must not pass
    bundle = {r: node.total(r) for r in resources if node.total(r) > 0}
    bundle[f"node:{node.ip}"] = 0.001  # never empty; harmless marker of the node
    return bundle


def reserve_groups(
    tests: Sequence[Test],
    *,
    node_of: Callable[[str], RayNode],
    bundle_of: Callable[[RayNode], dict[str, float]],
    reservations: dict[str, Any],
    timeout_s: float,
) -> dict[str, str]:
    """Reserve each group of the round; returns test_id -> problem for tests not reserved.

    One placement group per :func:`overlapping_groups` group, added to ``reservations``
    (name -> PlacementGroup) as soon as it is asked for, so a later release removes it even
    when it never became ready. A host ``node_of`` cannot map is that group's problem; a group
    not created while no group of the round was for ``timeout_s`` (someone holds part of a
    node, or it is gone) is reported, not waited for.
    """
    from ray.util.placement_group import placement_group

    problems: dict[str, str] = {}
    pending: list[tuple[list[str], Any]] = []
    for group in overlapping_groups(tests):
        ids = [t.test_id for t in group]
        hosts = list(dict.fromkeys(h for t in group for h in t.nodes))
        try:
            nodes = [node_of(h) for h in hosts]
            name = f"fabriccheck-{next(_PG_COUNTER)}-{'+'.join(ids)}"[:200]
            pg = placement_group(
                [bundle_of(n) for n in nodes], strategy="STRICT_SPREAD", name=name,
                bundle_label_selector=[{NODE_ID_LABEL: n.node_id} for n in nodes],
            )
        except ExecutorError as exc:
            problems.update({i: str(exc) for i in ids})
            continue
        except Exception as exc:  # Ray boundary
            raise map_ray_error(exc, what=f"reserve {', '.join(ids)}") from exc
        reservations[name] = pg
        pending.append((ids, pg))
    # pg.wait asks the GCS directly; pg.ready() would run a task in every group (~1 s more).
    # The GCS creates groups one after the other (30-70 ms each on 2 busy cores: 1,024 groups
    # take 30-70 s), so the limit counts from the last group seen created, not from the start:
    # a group fails when none was created for timeout_s while it waited (held or gone nodes).
    from ray.util.placement_group import placement_group_table

    progress = time.monotonic()
    for ids, pg in pending:
        try:
            ok = placement_group_table(pg).get("state") == "CREATED"
            left = progress + timeout_s - time.monotonic()
            if not ok and left > 0:  # whole seconds: Ray's wait takes an int
                ok = pg.wait(max(1, int(left + 0.999)))
        except Exception as exc:  # Ray boundary
            raise map_ray_error(exc, what="reserve nodes") from exc
        if ok:
            progress = time.monotonic()
        else:
            problems.update({i: f"could not reserve its nodes within "
                                f"{timeout_s:g} s (busy or gone)" for i in ids})
    return problems


def release_groups(reservations: dict[str, Any], names: Sequence[str] | None = None) -> None:
    """Remove placement groups of ``reservations`` (all by default) and forget them; every one
    is tried, the first error is mapped and raised last."""
    from ray.util.placement_group import remove_placement_group

    first: BaseException | None = None
    for name in list(names if names is not None else reservations):
        pg = reservations.pop(name, None)
        if pg is None:
            continue
        try:
            remove_placement_group(pg)
        except Exception as exc:  # keep releasing the others
            first = first or exc
    if first is not None:
        raise map_ray_error(first, what="release reservations") from first


def overlapping_groups(tests: Sequence[Test]) -> list[list[Test]]:
    """The round's tests grouped so that tests sharing a node land in one group (input order).

    >>> from fabriccheck.models import Test
    >>> ts = [Test("a", "iperf3", ("n1", "n2")), Test("b", "iperf3", ("n3", "n4")),
    ...       Test("c", "iperf3", ("n2", "n5"))]
    >>> [[t.test_id for t in g] for g in overlapping_groups(ts)]
    [['a', 'c'], ['b']]
    """
    parent = list(range(len(tests)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, test in enumerate(tests):
        for host in test.nodes:
            if host in owner:  # union; the smaller index stays the root
                a, b = find(i), find(owner[host])
                parent[max(a, b)] = min(a, b)
            else:
                owner[host] = i
    groups: dict[int, list[Test]] = {}
    for i, test in enumerate(tests):
        groups.setdefault(find(i), []).append(test)
    return [groups[root] for root in sorted(groups)]  # roots: first index of each group


def wait_reservations_gone(names: Sequence[str], timeout_s: float = 10.0) -> list[str]:
    """Those of ``names`` whose placement group is still not REMOVED after ``timeout_s``."""
    from ray.util.placement_group import placement_group_table

    deadline = time.monotonic() + timeout_s
    while True:
        table = placement_group_table()
        live = [v["name"] for v in table.values()
                if v["name"] in names and v["state"] != "REMOVED"]
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.1)
