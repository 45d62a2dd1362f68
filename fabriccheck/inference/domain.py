"""Localize what the NVLink-domain level found (pure; docs/nvl72.md "How a verdict is reached").

- **Tray**: every group it was in failed and blamed it (the halves and quarters of two
  carvings intersected); a tray NCCL's lines named in two failing tests (an IMEX tray's WARN,
  a tray in another clique, a tray whose channels rode the network) is bad with that cause.
- **GPU**: a candidate tray runs once per GPU index with two proven-good trays of its rack;
  the GPUs that fail are named (``node-060/gpu0``); every GPU failing is the tray; none
  failing leaves it a suspect (never drained on what noise could explain).
- **Port / chip / switch tray** over the fixed wiring (:mod:`fabriccheck.topology.nvlink`):
  a tray's inactive ports (its node check) are named with the chip they go to
  (``node-003/gpu2/nvl17 -> rack-0-nvsw-8/1``); the same ports inactive on most trays of a rack
  are the switch side: the switch tray when both its chips' ports are down (``rack-1-nvsw-3``),
  else the chip; no compute tray is drained for it.
- **Apart from the NICs**: a tray slow in the domain and fine over the network is an NVLink
  fault; bad over the network too, the tray itself (``node``); fine in the domain and slow over
  the network is the scale-out ladder's business, never reported here.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field

from fabriccheck.inference.domain_state import DomainState, TrayEvidence
from fabriccheck.inference.nvl_hints import NvlHints
from fabriccheck.topology.model import Topology
from fabriccheck.topology.nvlink import NvlDomain

__all__ = ["DomainReport", "TrayVerdict", "localize_domains"]

#: share of a rack's trays reporting the same ports inactive on every GPU: the switch side
SWITCH_SHARE = 0.5
_CAUSE = {"imex": "multi-node NVLink not working on it (NCCL WARN: IMEX)",
          "clique": "its GPUs in another NVLink clique (NCCL MNNVL cliqueId)",
          "network": "its channels rode the network in the domain test (configuration)"}


@dataclass
class TrayVerdict:
    """One tray the domain level judged: ``state`` bad | suspect; ``fault`` nvlink, imex,
    clique, network (configuration) or node (slow over the network too)."""

    tray: str
    rack: str
    state: str
    fault: str
    reason: str
    gpus: list[str] = field(default_factory=list)
    ports: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)


@dataclass
class DomainReport:
    """The domain level's findings for the run result (``nvlink``)."""

    trays: list[TrayVerdict] = field(default_factory=list)
    switches: list[dict] = field(default_factory=list)
    ports: list[dict] = field(default_factory=list)
    rack_suspects: list[dict] = field(default_factory=list)
    config: list[str] = field(default_factory=list)
    racks: dict[str, dict] = field(default_factory=dict)

    @property
    def components(self) -> list[str]:
        """Every component named, most specific first per tray: ports, GPUs, trays, switches."""
        out = [p["port"] for p in self.ports]
        for t in self.trays:
            out += [*t.gpus] or [t.tray]
        out += [s["name"] for s in self.switches]
        return list(dict.fromkeys(out))

    def to_json(self) -> dict:
        return {"racks": self.racks, "trays": [asdict(t) for t in self.trays],
                "switches": self.switches, "ports": self.ports,
                "rack_suspects": self.rack_suspects, "config": self.config,
                "components": self.components}


def localize_domains(state: DomainState, topology: Topology, hints: NvlHints,
                     over_network: frozenset[str] = frozenset()) -> DomainReport:
    """The domain level's verdicts (``over_network``: trays the scale-out ladder found bad as
    nodes, not for a NIC: a tray slow in both is the tray itself)."""
    rep = DomainReport(racks=_rack_summary(state))
    explained = _switches(rep, state, topology, hints)
    for tray in state.candidates():
        ev = state.trays[tray]
        if ev.rack in explained and not state.good(ev.rack):
            continue  # the switch side slowed every group of the rack: nothing to localize
        tv = _judge_candidate(ev, topology.domains.get(ev.rack), hints, tray in over_network)
        rep.trays.append(tv)
    rep.ports = _ports(topology, hints, {t.tray: t for t in rep.trays}, set(explained))
    _rack_wide(rep, state, explained)
    return rep


def _rack_summary(state: DomainState) -> dict[str, dict]:
    out = {}
    for rack, tests in sorted(state.racks.items()):
        vals = [v for _, ok, v in tests if ok and v is not None]
        out[rack] = {"tests": len(tests), "failed": sum(not ok for _, ok, _ in tests),
                     "median_busbw_gbps": round(statistics.median(vals), 1) if vals else None}
    return out


def _switches(rep: DomainReport, state: DomainState, topology: Topology,
              hints: NvlHints) -> set[str]:
    """Switch-side verdicts per rack; returns the racks they explain."""
    explained: set[str] = set()
    for name, d in sorted(topology.domains.items()):
        seen = [t for t in d.trays if t in state.trays or t in hints.switch_side]
        votes = Counter(hints.switch_side[t] for t in seen if hints.switch_side.get(t))
        if not votes:
            continue
        ports, n = votes.most_common(1)[0]
        if n < 2 or n < SWITCH_SHARE * len(seen):
            continue
        explained.add(name)
        for comp in _switch_components(d, ports):
            rep.switches.append({"name": comp, "rack": name, "ports": sorted(ports),
                                 "reason": _switch_reason(d, ports, n, len(seen), rep.racks)})
    return explained


def _switch_components(d: NvlDomain, ports: frozenset[int]) -> list[str]:
    """The switch trays whose chips all lost their ports, else the chips."""
    chips = sorted({d.chip_of(p) for p in ports})
    out = []
    for tray in sorted({t for t, _ in chips}):
        mine = [k for t, k in chips if t == tray]
        if len(mine) == d.chips_per_switch_tray:
            out.append(f"{d.name}-nvsw-{tray}")
        else:
            out += [d.chip_name(tray * d.chips_per_switch_tray + k) for k in mine]
    return out


def _switch_reason(d: NvlDomain, ports: frozenset[int], n: int, seen: int,
                   racks: dict[str, dict]) -> str:
    text = (f"NVLink {', '.join(map(str, sorted(ports)))} inactive on every GPU of {n} of "
            f"{seen} trays of {d.name}: those ports are cabled to this switch side")
    mine = racks.get(d.name, {}).get("median_busbw_gbps")
    others = [r["median_busbw_gbps"] for k, r in racks.items()
              if k != d.name and r.get("median_busbw_gbps")]
    if mine and others:
        med = statistics.median(others)
        text += (f"; the rack's domain tests at {mine:g} GB/s, "
                 f"{100 * (1 - mine / med):.0f}% under the other racks' {med:g}")
    return text + "; no compute tray drained"


def _judge_candidate(ev: TrayEvidence, d: NvlDomain | None, hints: NvlHints,
                     slow_over_network: bool) -> TrayVerdict:
    named = Counter(ev.named.values())
    tests = ", ".join(ev.blamed[:4]) + (f" (+{len(ev.blamed) - 4} more)" if len(ev.blamed) > 4
                                        else "")
    base = f"failed every domain group it was in ({len(ev.blamed)}: {tests})"
    if named and sum(named.values()) >= 2:
        cause = named.most_common(1)[0][0]
        return TrayVerdict(ev.tray, ev.rack, "bad", cause, f"{_CAUSE[cause]}; {base}",
                           evidence=list(ev.blamed))
    failing = sorted(g for g, runs in ev.gpu.items() if runs and not any(ok for _, ok in runs))
    passing = sorted(g for g, runs in ev.gpu.items() if any(ok for _, ok in runs))
    gpu_ids = [i for runs in ev.gpu.values() for i, _ in runs]
    fault = "node" if slow_over_network else "nvlink"
    where = " and over the network too: the tray itself" if slow_over_network else \
        ", fine over the network: NVLink"
    if failing and passing:
        gpus = [f"{ev.tray}/gpu{g}" for g in failing]
        return TrayVerdict(ev.tray, ev.rack, "bad", fault,
                           f"GPU {', '.join(map(str, failing))} slow with proven-good trays "
                           f"of its rack, the others pass{where}; {base}", gpus,
                           _tray_ports(ev.tray, d, hints, failing), [*ev.blamed, *gpu_ids])
    if failing:
        return TrayVerdict(ev.tray, ev.rack, "bad", fault,
                           f"every GPU failed or slow with proven-good trays of its rack"
                           f"{where}; {base}",
                           [], _tray_ports(ev.tray, d, hints, failing), [*ev.blamed, *gpu_ids])
    why = ("each GPU passed with proven-good trays of its rack" if passing
           else "no proven-good trays of its rack to localize with")
    return TrayVerdict(ev.tray, ev.rack, "suspect", fault, f"{base}; {why}: not drained",
                       evidence=[*ev.blamed, *gpu_ids])


def _tray_ports(tray: str, d: NvlDomain | None, hints: NvlHints, gpus: list[int]) -> list[str]:
    if d is None:
        return []
    own = hints.ports.get(tray, {})
    return [f"{tray}/gpu{g}/nvl{p} -> {d.chip_name(p % d.chips)}"
            for g in gpus for p in sorted(own.get(g, ()))]


def _ports(topology: Topology, hints: NvlHints, judged: dict[str, TrayVerdict],
           explained: set[str]) -> list[dict]:
    """Every tray's own inactive ports (not the switch side), with the chip each goes to."""
    out = []
    for tray, per_gpu in sorted(hints.ports.items()):
        d = topology.domain_of(tray)
        if d is None:
            continue
        side = hints.switch_side.get(tray, frozenset()) if d.name in explained else frozenset()
        for g, ports in sorted(per_gpu.items()):
            for p in sorted(set(ports) - side):
                out.append({"port": f"{tray}/gpu{g}/nvl{p}", "chip": d.chip_name(p % d.chips),
                            "tray": tray, "gpu": g,
                            "domain": "failed" if tray in judged else "within the bar"})
    return out


def _rack_wide(rep: DomainReport, state: DomainState, explained: set[str]) -> None:
    """Racks with failing tests and no proven-good tray (nothing to localize against), and
    tests that rode the network that no convicted tray explains (a configuration fault)."""
    convicted = {t.tray for t in rep.trays if t.fault in ("imex", "clique", "network")}
    for rack, tests in sorted(state.racks.items()):
        failed = [tid for tid, ok, _ in tests if not ok]
        if failed and not state.good(rack) and rack not in explained:
            rep.rack_suspects.append({"rack": rack, "failed": failed,
                                      "reason": "every domain test of the rack failed: no "
                                                "tray proven good (NVSwitch trays, fabric "
                                                "manager or the domain's configuration)"})
    for tray, ev in sorted(state.trays.items()):
        if "network" in ev.named.values() and tray not in convicted:
            tid = next(t for t, why in ev.named.items() if why == "network")
            rep.config.append(f"{ev.rack}: domain test {tid} rode the network on {tray} "
                              "(NCCL channels via NET): the NVLink domain is misconfigured "
                              "(NCCL_MNNVL_ENABLE, IMEX, fabric manager)")
