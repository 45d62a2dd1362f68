"""A simulated node's GPU tools and kernel log as text, in the tools' real formats.

``nvidia-smi -L``, ``-q``, ``nvlink -s``, ``dmesg`` (raw or ``--time-format iso``) and
``/proc/uptime`` of a node that is :class:`~.node_world.NodeFacts` (its faults) plus its
:class:`~.node_world.Background`. Times: the run starts at :data:`~.tools.BASE_UNIX_S`; a node
booted its uptime before that; the run's clock (``clock_s``) is "now". Kernel-log events of the
faults are stamped seconds to minutes before the run starts (new since any earlier check), the
background's application Xids hours before it. How faults show:

- ``gpu_missing``: one GPU fewer everywhere, Xid 79 "GPU has fallen off the bus" on it;
- ``xid``: ``NVRM: Xid (PCI:0000:2a:00): N, ...`` with the driver's wording for common numbers;
- ``gpu_throttle``: that reason ``Active`` under ``Clocks Event Reasons`` (``HW Slowdown`` with
  ``HW Power Brake Slowdown`` / ``HW Thermal Slowdown`` nested, as the driver prints them; the
  thermal GPU also runs hot);
- ``row_remap_pending``: ``Remapped Rows`` ``Pending : Yes`` with every ECC counter at 0;
- ``nvlink_down``: ``Link k: <inactive>`` on that many links of one GPU (18 per H100/H200/B200,
  12 per A100);
- ``port_flap`` on RoCE: ``mlx5_core 0000:1a:00.0 enp26s0np0: Link down`` / ``Link up`` pairs
  (the ring buffer keeps the last :data:`MAX_FLAPS_LOGGED`). On InfiniBand the kernel logs
  nothing: mlx5 hands IB port events to the RDMA core without a message at the default log
  level (``port_change`` in ``mlx5/core/events.c``), so there only the counters show it.
"""

from __future__ import annotations

import functools
import time
from datetime import UTC, datetime

from fabriccheck.executors.sim.model import stable_hash, unit_float
from fabriccheck.executors.sim.node_world import (
    MAX_PCIE_WIDTH,
    Background,
    NodeFacts,
    gpu_bus,
    memo,
    netdev,
    nic_order,
    nic_pci,
)
from fabriccheck.executors.sim.tools import BASE_UNIX_S

DRIVER = "550.90.07"
MLX5_FW = "28.41.1000"
#: RoCE flaps the simulated ring buffer still holds (older ones have scrolled out)
MAX_FLAPS_LOGGED = 20
#: the driver's wording after ``pid=..., name=..., `` for common Xids (others: a register dump)
XID_TEXT = {
    13: "Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0): Out Of Range Address",
    31: "Ch 00000018, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_3 faulted @ "
        "0x7f1b_e5a00000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    43: "Ch 00000010",
    45: "Ch 00000010",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer "
        "at physAddr 0x12bac1c3e0 partition 2, subpartition 1.",
    63: "Row Remapper: New row (0x00000012bac1c3e0) marked for remapping, reset gpu to "
        "activate.",
    64: "Row Remapper: Failed to remap row (0x00000012bac1c3e0), bank remap table full.",
    74: "NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
    92: "High single-bit ECC error rate",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: FBHUB. RST: Yes, D-RST: No",
    119: "Timeout after 6s of waiting for RPC response from GPU{gpu} GSP! Expected function 76 "
         "(GSP_RM_CONTROL) (0x20803039 0x0).",
}
#: application Xids carry the process that raised them
_APP = frozenset({13, 31, 43, 45})


# ---- nvidia-smi ------------------------------------------------------------------------------
def gpu_uuid(seed: int, node: str, i: int) -> str:
    """GPU ``i``'s UUID on ``node`` (``GPU-8-4-4-4-12`` hex, deterministic)."""
    h = f"{stable_hash(seed, node, 'gpu', i):016x}{stable_hash(node, i):016x}"
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def gpu_uuids(seed: int, node: str, facts: NodeFacts) -> tuple[str, ...]:
    """:func:`gpu_uuid` of the node's listed GPUs (asked by ``-L``, ``-q`` and ``nvlink -s``
    alike: built once per node)."""
    n = facts.listed_gpus
    return memo(facts, ("uuids", seed, node, n),
                lambda: tuple(gpu_uuid(seed, node, i) for i in range(n)))


def nvlinks(gpu_name: str) -> tuple[int, str]:
    """NVLinks per GPU and each one's speed as ``nvidia-smi nvlink -s`` prints it.

    >>> nvlinks("NVIDIA A100-SXM4-80GB")
    (12, '25 GB/s')
    """
    if "A100" in gpu_name:
        return 12, "25 GB/s"
    if "B200" in gpu_name:
        return 18, "53.125 GB/s"
    return 18, "26.562 GB/s"


def inactive_links(seed: int, node: str, gpu: int, n: int, total: int) -> list[int]:
    """Which ``n`` of a GPU's ``total`` links are down (deterministic)."""
    if n <= 0:
        return []
    order = sorted(range(total), key=lambda k: stable_hash(node, "nvlink", gpu, k))
    return sorted(order[:min(n, total)])


def smi_list(facts: NodeFacts, seed: int, node: str) -> str:
    """``nvidia-smi -L``: one line per listed GPU."""
    return "".join(f"GPU {i}: {facts.gpu_name} (UUID: {uuid})\n"
                   for i, uuid in enumerate(gpu_uuids(seed, node, facts)))


def smi_nvlink(facts: NodeFacts, seed: int, node: str) -> str:
    """``nvidia-smi nvlink -s``: per GPU its header line, then one ``Link k: <speed>`` line per link
    (``<inactive>`` for the links ``nvlink_down`` took)."""
    total, speed = nvlinks(facts.gpu_name)
    out = []
    uuids = gpu_uuids(seed, node, facts)
    for i in range(facts.listed_gpus):
        out.append(f"GPU {i}: {facts.gpu_name} (UUID: {uuids[i]})")
        down = set(inactive_links(seed, node, i, facts.nvlink_down.get(i, 0), total))
        out += [f"\t Link {k}: {'<inactive>' if k in down else speed}" for k in range(total)]
    return "\n".join(out) + "\n"


def _kv(depth: int, key: str, value: object = None) -> str:
    pad = " " * (4 * depth)
    return pad + key if value is None else f"{pad}{key:<{42 - 4 * depth}}: {value}"


def _active(on: bool) -> str:
    return "Active" if on else "Not Active"


def _clock_reasons(reason: str | None, idle: bool, cap: bool) -> list[str]:
    slow = reason is not None
    return [_kv(1, "Clocks Event Reasons"),
            _kv(2, "Idle", _active(idle and not cap and not slow)),
            _kv(2, "Applications Clocks Setting", _active(False)),
            _kv(2, "SW Power Cap", _active(cap)),
            _kv(2, "HW Slowdown", _active(slow)),
            _kv(3, "HW Thermal Slowdown", _active(reason == "thermal")),
            _kv(3, "HW Power Brake Slowdown", _active(reason == "hw_power_brake")),
            _kv(2, "Sync Boost", _active(False)),
            _kv(2, "SW Thermal Slowdown", _active(False)),
            _kv(2, "Display Clock Setting", _active(False))]


def _pci_block(bus: int, gen_max: int, gen_now: int) -> list[str]:
    return [_kv(1, "PCI"), _kv(2, "Bus", f"0x{bus % 0x100:02X}"), _kv(2, "Device", "0x00"),
            _kv(2, "Domain", "0x0000"), _kv(2, "Bus Id", f"00000000:{bus:02X}:00.0"),
            _kv(2, "GPU Link Info"), _kv(3, "PCIe Generation"),
            _kv(4, "Max", gen_max), _kv(4, "Current", gen_now),
            _kv(4, "Device Current", gen_now), _kv(4, "Device Max", gen_max),
            _kv(4, "Host Max", gen_max), _kv(3, "Link Width"),
            _kv(4, "Max", f"{MAX_PCIE_WIDTH}x"), _kv(4, "Current", f"{MAX_PCIE_WIDTH}x"),
            _kv(2, "Replays Since Reset", 0), _kv(2, "Replay Number Rollovers", 0)]


def _ecc_block(correctable: int) -> list[str]:
    names = ("SRAM Correctable", "SRAM Uncorrectable Parity", "SRAM Uncorrectable SEC-DED",
             "DRAM Correctable", "DRAM Uncorrectable")
    out = [_kv(1, "ECC Mode"), _kv(2, "Current", "Enabled"), _kv(2, "Pending", "Enabled"),
           _kv(1, "ECC Errors"), _kv(2, "Volatile")]
    out += [_kv(3, k, 0) for k in names]
    out += [_kv(2, "Aggregate")]
    out += [_kv(3, k, correctable if k == "DRAM Correctable" else 0) for k in names]
    return out


def smi_query(facts: NodeFacts, bg: Background, seed: int, node: str, clock_s: float) -> str:
    """``nvidia-smi -q`` of the node's listed GPUs."""
    gen_max = 4 if "A100" in facts.gpu_name else 5
    stamp = time.asctime(time.gmtime(BASE_UNIX_S + clock_s))
    out = ["", "==============NVSMI LOG==============", "", _kv(0, "Timestamp", stamp),
           _kv(0, "Driver Version", DRIVER), _kv(0, "CUDA Version", "12.4"), "",
           _kv(0, "Attached GPUs", facts.listed_gpus)]
    uuids = gpu_uuids(seed, node, facts)
    for i in range(facts.listed_gpus):
        reason = facts.throttle.get(i)
        temp = 91 if reason == "thermal" else 28 + stable_hash(seed, node, "temp", i) % 12
        head, mid, mem, tail = _gpu_query_block(
            facts.gpu_name, i, gen_max, 1 if bg.idle_gen1 else gen_max, reason, bg.idle,
            i in bg.sw_power_cap, bg.correctable_ecc.get(i, 0), i in facts.remap_pending)
        out += [f"{head}{uuids[i]}{mid}{temp} C{mem}{temp + 8} C{tail}", ""]
    return "\n".join(out) + "\n"


_UUID, _TEMP, _MEM = "\x00uuid\x00", "\x00temp\x00", "\x00mem\x00"


@functools.lru_cache(maxsize=1024)
def _gpu_query_block(gpu_name: str, i: int, gen_max: int, gen_now: int, reason: str | None,
                     idle: bool, cap: bool, ecc: int, pending: bool) -> tuple[str, ...]:
    """One GPU's ``nvidia-smi -q`` lines joined, cut where its UUID, GPU temperature and memory
    temperature go (the same for every GPU alike but for those)."""
    bus = gpu_bus(i)
    out = [f"GPU 00000000:{bus:02X}:00.0", _kv(1, "Product Name", gpu_name),
           _kv(1, "Persistence Mode", "Enabled"), _kv(1, "GPU UUID", _UUID),
           _kv(1, "Minor Number", i)]
    out += _pci_block(bus, gen_max, gen_now)
    out += [_kv(1, "Performance State", "P0")]
    out += _clock_reasons(reason, idle, cap)
    out += _ecc_block(ecc)
    out += [_kv(1, "Retired Pages"), _kv(2, "Single Bit ECC", "N/A"),
            _kv(2, "Double Bit ECC", "N/A"), _kv(2, "Pending Page Blacklist", "N/A"),
            _kv(1, "Remapped Rows"), _kv(2, "Correctable Error", 0),
            _kv(2, "Uncorrectable Error", 1 if pending else 0),
            _kv(2, "Pending", "Yes" if pending else "No"),
            _kv(2, "Remapping Failure Occurred", "No"),
            _kv(1, "Temperature"), _kv(2, "GPU Current Temp", f"{_TEMP} C"),
            _kv(2, "Memory Current Temp", f"{_MEM} C"),
            _kv(1, "GPU Power Readings"), _kv(2, "Power Draw", f"71.{i} W"),
            _kv(2, "Current Power Limit", "700.00 W")]
    text = "\n".join(out)
    head, rest = text.split(_UUID)
    mid, rest = rest.split(_TEMP + " C")
    mem, tail = rest.split(_MEM + " C")
    return head, mid, mem, tail


# ---- kernel log ------------------------------------------------------------------------------
def proc_uptime(bg: Background, clock_s: float) -> str:
    """``/proc/uptime``: seconds since boot and idle seconds summed over the CPUs.

    >>> proc_uptime(Background(350735.47, cpus=4), 0.0)
    '350735.47 1360853.62\\n'
    """
    up = bg.uptime_s + clock_s
    return f"{up:.2f} {up * bg.cpus * 0.97:.2f}\n"


def xid_line(gpu: int, xid: int, pid: int) -> str:
    """One ``NVRM: Xid`` line on GPU ``gpu`` (the PCI address is bus:device, lower case)."""
    text = XID_TEXT.get(xid, "0000(0000) 00000000 00000000").format(gpu=gpu)
    who = (f"pid={pid}, name=python3" if xid in _APP or xid == 79
           else "pid='<unknown>', name=<unknown>")
    return f"NVRM: Xid (PCI:0000:{gpu_bus(gpu):02x}:00): {xid}, {who}, {text}"


def kernel_events(facts: NodeFacts, bg: Background, seed: int, node: str,
                  fabric: str) -> list[tuple[float, str]]:
    """``(seconds since boot, message)`` of the node's kernel log, oldest first."""
    start = bg.uptime_s  # the run starts this long after boot
    ev: list[tuple[float, str]] = [
        (0.0, "Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075)"),
        (5.120934, "nvidia: module license 'NVIDIA' taints kernel."),
        (5.823104, f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {DRIVER}")]
    nics = nic_order(facts)
    if not facts.background:
        fw = facts.firmware.get(nics[0], MLX5_FW) if nics else MLX5_FW
        ev.append((3.412201, f"mlx5_core 0000:1a:00.0: firmware version: {fw}"))
    for i, nic in enumerate(nics if facts.background else ()):
        ev += _nic_boot(facts, bg, nic, 3.412201 + 0.35 * i, fabric, seed, node)
    for nic, t, pid in bg.access_reg:
        ev.append((t, f"mlx5_core {nic_pci(facts, nic)}: mlx5_cmd_out_err:838:(pid {pid}): "
                      "ACCESS_REG(0x805) op_mod(0x1) failed, status bad parameter(0x3), "
                      "syndrome (0x6c4d4c), err(-22)"))
    for gpu, xid, before, pid in bg.app_xids:
        ev.append((start - before, xid_line(gpu, xid, pid)))
    for g in range(facts.listed_gpus, facts.gpus):  # fell off the bus minutes ago
        ev.append((start - 60 - 600 * unit_float(seed, node, "xid79", g),
                   xid_line(g, 79, 2764)))
    for k, (gpu, xid) in enumerate(facts.xids):
        ev.append((start - 5 - 40 * unit_float(seed, node, "xid", k),
                   xid_line(gpu, xid, 3000 + stable_hash(seed, node, "pid", k) % 900000)))
    if fabric == "roce":
        for nic, per_hour in sorted(facts.flap_per_hour.items()):
            ev += _flaps(facts, bg, nic, per_hour, seed, node)
    return sorted(ev)


def _nic_boot(facts: NodeFacts, bg: Background, nic: str, t: float, fabric: str, seed: int,
              node: str) -> list[tuple[float, str]]:
    pci = nic_pci(facts, nic)
    w = facts.width.get(nic, MAX_PCIE_WIDTH)
    full = f"{504.112:.3f} Gb/s available PCIe bandwidth"
    bw = (f"{full} (32.0 GT/s PCIe x16 link)" if w == MAX_PCIE_WIDTH else
          f"{504.112 * w / MAX_PCIE_WIDTH:.3f} Gb/s available PCIe bandwidth, limited by "
          f"32.0 GT/s PCIe x{w} link at {pci} (capable of 504.112 Gb/s with 32.0 GT/s PCIe "
          "x16 link)")
    ev = [(t, f"mlx5_core {pci}: firmware version: {facts.firmware.get(nic, MLX5_FW)}"),
          (t + 0.00006, f"mlx5_core {pci}: {bw}"),
          (t + 0.3502, f"mlx5_core {pci}: Port module event: module 0, Cable plugged")]
    if bg.power_notice:
        pid = (9, 1304)[stable_hash(seed, node, nic, "pid") % 2]
        ev.append((t + 0.3503, f"mlx5_core {pci}: mlx5_pcie_event:301:(pid {pid}): Detected "
                               "insufficient power on the PCIe slot (27W)."))
    if fabric == "roce" and nic not in facts.down:
        ev.append((31.6 + t, f"mlx5_core {pci} {netdev(facts, nic)}: Link up"))
    return ev


def _flaps(facts: NodeFacts, bg: Background, nic: str, per_hour: float, seed: int,
           node: str) -> list[tuple[float, str]]:
    """The RoCE port's last down/up pairs, one every ``3600 / per_hour`` s before the run."""
    head = f"mlx5_core {nic_pci(facts, nic)} {netdev(facts, nic)}"
    every = 3600.0 / per_hour
    last = bg.uptime_s - every * unit_float(seed, node, nic, "flap") - 10
    ev = []
    for j in range(MAX_FLAPS_LOGGED):
        t = last - j * every
        if t < 120:  # not before the port first came up
            break
        ev += [(t, f"{head}: Link down"),
               (t + 2 + 7 * unit_float(seed, node, nic, "up", j), f"{head}: Link up")]
    return ev


def kernel_log(facts: NodeFacts, bg: Background, seed: int, node: str, fabric: str,
               *, iso: bool) -> str:
    """``dmesg`` (``[seconds.micros] msg``) or ``dmesg --time-format iso`` of the node."""
    boot = BASE_UNIX_S - bg.uptime_s
    lines = []
    for t, msg in kernel_events(facts, bg, seed, node, fabric):
        micros = round(t * 1e6)
        if iso:
            sec, us = divmod(round((boot + t) * 1e6), 1_000_000)
            day, rest = divmod(sec, 86400)  # UTC has no leap seconds in POSIX time
            lines.append(f"{_iso_day(day)}T{rest // 3600:02d}:{rest // 60 % 60:02d}:"
                         f"{rest % 60:02d},{us:06d}+00:00 {msg}")
        else:
            lines.append(f"[{micros // 1_000_000:5d}.{micros % 1_000_000:06d}] {msg}")
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=1024)
def _iso_day(day: int) -> str:
    """``YYYY-MM-DD`` of day ``day`` since the epoch (UTC).

    >>> _iso_day(0), _iso_day(20819)
    ('1970-01-01', '2027-01-01')
    """
    return datetime.fromtimestamp(day * 86400, UTC).strftime("%Y-%m-%d")
