"""Thresholds follow each part's own speed: a test is judged against the slowest line rate on
its path, not only the spec's NIC speed.

A spec's floors assume NICs of ``spec.nic_gbps``. On a fabric with slower parts (EDR HCAs on an
imported storage fabric, a 200G link in a 400G fabric) a flow can never reach that floor, and
judging it so blames every slow-but-healthy part. Each pair test's floor and expected value are
scaled by ``min(NIC and link Gb/s on its path) / spec.nic_gbps`` when that is below 1. An
nccl collective over fewer rails than the spec's NICs per node (one per GPU: a 2-rail fabric
judged with an 8-NIC spec) is scaled by ``rails / spec NICs`` too: its busbw is the sum over
its rails.
"""

from __future__ import annotations

from dataclasses import replace

from fabriccheck.inference.table import below_floor
from fabriccheck.models import FAIL, PASS, Observation
from fabriccheck.topology.view import FabricView


def path_gbps(o: Observation, view: FabricView) -> float | None:
    """The slowest NIC or link a test's flows use (None without flows)."""
    topo = view.topology
    rates = []
    for f in o.test.flows:
        rates += [topo.nics[e].gbps for e in (f.src, f.dst) if e in topo.nics]
        rates += [topo.link_gbps(lk) for lk in view.flow_links(f)[1] if lk in topo.links]
    rates = [r for r in rates if r and r > 0]
    return min(rates) if rates else None


def at_line_rate(o: Observation, view: FabricView, spec_gbps: float,
                 spec_rails: int = 0) -> Observation:
    """``o`` judged against floors scaled to its path's line rate and, for nccl, to its rails
    (unchanged at full speed on all of the spec's rails)."""
    if o.floor is None or o.value is None or o.unit == "us" or not spec_gbps:
        return o
    rate = path_gbps(o, view)
    rails = len(o.test.params.rails or ()) if o.test.flows else 0
    rail_ratio = rails / spec_rails if o.test.probe == "nccl" and 0 < rails < spec_rails \
        else 1.0
    if (rate is None or rate >= spec_gbps * 0.999) and rail_ratio == 1.0:
        return o
    rate = spec_gbps if rate is None else min(rate, spec_gbps)
    ratio = rate / spec_gbps * rail_ratio
    floor = o.floor * ratio
    expected = o.expected * ratio if o.expected is not None else None
    if o.status == FAIL and below_floor(o):
        if o.value >= floor:
            return replace(o, status=PASS, floor=floor, expected=expected, reason=(
                f"{o.value:.1f} {o.unit}: at its path's line rate ({rate:g} Gb/s"
                + (f" x {rails} rail(s)" if rail_ratio < 1 else "") + f", floor {floor:.3g})"))
        return replace(o, floor=floor, expected=expected,
                       reason=f"{o.value:.1f} {o.unit} below floor {floor:g}")
    return replace(o, floor=floor, expected=expected)
