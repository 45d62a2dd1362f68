"""Pinned 5-tuples for RoCE pair tests: the ports that fix a flow's ECMP path (pure).

An ECMP switch hashes a flow's 5-tuple; with its source and destination port fixed, a flow's
path is fixed too, and a traceroute with the same 5-tuple reveals it
(:mod:`fabriccheck.learn_paths`). The planner cannot choose a path (the hash is the switches'),
so it *varies* source ports: each test gets its own, spread uniformly over the range, so the
flows of a round land on the equal-cost members like independent draws.

- ``ib_write_bw`` (RoCEv2): UDP destination port 4791 (fixed by the protocol), source port in
  49152-65535 (set through perftest's ``--flow_label``; see ``probes.commands``);
- ``iperf3`` (TCP): destination port 5201-7200, source port (``--cport``) 10000-29999, below
  Linux's ephemeral range so a pinned port does not collide with the hosts' own connections.
"""

from __future__ import annotations

import hashlib

ROCE_UDP_PORT = 4791
ROCE_SPORTS = (49152, 65535)
TCP_SPORTS = (10000, 29999)
TCP_DPORTS = (5201, 7200)
PINNABLE = ("ib_write_bw", "iperf3")


def _draw(lo: int, hi: int, *parts: object) -> int:
    data = "\x1f".join(str(p) for p in parts).encode()
    h = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")
    return lo + h % (hi - lo + 1)


def pinned_ports(probe: str, test_id: str, seed: int = 0) -> dict[str, int]:
    """``{"sport", "dport"}`` for a pair test of ``probe`` ({} when the probe cannot be pinned).

    >>> pinned_ports("ib_write_bw", "r2-t17", 5)["dport"]
    4791
    >>> 10000 <= pinned_ports("iperf3", "r2-t17")["sport"] <= 29999
    True
    >>> pinned_ports("nccl", "r2-t1")
    {}
    """
    if probe == "ib_write_bw":
        return {"sport": _draw(*ROCE_SPORTS, seed, test_id, "sport"), "dport": ROCE_UDP_PORT}
    if probe == "iperf3":
        return {"sport": _draw(*TCP_SPORTS, seed, test_id, "sport"),
                "dport": _draw(*TCP_DPORTS, seed, test_id, "dport")}
    return {}
