"""Which cable to pull: the links of link and switch verdicts with both ends and their ports.

The run result's ``extra["cables"]`` (``--json``) lists, for every link or switch verdict that
is not healthy, each of its links as ``{"verdict", "kind", "state", "link": [a, b], "a_port",
"b_port", "cable", "of"}``: the ports at each end where the topology has them (an ibnetdiscover
import; empty lists otherwise), ``cable`` the words an operator reads (``leaf-1 port 17 --
spine-0 port 3``) and ``of`` how many links the verdict names (a suspect set: one of them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fabriccheck.models import HEALTHY, LinkKey, Verdict, link_key
from fabriccheck.topology.model import Link, Topology


def verdict_links(v: Verdict) -> tuple[LinkKey, ...]:
    """The links a link verdict names (one, or a candidate set ``a -- b | c -- d``).

    >>> verdict_links(Verdict("link", "spine-0 -- leaf-1 | leaf-2 -- spine-0", "suspect"))
    (Link(a='leaf-1', b='spine-0'), Link(a='leaf-2', b='spine-0'))
    """
    if v.link is not None:
        return (link_key(*v.link),)
    out = []
    for piece in v.name.split(" | "):
        a, sep, b = piece.partition(" -- ")
        if sep and a.strip() and b.strip():
            out.append(link_key(a.strip(), b.strip()))
    return tuple(out)


def cable_entry(verdict: Verdict, key: LinkKey, of: int, topology: Topology) -> dict[str, Any]:
    """One link of a verdict as its ``extra["cables"]`` entry (see the module docstring)."""
    link = topology.links.get(key) or Link(key[0], key[1], 0.0)
    return {
        "verdict": verdict.name, "kind": verdict.kind, "state": str(verdict.state),
        "link": [link.a, link.b], "a_port": list(link.a_port), "b_port": list(link.b_port),
        "cable": link.describe(), "of": of,
    }  # fmt: skip


def cables(verdicts: Sequence[Verdict], switch_links: Mapping[str, Sequence[LinkKey]],
           topology: Topology) -> list[dict[str, Any]]:
    """Every link of the run's unhealthy link and switch verdicts, with its ports.

    Parameters
    ----------
    verdicts
        The run's verdicts; link and switch ones that are not healthy are listed.
    switch_links
        Switch verdict name -> the bad links that make it.
    topology
        Where the ports come from (``Link.a_port`` / ``b_port``).

    Returns
    -------
    list of dict
        One entry per (verdict, link), in verdict order.
    """
    out = []
    for v in verdicts:
        if v.state == HEALTHY or v.kind not in ("link", "switch"):
            continue
        keys = verdict_links(v) if v.kind == "link" else tuple(switch_links.get(v.name, ()))
        out += [cable_entry(v, k, len(keys), topology) for k in keys]
    return out
