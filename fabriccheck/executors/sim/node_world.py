"""One simulated node's world for the preflight: its injected faults and real-world background.

Real healthy nodes are not spotless, so by default (``noise: {background: default}``) every
simulated node gets, drawn deterministically from ``stable_hash(seed, node, ...)`` (same seed,
same node: same world):

==========================================================  ============  =====================
background                                                  share         seen in
==========================================================  ============  =====================
uptime of 1-60 days (boot = run start - uptime)             every node    /proc/uptime, stamps
mlx5 boot lines: firmware version, PCIe bandwidth, cable    every node    dmesg
``Detected insufficient power on the PCIe slot (27W)``      10% of nodes  dmesg (on every NIC)
``ACCESS_REG(0x805) ... failed, status bad parameter``      20% of nodes  dmesg (1-3, user tools)
application Xid 13, 31, 43 or 45, 2-20 h before the run     5% of nodes   dmesg
idle GPUs trained down to PCIe gen 1 of their max           70% of nodes  nvidia-smi -q
``Idle : Active`` clock-event reason                        idle GPUs     nvidia-smi -q
``SW Power Cap : Active`` instead                           10% of GPUs   nvidia-smi -q
aggregate correctable ECC (SRAM/DRAM) of 1-5                5% of GPUs    nvidia-smi -q
symbol errors since boot, 0-5 per day of uptime             every port    perfquery, ethtool -S
one link-down since boot (a retrain)                        10% of ports  perfquery, ethtool -S
==========================================================  ============  =====================

Every rate is far below any warn threshold: a careful judge finds nothing to drain. With
``background: none`` only the uptime is kept (the counters' time base) and the outputs are the
spotless ones of a lab machine.

Faults that land on "one GPU" of a node pick it by ``stable_hash(node, kind, k)`` among the GPUs
the node still lists, so tests can find it in :class:`NodeFacts`.

Configuration (docs/config-checks.md): every healthy node is set up alike (the fleet's firmware
:data:`NIC_FIRMWARE`, ``nvidia_peermem`` loaded, ACS off on the GPU/NIC switch ports, each GPU
sharing a PCIe switch with its rail NIC; RoCE: MTU 9000, trust dscp, PFC and ECN on priority
3, GID 3 = RoCE v2; InfiniBand: active MTU 4096). The misconfiguration faults change one
setting: ``transport_fallback {to: host_memory}`` (no peer-memory module), ``acs_enabled``,
``numa_misaligned`` (the NICs in the other socket's slots), ``pfc_disabled``, ``gid_mismatch``,
``mtu_mismatch``, ``firmware_drift``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from fabriccheck.executors.sim.model import KeyedHash, stable_hash
from fabriccheck.faults import FaultSet

#: lanes every simulated NIC's PCIe slot has (ConnectX-7: Gen5 x16)
MAX_PCIE_WIDTH = 16
#: PCIe buses of the GPUs (Xids name them lower case, nvidia-smi -q upper case)
GPU_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
#: PCIe buses of the NICs in name order (an 8x ConnectX-7 HGX server's layout)
NIC_BUSES = (0x1A, 0x3C, 0x4D, 0x5E, 0x9C, 0xBC, 0xCC, 0xDC)
#: the fleet's NIC firmware and MTUs (RoCE netdev, InfiniBand active MTU)
NIC_FIRMWARE = "28.41.1000"
ROCE_MTU = 9000
IB_MTU = 4096
#: application Xids a healthy node's log may hold (raised by user code)
APPLICATION_XIDS = (13, 31, 43, 45)
#: shares of the background table above
POWER_NOTICE_NODES = 0.10
ACCESS_REG_NODES = 0.20
APP_XID_NODES = 0.05
IDLE_GEN1_NODES = 0.70
SW_POWER_CAP_GPUS = 0.10
CORRECTABLE_ECC_GPUS = 0.05
RETRAINED_PORTS = 0.10
MAX_SYMBOL_ERRORS_PER_DAY = 5.0
UPTIME_DAYS = (1.0, 60.0)


@dataclass(frozen=True)
class NodeFacts:
    """What one simulated node's preflight tools see (from the topology and the faults).

    Per-GPU faults are keyed by the GPU's index among the listed ones: ``throttle`` (reason),
    ``remap_pending``, ``nvlink_down`` (links down), ``xids`` as ``(gpu, xid)`` pairs.
    """

    gpus: int
    gpu_name: str
    missing_gpus: int = 0
    nic_gbps: dict[str, float] = field(default_factory=dict)  # nic name -> Gb/s
    down: frozenset[str] = frozenset()
    width: dict[str, int] = field(default_factory=dict)  # nic name -> lanes trained
    error_rate: dict[str, float] = field(default_factory=dict)  # nic name -> errors/s
    flap_per_hour: dict[str, float] = field(default_factory=dict)  # nic name -> downs/hour
    xids: tuple[tuple[int, int], ...] = ()
    throttle: dict[int, str] = field(default_factory=dict)
    remap_pending: frozenset[int] = frozenset()
    nvlink_down: dict[int, int] = field(default_factory=dict)
    background: bool = True
    #: configuration: peer-memory module loaded, ACS redirect on the GPU/NIC switch ports,
    #: NICs in the other socket's slots; per NIC: MTU and firmware unlike the fleet's, PFC/ECN
    #: off, the GID at index 3 RoCE v1
    peermem: bool = True
    acs: bool = False
    numa_misaligned: bool = False
    mtu: dict[str, int] = field(default_factory=dict)
    firmware: dict[str, str] = field(default_factory=dict)
    pfc_off: frozenset[str] = frozenset()
    gid_v1: frozenset[str] = frozenset()
    #: the tray's NVLink domain (:class:`~.nvl_world.NvlFacts`), None outside one
    nvl: Any = None

    @property
    def listed_gpus(self) -> int:
        """GPUs the node lists (``gpu_missing`` ones are gone)."""
        return self.gpus - self.missing_gpus


def node_facts(node: str, nics: dict[str, float], gpus: int, gpu_name: str,
               faults: FaultSet) -> NodeFacts:
    """The facts of ``node`` (``nics``: NIC name -> Gb/s) under ``faults``."""
    mine = [f for f in faults.faults
            if f.node == node or (f.nic or "").split("/", 1)[0] == node]
    missing = min(gpus, sum(1 for f in mine if f.kind == "gpu_missing"))
    listed = gpus - missing
    down, width, rate, flap = set(), {}, {}, {}
    xids, throttle, remap, links = [], {}, set(), {}
    config: dict = {"mtu": {}, "firmware": {}, "pfc_off": set(), "gid_v1": set()}
    seen: dict[str, int] = {}
    for f in mine:
        k = seen[f.kind] = seen.get(f.kind, -1) + 1
        gpu = stable_hash(node, f.kind, k) % listed if listed else 0
        if _configure(config, f):
            continue
        if f.nic:
            name = f.nic.split("/", 1)[1]
            if f.kind == "nic_down":
                down.add(name)
            elif f.kind == "pcie_downtrained":
                width[name] = int(f.width or MAX_PCIE_WIDTH)
            elif f.kind == "port_errors":
                rate[name] = rate.get(name, 0.0) + float(f.rate or 0.0)
            elif f.kind == "port_flap":
                flap[name] = flap.get(name, 0.0) + float(f.per_hour or 0.0)
        elif f.kind == "xid":
            xids.append((gpu, int(f.xid or 0)))
        elif f.kind == "gpu_throttle" and listed:
            throttle[gpu] = str(f.reason)
        elif f.kind == "row_remap_pending" and listed:
            remap.add(gpu)
        elif f.kind == "nvlink_down" and listed:
            links[gpu] = links.get(gpu, 0) + int(f.links or 0)
    return NodeFacts(gpus, gpu_name, missing, dict(nics), frozenset(down), width, rate, flap,
                     tuple(xids), throttle, frozenset(remap), links,
                     faults.noise.background != "none",
                     peermem=not config.get("no_peermem"), acs=bool(config.get("acs")),
                     numa_misaligned=bool(config.get("numa")), mtu=config["mtu"],
                     firmware=config["firmware"], pfc_off=frozenset(config["pfc_off"]),
                     gid_v1=frozenset(config["gid_v1"]))


def _configure(config: dict, f) -> bool:
    """Note a misconfiguration fault ``f`` in ``config``; False for any other kind."""
    name = (f.nic or "/").split("/", 1)[1]
    if f.kind == "transport_fallback":  # to: socket shows in NCCL's own lines, not here
        config["no_peermem"] = config.get("no_peermem") or f.to == "host_memory"
    elif f.kind in ("acs_enabled", "numa_misaligned"):
        config["acs" if f.kind == "acs_enabled" else "numa"] = True
    elif f.kind in ("pfc_disabled", "gid_mismatch"):
        config["pfc_off" if f.kind == "pfc_disabled" else "gid_v1"].add(name)
    elif f.kind == "mtu_mismatch":
        config["mtu"][name] = int(f.mtu or ROCE_MTU)
    elif f.kind == "firmware_drift":
        config["firmware"][name] = str(f.version)
    else:
        return False
    return True


# ---- where things sit ------------------------------------------------------------------------
def gpu_bus(i: int) -> int:
    """The PCIe bus of GPU ``i`` (beyond 8 GPUs: the next hundred, as the old sim did)."""
    return GPU_BUSES[i % 8] + 0x100 * (i // 8)


def nic_order(facts: NodeFacts) -> list[str]:
    """The node's NICs in natural name order (mlx5_2 before mlx5_10).

    >>> nic_order(NodeFacts(0, "", nic_gbps={"mlx5_10": 1, "mlx5_2": 1}))
    ['mlx5_2', 'mlx5_10']
    """
    return list(_nic_order(tuple(facts.nic_gbps)))


def _natural(name: str) -> list:
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name)]


@functools.lru_cache(maxsize=256)
def _nic_order(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(names, key=_natural))


@functools.lru_cache(maxsize=256)
def _nic_pcis(names: tuple[str, ...]) -> dict[str, str]:
    """NIC name -> PCI address, for one node's NIC names (see :func:`nic_pci`)."""
    return {nic: f"0000:{NIC_BUSES[i % 8]:02x}:00.{(i // 8) % 8}"
            for i, nic in enumerate(_nic_order(names))}


def nic_pci(facts: NodeFacts, nic: str) -> str:
    """The PCI address of ``nic`` (``0000:1a:00.0``; a ninth NIC is function 1 of the first)."""
    pci = _nic_pcis(tuple(facts.nic_gbps)).get(nic)
    if pci is None:  # not one of the node's NICs: what list.index says
        raise ValueError(f"{nic!r} is not in list")
    return pci


def netdev(facts: NodeFacts, nic: str) -> str:
    """The Ethernet netdev of a RoCE ``nic`` (systemd's name: ``enp26s0np0`` for bus 0x1a)."""
    pci = nic_pci(facts, nic)
    bus, fn = int(pci[5:7], 16), int(pci[-1])
    return f"enp{bus}s0" + (f"f{fn}np{fn}" if fn else "np0")


# ---- the background ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Background:
    """One node's harmless oddities (all empty / off with ``background: none``, but the uptime).

    ``app_xids``: ``(gpu, xid, seconds before the run start, pid)``; ``access_reg``: ``(nic,
    seconds since boot, pid)``; per port ``symbols_per_day`` and ``retrained`` (0 or 1).
    """

    uptime_s: float
    cpus: int = 224
    power_notice: bool = False
    access_reg: tuple[tuple[str, float, int], ...] = ()
    app_xids: tuple[tuple[int, int, float, int], ...] = ()
    idle_gen1: bool = False
    sw_power_cap: frozenset[int] = frozenset()
    correctable_ecc: dict[int, int] = field(default_factory=dict)
    idle: bool = False
    symbols_per_day: dict[str, float] = field(default_factory=dict)
    retrained: dict[str, int] = field(default_factory=dict)


def memo(facts: NodeFacts, key: tuple, make):
    """``make()`` remembered on ``facts`` under ``key``: what is drawn or built once per node
    (its background, its GPUs' UUIDs) lives as long as the node's facts, not longer (an
    attribute outside the dataclass fields: not compared, printed or copied by ``replace``)."""
    store = facts.__dict__.get("_sim_memo")
    if store is None:
        store = {}
        object.__setattr__(facts, "_sim_memo", store)
    value = store.get(key)
    if value is None:
        value = store[key] = make()
    return value


def background(seed: int, node: str, facts: NodeFacts) -> Background:
    """The background of ``node`` under ``seed`` (the table in this module's docstring).

    Drawn once per (seed, node) and facts object, and remembered: the same value every time.

    >>> f = NodeFacts(8, "NVIDIA H100 80GB HBM3", nic_gbps={"mlx5_0": 400.0})
    >>> background(1, "node-001", f) == background(1, "node-001", f)
    True
    >>> 86400 <= background(1, "node-001", f).uptime_s <= 60 * 86400
    True
    """
    return memo(facts, ("background", seed, node), lambda: _draw_background(seed, node, facts))


def _draw_background(seed: int, node: str, facts: NodeFacts) -> Background:
    u = KeyedHash(seed, node).unit  # u(*parts) == unit_float(seed, node, *parts)
    lo, hi = UPTIME_DAYS
    uptime = round((lo + (hi - lo) * u("uptime")) * 86400, 2)
    if not facts.background:
        return Background(uptime)
    nics = nic_order(facts)
    access = ()
    if nics and u("access-reg") < ACCESS_REG_NODES:
        n = 1 + int(u("access-reg", "n") * 3)
        access = tuple(sorted(
            (nics[int(u("access-reg", k, "nic") * len(nics))],
             round(600 + u("access-reg", k, "t") * (uptime - 900), 6),
             1000 + int(u("access-reg", k, "pid") * 900000)) for k in range(n)))
    listed = facts.listed_gpus
    app = ()
    if listed and u("app-xid") < APP_XID_NODES:
        app = ((int(u("app-xid", "gpu") * listed),
                APPLICATION_XIDS[int(u("app-xid", "which") * len(APPLICATION_XIDS))],
                round((2 + 18 * u("app-xid", "t")) * 3600, 6),
                1000 + int(u("app-xid", "pid") * 900000)),)
    cap = frozenset(g for g in range(listed) if u("sw-power-cap", g) < SW_POWER_CAP_GPUS)
    ecc = {g: 1 + int(u("ecc", g, "n") * 5) for g in range(listed)
           if u("ecc", g) < CORRECTABLE_ECC_GPUS}
    return Background(
        uptime_s=uptime, cpus=224, power_notice=u("pcie-power") < POWER_NOTICE_NODES,
        access_reg=access, app_xids=app, idle_gen1=u("idle-gen1") < IDLE_GEN1_NODES,
        sw_power_cap=cap, correctable_ecc=ecc, idle=True,
        symbols_per_day={n: round(MAX_SYMBOL_ERRORS_PER_DAY * u("symbols", n), 3)
                         for n in nics},
        retrained={n: int(u("retrained", n) < RETRAINED_PORTS) for n in nics})
