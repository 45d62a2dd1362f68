"""Test specs: what "healthy" means per SKU, fabric, probe and group size (files in test_specs/)."""

from __future__ import annotations

from dataclasses import dataclass

from fabriccheck.errors import ConfigError


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

    @property
    def lower_is_better(self) -> bool:
        return self.unit == "us"


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
