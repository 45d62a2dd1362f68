"""Failures a link found bad explains: they say nothing about the devices on them.

A test across a half-speed cable fails whatever its NICs are, so a NIC is not convicted on
such a failure; it may be convicted on the rest. How slow the cable is, is known from its own
failing tests (the median of their values, per unit): a failure well below that level (a
quarter-speed NIC behind a half-speed cable) is deeper than the cable explains and still
counts against the device.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from statistics import median

from fabriccheck.inference.localize import LinkGroup
from fabriccheck.models import LinkKey, Observation
from fabriccheck.topology.view import FabricView

#: a failure below this share of the cable's own level is deeper than the cable explains
DEEPER = 0.75

Levels = dict[LinkKey, dict[str, float | None]]


def link_levels(groups: Sequence[LinkGroup], by_id: Mapping[str, Observation]) -> Levels:
    """Bad link -> unit -> the median value of its failing tests (None: no number, e.g. a
    down link: every test across it fails outright).

    >>> from fabriccheck.models import Flow, Test
    >>> t = lambda i, v: Observation(Test(f"t{i}", "ib_write_bw", ("a", "b"),
    ...                              (Flow("a/m0", "b/m0"),)), "fail", v, "Gb/s")
    >>> g = LinkGroup((("leaf-0", "spine-1"),), ("t1", "t2", "t3"), (), (), bad=True)
    >>> link_levels([g], {"t1": t(1, 190.0), "t2": t(2, 200.0), "t3": t(3, None)})
    {('leaf-0', 'spine-1'): {'Gb/s': 195.0, '': None}}
    """
    out: Levels = {}
    for g in groups:
        if not g.bad:
            continue
        vals: dict[str, list[float]] = defaultdict(list)
        blank = False
        for tid in g.evidence:
            o = by_id.get(tid)
            if o is None:
                continue
            if o.value is None:
                blank = True
            else:
                vals[o.unit].append(o.value)
        level: dict[str, float | None] = {u: float(median(v)) for u, v in vals.items()}
        if blank or not level:
            level[""] = None
        out[g.candidates[0]] = level
    return out


def explained(o: Observation, levels: Levels, view: FabricView) -> LinkKey | None:
    """The bad link that explains failure ``o`` (it may have crossed it, and its value is not
    far below the link's own level), or None."""
    links = set().union(*(view.flow_links(f)[1] for f in o.test.flows)) if o.test.flows else set()
    for lk in sorted(links & levels.keys()):
        level = levels[lk]
        if "" in level or o.value is None:
            return lk  # a dead link explains anything; a hang or an error is no number
        ref = level.get(o.unit)
        if ref is None or o.value >= DEEPER * ref:
            return lk
    return None


def split(obs: Sequence[Observation], levels: Levels, view: FabricView
          ) -> tuple[list[Observation], dict[str, LinkKey]]:
    """``obs`` a bad link does not explain, and test id -> the link for the others."""
    own, why = [], {}
    for o in obs:
        lk = explained(o, levels, view)
        if lk is None:
            own.append(o)
        else:
            why[o.test.test_id] = lk
    return own, why
