"""What the rack picture marks on each NVLink domain (pure): the run's view of its trays and the
run result's ``nvlink`` key (docs/nvl72.md "In the run result").

Per rack (:class:`RackMarks`): each compute tray's state as the rest of the report shows it
(drained trays are bad, suspects suspect; :mod:`fabriccheck.report.view`), the GPUs the domain
level named (``nvlink.trays[].gpus``), the inactive NVLink ports with the switch chip each is
wired to (``nvlink.ports``), the switch trays and chips it found down (``nvlink.switches``) and
a rack it could not settle (``nvlink.rack_suspects``). A run without the key (no domain level)
marks the trays' states only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fabriccheck.models import HEALTHY, UNTESTED, RunResult
from fabriccheck.report.view import RunView
from fabriccheck.topology.model import Topology
from fabriccheck.topology.nvlink import NvlDomain

__all__ = ["PortMark", "RackMarks", "rack_marks"]


@dataclass(frozen=True)
class PortMark:
    """One inactive NVLink port: GPU ``gpu`` of ``tray``, port ``port``, to chip ``chip`` (its
    index in the domain) named ``chip_name``; ``note`` what the domain level made of it."""

    tray: str
    gpu: int
    port: int
    chip: int
    chip_name: str
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.tray}/gpu{self.gpu}/nvl{self.port}"


@dataclass
class RackMarks:
    """One rack (NVLink domain) and what the run found on it."""

    domain: NvlDomain
    tray_state: dict[str, str] = field(default_factory=dict)
    tray_why: dict[str, str] = field(default_factory=dict)
    gpus: dict[tuple[str, int], str] = field(default_factory=dict)
    ports: list[PortMark] = field(default_factory=list)
    switch_trays: dict[int, str] = field(default_factory=dict)
    chips: dict[int, str] = field(default_factory=dict)
    suspect: str = ""
    stats: str = ""

    @property
    def marked(self) -> bool:
        """Whether anything on the rack is marked (a tray not healthy counts; untested not)."""
        return bool(self.gpus or self.ports or self.switch_trays or self.chips or self.suspect
                    or any(s not in (HEALTHY, UNTESTED) for s in self.tray_state.values()))


def _gpu_index(name: str) -> int | None:
    """``node-060/gpu0`` -> 0 (None for anything else)."""
    tail = name.rsplit("/", 1)[-1]
    return int(tail[3:]) if tail.startswith("gpu") and tail[3:].isdigit() else None


def _switch(d: NvlDomain, name: str) -> tuple[int, int | None] | None:
    """``rack-1-nvsw-3`` -> (3, None), ``rack-1-nvsw-3/0`` -> (3, 0); None when not ``d``'s."""
    prefix = f"{d.name}-nvsw-"
    if not name.startswith(prefix):
        return None
    tray, _, chip = name[len(prefix):].partition("/")
    if not tray.isdigit() or (chip and not chip.isdigit()):
        return None
    return int(tray), (int(chip) if chip else None)


def _trays(m: RackMarks, view: RunView, nvl: Mapping[str, Any]) -> None:
    d = m.domain
    for tray in d.trays:
        m.tray_state[tray] = view.node_state.get(tray, UNTESTED)
        if view.node_reason.get(tray):
            m.tray_why[tray] = view.node_reason[tray]
    for t in nvl.get("trays") or ():
        tray = str(t.get("tray", ""))
        if tray not in m.tray_state:
            continue
        m.tray_why.setdefault(tray, str(t.get("reason", "")))
        for g in t.get("gpus") or ():
            i = _gpu_index(str(g))
            if i is not None:
                m.gpus[(tray, i)] = f"{t.get('state', 'bad')}: {t.get('reason', '')}"


def _ports_and_switches(m: RackMarks, nvl: Mapping[str, Any]) -> None:
    d = m.domain
    for p in nvl.get("ports") or ():
        tray, gpu, port = str(p.get("tray", "")), p.get("gpu"), str(p.get("port", ""))
        n = port.rsplit("nvl", 1)[-1]
        if tray in m.tray_state and isinstance(gpu, int) and n.isdigit():
            chip = int(n) % d.chips
            m.ports.append(PortMark(tray, gpu, int(n), chip, str(p.get("chip") or
                                                                   d.chip_name(chip)),
                                    str(p.get("domain", ""))))
    for s in nvl.get("switches") or ():
        where = _switch(d, str(s.get("name", "")))
        if where is None or not 0 <= where[0] < d.switch_trays:
            continue
        t, k = where
        if k is None:
            m.switch_trays[t] = str(s.get("reason", ""))
        elif 0 <= k < d.chips_per_switch_tray:
            m.chips[t * d.chips_per_switch_tray + k] = str(s.get("reason", ""))


def _rack_notes(m: RackMarks, nvl: Mapping[str, Any]) -> None:
    name = m.domain.name
    for r in nvl.get("rack_suspects") or ():
        if r.get("rack") == name:
            m.suspect = str(r.get("reason", "")) or "not settled"
    st = (nvl.get("racks") or {}).get(name)
    if isinstance(st, Mapping) and st.get("tests"):
        busbw = st.get("median_busbw_gbps")
        m.stats = (f"{st.get('tests')} domain tests, {st.get('failed', 0)} failed"
                   + (f", median {busbw:g} GB/s" if isinstance(busbw, int | float) else ""))


def rack_marks(result: RunResult, view: RunView, topology: Topology | None) -> list[RackMarks]:
    """One :class:`RackMarks` per NVLink domain of ``topology``, in its order (none without
    domains)."""
    if topology is None or not topology.domains:
        return []
    nvl = result.extra.get("nvlink")
    nvl = nvl if isinstance(nvl, Mapping) else {}
    out = []
    for d in topology.domains.values():
        m = RackMarks(d)
        _trays(m, view, nvl)
        _ports_and_switches(m, nvl)
        _rack_notes(m, nvl)
        out.append(m)
    return out
