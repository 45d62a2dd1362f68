"""The simulator's answers to the preflight tools, in their real formats, reflecting the faults.

Commands are recognized by the whole rendered command line (what a real host would run), in
exactly the forms the built-in preflight uses: ``nvidia-smi -L`` / ``-q`` / ``nvlink -s``;
``cat`` of the sysfs port ``state`` / ``rate`` and PCIe ``{current,max}_link_{width,speed}``
files; ``cat /proc/uptime`` then ``perfquery -C <hca> -P <port>`` or ``ethtool -S`` read twice
around ``sleep N``; ``dmesg`` and ``dmesg --time-format iso``. The node behind them is
:mod:`.node_world` (faults and real-world background), the GPU tools' and kernel log's text is
:mod:`.node_text`. Faults show as a real host shows them: ``pcie_downtrained`` reads ``8`` of
``16`` lanes; ``port_errors`` grows the symbol/link error counters by ``rate`` per second;
``port_flap`` grows ``LinkDownedCounter`` / ``link_down_events_phy`` by ``per_hour`` over the
uptime (a lifetime total; within the 5 s window rarely; perfquery's 8-bit ``LinkDownedCounter``
stops at 255, as IBTA PortCounters saturate); ``nic_down`` reads ``1: DOWN``; the GPU
and kernel-log faults are listed in :mod:`.node_text`. The configuration commands
(``node-config``, ``nic-config``: ``echo '== section'; <tool> 2>&1; ...; echo '== end'``, the
RoCE one after ``dev=$(ls .../device/net | head -n 1)``) are answered section by section, each
section's tool as :mod:`.node_config` prints it (``lspci -D -vvv | grep -E '<pattern>'`` is
filtered with the pattern); the NVLink domain check (``imex``) is answered the same way, its
``nvidia-imex-ctl``, ``systemctl is-active nvidia-fabricmanager`` and ``nvidia-smi
--query-gpu=index,fabric.state,fabric.status`` sections by :mod:`.nvl_text`; a section whose
tool the simulator does not know makes the whole command unknown. Any other command -- a
different tool, or a known one inside a pipeline the simulator cannot run -- exits 127 with
``fabriccheck-sim: no simulated output for: ...``, which the run records as an untested signal
(never a made-up value).
"""

from __future__ import annotations

import functools
import re

from fabriccheck.executors.sim import node_config, node_text, nvl_text
from fabriccheck.executors.sim.model import stable_hash
from fabriccheck.executors.sim.node_world import (
    MAX_PCIE_WIDTH,
    Background,
    NodeFacts,
    background,
    node_facts,
)
from fabriccheck.executors.sim.tools import ToolRun
from fabriccheck.models import RawResult, Test
from fabriccheck.probes.signal_command import render_signal, signal_values

__all__ = ["NodeFacts", "answer", "node_facts", "run_signal"]

#: every simulated NIC's PCIe speed (ConnectX-7: Gen5)
PCIE_GTS = 32.0
#: IB port rate names by Gb/s (4X links)
_RATE_NAMES = {100: "4X EDR", 200: "4X HDR", 400: "4X NDR", 800: "4X XDR", 50: "2X HDR",
               25: "1X EDR"}
_W = r"'?([\w.:-]+)'?"  # a shell word as shlex.quote writes a safe name


def run_signal(test: Test, facts: NodeFacts, peer_ips: dict[str, str], *, seed: int,
               fabric: str, clock_s: float, unreachable: bool = False, hung: bool = False,
               connect_timeout_s: float = 10.0) -> RawResult:
    """The raw result of a signal test on its first node (what SSH would bring back)."""
    node = test.nodes[0]
    params = test.params  # read as attributes: p.get(k, d) is p.k unless p.k is None
    gpus = int(params.gpus_per_node if params.gpus_per_node is not None else 0)
    line = render_signal(str(params.command if params.command is not None else ""),
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
    hit = _DISPATCH.get(command)
    if hit is None:
        hit = _dispatch(command)
        if len(_DISPATCH) >= _MAX_DISPATCH:
            _DISPATCH.clear()
        _DISPATCH[command] = hit
    line, fn, m = hit
    if fn is None:
        return ToolRun("", f"fabriccheck-sim: no simulated output for: {line}\n", exit_code=127,
                       duration_s=0.01)
    return fn(m, line, node, facts, seed, fabric, clock_s)


def _dispatch(command: str) -> tuple:
    """(the command as sh runs it, its handler and match) or (line, None, None): a command
    line's answer depends on the node, never which handler answers it (the same lines recur
    on every node: cached in :data:`_DISPATCH`)."""
    line = _COMMENT.sub("", command).strip()  # sh ignores a trailing "# ..." comment
    for pattern, fn in _COMPILED:
        m = pattern.fullmatch(line)
        if m:
            return line, fn, m
    return line, None, None


#: command line -> :func:`_dispatch` of it
_DISPATCH: dict[str, tuple] = {}
_MAX_DISPATCH = 4096


# ---- nvidia-smi ------------------------------------------------------------------------------
def _smi_list(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    return ToolRun(node_text.smi_list(facts, seed, node), duration_s=0.4)


def _smi_query(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    bg = background(seed, node, facts)
    text = node_text.smi_query(facts, bg, seed, node, clock_s)
    if facts.nvl is not None:  # a compute tray of an NVLink domain: its GPUs' Fabric sections
        text = nvl_text.with_fabric(text, facts.nvl)
    return ToolRun(text, duration_s=1.5)


def _smi_nvlink(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    text = node_text.smi_nvlink(facts, seed, node)
    if facts.nvl is not None:
        text = nvl_text.with_dead_links(text, facts.nvl)
    return ToolRun(text, duration_s=0.6)


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
    for which, what in _pcie_files(command):
        if what == "speed":  # the faults model lanes, not generations: speed stays Gen5
            lines.append(f"{PCIE_GTS:.1f} GT/s PCIe")
        else:
            lines.append(str(facts.width.get(nic, MAX_PCIE_WIDTH) if which == "current"
                             else MAX_PCIE_WIDTH))
    return ToolRun("\n".join(lines) + "\n", duration_s=0.01)


@functools.lru_cache(maxsize=256)
def _pcie_files(command: str) -> list[tuple[str, str]]:
    return re.findall(r"/(current|max)_link_(width|speed)", command)


def _no_such_file(command: str) -> ToolRun:
    path = next((w for w in command.split() if w.startswith("/")), "?")
    return ToolRun("", f"cat: {path}: No such file or directory\n", exit_code=1, duration_s=0.01)


# ---- counters ----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1024)
def _window(command: str) -> float:
    m = re.search(r"sleep (\d+(?:\.\d+)?)", command)
    return float(m[1]) if m else 0.0


@functools.lru_cache(maxsize=1024)
def _reads(command: str, tool: str) -> tuple[float, ...]:
    """Seconds after the first read of each read of ``tool`` in ``command``."""
    n = max(1, command.count(tool))
    return tuple(_window(command) * r / (n - 1) if n > 1 else 0.0 for r in range(n))


def _growth(facts: NodeFacts, nic: str, after_s: float) -> int:
    return int(round(facts.error_rate.get(nic, 0.0) * after_s))


def _lifetime(facts: NodeFacts, bg: Background, nic: str, up_s: float) -> tuple[int, int]:
    """(symbol errors, link-down events) since boot at ``up_s`` seconds of uptime."""
    symbols = int(bg.symbols_per_day.get(nic, 0.0) * up_s / 86400)
    downs = bg.retrained.get(nic, 0) + int(facts.flap_per_hour.get(nic, 0.0) * up_s / 3600)
    return symbols, downs


#: widths of the IBTA PortCounters perfquery prints (without -x): a counter stops at all ones
_PQ_BITS = {"SymbolErrorCounter": 16, "LinkErrorRecoveryCounter": 8, "LinkDownedCounter": 8,
            "PortRcvErrors": 16, "PortXmitDiscards": 16, "LocalLinkIntegrityErrors": 4,
            "ExcessiveBufferOverrunErrors": 4, "PortXmitWait": 32}


def _saturated(name: str, value: int | str) -> int | str:
    """``value`` as the 8/16/32-bit counter ``name`` holds it (saturating, never wrapping).

    >>> _saturated("LinkDownedCounter", 3652), _saturated("PortSelect", "1")
    (255, '1')
    """
    bits = _PQ_BITS.get(name)
    return value if bits is None or isinstance(value, str) else min(value, 2**bits - 1)


def _uptime_first(command: str, bg: Background, clock_s: float) -> str:
    return node_text.proc_uptime(bg, clock_s) if "cat /proc/uptime" in command else ""


def _pq(name: str, value: int | str) -> str:
    """One ``Name:.....value`` line of perfquery (the value saturated as the counter holds it)."""
    return f"{name + ':':.<33}{_saturated(name, value)}\n"


#: the counters perfquery prints the same every read, between PortRcvErrors and PortXmitPkts
_PQ_STEADY = "".join(_pq(k, v) for k, v in (
    ("PortRcvRemotePhysicalErrors", 0), ("PortRcvSwitchRelayErrors", 0),
    ("PortXmitDiscards", 0), ("PortXmitConstraintErrors", 0),
    ("PortRcvConstraintErrors", 0), ("CounterSelect2", "0x00"),
    ("LocalLinkIntegrityErrors", 0), ("ExcessiveBufferOverrunErrors", 0),
    ("VL15Dropped", 0), ("PortXmitData", 4294967295), ("PortRcvData", 4294967295)))
_PQ_L = {k: f"{k + ':':.<33}" for k in (
    "PortSelect", "CounterSelect", "SymbolErrorCounter", "LinkErrorRecoveryCounter",
    "LinkDownedCounter", "PortRcvErrors", "PortXmitPkts", "PortRcvPkts", "PortXmitWait")}
_PQ_MAX = {k: 2**bits - 1 for k, bits in _PQ_BITS.items()}


def _perfquery(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    nic, port = m[1], m[2]
    if nic not in facts.nic_gbps:
        return ToolRun("", f"ibwarn: [1] mad_rpc_open_port: can't open UMAD port ({nic}:{port})\n"
                       "perfquery: iberror: failed: Failed to open", exit_code=255,
                       duration_s=0.05)
    bg = background(seed, node, facts)
    lid = stable_hash(seed, node, nic) % 0xBFFE + 1
    # background none: the old spotless-but-not-zero lifetime values
    if facts.background:
        sym0 = rec0 = 0
    else:
        base = stable_hash(seed, node, nic, "base")
        sym0, rec0 = base % 3, (base >> 8) % 2
    retrained = bg.retrained.get(nic, 0)
    L, top = _PQ_L, _PQ_MAX
    head = (f"# Port counters: Lid {lid} port {port} (CapMask: 0x5A00)\n"
            f"{L['PortSelect']}{port}\n{L['CounterSelect']}0x0000\n")
    blocks = []
    reads = _reads(command, "perfquery")
    for r, after in enumerate(reads):
        grow = _growth(facts, nic, clock_s + after)  # errors since the run began
        symbols, downs = _lifetime(facts, bg, nic, bg.uptime_s + clock_s + after)
        blocks.append(
            f"{head}{L['SymbolErrorCounter']}"
            f"{min(sym0 + symbols + grow * 7 // 10, top['SymbolErrorCounter'])}\n"
            f"{L['LinkErrorRecoveryCounter']}"
            f"{min(rec0 + retrained + grow // 10, top['LinkErrorRecoveryCounter'])}\n"
            f"{L['LinkDownedCounter']}{min(rec0 + downs + grow // 20, top['LinkDownedCounter'])}\n"
            f"{L['PortRcvErrors']}{min(grow // 5, top['PortRcvErrors'])}\n{_PQ_STEADY}"
            f"{L['PortXmitPkts']}{812345678 + r}\n{L['PortRcvPkts']}{809876543 + r}\n"
            f"{L['PortXmitWait']}{min(1024 + r, top['PortXmitWait'])}\n")
    return ToolRun(_uptime_first(command, bg, clock_s) + "".join(blocks),
                   duration_s=_window(command) + 0.1 * len(reads))


def _ethtool(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    nic = m[1]
    if nic not in facts.nic_gbps:
        return ToolRun("", f"ls: cannot access '/sys/class/infiniband/{nic}/device/net': No "
                       "such file or directory\n", exit_code=2, duration_s=0.01)
    bg = background(seed, node, facts)
    base = stable_hash(seed, node, nic, "eth")
    down0 = 0 if facts.background else (base >> 16) % 2
    blocks = []
    reads = _reads(command, "ethtool -S")
    for r, after in enumerate(reads):
        grow = _growth(facts, nic, clock_s + after)  # errors since the run began
        symbols, downs = _lifetime(facts, bg, nic, bg.uptime_s + clock_s + after)
        stats = [
            ("rx_packets", 91234567 + 1000 * r), ("tx_packets", 90123456 + 1000 * r),
            ("rx_bytes", 734567890123 + 10**6 * r), ("tx_bytes", 733456789012 + 10**6 * r),
            ("rx_out_of_buffer", 0), ("rx_discards_phy", 0), ("tx_discards_phy", 0),
            ("rx_crc_errors_phy", grow // 4), ("rx_symbol_err_phy", symbols + grow - grow // 4),
            ("rx_corrected_bits_phy", base % 5000 + 37 * r), ("rx_pcs_symbol_err_phy", 0),
            ("link_down_events_phy", down0 + downs),
            ("rx_prio3_pause", 0), ("tx_prio3_pause", 0),
        ]
        blocks.append("NIC statistics:\n" + "".join(f"     {k}: {v}\n" for k, v in stats))
    return ToolRun(_uptime_first(command, bg, clock_s) + "".join(blocks),
                   duration_s=_window(command) + 0.05 * len(reads))


# ---- kernel log --------------------------------------------------------------------------------
def _dmesg(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    bg = background(seed, node, facts)
    return ToolRun(node_text.kernel_log(facts, bg, seed, node, fabric, iso=bool(m[1])),
                   duration_s=0.05)


# ---- configuration (sectioned) -----------------------------------------------------------------
_DEV = rf"dev=\$\(ls /sys/class/infiniband/{_W}/device/net \| head -n 1\); "
_MARKER = re.compile(r"(?:^|; )echo '== (\w+)'(?=;|$)")
_NET = r'/sys/class/net/"\$dev"'
#: a section's command -> (facts, nic, seed, node, fabric, match) -> its output
_SECTIONS = (
    (r"cat /proc/driver/nvidia/version 2>&1", lambda f, *a: node_config.driver_version(f)),
    (r"ls -d /sys/module/nvidia_peermem /sys/module/nv_peer_mem 2>&1",
     lambda f, *a: node_config.peermem_ls(f)),
    (r"cat /sys/module/mlx5_core/version 2>&1", lambda f, *a: node_config.mlx5_version()),
    (r"nvidia-smi topo -m 2>&1", lambda f, *a: node_config.smi_topo(f)),
    (r"lspci -D -vvv 2>&1 \| grep -E '([^']*)'",
     lambda f, nic, seed, node, fabric, m: _grep(m[1], node_config.lspci_vvv(f, fabric))),
    (rf"ibv_devinfo -d {_W} 2>&1",
     lambda f, nic, seed, node, fabric, m: node_config.ibv_devinfo(f, seed, node, m[1], fabric)),
    (r'ethtool -i "\$dev" 2>&1', lambda f, nic, *a: node_config.ethtool_i(f, nic)),
    (rf"cat {_NET}/mtu 2>&1", lambda f, nic, *a: node_config.netdev_mtu(f, nic)),
    (r'mlnx_qos -i "\$dev" 2>&1', lambda f, nic, *a: node_config.mlnx_qos(f, nic)),
    (rf"grep -H \. {_NET}/ecn/roce_np/enable/\* {_NET}/ecn/roce_rp/enable/\* 2>&1",
     lambda f, nic, *a: node_config.ecn_enable(f, nic)),
    (rf"grep -H \. /sys/class/infiniband/{_W}/ports/1/gid_attrs/types/\* 2>/dev/null",
     lambda f, nic, seed, node, fabric, m: node_config.gid_types(f, m[1])),
    (r"nvidia-imex-ctl -q 2>&1", lambda f, *a: nvl_text.imex_status(f.nvl)),
    (r"nvidia-imex-ctl -N 2>&1", lambda f, *a: nvl_text.imex_domain(f.nvl, 0.0)),
    (r"systemctl is-active nvidia-fabricmanager 2>&1", lambda f, *a: nvl_text.fm_service(f.nvl)),
    (r"nvidia-smi --query-gpu=index,fabric\.state,fabric\.status --format=csv,noheader 2>&1",
     lambda f, *a: nvl_text.fabric_states(f.nvl, f.listed_gpus)),
)
_SECTION_RES = tuple((re.compile(p), fn) for p, fn in _SECTIONS)
_DEV_RE = re.compile(_DEV)


@functools.lru_cache(maxsize=256)
def _grep(pattern: str, text: str) -> str:
    """``grep -E pattern`` of ``text`` (the patterns the preflight writes are Python regexes
    too)."""
    rx = re.compile(pattern)
    return "".join(ln + "\n" for ln in text.splitlines() if rx.search(ln))


@functools.lru_cache(maxsize=1024)
def _sections(command: str) -> tuple[str | None, int, tuple]:
    """A sectioned command taken apart (the same on every node): the NIC of its ``dev=``
    prefix, how many sections, and per section its header line and ``(handler, match)``,
    None for an empty one or ``part`` (a str) for one the simulator does not know."""
    pre = _DEV_RE.match(command)
    nic, body = (pre[1], command[pre.end():]) if pre else (None, command)
    marks = list(_MARKER.finditer(body))
    parts = []
    for mk, nxt in zip(marks, [*marks[1:], None], strict=True):
        part = body[mk.end():nxt.start() if nxt else len(body)].removeprefix("; ").strip()
        hit = None
        if part:
            hit = next(((fn, sm) for rx, fn in _SECTION_RES if (sm := rx.fullmatch(part))),
                       part)
        parts.append((f"== {mk[1]}\n", hit))
    return nic, len(marks), tuple(parts)


def _sectioned(m, command, node, facts, seed, fabric, clock_s) -> ToolRun:
    nic, n_marks, parts = _sections(command)
    if nic and nic not in facts.nic_gbps:
        return ToolRun("", f"ls: cannot access '/sys/class/infiniband/{nic}/device/net': No "
                       "such file or directory\n", exit_code=2, duration_s=0.01)
    out = []
    for header, hit in parts:
        out.append(header)
        if hit is None:
            continue
        if isinstance(hit, str):
            return ToolRun("", f"fabriccheck-sim: no simulated output for: {hit}\n",
                           exit_code=127, duration_s=0.01)
        out.append(hit[0](facts, nic, seed, node, fabric, hit[1]))
    return ToolRun("".join(out), duration_s=0.3 + 0.2 * n_marks)


_SLEEP = r"; sleep \d+(?:\.\d+)?; "
_UPTIME = r"(?:cat /proc/uptime; )?"
_PQ = rf"perfquery -C {_W} -P '?(\d+)'?"
_ETH = 'ethtool -S "\\$dev"'
_HANDLERS = (
    (r"nvidia-smi -L", _smi_list),
    (r"nvidia-smi -q", _smi_query),
    (r"nvidia-smi nvlink (?:-s|--status)", _smi_nvlink),
    (rf"cat /sys/class/infiniband/{_W}/ports/\d+/state", _state),
    (rf"cat /sys/class/infiniband/{_W}/ports/\d+/rate", _rate),
    (rf"cat /sys/class/infiniband/{_W}/device/(?:current|max)_link_(?:width|speed)"
     rf"(?: /sys/class/infiniband/\1/device/(?:current|max)_link_(?:width|speed))*", _pcie),
    (rf"{_UPTIME}{_PQ}(?:{_SLEEP}perfquery -C \1 -P '?\2'?)*", _perfquery),
    (rf"dev=\$\(ls /sys/class/infiniband/{_W}/device/net \| head -n 1\); {_UPTIME}{_ETH}"
     rf"(?:{_SLEEP}{_ETH})*", _ethtool),
    (r"dmesg( --time-format[ =]iso)?", _dmesg),
    (rf"(?:{_DEV})?echo '== \w+'; .*echo '== end'", _sectioned),
)
_COMMENT = re.compile(r"(?:^|\s)#[^'\"]*$")
_COMPILED = tuple((re.compile(p), fn) for p, fn in _HANDLERS)
