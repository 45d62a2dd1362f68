"""Injected faults: the faults file (DESIGN.md "Faults file"), validated, plus its ground truth.

The same :class:`FaultSet` drives the simulator (``executors/sim``) and the namespace lab (which
turns the kinds into real ``tc`` / ``ip link`` faults), so nothing here is executor-specific.

A file looks like::

    noise: {jitter: 0.03, glitch_rate: 0.01}
    faults:
      - {kind: nic_degraded, nic: node-017/mlx5_3, factor: 0.25}
      - {kind: node_hang, node: node-033}
      - {kind: link_flapping, link: [leaf-1-2, spine-3], probability: 0.5}

Bad input raises one :class:`~fabriccheck.errors.ConfigError` naming the file, the field
(``faults[3].nic``) and what to do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from fabriccheck.errors import ConfigError
from fabriccheck.models import LinkKey, link_key, nic_node

if TYPE_CHECKING:  # pragma: no cover
    from fabriccheck.topology.model import Topology

#: every fault kind and the fields it takes besides ``kind`` (all required)
KINDS: dict[str, tuple[str, ...]] = {
    "nic_degraded": ("nic", "factor"),
    "nic_down": ("nic",),
    "node_slow": ("node", "factor"),
    "node_hang": ("node",),
    "node_unreachable": ("node",),
    "link_degraded": ("link", "factor"),
    "link_down": ("link",),
    "link_flapping": ("link", "probability"),
}
NIC_KINDS = ("nic_degraded", "nic_down")
NODE_KINDS = ("node_slow", "node_hang", "node_unreachable")
LINK_KINDS = ("link_degraded", "link_down", "link_flapping")


@dataclass(frozen=True)
class Noise:
    """Measurement noise: ``jitter`` is the relative std-dev of every measurement,
    ``glitch_rate`` the chance that one test is spuriously low (transient: a retest passes)."""

    jitter: float = 0.0
    glitch_rate: float = 0.0


@dataclass(frozen=True)
class Fault:
    """One injected fault. Only the fields of its ``kind`` (see :data:`KINDS`) are set."""

    kind: str
    nic: str | None = None
    node: str | None = None
    link: LinkKey | None = None
    factor: float | None = None
    probability: float | None = None

    @property
    def target(self) -> str | LinkKey:
        """The component the fault sits on: a NIC endpoint, a node or a link key."""
        return self.nic or self.node or self.link  # type: ignore[return-value]


@dataclass(frozen=True)
class FaultSet:
    """Noise plus the list of injected faults; ``source`` names the file it came from."""

    noise: Noise = Noise()
    faults: tuple[Fault, ...] = ()
    source: str = ""

    # ---- loading ---------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, *, source: str = "<faults>") -> FaultSet:
        """Build a fault set from the parsed faults-file mapping (validates field shapes).

        Parameters
        ----------
        data : mapping or None
            ``{"noise": {...}, "faults": [...]}``; None or ``{}`` means no noise and no faults.
        source : str
            Where the data came from, for error messages.

        Examples
        --------
        >>> fs = FaultSet.from_dict({"faults": [{"kind": "node_hang", "node": "node-003"}]})
        >>> fs.hung_nodes()
        ('node-003',)
        """
        if data is None:
            return cls(source=source)
        if not isinstance(data, Mapping):
            raise ConfigError(
                "expected a mapping with 'noise' and 'faults'", source=source,
                hint="see DESIGN.md 'Faults file'",
            )
        unknown = sorted(set(data) - {"noise", "faults"})
        if unknown:
            raise ConfigError(
                f"unknown key {unknown[0]!r}", source=source, field=unknown[0],
                hint="allowed top-level keys: noise, faults",
            )
        noise = _parse_noise(data.get("noise"), source)
        raw_faults = data.get("faults") or []
        if not isinstance(raw_faults, list):
            raise ConfigError("must be a list", source=source, field="faults",
                              hint="write faults as a YAML list of {kind: ..., ...}")
        faults = tuple(_parse_fault(f, i, source) for i, f in enumerate(raw_faults))
        return cls(noise=noise, faults=faults, source=source)

    def to_dict(self) -> dict[str, Any]:
        """The faults-file mapping (inverse of :meth:`from_dict`; links as ``[a, b]`` lists).

        >>> FaultSet.from_dict({"faults": [{"kind": "link_down", "link": ["s", "l"]}]}).to_dict()
        {'noise': {'jitter': 0.0, 'glitch_rate': 0.0}, 'faults': [{'kind': 'link_down', \
'link': ['l', 's']}]}
        """
        faults = []
        for f in self.faults:
            item: dict[str, Any] = {"kind": f.kind}
            for name in KINDS[f.kind]:
                value = getattr(f, name)
                item[name] = list(value) if name == "link" else value
            faults.append(item)
        return {"noise": {"jitter": self.noise.jitter, "glitch_rate": self.noise.glitch_rate},
                "faults": faults}

    # ---- checks ----------------------------------------------------------------------------
    def validate(self, topology: Topology) -> FaultSet:
        """Check that every node, NIC and link named exists in ``topology``; return self.

        Raises
        ------
        ConfigError
            On the first unknown name, naming the file and the field (``faults[3].nic``).
        """
        for i, f in enumerate(self.faults):
            if f.nic is not None and f.nic not in topology.nics:
                node = nic_node(f.nic)
                hint = (
                    f"{node} has NICs {', '.join(n.name for n in topology.nodes[node].nics)}"
                    if node in topology.nodes
                    else "write a NIC as node/nic, e.g. node-001/mlx5_0"
                )
                raise ConfigError(f"unknown NIC {f.nic!r}", source=self.source,
                                  field=f"faults[{i}].nic", hint=hint)
            if f.node is not None and f.node not in topology.nodes:
                raise ConfigError(f"unknown node {f.node!r}", source=self.source,
                                  field=f"faults[{i}].node",
                                  hint="use a node name from the topology (topology show)")
            if f.link is not None and f.link not in topology.links:
                raise ConfigError(f"no link between {f.link[0]!r} and {f.link[1]!r}",
                                  source=self.source, field=f"faults[{i}].link",
                                  hint="name a link as [a, b] with both ends from the topology")
        return self

    # ---- queries ---------------------------------------------------------------------------
    def of_kind(self, *kinds: str) -> tuple[Fault, ...]:
        return tuple(f for f in self.faults if f.kind in kinds)

    def __bool__(self) -> bool:
        return bool(self.faults) or self.noise != Noise()

    # ---- ground truth (what a perfect tool would report) -------------------------------------
    def bad_nodes(self) -> tuple[str, ...]:
        """Nodes that are bad themselves: ``node_slow`` and ``node_hang``."""
        return _sorted(f.node for f in self.of_kind("node_slow", "node_hang"))

    def bad_nics(self) -> tuple[str, ...]:
        """NIC endpoints with ``nic_degraded`` or ``nic_down``."""
        return _sorted(f.nic for f in self.of_kind(*NIC_KINDS))

    def bad_links(self) -> tuple[LinkKey, ...]:
        """Links with ``link_degraded``, ``link_down`` or ``link_flapping``."""
        return tuple(sorted({f.link for f in self.of_kind(*LINK_KINDS) if f.link}))

    def hung_nodes(self) -> tuple[str, ...]:
        return _sorted(f.node for f in self.of_kind("node_hang"))

    def unreachable_nodes(self) -> tuple[str, ...]:
        return _sorted(f.node for f in self.of_kind("node_unreachable"))

    def drain_nodes(self) -> tuple[str, ...]:
        """Nodes that should not run jobs: bad nodes and nodes with a bad NIC (not unreachable)."""
        return _sorted([*self.bad_nodes(), *(nic_node(n) for n in self.bad_nics())])


def load_faults(path: str | Path) -> FaultSet:
    """Read and shape-check a faults file (YAML). Check names with :meth:`FaultSet.validate`.

    Raises
    ------
    ConfigError
        Missing file, bad YAML, unknown kind or field, bad value.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read faults file: {exc.strerror}", source=str(p),
                          hint="check the --faults path") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"not valid YAML{where}", source=str(p),
                          hint="fix the YAML syntax") from exc
    return FaultSet.from_dict(data, source=str(p))


# ---- helpers -------------------------------------------------------------------------------
def _sorted(items: Iterable[str | None]) -> tuple[str, ...]:
    return tuple(sorted({i for i in items if i}))


def _number(value: Any, source: str, field: str, lo: float, hi: float, *, lo_open: bool,
            hi_open: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"must be a number, got {value!r}", source=source, field=field)
    v = float(value)
    bad_lo = v <= lo if lo_open else v < lo
    bad_hi = v >= hi if hi_open else v > hi
    if bad_lo or bad_hi:
        rng = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
        raise ConfigError(f"{v:g} is out of range {rng}", source=source, field=field)
    return v


def _parse_noise(raw: Any, source: str) -> Noise:
    if raw is None:
        return Noise()
    if not isinstance(raw, Mapping):
        raise ConfigError("must be a mapping {jitter, glitch_rate}", source=source, field="noise")
    unknown = sorted(set(raw) - {"jitter", "glitch_rate"})
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r}", source=source,
                          field=f"noise.{unknown[0]}", hint="allowed: jitter, glitch_rate")
    return Noise(
        jitter=_number(raw.get("jitter", 0.0), source, "noise.jitter", 0.0, 0.5,
                       lo_open=False, hi_open=False),
        glitch_rate=_number(raw.get("glitch_rate", 0.0), source, "noise.glitch_rate", 0.0, 1.0,
                            lo_open=False, hi_open=False),
    )


def _parse_fault(raw: Any, i: int, source: str) -> Fault:
    where = f"faults[{i}]"
    if not isinstance(raw, Mapping):
        raise ConfigError("must be a mapping with 'kind'", source=source, field=where)
    kind = raw.get("kind")
    if kind not in KINDS:
        raise ConfigError(f"unknown kind {kind!r}", source=source, field=f"{where}.kind",
                          hint=f"use one of {', '.join(KINDS)}")
    needed = KINDS[kind]
    extra = sorted(set(raw) - {"kind", *needed})
    if extra:
        raise ConfigError(f"{kind} takes no field {extra[0]!r}", source=source,
                          field=f"{where}.{extra[0]}", hint=f"{kind} takes {', '.join(needed)}")
    for name in needed:
        if name not in raw or raw[name] is None:
            raise ConfigError(f"{kind} needs {name!r}", source=source, field=f"{where}.{name}",
                              hint=f"{kind} takes {', '.join(needed)}")
    fields: dict[str, Any] = {}
    if "nic" in needed:
        nic = raw["nic"]
        if not isinstance(nic, str) or nic.count("/") != 1 or not all(nic.split("/")):
            raise ConfigError(f"a NIC is written node/nic, got {nic!r}", source=source,
                              field=f"{where}.nic", hint="e.g. node-017/mlx5_3")
        fields["nic"] = nic
    if "node" in needed:
        node = raw["node"]
        if not isinstance(node, str) or not node:
            raise ConfigError(f"a node name is a string, got {node!r}", source=source,
                              field=f"{where}.node")
        fields["node"] = node
    if "link" in needed:
        link = raw["link"]
        if (
            not isinstance(link, (list, tuple))
            or len(link) != 2
            or not all(isinstance(e, str) and e for e in link)
            or link[0] == link[1]
        ):
            raise ConfigError(f"a link is two different endpoints [a, b], got {link!r}",
                              source=source, field=f"{where}.link",
                              hint="e.g. [leaf-1-2, spine-3] or [node-001/mlx5_0, leaf-0-0]")
        fields["link"] = link_key(link[0], link[1])
    if "factor" in needed:
        fields["factor"] = _number(raw["factor"], source, f"{where}.factor", 0.0, 1.0,
                                   lo_open=True, hi_open=True)
    if "probability" in needed:
        fields["probability"] = _number(raw["probability"], source, f"{where}.probability",
                                        0.0, 1.0, lo_open=True, hi_open=False)
    return Fault(kind=kind, **fields)
