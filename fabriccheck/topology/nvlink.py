"""NVLink domains: compute trays that share NVLink through NVSwitch trays (GB200/GB300 NVL72).

A domain (one rack) has compute trays (topology nodes, ``gpus_per_tray`` GPUs each), NVSwitch
trays (``switch_trays``, ``chips_per_switch_tray`` switch chips each) and per GPU
``ports_per_gpu`` NVLink ports. The GPU <-> switch-chip wiring is a fixed bipartite graph derived
by rule, so a file never lists its 1,296 cables: **port p of every GPU goes to switch chip
p mod chips**, and chip c sits in switch tray ``c // chips_per_switch_tray`` (GB200 NVL72: 18
ports, 18 chips in 9 trays, one port of every GPU on every chip; NVIDIA's NVL72 spec: 72 GPUs,
each with 18 NVLink 5 links of 100 GB/s, 9 NVLink switch trays with 2 NVLink switch chips each).

Names: switch tray ``<domain>-nvsw-<t>``, chip ``<domain>-nvsw-<t>/<k>`` (k = 0..chips per
tray - 1), a GPU port ``<tray>/gpu<g>/nvl<p>``. These are not switches of the scale-out fabric
(:attr:`~fabriccheck.topology.model.Topology.switches`): NVLink carries no NIC traffic.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["NvlDomain", "NvlPort"]


@dataclass(frozen=True)
class NvlPort:
    """One NVLink cable of a domain: GPU ``gpu`` of tray ``tray``, its port ``port``, to switch
    chip ``chip`` (``switch_tray``, ``chip_in_tray``)."""

    tray: str
    gpu: int
    port: int
    chip: int
    switch_tray: int
    chip_in_tray: int

    @property
    def name(self) -> str:
        """``node-001/gpu2/nvl7``."""
        return f"{self.tray}/gpu{self.gpu}/nvl{self.port}"


@dataclass(frozen=True)
class NvlDomain:
    """One NVLink domain (rack): its trays in rack order and its switch fabric's shape.

    >>> d = NvlDomain("rack-0", ("n1", "n2"))
    >>> d.chips, d.switch_tray_names()[:2], d.chip_of(7)
    (18, ('rack-0-nvsw-0', 'rack-0-nvsw-1'), (3, 1))
    """

    name: str
    trays: tuple[str, ...]
    gpus_per_tray: int = 4
    switch_trays: int = 9
    chips_per_switch_tray: int = 2
    ports_per_gpu: int = 18

    @property
    def chips(self) -> int:
        """Switch chips in the domain."""
        return self.switch_trays * self.chips_per_switch_tray

    @property
    def gpus(self) -> int:
        return len(self.trays) * self.gpus_per_tray

    def switch_tray_names(self) -> tuple[str, ...]:
        return tuple(f"{self.name}-nvsw-{t}" for t in range(self.switch_trays))

    def chip_name(self, chip: int) -> str:
        """``rack-0-nvsw-3/1`` for chip 7 of 2-chip trays."""
        t, k = divmod(chip, self.chips_per_switch_tray)
        return f"{self.name}-nvsw-{t}/{k}"

    def chip_of(self, port: int) -> tuple[int, int]:
        """(switch tray, chip in that tray) GPU port ``port`` is wired to (the rule above)."""
        return divmod(port % self.chips, self.chips_per_switch_tray)

    def ports_of_switch_tray(self, switch_tray: int) -> tuple[int, ...]:
        """The GPU port numbers wired to switch tray ``switch_tray`` (the same on every GPU).

        >>> NvlDomain("r", ("n",)).ports_of_switch_tray(4)
        (8, 9)
        """
        return tuple(p for p in range(self.ports_per_gpu)
                     if self.chip_of(p)[0] == switch_tray)

    def tray_index(self, tray: str) -> int:
        return self.trays.index(tray)

    def ports(self) -> Iterator[NvlPort]:
        """Every GPU port of the domain with the chip it is wired to (trays x GPUs x ports)."""
        for tray in self.trays:
            for g in range(self.gpus_per_tray):
                for p in range(self.ports_per_gpu):
                    t, k = self.chip_of(p)
                    yield NvlPort(tray, g, p, p % self.chips, t, k)

    def to_json(self) -> dict:
        """The domain as ``topology show --json`` lists it (``nvlink_domains``)."""
        return {"name": self.name, "trays": list(self.trays), "gpus_per_tray": self.gpus_per_tray,
                "switch_trays": self.switch_trays,
                "chips_per_switch_tray": self.chips_per_switch_tray,
                "ports_per_gpu": self.ports_per_gpu}
