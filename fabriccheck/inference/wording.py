"""How verdict reasons word their evidence: a switch link's name, a list cut short, test values.

Attribution's judges, the result builder and the loop's log lines name a link and list the
evidence alike, so a reason reads the same wherever it is built.
"""

from __future__ import annotations

from collections.abc import Sequence

from fabriccheck.models import LinkKey, Observation


def link_name(key: LinkKey) -> str:
    """``leaf-0 -- spine-1``: a switch link as its two ends."""
    return f"{key[0]} -- {key[1]}"


def listing(items: Sequence[str], most: int = 4) -> str:
    """``a, b, c, d (+2 more)``: a list cut short says so.

    >>> listing(["a", "b", "c"], 2)
    'a, b (+1 more)'
    """
    more = f" (+{len(items) - most} more)" if len(items) > most else ""
    return ", ".join(items[:most]) + more


def observed_values(obs: Sequence[Observation], most: int = 4) -> str:
    """Each test with its value, or why it has none: ``r1-3 95.2 Gb/s, r2-1 (timeout)``."""
    return listing([_fmt(o) for o in obs], most)


def _fmt(o: Observation) -> str:
    if o.value is None:
        return f"{o.test.test_id} ({o.reason[:60]})"
    return f"{o.test.test_id} {o.value:.1f} {o.unit}"
