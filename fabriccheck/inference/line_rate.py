"""Thresholds follow each part's own speed: a test is judged against the slowest line rate on
its path, not only the spec's NIC speed.

A spec's floors assume NICs of ``spec.nic_gbps``. On a fabric with slower parts (EDR HCAs on an
imported storage fabric, a 200G link in a 400G fabric) a flow can never reach that floor, and
judging it so blames every slow-but-healthy part. Each pair test's floor and expected value are
scaled by ``min(NIC and link Gb/s on its path) / spec.nic_gbps`` when that is below 1.
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


def at_line_rate(o: Observation, view: FabricView, spec_gbps: float) -> Observation:
    """``o`` judged against floors scaled to its path's line rate (unchanged at full speed)."""
    if o.floor is None or o.value is None or o.unit == "us" or not spec_gbps:
        return o
    rate = path_gbps(o, view)
    if rate is None or rate >= spec_gbps * 0.999:
        return o
    ratio = rate / spec_gbps
    floor = o.floor * ratio
    expected = o.expected * ratio if o.expected is not None else None
    if o.status == FAIL and below_floor(o):
        if o.value >= floor:
            return replace(o, status=PASS, floor=floor, expected=expected, reason=(
                f"{o.value:.1f} {o.unit}: at its path's line rate ({rate:g} Gb/s, "
                f"floor {floor:.3g})"))
        return replace(o, floor=floor, expected=expected,
                       reason=f"{o.value:.1f} {o.unit} below floor {floor:g}")
    return replace(o, floor=floor, expected=expected)
