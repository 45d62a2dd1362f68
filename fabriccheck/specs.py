"""Test specs: what "healthy" means per SKU, fabric, probe and group size (files in test_specs/)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabriccheck.errors import ConfigError
from fabriccheck.schema.values import COLLECTIVES, SPEC_FABRICS, parse_size_bytes  # noqa: F401


@dataclass(frozen=True)
class ProbeSpec:
    """The bar one probe must clear for one group size.

    ``value < floor`` fails; ``floor <= value < warn`` is suspect (for ``unit == "us"``, latency,
    the comparison is reversed: above ``floor`` fails). ``size_bytes`` is the message size judged.
    """

    probe: str
    group_size: int
    size_bytes: int
    floor: float
    warn: float
    unit: str
    collective: str | None = None
    #: the healthy value on this SKU (what the simulator reproduces; floors sit below it)
    expected: float | None = None

    @property
    def lower_is_better(self) -> bool:
        return self.unit == "us"


@dataclass(frozen=True)
class SignalSpec:
    """A user signal (docs/design.md "Signals"): a command whose printed value must pass a bound.

    ``value`` is a regex with a group named ``value`` (or ``parser`` names an entry point of
    ``fabriccheck.signals``); ``pass_min`` / ``pass_max`` bound it (None: no bound).
    """

    name: str
    level: int
    per: str
    command: str
    value: str | None
    parser: str | None
    unit: str
    pass_min: float | None
    pass_max: float | None
    timeout_s: float


@dataclass(frozen=True)
class TestSpec:
    name: str
    sku: str
    fabric: str
    gpus_per_node: int
    nic_gbps: float
    probes: tuple[ProbeSpec, ...]
    timeout_s: float = 120.0
    source: str = ""
    #: single-node NCCL all_reduce busbw over NVLink in GB/s (nccl-tests units); 0 without GPUs
    intra_node_busbw_gbps: float = 0.0
    #: user signals from the spec's ``signals:`` list
    signals: tuple[SignalSpec, ...] = ()
    #: the ladder's levels (nodes per test); None: the default 1, 2, 4, 8
    levels: tuple[int, ...] | None = None
    #: node-local catalogue overrides by check id (docs/node-checks.md), with the ``config:``
    #: block's settings as the ``cfg-*`` entries' ``params`` (:func:`config_checks`); empty: the
    #: built-in catalogue
    node_checks: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: the ``config:`` block as written (docs/config-checks.md); empty: peers judge every setting
    config: Mapping[str, Any] = field(default_factory=dict, compare=False)

    __test__ = False  # not a pytest class

    def lookup(self, probe: str, group_size: int, collective: str | None = None) -> ProbeSpec:
        """The spec for ``probe`` at ``group_size`` nodes: exact size, else the largest below it.

        Raises :class:`ConfigError` when the spec has nothing for this probe.
        """
        cands = [
            p
            for p in self.probes
            if p.probe == probe and (collective is None or p.collective in (None, collective))
        ]
        if not cands:
            raise ConfigError(
                f"no entry for probe {probe!r}",
                source=self.source or self.name,
                field="probes",
                hint=f"add a '{probe}' entry to the spec",
            )
        exact = [p for p in cands if p.group_size == group_size]
        if exact:
            return exact[0]
        below = [p for p in cands if p.group_size <= group_size]
        return max(below or cands, key=lambda p: p.group_size if below else -p.group_size)


# ---- loading ------------------------------------------------------------------------------
#: probe name -> its unit (``us``: latency, lower is better)
PROBE_UNITS = {
    "nccl": "GB/s",
    "allreduce-cpu": "GB/s",
    "ib_write_bw": "Gb/s",
    "iperf3": "Gb/s",
    "ib_write_lat": "us",
}
_TOP_FIELDS = (
    "name", "sku", "fabric", "description", "gpus_per_node", "nic_gbps", "intra_node_busbw_gbps",
    "timeout_s", "probes", "signals", "levels", "node_checks", "config",
)
#: a ``config:`` setting -> (the catalogue entry that judges it, the ``params`` key it sets)
CONFIG_CHECKS: Mapping[str, tuple[str, str]] = {
    "gpudirect": ("cfg-gpudirect", "expect"), "gpu_nic": ("cfg-gpu-nic", "expect"),
    "gpu_driver": ("cfg-gpu-driver", "expect"), "firmware": ("cfg-nic-firmware", "expect"),
    "mtu": ("cfg-mtu", "expect"), "pfc_priority": ("cfg-pfc", "expect"),
    "trust": ("cfg-trust", "expect"), "ecn": ("cfg-ecn", "expect"),
    "roce_version": ("cfg-gid", "expect"), "gid_index": ("cfg-gid", "index"),
}

#: the repository's bundled spec files
SPEC_DIR = Path(__file__).resolve().parent / "_bundled" / "test_specs"


def resolve_spec_path(path_or_name: str, base: str = "") -> str:
    """A spec file: an existing path, a path relative to ``base``'s folder, or a bundled name."""
    cands = [Path(path_or_name)]
    if base:
        cands.append(Path(base).parent / path_or_name)
    for d in (SPEC_DIR, Path.cwd() / "test_specs"):
        cands += [d / path_or_name, d / f"{path_or_name}.yaml"]
    for cand in cands:
        if cand.is_file():
            return str(cand)
    names = ", ".join(bundled_specs()) or "none found"
    raise ConfigError(
        "no such spec file or bundled spec", source=path_or_name, hint=f"one of: {names}"
    )


def bundled_specs() -> list[str]:
    """Names of the spec files shipped in ``test_specs/``."""
    return sorted(p.stem for p in SPEC_DIR.glob("*.yaml")) if SPEC_DIR.is_dir() else []


def load_spec(path_or_name: str) -> TestSpec:
    """Read and validate a test spec file (``test_specs/*.yaml``) or a bundled spec by name.

    Parameters
    ----------
    path_or_name
        A path, or a bundled name such as ``h100-ndr400-ib``.

    Returns
    -------
    TestSpec

    Raises
    ------
    ConfigError
        One line naming the file, the field and the problem.
    """
    from fabriccheck.topology.fields import read_yaml

    source = resolve_spec_path(str(path_or_name))
    return spec_from_dict(read_yaml(source), source=source)


def spec_from_dict(data: object, *, source: str) -> TestSpec:
    """Build and validate a :class:`TestSpec` from a parsed document (see :func:`load_spec`)."""
    from fabriccheck.schema.base import check
    from fabriccheck.schema.spec import SpecFile
    from fabriccheck.topology.fields import Fields

    model = check(SpecFile, data, source=source)
    top = Fields(data, source, "", allowed=_TOP_FIELDS)
    probes_f = Fields(top.require("probes"), source, "probes", allowed=tuple(PROBE_UNITS))
    probes: list[ProbeSpec] = []
    for probe, blocks in probes_f.data.items():
        blocks = blocks if isinstance(blocks, list) else [blocks]
        for i, block in enumerate(blocks):
            path = f"probes.{probe}" + (f"[{i}]" if len(blocks) > 1 else "")
            probes += _probe_entries(Fields(block, source, path), probe)
    if not probes:
        raise top.error("a spec needs at least one probe", "probes")
    config = model.config.model_dump(exclude_none=True) if model.config else {}
    return TestSpec(
        name=top.str("name"),
        sku=top.str("sku"),
        fabric=top.str("fabric", choices=SPEC_FABRICS),
        gpus_per_node=top.int("gpus_per_node", minimum=0),
        nic_gbps=top.number("nic_gbps"),
        probes=tuple(probes),
        timeout_s=top.number("timeout_s", 120.0),
        source=source,
        intra_node_busbw_gbps=top.number("intra_node_busbw_gbps", 0.0, positive=False),
        signals=tuple(signal_from_model(s) for s in model.signals),
        levels=tuple(sorted(set(model.levels))) if model.levels else None,
        node_checks=config_checks(config, model.node_checks),
        config=config,
    )


def config_checks(config: Mapping[str, Any],
                  node_checks: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The catalogue overrides a spec means: its ``config:`` settings as the ``params`` of the
    ``cfg-*`` entries that judge them, under its own ``node_checks`` (which win).

    >>> config_checks({"mtu": 9000, "roce_version": 2, "gid_index": 3})["cfg-gid"]
    {'params': {'expect': 2, 'index': 3}}
    >>> config_checks({"mtu": 9000}, {"cfg-mtu": {"severity": "warn"}})["cfg-mtu"]
    {'severity': 'warn', 'params': {'expect': 9000}}
    """
    out: dict[str, Any] = {}
    for key, value in config.items():
        if value is None or key not in CONFIG_CHECKS:
            continue
        check, param = CONFIG_CHECKS[key]
        out.setdefault(check, {"params": {}})["params"][param] = value
    for check, fields in (node_checks or {}).items():
        derived = out.get(check, {"params": {}})
        if not isinstance(fields, Mapping):  # refused with its field name by the catalogue
            out[check] = fields
            continue
        params = {**derived["params"], **dict(fields.get("params") or {})}
        out[check] = {**{k: v for k, v in fields.items() if k != "params"},
                      **({"params": params} if params else {})}
    return out


def load_signals(path: str) -> tuple[SignalSpec, ...]:
    """Read a signals file (``--signals FILE``: a ``signals:`` list, docs/design.md "Signals").

    Raises
    ------
    ConfigError
        One line naming the file, the field (``signals[2].command``) and the problem.
    """
    from fabriccheck.schema.base import check
    from fabriccheck.schema.signals import SignalsFile
    from fabriccheck.schema.yamlio import read_yaml

    model = check(SignalsFile, read_yaml(path, what="signals file"), source=str(path))
    return tuple(signal_from_model(s) for s in model.signals)


def signal_from_model(m) -> SignalSpec:
    """A validated :class:`~fabriccheck.schema.signals.SignalModel` -> :class:`SignalSpec`."""
    return SignalSpec(
        name=m.name, level=m.level, per=m.per, command=m.command, value=m.value, parser=m.parser,
        unit=m.unit, pass_min=m.pass_.min, pass_max=m.pass_.max, timeout_s=m.timeout_s,
    )


def _probe_entries(f, probe: str) -> list[ProbeSpec]:
    from fabriccheck.topology.fields import Fields

    f = Fields(f.data, f.source, f.path, allowed=("unit", "collective", "groups"))
    unit = f.str("unit", PROBE_UNITS[probe], choices=(PROBE_UNITS[probe],))
    collective = None
    if probe == "nccl":
        collective = f.str("collective", "all_reduce", choices=COLLECTIVES)
    elif f.has("collective"):
        raise f.error("only the nccl probe takes a collective", "collective")
    groups = Fields(f.require("groups"), f.source, f.path + ".groups")
    out = []
    for size, entry in groups.data.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise groups.error(f"group size must be a positive integer, got {size!r}", str(size))
        g = Fields(
            entry, f.source, f"{groups.path}.{size}",
            allowed=("size_bytes", "floor", "warn", "expected"),
        )
        size_bytes = parse_size_bytes(g.require("size_bytes"))
        if size_bytes is None or size_bytes < 1:
            raise g.error("expected a positive size such as 65536 or '8M'", "size_bytes")
        floor, warn, expected = g.number("floor"), g.number("warn"), g.number("expected")
        if unit == "us" and not floor >= warn >= expected:
            raise g.error(
                f"latency needs floor >= warn >= expected, got {floor} / {warn} / {expected}",
                "floor",
            )
        if unit != "us" and not floor <= warn <= expected:
            raise g.error(
                f"bandwidth needs floor <= warn <= expected, got {floor} / {warn} / {expected}",
                "floor",
            )
        out.append(ProbeSpec(probe, size, size_bytes, floor, warn, unit, collective, expected))
    if not out:
        raise f.error("no group sizes", "groups")
    return out


def resolve_spec(name_or_path: str | None, topology) -> TestSpec:
    """The spec to judge ``topology`` by: the one given, else the topology's ``spec:``, else a
    bundled default by fabric and NIC speed (lab-tcp for <= 10 Gb/s NICs).

    Raises
    ------
    ConfigError
        The spec cannot be read, or it is for another fabric than the topology's.
    """
    chosen = name_or_path or getattr(topology, "spec", None)
    if chosen:
        spec = load_spec(resolve_spec_path(chosen, getattr(topology, "source", "")))
    else:
        nic_gbps = min((n.gbps for n in topology.nics.values()), default=0.0)
        if nic_gbps <= 10:
            spec = load_spec("lab-tcp")
        elif topology.fabric == "infiniband":
            spec = load_spec("a100-hdr200-ib" if nic_gbps <= 200 else "h100-ndr400-ib")
        else:
            spec = load_spec("h100-roce400")
    if spec.fabric not in ("any", topology.fabric):
        raise ConfigError(
            f"spec {spec.name!r} is for {spec.fabric} but topology {topology.name!r} is "
            f"{topology.fabric}",
            source=spec.source,
            field="fabric",
            hint="pick a spec for this fabric with --spec",
        )
    return spec
