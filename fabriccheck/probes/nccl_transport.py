"""NCCL transport per rank: the network NCCL chose (InfiniBand/RoCE or sockets) and whether its
NET channels use GPUDirect RDMA, read from the ``NCCL INFO`` lines of ``NCCL_DEBUG=INFO`` output.

What is read (wordings of NCCL 2.4 to 2.27, from NCCL's own format strings):

- ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>`` (merged devices
  ``[0]={[0] mlx5_0:1/IB, [1] mlx5_1:1/IB}``, SHARP ``mlx5_0:1/IB/SHARP``), ``NET/IB : No device
  found.``, ``NET/Socket : Using [0]eth0:10.0.0.1<0>``: the devices a process's network offers;
- ``Using network IB`` / ``Socket`` / a plugin's name (``IBext_v8``, ``AWS Libfabric``);
- channel lines: ``Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA`` (2.12+; older
  ``Channel 00 : 0[1b000] -> ...`` and ``Ring 00 : 3 -> 12 [send] via NET/IB/0``; PXN
  ``NET/IB/3(1)/GDRDMA``; 2.27 ``/GDRDMA(PCI)``; ``/Shared``), ``CollNet 00/0 : 3 [send] via
  COLLNET/IBext/0/GDRDMA``, and the non-NET ones (``via P2P/IPC``, ``via SHM/direct/direct``);
- ``NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)`` (up to 2.12) and
  ``NET/IB : GPU Direct RDMA Enabled|Disabled for HCA 0 'mlx5_0'`` (2.14+); ``GPU Direct RDMA
  Disabled for GPU 1b000 / HCA 0 (distance 5 > 3)`` (the GPU-NIC path is too long);
- ``comm 0x... rank 5 nranks 16 cudaDev 5 ...`` (which rank a process is).

Per rank: ``net`` is ``ib`` (InfiniBand and RoCE alike: NCCL's IB transport drives both),
``socket``, or a net plugin's own name as printed (``AWS Libfabric``), from its NET channel lines;
None when it has channel lines but none over NET (a single-node test: NVLink/PCIe only). Output
without channel lines falls back on ``Using network`` / the init lines, for a job over several
hosts only. ``gdr`` is True when any NET channel of the rank has ``/GDRDMA`` (a send channel may
lack it by NCCL's GDR-read policy on PCIe-only GPUs), False when none has (or, without channel
lines, when NCCL disabled GPUDirect RDMA for every HCA), None when unknown. ``hcas`` are the
devices its NET channels used (IB HCAs, or interfaces for sockets).

The same messages recur on every rank of every test (a sweep prints a few hundred distinct
texts over hundreds of thousands of lines), so a message is read once into an immutable answer
(:func:`message_action`, a bounded cache of a pure function: nothing of one output reaches
the next) and each line only applies it to its rank or process.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from fabriccheck.probes._text import NCCL_LINE_RE, clean_line
from fabriccheck.probes.results import RankTransport

IB, SOCKET = "ib", "socket"

#: a channel line: ``Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA`` and older forms
_CHANNEL_RE = re.compile(
    r"^(?:Channel|Ring) \d+(?:/\d+)? : (?P<a>\d+)(?:\[[0-9a-fA-F]+\])? -> "
    r"(?P<b>\d+)(?:\[[0-9a-fA-F]+\])?(?: \[(?P<dir>send|receive)\])? via (?P<via>.+?)\s*$")
#: ``CollNet 00/0 : 3 [send] via COLLNET/IBext/0/GDRDMA`` (``Coll 00 : 3 ...`` before 2.12)
_COLLNET_RE = re.compile(
    r"^Coll(?:Net)? \d+(?:/\d+)? : (?P<a>\d+) \[(?P<dir>send|receive)\] via (?P<via>.+?)\s*$")
#: ``NET/IB/0(1)/GDRDMA(PCI)/Shared``: network name (may hold spaces), device, proxy, flags
_NET_VIA_RE = re.compile(r"^(?:COLL)?NET/(?P<name>[^/]+)/(?P<dev>\d+)(?:\((?P<proxy>\d+)\))?"
                         r"(?P<flags>(?:/\w+(?:\(\w+\))?)*)")
#: ``GPU Direct RDMA Disabled for HCA 0 'mlx5_0'`` with ``NET/IB : `` before it
_HCA_GDR_RE = re.compile(r"^NET/[^:]+?\s?: GPU Direct RDMA (?P<state>Enabled|Disabled) for HCA "
                         r"(?P<n>\d+) '(?P<hca>[^']*)'")
#: ``GPU Direct RDMA Disabled for GPU 1b000 / HCA 0 (distance 5 > 3)``
_DIST_GDR_RE = re.compile(r"^GPU Direct RDMA (?P<state>Enabled|Disabled) for GPU \S+ / HCA \S+ "
                          r"\(distance \d+ (?:>|<=) \d+\)")
_COMM_RANK_RE = re.compile(r"\brank (?P<rank>\d+) nranks \d+ cudaDev \d+")
#: one device of ``NET/IB : Using``: ``[0]mlx5_0:1/IB`` or merged ``[0]={[0] mlx5_0:1/IB, ...}``
_IB_DEV_RE = re.compile(r"\[(?P<i>\d+)\](?:=\{(?P<merged>[^}]*)\}|(?P<name>[\w.-]+):\d+/)")
_MERGED_RE = re.compile(r"\]\s?([\w.-]+):\d+/")
#: one interface of ``NET/Socket : Using``: ``[0]eth0:10.0.0.1<0>``
_SOCK_DEV_RE = re.compile(r"\[(?P<i>\d+)\](?P<name>[^:\s\[]+):")
#: substrings one of which a transport line holds (a cheap test before any regex)
_KEYS = ("NET/", "network", "via ", "GPU Direct", "nranks")
#: what a message tells the reader (the first item of :func:`message_action`'s tuple)
IB_DEVS, IB_NONE, SOCKET_DEVS, HCA_GDR = "ib_devs", "ib_none", "socket_devs", "hca_gdr"
DISTANCE_GDR, CHANNEL, NETWORK, RANK = "distance_gdr", "channel", "network", "rank"
#: distinct messages :func:`message_action` remembers: a sweep's are few (device lists, channel
#: lines that differ by rank numbers), so hits are the rule; the bound keeps it to a few MB
MESSAGE_CACHE_SIZE = 8192


def net_kind(name: str) -> str:
    """What a network NCCL names is: ``ib`` (its IB transport, also for RoCE, and the IB plugins
    ``IBext``/``IBext_v8``), ``socket``, or the plugin's own name as printed.

    >>> net_kind("IB"), net_kind("IBext_v8"), net_kind("Socket"), net_kind("AWS Libfabric")
    ('ib', 'ib', 'socket', 'AWS Libfabric')
    """
    name = name.strip()
    low = name.lower()
    if low == "ib" or low.startswith("ibext"):
        return IB
    if low == "socket":
        return SOCKET
    return name


def parse_net_via(via: str) -> tuple[str, int, bool] | None:
    """``(network, device index, gdr)`` of a channel's ``via`` part, None for a non-NET one.

    >>> parse_net_via("NET/IB/3(1)/GDRDMA(PCI)/Shared")
    ('IB', 3, True)
    >>> parse_net_via("NET/AWS Libfabric/0"), parse_net_via("P2P/IPC/read")
    (('AWS Libfabric', 0, False), None)
    """
    m = _NET_VIA_RE.match(via)
    if m is None:
        return None
    return m["name"], int(m["dev"]), "/GDRDMA" in m["flags"]


def parse_ib_devices(msg: str) -> dict[int, str]:
    """Device index -> name from ``NET/IB : Using ...`` (merged devices joined by ``+``).

    >>> parse_ib_devices("NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/RoCE [RO]; OOB eth0:1.2.3.4<0>")
    {0: 'mlx5_0', 1: 'mlx5_3'}
    >>> parse_ib_devices("NET/IB : Using [0]={[0] mlx5_0:1/IB, [1] mlx5_1:1/IB} ; OOB ib0:x<0>")
    {0: 'mlx5_0+mlx5_1'}
    """
    body = msg.split(";", 1)[0]
    out: dict[int, str] = {}
    for m in _IB_DEV_RE.finditer(body):
        name = "+".join(_MERGED_RE.findall(m["merged"])) if m["merged"] is not None else m["name"]
        out.setdefault(int(m["i"]), name)
    return out


def parse_socket_devices(msg: str) -> dict[int, str]:
    """Interface index -> name from ``NET/Socket : Using [0]eth0:10.0.0.1<0> ...``.

    >>> parse_socket_devices("NET/Socket : Using [0]eth0:10.0.0.1<0> [1]ens1:10.1.0.1<0>")
    {0: 'eth0', 1: 'ens1'}
    """
    return {int(m["i"]): m["name"] for m in _SOCK_DEV_RE.finditer(msg)}


def rank_ranges(ranks: Iterable[int]) -> str:
    """Ranks as ranges: ``8-11, 17``.

    >>> rank_ranges([9, 8, 10, 11, 17])
    '8-11, 17'
    """
    spans: list[list[int]] = []
    for r in sorted(set(ranks)):
        if spans and spans[-1][1] == r - 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in spans)


@dataclass
class _Process:
    """What one process's network init printed (``host:pid``)."""

    ib_devs: dict[int, str] = field(default_factory=dict)
    socket_devs: dict[int, str] = field(default_factory=dict)
    ib_none: bool = False
    hca_gdr: dict[str, bool] = field(default_factory=dict)  # HCA -> GPUDirect RDMA enabled


@dataclass
class _Rank:
    """What one rank (``host:pid [cudaDev]``) printed about its channels."""

    host: str
    proc: tuple[str, str]
    rank: int | None = None
    network: str | None = None  # ``Using network X``
    #: its NET channels' distinct ``(net_kind, device, gdr)``, in first-seen order (all the
    #: judgement needs: the first kind, which kinds, which devices, any GDR)
    net: dict[tuple[str, int, bool], None] = field(default_factory=dict)
    other_channels: int = 0  # P2P / SHM channel lines
    distance_gdr: list[bool] = field(default_factory=list)  # GDR enabled per GPU/HCA distance


@dataclass
class TransportReader:
    """Collects the transport lines of one output, then answers per rank (:meth:`ranks`).

    >>> t = TransportReader()
    >>> t.feed("n2", "77", "0", "NET/IB : No device found.")
    >>> t.feed("n2", "77", "0", "NET/Socket : Using [0]eth0:10.0.0.2<0>")
    >>> t.feed("n2", "77", "0", "Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0")
    >>> t.ranks(multi_host=True)
    (RankTransport(host='n2', rank=1, net='socket', gdr=False, hcas=('eth0',)),)
    """

    procs: dict[tuple[str, str], _Process] = field(default_factory=dict)
    by_key: dict[tuple[str, str, str], _Rank] = field(default_factory=dict)
    #: (host, pid, cudaDev) -> rank from the nccl-tests ``# Rank`` lines
    header_ranks: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def note_rank(self, rank: int, host: str, pid: str, dev: str) -> None:
        """A ``#  Rank  3 Group  0 Pid 1234 on node-01 device  3 [...]`` line."""
        self.header_ranks.setdefault((host, str(pid), str(int(dev))), rank)

    def feed(self, host: str, pid: str, dev: str, msg: str) -> None:
        """One ``NCCL INFO`` line's prefix fields and message (other lines are ignored).

        The message is read once per distinct text (:func:`message_action`, cached: NCCL
        prints the same lines on every rank of every test); only applying what it says to
        this output's processes and ranks happens per line."""
        act = message_action(msg)
        if act is None:
            return
        kind = act[0]
        if kind == CHANNEL:
            r = self._rank(host, pid, dev)
            if r.rank is None:
                r.rank = act[1]
            if act[2] is None:
                r.other_channels += 1
            else:
                r.net[act[2]] = None
        elif kind == NETWORK:
            self._rank(host, pid, dev).network = act[1]
        elif kind == RANK:
            self._rank(host, pid, dev).rank = act[1]
        elif kind == DISTANCE_GDR:
            self._rank(host, pid, dev).distance_gdr.append(act[1])
        else:
            _apply_to_process(self._proc(host, pid), act)

    def _rank(self, host: str, pid: str, dev: str) -> _Rank:
        key = (host, pid, dev)
        r = self.by_key.get(key)
        if r is None:
            r = self.by_key[key] = _Rank(host, (host, pid))
        return r

    def _proc(self, host: str, pid: str) -> _Process:
        """The process's record, made on its first line (not a throwaway one per line)."""
        key = (host, pid)
        proc = self.procs.get(key)
        if proc is None:
            proc = self.procs[key] = _Process()
        return proc

    def ranks(self, multi_host: bool) -> tuple[RankTransport, ...]:
        """The transport of every rank that printed a transport line, sorted by rank.

        ``multi_host``: the job spans several hosts (without channel lines, its ranks are taken
        to use the network NCCL chose; a single host's do not use it)."""
        out = []
        for (host, pid, dev), r in self.by_key.items():
            rank = r.rank if r.rank is not None else self.header_ranks.get((host, pid, dev))
            proc = self.procs.get(r.proc)
            net, gdr, hcas = _judge_rank(r, _Process() if proc is None else proc, multi_host)
            out.append(RankTransport(host, rank, net, gdr, hcas))
        if multi_host:
            out += self._init_only_ranks()
        return tuple(sorted(out, key=lambda t: (t.rank is None, t.rank or 0, t.host)))

    def _init_only_ranks(self) -> list[RankTransport]:
        """The processes whose network init lines were seen but no rank line of theirs (NET/INIT
        only), in a job over several hosts: a rank from the ``# Rank`` lines when the process
        has exactly one. Most outputs have none, so the rank lines are grouped only then."""
        seen = {r.proc for r in self.by_key.values()}
        unseen = [(key, proc) for key, proc in self.procs.items() if key not in seen]
        if not unseen:
            return []
        by_proc: dict[tuple[str, str], list[int]] = {}
        for (host, pid, _dev), rank in self.header_ranks.items():
            by_proc.setdefault((host, pid), []).append(rank)
        out = []
        for (host, pid), proc in unseen:
            net, gdr, hcas = _judge_rank(_Rank(host, (host, pid)), proc, multi_host=True)
            if net is not None:
                ranks = by_proc.get((host, pid), [])
                out.append(RankTransport(host, ranks[0] if len(ranks) == 1 else None, net, gdr,
                                         hcas))
        return out


@functools.lru_cache(maxsize=MESSAGE_CACHE_SIZE)
def message_action(msg: str) -> tuple | None:
    """What one ``NCCL INFO`` message (the text after ``NCCL INFO``) tells the transport reader,
    None when nothing: ``(CHANNEL, local rank, (net_kind, device, gdr) or None for P2P/SHM)``,
    ``(NETWORK, name)``, ``(RANK, rank)``, ``(DISTANCE_GDR, enabled)`` for the rank;
    ``(IB_DEVS, ((index, name), ...))``, ``(SOCKET_DEVS, ...)``, ``(IB_NONE,)``,
    ``(HCA_GDR, hca, enabled)`` for its process.

    Pure and cached (:data:`MESSAGE_CACHE_SIZE`): the same texts recur on every rank and test
    of a sweep, so each is matched against the patterns once. The answer is a tuple of strings,
    ints and bools only (hashable all through), so nothing a reader does can change it for the
    next output.

    >>> message_action("Channel 00/0 : 1[1] -> 0[1] [receive] via NET/IB/1/GDRDMA")
    ('channel', 0, ('ib', 1, True))
    >>> message_action("NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:1.2.3.4<0>")
    ('ib_devs', ((0, 'mlx5_0'), (1, 'mlx5_1')))
    >>> message_action("Using network Socket"), message_action("Init COMPLETE")
    (('network', 'Socket'), None)
    """
    msg = msg.strip()
    if not any(k in msg for k in _KEYS):
        return None
    if msg.startswith(("NET/", "GPU Direct")):
        return _init_action(msg)
    if "via " in msg:
        return _channel_action(msg)
    if msg.startswith("Using network "):
        return NETWORK, msg[len("Using network "):].strip()
    m = _COMM_RANK_RE.search(msg)
    return (RANK, int(m["rank"])) if m is not None else None


def _init_action(msg: str) -> tuple | None:
    """:func:`message_action` of a network init line (``NET/...``, ``GPU Direct ...``)."""
    if msg.startswith("NET/IB : Using") or msg.startswith("NET/IB: Using"):
        return IB_DEVS, tuple(parse_ib_devices(msg).items())
    if msg.startswith("NET/IB : No device found"):
        return (IB_NONE,)
    if msg.startswith("NET/Socket : Using"):
        return SOCKET_DEVS, tuple(parse_socket_devices(msg).items())
    if (m := _HCA_GDR_RE.match(msg)) is not None:
        return HCA_GDR, m["hca"], m["state"] == "Enabled"
    if (m := _DIST_GDR_RE.match(msg)) is not None:
        return DISTANCE_GDR, m["state"] == "Enabled"
    return None


def _channel_action(msg: str) -> tuple | None:
    """:func:`message_action` of a line with ``via``: a channel line's own rank (a receive
    line names the peer first; a CollNet line names only its own rank) and NET channel."""
    m = _CHANNEL_RE.match(msg) or _COLLNET_RE.match(msg)
    if m is None:
        return None
    local = m["b"] if m.re is _CHANNEL_RE and m["dir"] == "receive" else m["a"]
    net = parse_net_via(m["via"])
    return CHANNEL, int(local), None if net is None else (net_kind(net[0]), net[1], net[2])


def _apply_to_process(proc: _Process, act: tuple) -> None:
    """A process-wide :func:`message_action` (devices, no IB device, GDR per HCA) into what
    one output's process printed."""
    kind = act[0]
    if kind == IB_DEVS:
        proc.ib_devs.update(act[1])
    elif kind == SOCKET_DEVS:
        proc.socket_devs.update(act[1])
    elif kind == IB_NONE:
        proc.ib_none = True
    else:
        proc.hca_gdr[act[1]] = act[2]


def _judge_rank(r: _Rank, proc: _Process, multi_host: bool
                ) -> tuple[str | None, bool | None, tuple[str, ...]]:
    """``(net, gdr, hcas)`` of one rank: from its NET channels, else from what its process's
    network init printed (a job over several hosts only)."""
    if r.net:
        kinds = [kind for kind, _, _ in r.net]
        net = SOCKET if SOCKET in kinds else kinds[0]
        devs = proc.socket_devs if net == SOCKET else proc.ib_devs
        hcas = tuple(dict.fromkeys(devs.get(d, f"#{d}") for kind, d, _ in r.net if kind == net))
        gdr = False if net == SOCKET else any(g for kind, _, g in r.net if kind == net)
        return net, gdr, hcas
    if r.other_channels or not multi_host:
        return None, None, ()
    name = r.network
    if name is None and proc.ib_devs:
        name = "IB"
    elif name is None and (proc.socket_devs or proc.ib_none):
        name = "Socket"
    if name is None:
        return None, None, ()
    net = net_kind(name)
    if net == SOCKET:
        return net, False, tuple(proc.socket_devs.values())
    hcas = tuple(proc.ib_devs.values()) if net == IB else ()
    gdr: bool | None = None
    flags = [proc.hca_gdr[h] for h in hcas if h in proc.hca_gdr] or list(proc.hca_gdr.values())
    if r.distance_gdr:
        gdr = any(r.distance_gdr)
    elif flags:
        gdr = any(flags)
    return net, gdr, hcas


def read_transport(text: str) -> tuple[RankTransport, ...]:
    """Every rank's transport in a whole output (NCCL INFO lines anywhere, launcher prefixes
    stripped); the nccl-tests parser feeds the same reader line by line.

    >>> read_transport('''n1:10:10 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:x<0>
    ... n1:10:11 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0/GDRDMA
    ... n2:20:21 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0''')[0]
    RankTransport(host='n2', rank=0, net='ib', gdr=False, hcas=('#0',))
    """
    reader = TransportReader()
    hosts: set[str] = set()
    for raw in text.splitlines():
        line = clean_line(raw)
        if "NCCL " not in line:
            continue
        m = NCCL_LINE_RE.search(line)
        if m is not None:
            hosts.add(m["host"])
            reader.feed(m["host"], m["pid"], m["dev"], m["msg"])
    return reader.ranks(multi_host=len(hosts) > 1)


def transport_summary(ranks: Sequence[RankTransport]) -> dict:
    """The run-level view of :func:`read_transport`'s ranks: ``net`` (``socket`` when any rank
    used sockets, else the network the ranks used, None without any NET channel),
    ``socket_hosts`` and ``no_gdr_hosts`` (hosts with IB ranks whose NET channels all lacked
    GPUDirect RDMA).

    >>> transport_summary([RankTransport("a", 0, "ib", True, ("mlx5_0",)),
    ...                    RankTransport("b", 1, "socket", False, ("eth0",))])
    {'net': 'socket', 'socket_hosts': ['b'], 'no_gdr_hosts': []}
    """
    nets = [r.net for r in ranks if r.net is not None]
    net = SOCKET if SOCKET in nets else (nets[0] if nets else None)
    return {
        "net": net,
        "socket_hosts": sorted({r.host for r in ranks if r.net == SOCKET}),
        "no_gdr_hosts": sorted({r.host for r in ranks if r.net == IB and r.gdr is False}),
    }
