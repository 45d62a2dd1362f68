"""NVLink-domain collectives: how nccl-tests run over a multi-node NVLink domain (the network
off), and what NCCL's INFO/WARN lines prove about the transport they used (pure).

Run (:func:`mnnvl_env`): ``NCCL_MNNVL_ENABLE=1`` (multi-node NVLink forced on: NCCL fails rather
than fall back when the clique cannot share memory), ``NCCL_NVLS_ENABLE=1`` (NVLink SHARP in
the NVSwitches), ``NCCL_IB_DISABLE=1`` (no InfiniBand/RoCE transport), ``NCCL_P2P_LEVEL=NVL``
(peer-to-peer only over NVLink), ``NCCL_DEBUG=INFO`` with ``NCCL_DEBUG_SUBSYS=INIT,NET``; no
``NCCL_ALGO`` (NVLS is the domain's algorithm) and no ``NCCL_IB_HCA``. A per-GPU test runs one
rank per tray on one GPU index (``CUDA_VISIBLE_DEVICES``).

Read (:func:`read_mnnvl`), in NCCL's own wordings (``src/init.cc``, ``src/mnnvl.cc``):

- ``MNNVL busId 0x1801000 fabric UUID 814d....b5b7 cliqueId 0x7ffe state 3 healthMask 0x0``:
  each rank's fabric clique;
- ``MNNVL 1 cliqueId 7ffe cliqueSize 72 cliqueRank 5`` (2.27+: ``... nvlDomainSize 72``):
  multi-node NVLink on for the rank, the size of its clique;
- ``NVLS multicast support is available on dev 0 (NVLS_NCHANNELS 16)``;
- channel lines ``Channel 00/0 : 4[0] -> 3[3] via P2P/MNNVL`` (NVLink across trays), ``via
  P2P/CUMEM/read`` (inside a tray), ``via NET/Socket/0`` or ``via NET/IB/0/GDRDMA`` (the
  network: what a domain test must never use);
- ``NCCL WARN MNNVL (cliqueSize 72) is available but not working on this system. Check the
  IMEX configuration (nvidia-imex-ctl -N). ...`` (the tray cannot export/import fabric memory).

The transport is **proven** when the output has channel lines and none of them rides NET.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from fabriccheck.probes._text import NCCL_LINE_RE, clean_line

__all__ = ["MNNVL_ENV", "MnnvlReading", "mnnvl_env", "read_mnnvl"]

#: what a domain test adds to the site's NCCL environment
MNNVL_ENV = {"NCCL_MNNVL_ENABLE": "1", "NCCL_NVLS_ENABLE": "1", "NCCL_IB_DISABLE": "1",
             "NCCL_P2P_LEVEL": "NVL", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
#: what a domain test must not inherit from the scale-out collectives
_DROP = ("NCCL_ALGO", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX")

_BUSID_RE = re.compile(r"^MNNVL busId \S+ fabric UUID (?P<uuid>\S+) "
                       r"cliqueId (?P<clique>0x[0-9a-fA-F]+) state (?P<state>\d+)")
_ON_RE = re.compile(r"^MNNVL (?P<on>\d) cliqueId (?P<clique>[0-9a-fA-F]+) cliqueSize (?P<size>\d+)")
_VIA_RE = re.compile(r"^(?:Channel|Ring) \d+(?:/\d+)? : \d+(?:\[[0-9a-fA-F]+\])? -> "
                     r"\d+(?:\[[0-9a-fA-F]+\])?(?: \[(?:send|receive)\])? via (?P<via>\S+)")
_NVLS_RE = re.compile(r"^NVLS multicast support is available")
_IMEX_WARN_RE = re.compile(r"MNNVL \(cliqueSize \d+\) is available but not working")


def mnnvl_env(env: Mapping[str, str], gpu: int | None = None) -> dict[str, str]:
    """``env`` (a scale-out nccl-tests environment) made a domain test's.

    >>> e = mnnvl_env({"NCCL_ALGO": "Ring", "NCCL_IB_HCA": "=mlx5_0:1", "X": "1"}, gpu=2)
    >>> sorted(e)[:3], e["CUDA_VISIBLE_DEVICES"], "NCCL_ALGO" in e
    (['CUDA_VISIBLE_DEVICES', 'NCCL_DEBUG', 'NCCL_DEBUG_SUBSYS'], '2', False)
    """
    out = {k: v for k, v in env.items() if k not in _DROP}
    out.update(MNNVL_ENV)
    if gpu is not None:
        out["CUDA_VISIBLE_DEVICES"] = str(gpu)
    return out


@dataclass
class MnnvlReading:
    """What one domain test's NCCL lines say.

    ``cliques`` host -> the clique ids its ranks registered in; ``mnnvl_off`` hosts whose ranks
    printed ``MNNVL 0``; ``channels`` transport (``P2P/MNNVL``, ``NET/Socket`` ...) -> lines;
    ``net_hosts`` hosts with a channel over the network; ``imex_hosts`` hosts whose ranks warned
    that multi-node NVLink is not working (IMEX); ``nvls`` NVLS multicast available.
    """

    cliques: dict[str, set[str]] = field(default_factory=dict)
    mnnvl_off: set[str] = field(default_factory=set)
    channels: dict[str, int] = field(default_factory=dict)
    net_hosts: set[str] = field(default_factory=set)
    imex_hosts: set[str] = field(default_factory=set)
    nvls: bool = False

    @property
    def network(self) -> bool:
        """Any channel rode the network (NET/IB, NET/Socket or a net plugin)."""
        return any(v.startswith(("NET/", "COLLNET/")) for v in self.channels)

    @property
    def proven(self) -> bool:
        """Channel lines are present and none rides the network."""
        return bool(self.channels) and not self.network

    def odd_clique_hosts(self) -> set[str]:
        """Hosts whose ranks sit in a clique other than the majority's (by host count)."""
        counts: dict[str, int] = {}
        for ids in self.cliques.values():
            for c in ids:
                counts[c] = counts.get(c, 0) + 1
        if len(counts) < 2:
            return set()
        major = max(sorted(counts), key=counts.__getitem__)
        return {h for h, ids in self.cliques.items() if ids - {major}}

    def to_json(self) -> dict:
        return {"proven": self.proven, "network": self.network, "nvls": self.nvls,
                "channels": dict(sorted(self.channels.items())),
                "net_hosts": sorted(self.net_hosts), "imex_hosts": sorted(self.imex_hosts),
                "odd_clique_hosts": sorted(self.odd_clique_hosts()),
                "mnnvl_off": sorted(self.mnnvl_off)}


def read_mnnvl(text: str) -> MnnvlReading:
    """The transport facts of a domain test's output (any launcher prefix stripped).

    >>> r = read_mnnvl("n1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via P2P/MNNVL\\n"
    ...                "n2:3:4 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] via NET/Socket/0\\n")
    >>> r.proven, sorted(r.net_hosts), r.channels["P2P/MNNVL"]
    (False, ['n2'], 1)
    """
    out = MnnvlReading()
    for raw in text.splitlines():
        if "NCCL" not in raw:
            continue
        m = NCCL_LINE_RE.search(clean_line(raw))
        if m is None:
            continue
        _read_line(out, m.group("host"), m.group("level"), m.group("msg").strip())
    return out


def _read_line(out: MnnvlReading, host: str, level: str, msg: str) -> None:
    if level == "WARN":
        if _IMEX_WARN_RE.search(msg):
            out.imex_hosts.add(host)
        return
    m = _VIA_RE.match(msg)
    if m:
        via = m.group("via")
        kind = "/".join(via.split("/")[:2])
        out.channels[kind] = out.channels.get(kind, 0) + 1
        if via.startswith(("NET/", "COLLNET/")):
            out.net_hosts.add(host)
        return
    m = _BUSID_RE.match(msg)
    if m:
        out.cliques.setdefault(host, set()).add(str(int(m.group("clique"), 16)))
        return
    m = _ON_RE.match(msg)
    if m and m.group("on") == "0":
        out.mnnvl_off.add(host)
    elif _NVLS_RE.match(msg):
        out.nvls = True
