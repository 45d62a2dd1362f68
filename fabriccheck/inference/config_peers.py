"""Configuration judged against peers (pure; docs/config-checks.md): a part whose setting differs
from a clear majority of its peers of the same class (SKU, NIC model and speed) is an outlier,
whether or not the spec named the setting.

For each class and setting, over the parts that reported it: the most common value is the
**majority** when at least :data:`MIN_PEERS` parts hold it and they are at least
:data:`MAJORITY_SHARE` of the parts; every other value is an outlier, judged with the severity of
the setting's catalogue entry (``cfg-*``: fault for what makes a job run wrong, warn for drift).
Without a clear majority (a fleet split evenly, a rollout half done) nobody is judged on that
setting and the split is reported as info. A setting with an order (:data:`ORDERS`: GPU-NIC
distance, GPUDirect on/off) judges only parts worse than the majority: a GPU nearer its NIC than
its peers' is not a problem.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: fewest parts that must agree on a value before it is the peers' value
MIN_PEERS = 4
#: the share of the parts that must agree (3 in 4)
MAJORITY_SHARE = 0.75
#: settings whose values rank best first: only a worse value than the majority's is judged
ORDERS: Mapping[str, tuple[Any, ...]] = {
    "gpu_nic": ("PIX", "PXB", "PHB", "NODE", "SYS"),
    "gpudirect": ("on", "off"),
    "acs": ("off", "redirect"),
}


@dataclass(frozen=True)
class Outlier:
    """One part whose ``setting`` is ``value`` where ``peers`` of its class have ``majority``."""

    target: str
    setting: str
    value: Any
    majority: Any
    peers: int
    severity: str

    @property
    def what(self) -> str:
        """``firmware 28.39.1002 on node-017/mlx5_3; 127 peers run 28.41.1000``."""
        return (f"{self.setting} {self.value} on {self.target}; {self.peers} peers have "
                f"{self.majority}")


@dataclass(frozen=True)
class Split:
    """A setting the class's parts disagree on without a clear majority (``counts``: value ->
    parts)."""

    setting: str
    label: str
    counts: Mapping[Any, int]

    @property
    def what(self) -> str:
        parts = sum(self.counts.values())
        shown = ", ".join(f"{n} have {v}" for v, n in Counter(self.counts).most_common(4))
        return (f"{self.setting}: no clear majority among {parts} {self.label or 'parts'} "
                f"({shown}): nobody judged on it")


@dataclass
class PeerJudgement:
    """The outliers, the splits, and per setting what the peers hold (the run JSON ``config``:
    ``{setting: {majority, parts, outliers: {target: value}}}``)."""

    outliers: list[Outlier] = field(default_factory=list)
    splits: list[Split] = field(default_factory=list)
    summary: dict[str, dict[str, Any]] = field(default_factory=dict)


def majority(values: Mapping[str, Any], min_peers: int = MIN_PEERS,
             share: float = MAJORITY_SHARE) -> tuple[Any, bool]:
    """The most common value and whether it is a clear majority.

    >>> majority({"a": 1, "b": 1, "c": 1, "d": 1, "e": 2})
    (1, True)
    >>> majority({"a": 1, "b": 1, "c": 2, "d": 2})[1]
    False
    """
    counts = Counter(values.values())
    if not counts:
        return None, False
    (top, n), *rest = counts.most_common()
    tied = bool(rest) and rest[0][1] == n
    return top, (not tied and n >= min_peers and n >= share * len(values))


def judge_peers(settings: Mapping[str, Mapping[str, Any]],
                classes: Mapping[str, Hashable] | None = None,
                severities: Mapping[str, str] | None = None,
                skip: Mapping[str, Collection[str]] | None = None, *,
                labels: Mapping[Hashable, str] | None = None,
                min_peers: int = MIN_PEERS, share: float = MAJORITY_SHARE) -> PeerJudgement:
    """Judge every part's settings against its peers (the module doc's rule).

    Parameters
    ----------
    settings
        Per part (``node`` or ``node/nic``) its settings: ``{"firmware": "28.41.1000", ...}``.
    classes
        Per part its class: only parts of one class are peers (default: all one class).
    severities
        Per setting the severity of an outlier (default ``warn``).
    skip
        Per part the settings judged already (against the spec): counted for the majority,
        not judged again.
    labels
        A class's name in the summary keys (``firmware[ConnectX-7 400G]`` when a setting is
        held by more than one class).

    Examples
    --------
    >>> fleet = {f"n{i}/mlx5_0": {"firmware": "28.41.1000"} for i in range(6)}
    >>> fleet["n3/mlx5_0"] = {"firmware": "28.39.1002"}
    >>> [o.what for o in judge_peers(fleet).outliers]
    ['firmware 28.39.1002 on n3/mlx5_0; 5 peers have 28.41.1000']
    """
    groups = _peer_groups(settings, classes or {})
    held = Counter(name for _cls, name in groups)
    out = PeerJudgement()
    for (cls, name), values in sorted(groups.items(), key=lambda kv: (str(kv[0][1]),
                                                                     str(kv[0][0]))):
        label = (labels or {}).get(cls, "" if cls is None else str(cls))
        key = name if held[name] == 1 else f"{name}[{label}]"
        entry, split, outliers = _judge_setting(name, label, values, severities or {},
                                                skip or {}, min_peers, share)
        if entry is not None:
            out.summary[key] = entry
        if split is not None:
            out.splits.append(split)
        out.outliers += outliers
    return out


def _peer_groups(settings: Mapping[str, Mapping[str, Any]], classes: Mapping[str, Hashable]
                 ) -> dict[tuple[Hashable, str], dict[str, Any]]:
    """Per (class, setting) the parts that reported it and their value (a None value is not
    reported).

    >>> _peer_groups({"a": {"mtu": 4096, "fw": None}, "b": {"mtu": 1024}}, {"b": "x"})
    {(None, 'mtu'): {'a': 4096}, ('x', 'mtu'): {'b': 1024}}
    """
    groups: dict[tuple[Hashable, str], dict[str, Any]] = {}
    for target, values in settings.items():
        for name, value in values.items():
            if value is not None:
                groups.setdefault((classes.get(target), name), {})[target] = value
    return groups


def _judge_setting(name: str, label: str, values: Mapping[str, Any],
                   severities: Mapping[str, str], skip: Mapping[str, Collection[str]],
                   min_peers: int, share: float
                   ) -> tuple[dict[str, Any] | None, Split | None, list[Outlier]]:
    """One class's parts judged on setting ``name`` (``values``: part -> value).

    Returns the setting's summary entry (None when every part agrees but they are too few to
    be a clear majority), the split (None unless the parts disagree without a clear majority) and
    the outliers, by part (none without a clear majority; parts in ``skip`` and parts better
    than the majority are not judged).

    >>> fleet = {f"n{i}": "28.41" for i in range(5)} | {"n5": "28.39"}
    >>> entry, split, outliers = _judge_setting("firmware", "", fleet, {}, {}, 4, 0.75)
    >>> entry["outliers"], split, [o.what for o in outliers]
    ({'n5': '28.39'}, None, ['firmware 28.39 on n5; 5 peers have 28.41'])
    """
    top, clear = majority(values, min_peers, share)
    odd = {t: v for t, v in values.items() if v != top}
    if not clear:
        if not odd:
            return None, None, []
        counts = Counter(values.values())
        return ({"majority": None, "parts": len(values),
                 "values": {str(v): n for v, n in counts.most_common()}},
                Split(name, label, dict(counts)), [])
    peers = len(values) - len(odd)
    outliers = [Outlier(target, name, value, top, peers, severities.get(name, "warn"))
                for target, value in sorted(odd.items())
                if name not in skip.get(target, ()) and not _better(name, value, top)]
    entry = {"majority": top, "parts": len(values), "outliers": dict(sorted(odd.items()))}
    return entry, None, outliers


def _better(setting: str, value: Any, than: Any) -> bool:
    """True when ``setting`` has an order and ``value`` ranks before ``than``.

    >>> _better("gpu_nic", "PIX", "PXB"), _better("gpu_nic", "SYS", "PIX"), _better("mtu", 1, 2)
    (True, False, False)
    """
    order = ORDERS.get(setting)
    if not order or value not in order or than not in order:
        return False
    return order.index(value) < order.index(than)
