"""NVLink domains read from every tray's ``nvidia-smi -q`` (pure): trays whose GPUs report the same
fabric ``ClusterUUID`` and ``CliqueId`` share a domain (NVIDIA/nccl#1301: two GPUs share
multi-node NVLink exactly when both match).

A tray whose GPUs report no cluster, an all-zero one (single-node NVSwitch systems) or
disagree among themselves is left out and named in ``unplaced`` with the reason. Domains are
named ``rack-0`` … in the order of their first tray (sorted by name); the switch shape is the
NVL72's unless given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from fabriccheck.topology.nvlink import NvlDomain

_CLUSTER = re.compile(r"^\s+ClusterUUID\s*:\s*(\S+)\s*$", re.M)
_CLIQUE = re.compile(r"^\s+CliqueId\s*:\s*(\d+)\s*$", re.M)
_ZERO = re.compile(r"^[0-]+$")


@dataclass
class ImportedDomains:
    """The domains found, and the trays left out (tray -> why)."""

    domains: dict[str, NvlDomain] = field(default_factory=dict)
    unplaced: dict[str, str] = field(default_factory=dict)


def domains_from_smi(outputs: Mapping[str, str], *, switch_trays: int = 9,
                     chips_per_switch_tray: int = 2, ports_per_gpu: int = 18) -> ImportedDomains:
    """Group trays into NVLink domains by the fabric fields of their ``nvidia-smi -q``.

    >>> q = "    Fabric\\n        CliqueId : 32766\\n        ClusterUUID : 9c6f5af3-53bf\\n"
    >>> got = domains_from_smi({"t2": q * 4, "t1": q * 4, "h100": "no fabric"})
    >>> got.domains["rack-0"].trays, got.domains["rack-0"].gpus_per_tray, sorted(got.unplaced)
    (('t1', 't2'), 4, ['h100'])
    """
    groups: dict[tuple[str, str], list[tuple[str, int]]] = {}
    out = ImportedDomains()
    for tray in sorted(outputs):
        text = outputs[tray]
        clusters, cliques = _CLUSTER.findall(text), _CLIQUE.findall(text)
        keys = set(zip(clusters, cliques, strict=False))
        if not clusters or all(_ZERO.match(c) for c in clusters):
            out.unplaced[tray] = "no NVLink cluster (ClusterUUID absent or all zeros)"
        elif len(keys) != 1 or len(clusters) != len(cliques):
            out.unplaced[tray] = "its GPUs disagree: " + ", ".join(sorted(
                f"{c}/{q}" for c, q in keys))
        else:
            groups.setdefault(next(iter(keys)), []).append((tray, len(clusters)))
    for k, trays in enumerate(sorted(groups.values(), key=lambda ts: ts[0][0])):
        gpus = max(n for _, n in trays)
        name = f"rack-{k}"
        out.domains[name] = NvlDomain(name, tuple(t for t, _ in trays), gpus, switch_trays,
                                      chips_per_switch_tray, ports_per_gpu)
    return out
