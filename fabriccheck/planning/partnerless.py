"""Tests for a NIC whose rail has no partner in scope.

The sweep pairs NICs rail by rail. A NIC alone on its rail (a host whose extra ports no other
host has, one host in the scope, a rail index that only means "port 2" on an imported fabric)
would stay untested and the run could never pass. A real operator still has tests for it, in
this order of preference:

1. **Another rail, another node** — on a fabric where the rails meet (one InfiniBand subnet, a
   routed Ethernet fabric) any two ports with a path can run ``ib_write_bw``; a known-good port
   on the same leaf first (the test then crosses no switch link).
2. **Another NIC of the same node**, through the switch (``ib_write_bw -d <nic_a>`` to the
   address of ``<nic_b>`` on the same host): both NICs and both cables are on the path.
3. **HCA loopback** (``ib_write_bw -d <nic>`` to its own address): RDMA traffic through the
   NIC's own engine and PCIe, *not* its cable or switch port. Only with an RDMA probe: an
   ``iperf3`` to the host's own address never leaves the kernel, so with TCP the NIC stays
   untested.

A passing test of any of these clears the NIC (it was tested: its own path); the verdict
says which kind of test it was (``inference.verdicts``). A NIC with no test at all stays
``untested`` and the run cannot exit 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from fabriccheck.models import Test, nic_node
from fabriccheck.planning.build import RoundBuilder

#: probes that exercise the NIC when both ends are the same port (RDMA through the HCA)
LOOPBACK_PROBES = ("ib_write_bw",)


def plan_partnerless_nic(nic: str, b: RoundBuilder, good_nics: set[str],
                         in_scope: Sequence[str], purpose: str = "sweep", *,
                         only_good: bool = False, receive: bool = False,
                         avoid: set[str] | None = None) -> Test | None:
    """One test of ``nic`` (its rail has no partner in ``in_scope``): another rail, another
    NIC of its node, or HCA loopback, in that order (see the module doc). None when nothing
    fits this round.

    ``only_good`` keeps to proven-good partners (a confirmation: a failure then pins ``nic``);
    ``receive`` makes ``nic`` the receiving end; ``avoid`` are partner NICs not to use again
    (updated with the one chosen).
    """
    topo = b.view.topology
    att = topo.attachment
    node = nic_node(nic)
    scope = set(in_scope) | {node}
    avoid = avoid if avoid is not None else set()
    others = [x for x in topo.nics if x != nic and nic_node(x) in scope and x in att
              and x not in avoid and (x in good_nics or not only_good)]
    # known-good first, then same leaf (no switch link on the path), then other nodes before
    # the node's own NICs (a partner's failure is easier to tell from the suspect's)
    others.sort(key=lambda x: (x not in good_nics, att.get(x) != att.get(nic),
                               nic_node(x) == node, x))
    for x in others[:256]:
        src, dst = (x, nic) if receive else (nic, x)
        if not (b.nic_free(src, "tx") and b.nic_free(dst, "rx")):
            continue
        if not topo.candidate_paths(src, dst):
            continue  # rails that never meet (separate planes)
        t = b.add_nic_flow(src, dst, purpose)
        if t is not None:
            avoid.add(x)
            return t
    if nic not in avoid and (t := plan_loopback(nic, b, purpose)) is not None:
        avoid.add(nic)
        return t
    return None


def plan_loopback(nic: str, b: RoundBuilder, purpose: str = "confirm") -> Test | None:
    """An HCA loopback test of ``nic`` (the NIC alone: no cable, no switch, no partner), when
    the pair probe can run one and the NIC is free this round; else None."""
    probe = b.policy.pair_probe if b.policy.per_rail else "ib_write_bw"
    return b.add_nic_flow(nic, nic, purpose) if probe in LOOPBACK_PROBES else None
