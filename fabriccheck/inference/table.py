"""The run's observations as one pandas table (peer statistics, baselines and the report read it).

:func:`observation_frame` has one row per observation (test x round) with its kind — probe,
level (group size) and path class — and its outcome (``below_floor``: failed for its number
alone; ``under_floor``: its number is below the floor, whatever the verdict);
:func:`component_frame` explodes it to one row per test x component (node and NIC) x round,
for per-component tallies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from fabriccheck.models import Observation, Test

#: path classes, from the shortest path to the longest
INTRA, LEAF, CROSS = "intra-node", "same-leaf", "cross-leaf"

COLUMNS = ["test_id", "round", "probe", "purpose", "level", "path", "status", "value", "floor",
           "unit", "below_floor", "under_floor", "nodes"]


def path_class(test: Test, attachment: Mapping[str, str]) -> str:
    """``intra-node`` (no flow leaves the node), ``same-leaf`` (every flow stays under one
    leaf) or ``cross-leaf`` (a flow crosses switch links)."""
    if not test.flows:
        return INTRA
    for f in test.flows:
        a, b = attachment.get(f.src), attachment.get(f.dst)
        if a is None or a != b:
            return CROSS
    return LEAF


def below_floor(o: Observation) -> bool:
    """A failure for its number alone (below the floor), not a tool failure or a hang."""
    return (o.floor is not None and o.value is not None
            and o.reason.endswith(f"below floor {o.floor:g}"))


def under_floor(o: Observation) -> bool:
    """The number is below the floor, whatever the verdict (a fabric-wide pass included)."""
    return o.floor is not None and o.value is not None and o.unit != "us" and o.value < o.floor


def observation_frame(observations: Sequence[Observation],
                      attachment: Mapping[str, str]) -> pd.DataFrame:
    """One row per observation, in order."""
    rows = [(o.test.test_id, o.test.round, str(o.test.probe), str(o.test.purpose),
             o.test.group_size, path_class(o.test, attachment), str(o.status),
             o.value, o.floor, o.unit, below_floor(o), under_floor(o), list(o.test.nodes))
            for o in observations]
    return pd.DataFrame.from_records(rows, columns=COLUMNS)


def component_frame(observations: Sequence[Observation],
                    attachment: Mapping[str, str]) -> pd.DataFrame:
    """One row per observation x component it touched (``kind`` node | nic, ``name``)."""
    frame = observation_frame(observations, attachment)
    frame["component"] = [
        [("node", n) for n in o.test.nodes] + [("nic", x) for x in o.test.nics]
        for o in observations
    ]
    out = frame.explode("component", ignore_index=True).dropna(subset=["component"])
    out["kind"] = out["component"].map(lambda c: c[0])
    out["name"] = out["component"].map(lambda c: c[1])
    return out.drop(columns="component")
