"""A simulated node's configuration as its tools print it (docs/config-checks.md, pure).

``/proc/driver/nvidia/version``, ``ls -d`` of the peer-memory modules, ``mlx5_core``'s version,
``nvidia-smi topo -m`` (with its NIC legend), ``lspci -D -vvv`` (the bridges, their bus ranges,
port types and ``ACSCtl``; an HGX-like tree: each GPU and NIC behind a PCIe switch downstream
port, plus a storage switch whose ports redirect, as a healthy node's may), ``ibv_devinfo -d``,
``ethtool -i``, the netdev MTU, ``mlnx_qos -i``, the ECN enable files and the GID types, for a
node that is :class:`~.node_world.NodeFacts`. Healthy values are the fleet's
(:mod:`.node_world`); the misconfiguration faults show as a real host shows them.
"""

from __future__ import annotations

import functools

from fabriccheck.executors.sim.model import stable_hash
from fabriccheck.executors.sim.node_text import DRIVER, nvlinks
from fabriccheck.executors.sim.node_world import (
    IB_MTU,
    NIC_FIRMWARE,
    ROCE_MTU,
    NodeFacts,
    gpu_bus,
    netdev,
    nic_order,
    nic_pci,
)

MLX5_CORE = "24.07-0.6.1"
#: the RoCE priority with PFC and ECN on, and the netdev's default trust state
ROCE_PRIORITY = 3
_LEGEND = (
    "Legend:\n\n  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
    "(e.g., QPI/UPI)\n"
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges "
    "within a NUMA node\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
    "Bridge)\n"
    "  PIX  = Connection traversing at most a single PCIe bridge\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n")
_GPU_PCI_NAMES = {"H100": "GH100 [H100 SXM5 80GB]", "H200": "GH100 [H200 SXM 141GB]",
                  "A100": "GA100 [A100 SXM4 80GB]", "B200": "Device 2901"}
_NO_FILE = "{tool}: {path}: No such file or directory\n"


# ---- node ------------------------------------------------------------------------------------
def driver_version(facts: NodeFacts) -> str:
    """``/proc/driver/nvidia/version`` (the proprietary kernel module)."""
    if not facts.gpus:
        return _NO_FILE.format(tool="cat", path="/proc/driver/nvidia/version")
    return (f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {DRIVER}  Fri May 31 09:35:42 UTC "
            "2024\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04) \n")


def peermem_ls(facts: NodeFacts) -> str:
    """``ls -d /sys/module/nvidia_peermem /sys/module/nv_peer_mem 2>&1`` (errors first)."""
    out = "ls: cannot access '/sys/module/nv_peer_mem': No such file or directory\n"
    if facts.peermem:
        return out + "/sys/module/nvidia_peermem\n"
    return "ls: cannot access '/sys/module/nvidia_peermem': No such file or directory\n" + out


def mlx5_version() -> str:
    """``/sys/module/mlx5_core/version`` of the MLNX_OFED driver."""
    return MLX5_CORE + "\n"


def _socket(i: int, n: int) -> int:
    return 0 if n < 2 or i < n // 2 else 1


def _gpu_nic(facts: NodeFacts, g: int, j: int, nics: int) -> str:
    gpus = facts.listed_gpus
    nic_socket = _socket(j, nics)
    if facts.numa_misaligned:  # seated in the other socket's slots, in no GPU's switch
        nic_socket = 1 - nic_socket
    if nic_socket != _socket(g, gpus):
        return "SYS"
    return "PIX" if _paired(g, j, gpus, nics) and not facts.numa_misaligned else "NODE"


def _paired(g: int, j: int, gpus: int, nics: int) -> bool:
    """GPU ``g`` and NIC ``j`` share a PCIe switch: with fewer NICs than GPUs each NIC serves
    ``gpus // nics`` neighbouring GPUs (4 NICs, 8 GPUs: GPUs 0-1 beside NIC 0), and the reverse.

    >>> [j for j in range(4) if _paired(5, j, 8, 4)], _paired(0, 0, 8, 8), _paired(0, 1, 8, 8)
    ([2], True, False)
    """
    if nics <= gpus:
        return j == g * nics // gpus
    return g == j * gpus // nics


def smi_topo(facts: NodeFacts, cpus: int = 224) -> str:
    """``nvidia-smi topo -m``: NV# between GPUs, each GPU beside its NIC (PIX) in one PCIe switch,
    NODE on its socket, SYS across; the NIC legend by NIC name order.

    >>> f = NodeFacts(2, "NVIDIA H100 80GB HBM3", nic_gbps={"mlx5_0": 400, "mlx5_1": 400})
    >>> smi_topo(f).splitlines()[1].split("\\t")[:5]
    ['GPU0', ' X ', 'NV18', 'PIX', 'SYS']
    >>> from dataclasses import replace
    >>> smi_topo(replace(f, numa_misaligned=True)).splitlines()[1].split("\\t")[3:5]
    ['SYS', 'NODE']
    """
    return _smi_topo(facts.gpus, facts.missing_gpus, facts.gpu_name, tuple(facts.nic_gbps),
                     facts.numa_misaligned, cpus)


@functools.lru_cache(maxsize=256)
def _smi_topo(gpus: int, missing: int, gpu_name: str, nics: tuple[str, ...],
              numa_misaligned: bool, cpus: int) -> str:
    """:func:`smi_topo` of what it reads of the facts (the same text for every alike node)."""
    facts = NodeFacts(gpus, gpu_name, missing, dict.fromkeys(nics, 0.0),
                      numa_misaligned=numa_misaligned)
    gpus, names = facts.listed_gpus, nic_order(facts)
    if not gpus:
        return "No devices were found\n"
    links = f"NV{nvlinks(facts.gpu_name)[0]}"
    n = len(names)
    q = cpus // 4
    affinity = (f"0-{q - 1},{2 * q}-{3 * q - 1}", f"{q}-{2 * q - 1},{3 * q}-{4 * q - 1}")
    head = [f"GPU{i}" for i in range(gpus)] + [f"NIC{j}" for j in range(n)]
    lines = ["\t" + "\t".join([*head, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])]
    for g in range(gpus):
        cells = [" X " if h == g else links for h in range(gpus)]
        cells += [_gpu_nic(facts, g, j, n) for j in range(n)]
        s = _socket(g, gpus)
        lines.append("\t".join([f"GPU{g}", *cells, affinity[s], str(s), "N/A"]))
    for j in range(n):
        cells = [_gpu_nic(facts, g, j, n) for g in range(gpus)]
        cells += [" X " if k == j else ("NODE" if _socket(k, n) == _socket(j, n) else "SYS")
                  for k in range(n)]
        lines.append("\t".join([f"NIC{j}", *cells]))
    legend = "".join(f"  NIC{j}: {name}\n" for j, name in enumerate(names))
    return "\n".join(lines) + "\n\n" + _LEGEND + "\nNIC Legend:\n\n" + legend + "\n"


def _acsctl(redirect: bool, source: bool = False) -> str:
    s, r = ("+" if source or redirect else "-"), ("+" if redirect else "-")
    return (f"\t\tACSCtl:\tSrcValid{s} TransBlk- ReqRedir{r} CmpltRedir{r} UpstreamFwd{r} "
            "EgressCtrl- DirectTrans-")


def _bridge(addr: str, desc: str, primary: int, sec: int, sub: int, port: str,
            acs: str | None) -> list[str]:
    out = [f"{addr} PCI bridge: {desc} (prog-if 00 [Normal decode])",
           f"\tBus: primary={primary:02x}, secondary={sec:02x}, subordinate={sub:02x}, "
           "sec-latency=0", f"\tCapabilities: [68] Express (v2) {port}, MSI 00"]
    if acs is not None:
        out += ["\tCapabilities: [148 v1] Access Control Services",
                "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ "
                "EgressCtrl- DirectTrans-", acs]
    return out + ["\tKernel driver in use: pcieport"]


def _switch(root: int, ends: list[tuple[int, str, str]], acs: bool, *, dom: str = "0000",
            name: str = "Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)") -> list[str]:
    """A root port at bus ``root``, a switch below it and one downstream port per endpoint
    ``(bus, class: description, driver)``."""
    hi = max(b for b, _d, _k in ends)
    out = _bridge(f"{dom}:{root:02x}:01.0", "Intel Corporation Device 352a (rev 04)", root,
                  root + 1, hi, "Root Port (Slot-)", _acsctl(False, source=True))
    out += _bridge(f"{dom}:{root + 1:02x}:00.0", name, root + 1, root + 2, hi, "Upstream Port",
                   None)
    for k, (bus, what, driver) in enumerate(ends):
        out += _bridge(f"{dom}:{root + 2:02x}:{k:02x}.0", name, root + 2, bus, bus,
                       "Downstream Port (Slot+)", _acsctl(acs))
        out += [f"{dom}:{bus:02x}:00.0 {what}", "\tCapabilities: [60] Express (v2) Endpoint, "
                "MSI 00", f"\tKernel driver in use: {driver}"]
    return out


def lspci_vvv(facts: NodeFacts, fabric: str) -> str:
    """``lspci -D -vvv`` reduced to what the simulated tree has (bridges, endpoints)."""
    return _lspci_vvv(facts.gpus, facts.missing_gpus, facts.gpu_name, tuple(facts.nic_gbps),
                      facts.acs, facts.background, fabric)


@functools.lru_cache(maxsize=256)
def _lspci_vvv(gpus: int, missing: int, gpu_name: str, nics: tuple[str, ...], acs: bool,
               background: bool, fabric: str) -> str:
    """:func:`lspci_vvv` of what it reads of the facts (the same text for every alike node)."""
    facts = NodeFacts(gpus, gpu_name, missing, dict.fromkeys(nics, 0.0), acs=acs,
                      background=background)
    model = next((v for k, v in _GPU_PCI_NAMES.items() if k in facts.gpu_name), "Device 2330")
    nic_cls = "Infiniband controller" if fabric == "infiniband" else "Ethernet controller"
    ends = [(gpu_bus(i), f"3D controller: NVIDIA Corporation {model} (rev a1)", "nvidia")
            for i in range(facts.listed_gpus)]
    seen = set()
    for nic in nic_order(facts):
        bus = int(nic_pci(facts, nic)[5:7], 16)
        if bus not in seen:
            seen.add(bus)
            ends.append((bus, f"{nic_cls}: Mellanox Technologies MT2910 Family [ConnectX-7]",
                         "mlx5_core"))
    ends = sorted(e for e in ends if e[0] < 0x100)
    groups: list[list[tuple[int, str, str]]] = []
    for e in ends:  # a switch per run of endpoints whose buses leave no room for a root port
        if groups and e[0] - 3 <= groups[-1][-1][0]:
            groups[-1].append(e)
        else:
            groups.append([e])
    out: list[str] = []
    for g in groups:
        out += _switch(g[0][0] - 3, g, facts.acs)
    if facts.background:  # a storage switch redirecting, harmless: no GPU or NIC below it
        nvme = "Non-Volatile memory controller: Samsung Electronics Co Ltd NVMe SSD Controller " \
               "PM174X (prog-if 02 [NVM Express])"
        out += _switch(0x7F, [(0x82, nvme, "nvme"), (0x83, nvme, "nvme")], True,
                       name="PMC-Sierra Inc. Device 4128")
    return "\n".join(out) + "\n"


# ---- NIC -------------------------------------------------------------------------------------
def _ib_mtu(mtu: int) -> int:
    """The largest InfiniBand MTU that fits ``mtu`` (RoCE: the netdev MTU less headers).

    >>> _ib_mtu(9000), _ib_mtu(1500), _ib_mtu(2048)
    (4096, 1024, 2048)
    """
    return max((m for m in (256, 512, 1024, 2048, 4096) if m <= mtu), default=256)


def ibv_devinfo(facts: NodeFacts, seed: int, node: str, nic: str, fabric: str) -> str:
    """``ibv_devinfo -d <nic>``."""
    if nic not in facts.nic_gbps:
        return f"Failed to get IB devices list: Unknown error -19\nIB device '{nic}' wasn't found\n"
    roce = fabric != "infiniband"
    mtu = facts.mtu.get(nic, ROCE_MTU if roce else IB_MTU)
    active = _ib_mtu(mtu - (100 if roce else 0))
    code = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
    h = f"{stable_hash(seed, node, nic, 'guid'):016x}"
    guid = ":".join(h[i:i + 4] for i in range(0, 16, 4))
    lid = 0 if roce else stable_hash(seed, node, nic) % 0xBFFE + 1
    down = nic in facts.down
    return (f"hca_id:\t{nic}\n\ttransport:\t\t\tInfiniBand (0)\n"
            f"\tfw_ver:\t\t\t\t{facts.firmware.get(nic, NIC_FIRMWARE)}\n"
            f"\tnode_guid:\t\t\t{guid}\n\tsys_image_guid:\t\t\t{guid}\n"
            "\tvendor_id:\t\t\t0x02c9\n\tvendor_part_id:\t\t\t4129\n\thw_ver:\t\t\t\t0x0\n"
            "\tboard_id:\t\t\tMT_0000000838\n\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n"
            f"\t\t\tstate:\t\t\t{'PORT_DOWN (1)' if down else 'PORT_ACTIVE (4)'}\n"
            "\t\t\tmax_mtu:\t\t4096 (5)\n"
            f"\t\t\tactive_mtu:\t\t{active} ({code[active]})\n"
            f"\t\t\tsm_lid:\t\t\t{0 if roce else 1}\n\t\t\tport_lid:\t\t{lid}\n"
            "\t\t\tport_lmc:\t\t0x00\n"
            f"\t\t\tlink_layer:\t\t{'Ethernet' if roce else 'InfiniBand'}\n\n")


def ethtool_i(facts: NodeFacts, nic: str) -> str:
    """``ethtool -i <netdev>`` of a RoCE NIC."""
    return (f"driver: mlx5_core\nversion: {MLX5_CORE}\n"
            f"firmware-version: {facts.firmware.get(nic, NIC_FIRMWARE)} (MT_0000000838)\n"
            f"expansion-rom-version: \nbus-info: {nic_pci(facts, nic)}\n"
            "supports-statistics: yes\nsupports-test: yes\nsupports-eeprom-access: no\n"
            "supports-register-dump: no\nsupports-priv-flags: yes\n")


def netdev_mtu(facts: NodeFacts, nic: str) -> str:
    """``/sys/class/net/<netdev>/mtu``."""
    return f"{facts.mtu.get(nic, ROCE_MTU)}\n"


def mlnx_qos(facts: NodeFacts, nic: str) -> str:
    """``mlnx_qos -i <netdev>``: trust dscp, PFC on priority 3 (off everywhere with
    ``pfc_disabled``), the default priority-to-TC map."""
    pfc = set() if nic in facts.pfc_off else {ROCE_PRIORITY}
    out = ["DCBX mode: OS controlled", "Priority trust state: dscp", "dscp2prio mapping:"]
    out += [f"\tprio:{p} dscp:" + ",".join(f"{d:02d}" for d in range(8 * p + 7, 8 * p - 1, -1))
            + "," for p in range(8)]
    out += ["default priority:",
            "Receive buffer size (bytes): 130944,130944,0,0,0,0,0,0,total_size=1027584",
            "Cable len: 7", "PFC configuration:",
            "\tpriority    0   1   2   3   4   5   6   7",
            "\tenabled     " + "".join(f"{int(p in pfc)}   " for p in range(8)),
            "\tbuffer      " + "".join(f"{int(p in pfc)}   " for p in range(8))]
    for tc in range(8):
        out += [f"tc: {tc} ratelimit: unlimited, tsa: vendor",
                f"\t priority:  {(1, 0)[tc] if tc < 2 else tc}"]
    return "\n".join(out) + "\n"


def ecn_enable(facts: NodeFacts, nic: str) -> str:
    """``grep -H .`` of ``ecn/roce_np|roce_rp/enable/<prio>``: on for every priority (the mlx5
    default), off for every priority with ``pfc_disabled``."""
    dev, on = netdev(facts, nic), int(nic not in facts.pfc_off)
    return "".join(f"/sys/class/net/{dev}/ecn/{side}/enable/{p}:{on}\n"
                   for side in ("roce_np", "roce_rp") for p in range(8))


def gid_types(facts: NodeFacts, nic: str) -> str:
    """``grep -H .`` of ``gid_attrs/types/<i>``: link-local and IPv4, v1 then v2 (the IPv4 pair
    swapped with ``gid_mismatch``: index 3 is RoCE v1).

    >>> f = NodeFacts(0, "", nic_gbps={"mlx5_0": 400}, gid_v1=frozenset({"mlx5_0"}))
    >>> gid_types(f, "mlx5_0").splitlines()[3]
    '/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3:IB/RoCE v1'
    """
    types = ["IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"]
    if nic in facts.gid_v1:
        types[2], types[3] = types[3], types[2]
    return "".join(f"/sys/class/infiniband/{nic}/ports/1/gid_attrs/types/{i}:{t}\n"
                   for i, t in enumerate(types))
