"""The preflight (level 0): node-local checks declared as built-in signals (docs/design.md
"Signals").

The built-in checks are written in the signals contract and validated by the same model as a
user's ``--signals`` file, so they run through the product's one signal path (plan -> executor ->
value -> judge). Their bounds come from the test spec (GPUs per node, NIC speed):

=============  =======  ==================================================  =================
signal         per      command                                             passes when
=============  =======  ==================================================  =================
gpu-count      node     ``nvidia-smi -L``                                   >= spec GPUs
gpu-health     node     ``nvidia-smi -q`` judged by the node catalogue       no fault finding
                        (ECC, row remapping, retired pages, clock-event
                        reasons HW slowdown/power brake/thermal, infoROM)
gpu-nvlink     node     ``nvidia-smi nvlink -s``: every link up              no fault finding
port-state     nic      ``/sys/class/infiniband/{nic}/ports/1/state``       4 (ACTIVE)
port-rate      nic      ``/sys/class/infiniband/{nic}/ports/1/rate``        >= the NICs' speed
pcie-link      nic      ``.../device/{current,max}_link_{width,speed}``     current = max
port-errors    nic      ``perfquery`` (IB) / ``ethtool -S`` (RoCE), read    no fault finding
                        twice 5 s apart after ``/proc/uptime``: error
                        rates per hour over the window and since boot
kernel-log     node     ``dmesg --time-format iso`` judged by the catalogue  no fault finding
                        (Xids by number, mlx5 lines by meaning), events
                        since the node's last check (history) only
node-config    node     one command, ``== section`` markers: the driver      no fault finding
                        version, ``ls -d /sys/module/nvidia_peermem``,
                        mlx5_core's version, ``nvidia-smi topo -m``, the
                        bridge/``ACSCtl`` lines of ``lspci -D -vvv``
nic-config     nic      ``ibv_devinfo -d {nic}``; RoCE also ``ethtool -i``,  no fault finding
                        the netdev MTU, ``mlnx_qos -i``, the ECN enable
                        files and the GID types
imex           node     ``nvidia-imex-ctl -q`` and ``-N`` (only with NVLink  no fault finding
                        domains in the topology: docs/nvl72.md)
=============  =======  ==================================================  =================

The configuration checks (``node-config``, ``nic-config``; docs/config-checks.md) are judged
against the spec's ``config:`` block here, and every setting against the node's peers of the
same SKU after the round (:mod:`fabriccheck.inference.config_peers`).

The judged checks (``node-*`` parsers) give findings of three severities (docs/node-checks.md):
a fault fails the signal (drain), a warn is listed in the run's ``warnings`` (the job may run;
``--strict`` makes them exit 1), an info is recorded only.

Checks the hardware lacks are skipped with a stated reason: GPU checks when the spec has no GPUs,
NIC checks when its fabric is not InfiniBand or RoCE (the namespace lab's plain TCP hosts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import SignalSpec, TestSpec
from fabriccheck.topology.model import Topology

#: seconds between the two counter reads of ``port-errors``
COUNTER_WINDOW_S = 5
#: printed first by the counter reads: the seconds since boot turn lifetime counts into rates
_UPTIME = "cat /proc/uptime"
#: the longest a preflight command may take (a hung node costs the round this, not more than
#: a hung pair test: nvidia-smi -q on 8 GPUs takes a few seconds, the counters 5 s + reads)
PREFLIGHT_TIMEOUT_S = 30

_SYSFS = "/sys/class/infiniband/{nic}"
_ROCE_DEV = f"dev=$(ls {_SYSFS}/device/net | head -n 1)"


@dataclass(frozen=True)
class Preflight:
    """The built-in signals a run uses, and why any were left out."""

    signals: tuple[SignalSpec, ...]
    skipped: tuple[str, ...] = ()


def _gpu_checks(gpus: int) -> list[dict]:
    return [
        {"name": "gpu-count", "level": 1, "per": "node", "command": "nvidia-smi -L",
         "parser": "nvidia-smi-gpus", "unit": "GPUs", "pass": {"min": gpus},
         "timeout_s": PREFLIGHT_TIMEOUT_S},
        {"name": "gpu-health", "level": 1, "per": "node", "command": "nvidia-smi -q",
         "parser": "node-gpu", "unit": "faults", "pass": {"max": 0},
         "timeout_s": PREFLIGHT_TIMEOUT_S},
        {"name": "gpu-nvlink", "level": 1, "per": "node", "command": "nvidia-smi nvlink -s",
         "parser": "node-nvlink", "unit": "faults", "pass": {"max": 0},
         "timeout_s": PREFLIGHT_TIMEOUT_S},
    ]


def _nic_checks(fabric: str, nic_gbps: float) -> list[dict]:
    if fabric == "infiniband":
        read = "perfquery -C {nic} -P 1"
        errors = {"command": f"{_UPTIME}; {read}; sleep {COUNTER_WINDOW_S}; {read}",
                  "parser": "node-counters"}
    else:
        read = 'ethtool -S "$dev"'
        errors = {"command": f"{_ROCE_DEV}; {_UPTIME}; {read}; sleep {COUNTER_WINDOW_S}; {read}",
                  "parser": "node-counters"}
    return [
        {"name": "port-state", "level": 1, "per": "nic",
         "command": f"cat {_SYSFS}/ports/1/state", "value": r"^(?P<value>\d+):",
         "unit": "", "pass": {"min": 4, "max": 4}, "timeout_s": 10},
        {"name": "port-rate", "level": 1, "per": "nic",
         "command": f"cat {_SYSFS}/ports/1/rate", "value": r"(?P<value>\d+(?:\.\d+)?) Gb/sec",
         "unit": "Gb/s", "pass": {"min": nic_gbps}, "timeout_s": 10},
        {"name": "pcie-link", "level": 1, "per": "nic",
         "command": "cat " + " ".join(f"{_SYSFS}/device/{f}" for f in (
             "current_link_width", "max_link_width", "current_link_speed", "max_link_speed")),
         "parser": "pcie-link-ratio", "unit": "of max", "pass": {"min": 1}, "timeout_s": 10},
        {"name": "port-errors", "level": 1, "per": "nic", **errors, "unit": "faults",
         "pass": {"max": 0}, "timeout_s": PREFLIGHT_TIMEOUT_S},
    ]


#: the node's configuration (docs/config-checks.md): every section's errors are kept (``2>&1``)
#: so a missing tool reads as unread, and ``== end`` marks an output that was not cut
NODE_CONFIG = (
    "echo '== driver'; cat /proc/driver/nvidia/version 2>&1; "
    "echo '== peermem'; ls -d /sys/module/nvidia_peermem /sys/module/nv_peer_mem 2>&1; "
    "echo '== mlx5_core'; cat /sys/module/mlx5_core/version 2>&1; "
    "echo '== topo'; nvidia-smi topo -m 2>&1; "
    "echo '== acs'; lspci -D -vvv 2>&1 "
    "| grep -E '^[0-9a-f]|Bus: primary|Express \\(|ACSCtl|denied'; "
    "echo '== end'"
)
_NIC_DEVINFO = "echo '== devinfo'; ibv_devinfo -d {nic} 2>&1; "
#: one NIC's configuration on InfiniBand: firmware and the port's active MTU
NIC_CONFIG_IB = _NIC_DEVINFO + "echo '== end'"
#: ... and on RoCE: the netdev's driver, MTU, QoS (trust, PFC), ECN and GID types
NIC_CONFIG_ROCE = (
    f"{_ROCE_DEV}; {_NIC_DEVINFO}"
    "echo '== ethtool'; ethtool -i \"$dev\" 2>&1; "
    "echo '== mtu'; cat /sys/class/net/\"$dev\"/mtu 2>&1; "
    "echo '== qos'; mlnx_qos -i \"$dev\" 2>&1; "
    "echo '== ecn'; grep -H . /sys/class/net/\"$dev\"/ecn/roce_np/enable/* "
    "/sys/class/net/\"$dev\"/ecn/roce_rp/enable/* 2>&1; "
    "echo '== gids'; grep -H . /sys/class/infiniband/{nic}/ports/1/gid_attrs/types/* 2>/dev/null; "
    "echo '== end'"
)


def _config_checks(fabric: str, gpus: bool) -> list[dict]:
    nic = {"name": "nic-config", "level": 1, "per": "nic", "parser": "nic-config",
           "command": NIC_CONFIG_IB if fabric == "infiniband" else NIC_CONFIG_ROCE,
           "unit": "faults", "pass": {"max": 0}, "timeout_s": PREFLIGHT_TIMEOUT_S}
    node = {"name": "node-config", "level": 1, "per": "node", "command": NODE_CONFIG,
            "parser": "node-config", "unit": "faults", "pass": {"max": 0},
            "timeout_s": PREFLIGHT_TIMEOUT_S}
    return [node, nic] if gpus else [nic]


_KERNEL_LOG = {"name": "kernel-log", "level": 1, "per": "node",
               "command": "dmesg --time-format iso", "parser": "node-kernel",
               "unit": "faults", "pass": {"max": 0}, "timeout_s": 20}


def preflight(spec: TestSpec, fabric: str, nic_gbps: Sequence[float] = ()) -> Preflight:
    """The built-in preflight signals for ``spec`` on a ``fabric`` fabric.

    ``nic_gbps`` are the line rates of the NICs in scope as the topology gives them: a port
    must train at its own speed, not at the spec's (an EDR fabric judged against a 400G spec
    would fail every port). With mixed speeds the slowest is the bound, and the run says so:
    a port that trained down to a slower NIC's rate is then left to the traffic tests, never
    drained on a bar that is not its own. Without them, the spec's ``nic_gbps``.

    >>> from fabriccheck.specs import load_spec
    >>> [s.name for s in preflight(load_spec("h100-ndr400-ib"), "infiniband").signals][:4]
    ['gpu-count', 'gpu-health', 'gpu-nvlink', 'port-state']
    >>> preflight(load_spec("lab-tcp"), "roce").skipped[0][:40]
    'gpu-count, gpu-health, gpu-nvlink: spec '
    """
    from fabriccheck.schema.base import check
    from fabriccheck.schema.signals import SignalsFile
    from fabriccheck.specs import signal_from_model

    entries: list[dict] = []
    skipped: list[str] = []
    if spec.gpus_per_node > 0:
        entries += _gpu_checks(spec.gpus_per_node)
    else:
        skipped.append(f"gpu-count, gpu-health, gpu-nvlink: spec {spec.name} has no GPUs "
                       "(gpus_per_node: 0)")
    rdma = spec.fabric in ("infiniband", "roce") and fabric in ("infiniband", "roce")
    if rdma:
        speeds = sorted({float(g) for g in nic_gbps if g and g > 0})
        entries += _nic_checks(fabric, speeds[0] if speeds else spec.nic_gbps)
        entries += _config_checks(fabric, spec.gpus_per_node > 0)
        if spec.gpus_per_node <= 0:
            skipped.append(f"node-config: spec {spec.name} has no GPUs (GPUDirect, GPU-NIC "
                           "locality and ACS are GPU settings)")
        if len(speeds) > 1:
            skipped.append(f"port-rate: NICs of {len(speeds)} speeds in scope "
                           f"({', '.join(f'{g:g}' for g in speeds)} Gb/s): each port is held "
                           f"to the slowest ({speeds[0]:g} Gb/s)")
    else:
        skipped.append(f"port-state, port-rate, pcie-link, port-errors, node-config, "
                       f"nic-config: spec {spec.name} is for fabric {spec.fabric!r}, not "
                       "InfiniBand or RoCE (no RDMA ports)")
    if entries:  # the kernel log holds GPU Xids and mlx5 errors: only where those exist
        entries.append(_KERNEL_LOG)
    else:
        skipped.append("kernel-log: no GPUs and no RDMA NICs to look for")
    if not entries:
        return Preflight((), tuple(skipped))
    model = check(SignalsFile, {"signals": entries}, source="built-in preflight")
    return Preflight(tuple(signal_from_model(m) for m in model.signals), tuple(skipped))


def imex_signal() -> SignalSpec:
    """The ``imex`` check of a compute tray in an NVLink domain (docs/nvl72.md): its IMEX
    daemon ``READY`` and its domain fully connected (``nvidia-imex-ctl -q`` and ``-N``)."""
    from fabriccheck.probes.node.imex import IMEX_COMMAND
    from fabriccheck.schema.base import check
    from fabriccheck.schema.signals import SignalsFile
    from fabriccheck.specs import signal_from_model

    entry = {"name": "imex", "level": 1, "per": "node", "command": IMEX_COMMAND,
             "parser": "node-imex", "unit": "faults", "pass": {"max": 0},
             "timeout_s": PREFLIGHT_TIMEOUT_S}
    model = check(SignalsFile, {"signals": [entry]}, source="built-in preflight")
    return signal_from_model(model.signals[0])


def run_signals(spec: TestSpec, topology: Topology, nodes: Sequence[str], policy: SweepPolicy
                ) -> tuple[tuple[SignalSpec, ...], tuple[str, ...]]:
    """The run's signals: the built-in preflight (unless ``policy.preflight`` is off; its port
    bars from the line rates of the NICs of ``nodes``), the spec's ``signals:`` and
    ``policy.signals`` (``--signals``); a later one replaces an earlier one of the same name.
    Also the reasons any preflight check was skipped. The loop and the history recorder both
    call it, so a reading is judged by the same bars in the run and in the history."""
    # a node not in the topology is refused by the run itself (one line, exit 2), not here
    speeds = [nic.gbps for n in nodes if n in topology.nodes for nic in topology.nodes[n].nics]
    pre = preflight(spec, topology.fabric, speeds) if policy.preflight else None
    if pre is not None and topology.domains and spec.gpus_per_node > 0:
        pre = Preflight((*pre.signals, imex_signal()), pre.skipped)
    skipped = pre.skipped if pre else ("preflight off (--no-preflight)",)
    by_name: dict[str, SignalSpec] = {}
    for s in (*(pre.signals if pre else ()), *spec.signals, *policy.signals):
        by_name[s.name] = s
    return tuple(by_name.values()), skipped
