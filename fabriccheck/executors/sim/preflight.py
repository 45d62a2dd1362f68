"""The simulator's answers to the preflight tools, in their real formats, reflecting the faults.

Commands are recognized by the whole rendered command line (what a real host would run), in
exactly the forms the built-in preflight uses: ``nvidia-smi -L`` / ``-q``; ``cat`` of the sysfs
port ``state`` / ``rate`` and PCIe ``{current,max}_link_{width,speed}`` files;
``perfquery -C <hca> -P <port>`` and ``ethtool -S`` (read twice around ``sleep N``); ``dmesg``.
Faults show as a real host shows them: ``gpu_missing`` lists one GPU fewer and logs Xid 79;
``pcie_downtrained`` reads ``8`` of ``16`` lanes; ``port_errors`` grows the symbol/link error
counters by ``rate`` per second; ``nic_down`` reads ``1: DOWN``. Any other command -- a
different tool, or a known one inside a pipeline the simulator cannot run -- exits 127 with
``fabriccheck-sim: no simulated output for: ...``, which the run records as an untested signal
(never a made-up value).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabriccheck.executors.sim.model import stable_hash
from fabriccheck.executors.sim.tools import ToolRun
from fabriccheck.faults import FaultSet
from fabriccheck.models import RawResult, Test
from fabriccheck.probes.signal_command import render_signal, signal_values

#: lanes every simulated NIC's PCIe slot has, and their speed (ConnectX-7: Gen5 x16)
MAX_PCIE_WIDTH = 16
PCIE_GTS = 32.0
#: IB port rate names by Gb/s (4X links)
_RATE_NAMES = {100: "4X EDR", 200: "4X HDR", 400: "4X NDR", 800: "4X XDR", 50: "2X HDR",
               25: "1X EDR"}
_W = r"'?([\w.:-]+)'?"  # a shell word as shlex.quote writes a safe name


@dataclass(frozen=True)
class NodeFacts:
    """What one simulated node's preflight tools see (from the topology and the faults)."""

    gpus: int
    gpu_name: str
    missing_gpus: int = 0
    nic_gbps: dict[str, float] = field(default_factory=dict)  # nic name -> Gb/s
    down: frozenset[str] = frozenset()
    width: dict[str, int] = field(default_factory=dict)  # nic name -> lanes trained
    error_rate: dict[str, float] = field(default_factory=dict)  # nic name -> errors/s


def node_facts(node: str, nics: dict[str, float], gpus: int, gpu_name: str,
               faults: FaultSet) -> NodeFacts:
    """The facts of ``node`` (``nics``: NIC name -> Gb/s) under ``faults``."""
    missing, down, width, rate = 0, set(), {}, {}
    for f in faults.faults:
        if f.node != node and not (f.nic or "").startswith(node + "/"):
            continue
        if f.kind == "gpu_missing" and f.node == node:
            missing += 1
        elif f.nic and f.nic.split("/", 1)[0] == node:
            name = f.nic.split("/", 1)[1]
            if f.kind == "nic_down":
                down.add(name)
            elif f.kind == "pcie_downtrained":
                width[name] = int(f.width or MAX_PCIE_WIDTH)
            elif f.kind == "port_errors":
                rate[name] = rate.get(name, 0.0) + float(f.rate or 0.0)
    return NodeFacts(gpus, gpu_name, min(missing, gpus), dict(nics), frozenset(down), width,
                     rate)


def run_signal(test: Test, facts: NodeFacts, peer_ips: dict[str, str], *, seed: int,
               fabric: str, clock_s: float, unreachable: bool = False, hung: bool = False,
               connect_timeout_s: float = 10.0) -> RawResult:
    """The raw result of a signal test on its first node (what SSH would bring back)."""
    node = test.nodes[0]
    gpus = int(test.params.get("gpus_per_node", 0))
    line = render_signal(str(test.params.get("command", "")),
                         signal_values(test, peer_ips, gpus))
    commands = (f"{node}: sh -c {line!r}",)
    if unreachable:
        return RawResult(test.test_id, stderr=f"ssh: connect to host {node} port 22: No route "
                         "to host\n", exit_code=None, duration_s=connect_timeout_s,
                         unreachable=(node,), commands=commands)
    if hung:
        return RawResult(test.test_id, exit_code=None, duration_s=test.timeout_s,
                         timed_out=True, commands=commands)
    run = answer(line, node, facts, seed=seed, fabric=fabric, clock_s=clock_s)
    if run.duration_s > test.timeout_s:
        return RawResult(test.test_id, stdout=run.stdout, exit_code=None,
                         duration_s=test.timeout_s, timed_out=True, commands=commands)
    return RawResult(test.test_id, stdout=run.stdout, stderr=run.stderr,
                     exit_code=run.exit_code, duration_s=run.duration_s, commands=commands)


def answer(command: str, node: str, facts: NodeFacts, *, seed: int, fabric: str,
           clock_s: float) -> ToolRun:
    """What ``sh -c <command>`` prints on simulated ``node``."""
    line = _COMMENT.sub("", command).strip()  # sh ignores a trailing "# ..." comment
    for pattern, fn in _COMPILED:
        m = pattern.fullmatch(line)
        if m:
            return fn(m, line, node, facts, seed, fabric, clock_s)
    return ToolRun("", f"fabriccheck-sim: no simulated output for: {line}\n", exit_code=127,
                   duration_s=0.01)


# ---- nvidia-smi ------------------------------------------------------------------------------
def _uuid(seed: int, node: str, i: int) -> str:
    h = f"{stable_hash(seed, node, 'gpu', i):016x}{stable_hash(node, i):016x}"
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _bus_ids(facts: NodeFacts) -> list[str]:
    buses = [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB]
    ids = [f"00000000:{buses[i % 8] + 0x100 * (i // 8):02X}:00.0" for i in range(facts.gpus)]
    return ids[:facts.gpus - facts.missing_gpus] if facts.missing_gpus else ids


def _smi_list(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    lines = [f"GPU {i}: {facts.gpu_name} (UUID: {_uuid(seed, node, i)})"
             for i in range(len(_bus_ids(facts)))]
    return ToolRun("\n".join(lines) + "\n", duration_s=0.4)


def _smi_query(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    ids = _bus_ids(facts)
    out = ["", "==============NVSMI LOG==============", "",
           f"{'Timestamp':<42}: Thu Nov 26 23:00:{int(clock_s) % 60:02d} 2026",
           f"{'Driver Version':<42}: 550.90.07", f"{'CUDA Version':<42}: 12.4", "",
           f"{'Attached GPUs':<42}: {len(ids)}"]
    for i, bus in enumerate(ids):
        out += [f"GPU {bus}", f"    {'Product Name':<38}: {facts.gpu_name}",
                f"    {'Persistence Mode':<38}: Enabled",
                f"    {'GPU UUID':<38}: {_uuid(seed, node, i)}",
                f"    {'Minor Number':<38}: {i}", "    ECC Errors", "        Volatile"]
        out += [f"            {k:<30}: 0" for k in (
            "SRAM Correctable", "SRAM Uncorrectable Parity", "SRAM Uncorrectable SEC-DED",
            "DRAM Correctable", "DRAM Uncorrectable")]
        out += ["        Aggregate"]
        out += [f"            {k:<30}: 0" for k in (
            "SRAM Correctable", "SRAM Uncorrectable Parity", "SRAM Uncorrectable SEC-DED",
            "DRAM Correctable", "DRAM Uncorrectable")]
        out += ["    Retired Pages", f"        {'Single Bit ECC':<34}: N/A",
                f"        {'Double Bit ECC':<34}: N/A",
                f"        {'Pending Page Blacklist':<34}: N/A",
                "    Remapped Rows", f"        {'Correctable Error':<34}: 0",
                f"        {'Uncorrectable Error':<34}: 0", f"        {'Pending':<34}: No",
                f"        {'Remapping Failure Occurred':<34}: No",
                f"    {'Power Draw':<38}: 71.{i} W", ""]
    return ToolRun("\n".join(out) + "\n", duration_s=1.5)


# ---- sysfs -----------------------------------------------------------------------------------
def _state(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    nic = m[1]
    if nic not in facts.nic_gbps:
        return _no_such_file(command)
    return ToolRun("1: DOWN\n" if nic in facts.down else "4: ACTIVE\n", duration_s=0.01)


def _rate(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    nic = m[1]
    if nic not in facts.nic_gbps:
        return _no_such_file(command)
    gbps = 10 if nic in facts.down else int(facts.nic_gbps[nic])
    name = _RATE_NAMES.get(gbps, "4X SDR" if gbps == 10 else "4X")
    return ToolRun(f"{gbps} Gb/sec ({name})\n", duration_s=0.01)


def _pcie(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    nic = m[1]
    if nic not in facts.nic_gbps:
        return _no_such_file(command)
    lines = []
    for which, what in re.findall(r"/(current|max)_link_(width|speed)", command):
        if what == "speed":  # the faults model lanes, not generations: speed stays Gen5
            lines.append(f"{PCIE_GTS:.1f} GT/s PCIe")
        else:
            lines.append(str(facts.width.get(nic, MAX_PCIE_WIDTH) if which == "current"
                             else MAX_PCIE_WIDTH))
    return ToolRun("\n".join(lines) + "\n", duration_s=0.01)


def _no_such_file(command: str) -> ToolRun:
    path = next((w for w in command.split() if w.startswith("/")), "?")
    return ToolRun("", f"cat: {path}: No such file or directory\n", exit_code=1, duration_s=0.01)


# ---- counters ----------------------------------------------------------------------------------
def _window(command: str) -> float:
    m = re.search(r"sleep (\d+(?:\.\d+)?)", command)
    return float(m[1]) if m else 0.0


def _growth(facts: NodeFacts, nic: str, window_s: float) -> int:
    return int(round(facts.error_rate.get(nic, 0.0) * window_s))


def _perfquery(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    nic, port = m[1], m[2]
    if nic not in facts.nic_gbps:
        return ToolRun("", f"ibwarn: [1] mad_rpc_open_port: can't open UMAD port ({nic}:{port})\n"
                       "perfquery: iberror: failed: Failed to open", exit_code=255,
                       duration_s=0.05)
    reads = max(1, command.count("perfquery"))
    window = _window(command)
    lid = stable_hash(seed, node, nic) % 0xBFFE + 1
    base = stable_hash(seed, node, nic, "base")
    sym0, rec0 = base % 3, (base >> 8) % 2
    blocks = []
    for r in range(reads):
        grow = _growth(facts, nic, window * r / max(1, reads - 1)) if reads > 1 else 0
        counters = [
            ("PortSelect", str(port)), ("CounterSelect", "0x0000"),
            ("SymbolErrorCounter", sym0 + grow * 7 // 10),
            ("LinkErrorRecoveryCounter", rec0 + grow // 10),
            ("LinkDownedCounter", rec0 + grow // 20), ("PortRcvErrors", grow // 5),
            ("PortRcvRemotePhysicalErrors", 0), ("PortRcvSwitchRelayErrors", 0),
            ("PortXmitDiscards", 0), ("PortXmitConstraintErrors", 0),
            ("PortRcvConstraintErrors", 0), ("CounterSelect2", "0x00"),
            ("LocalLinkIntegrityErrors", 0), ("ExcessiveBufferOverrunErrors", 0),
            ("VL15Dropped", 0), ("PortXmitData", 4294967295), ("PortRcvData", 4294967295),
            ("PortXmitPkts", 812345678 + r), ("PortRcvPkts", 809876543 + r),
            ("PortXmitWait", 1024 + r),
        ]
        blocks.append(f"# Port counters: Lid {lid} port {port} (CapMask: 0x5A00)\n"
                      + "".join(f"{k + ':':.<33}{v}\n" for k, v in counters))
    return ToolRun("".join(blocks), duration_s=window + 0.1 * reads)


def _ethtool(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    nic = m[1]
    if nic not in facts.nic_gbps:
        return ToolRun("", f"ls: cannot access '/sys/class/infiniband/{nic}/device/net': No "
                       "such file or directory\n", exit_code=2, duration_s=0.01)
    reads = max(1, command.count("ethtool -S"))
    window = _window(command)
    base = stable_hash(seed, node, nic, "eth")
    blocks = []
    for r in range(reads):
        grow = _growth(facts, nic, window * r / max(1, reads - 1)) if reads > 1 else 0
        stats = [
            ("rx_packets", 91234567 + 1000 * r), ("tx_packets", 90123456 + 1000 * r),
            ("rx_bytes", 734567890123 + 10**6 * r), ("tx_bytes", 733456789012 + 10**6 * r),
            ("rx_out_of_buffer", 0), ("rx_discards_phy", 0), ("tx_discards_phy", 0),
            ("rx_crc_errors_phy", grow // 4), ("rx_symbol_err_phy", grow - grow // 4),
            ("rx_corrected_bits_phy", base % 5000 + 37 * r), ("rx_pcs_symbol_err_phy", 0),
            ("link_down_events_phy", (base >> 16) % 2),
            ("rx_prio3_pause", 0), ("tx_prio3_pause", 0),
        ]
        blocks.append("NIC statistics:\n" + "".join(f"     {k}: {v}\n" for k, v in stats))
    return ToolRun("".join(blocks), duration_s=window + 0.05 * reads)


# ---- kernel log --------------------------------------------------------------------------------
def _dmesg(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    lines = ["[    0.000000] Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075)",
             "[    3.412201] mlx5_core 0000:1a:00.0: firmware version: 28.41.1000",
             "[    5.120934] nvidia: module license 'NVIDIA' taints kernel.",
             "[    5.823104] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07"]
    if facts.missing_gpus:
        bus = f"{0xDB:02x}"
        lines.append(f"[ 8123.402117] NVRM: Xid (PCI:0000:{bus}:00): 79, pid=2764, "
                     "name=nvidia-smi, GPU has fallen off the bus.")
    return ToolRun("\n".join(lines) + "\n", duration_s=0.05)


_SLEEP = r"; sleep \d+(?:\.\d+)?; "
_PQ = rf"perfquery -C {_W} -P '?(\d+)'?"
_ETH = 'ethtool -S "\\$dev"'
_HANDLERS = (
    (r"nvidia-smi -L", _smi_list),
    (r"nvidia-smi -q", _smi_query),
    (rf"cat /sys/class/infiniband/{_W}/ports/\d+/state", _state),
    (rf"cat /sys/class/infiniband/{_W}/ports/\d+/rate", _rate),
    (rf"cat /sys/class/infiniband/{_W}/device/(?:current|max)_link_(?:width|speed)"
     rf"(?: /sys/class/infiniband/\1/device/(?:current|max)_link_(?:width|speed))*", _pcie),
    (rf"{_PQ}(?:{_SLEEP}perfquery -C \1 -P '?\2'?)*", _perfquery),
    (rf"dev=\$\(ls /sys/class/infiniband/{_W}/device/net \| head -n 1\); {_ETH}"
     rf"(?:{_SLEEP}{_ETH})*", _ethtool),
    (r"dmesg", _dmesg),
)
_COMMENT = re.compile(r"(?:^|\s)#[^'\"]*$")
_COMPILED = tuple((re.compile(p), fn) for p, fn in _HANDLERS)
