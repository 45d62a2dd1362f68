"""A simulated compute tray's NVLink-domain tool output, in the tools' real formats.

- ``nvidia-smi -q``: a ``Fabric`` section per GPU (``State``, ``Status``, ``CliqueId``,
  ``ClusterUUID``, ``Health`` with ``Summary`` and ``Bandwidth``), as GB200 drivers print it
  (NVIDIA/k8s-dra-driver-gpu#626, Azure/azhpc-images#506), placed after the GPU's PCI block;
- ``nvidia-smi nvlink -s``: the dead ports' ``Link p: <inactive>``;
- ``nvidia-imex-ctl -q``: ``READY`` (the local daemon's state) and ``-N``: the legend, a
  timestamp, ``Nodes:`` (``Node #k - <ip> - READY - Version: ...``, ``UNAVAILABLE`` for a tray
  without a daemon), the ``Nodes From\\To`` connectivity matrix (``C`` connected, ``N`` never
  connected) and ``Domain State: UP`` (``DEGRADED`` when a tray is missing), as the IMEX guide
  and the AWS ParallelCluster GB200 docs show it. A tray whose IMEX is missing has no
  ``nvidia-imex-ctl``: the shell says ``sh: 1: nvidia-imex-ctl: not found``;
- the fabric manager as the tray sees it: ``systemctl is-active nvidia-fabricmanager`` prints
  ``inactive`` (an NVL72 compute tray runs none: the rack's is on its NVSwitch trays) and
  ``nvidia-smi --query-gpu=index,fabric.state,fabric.status --format=csv,noheader`` one
  ``0, Completed, Success`` line per GPU. A tray the fabric manager never configured
  (``fabric_unregistered``) reads ``0, Not Started, [N/A]`` there, and its ``-q`` Fabric
  sections ``State : Not Started`` with the other fields ``N/A``.
"""

from __future__ import annotations

import time

from fabriccheck.executors.sim.nvl_world import IMEX_VERSION, NvlFacts
from fabriccheck.executors.sim.tools import BASE_UNIX_S

_PERF = "\n    Performance State"
_NOT_FOUND = "sh: 1: nvidia-imex-ctl: not found\n"
_LEGEND = (
    "Connectivity Table Legend:\n"
    "I - Invalid - Node wasn't reachable, no connection status available\n"
    "N - Never Connected\n"
    "R - Recovering - Connection was lost, but clean up has not yet been triggered.\n"
    "D - Disconnected - Connection was lost, and clean up has been triggreed.\n"
    "A - Authenticating - If GSSAPI enabled, client has initiated mutual authentication.\n"
    "!V! - Version mismatch, communication disabled.\n"
    "!M! - Node map mismatch, communication disabled.\n"
    "C - Connected - Ready for operation\n")


def _kv(depth: int, key: str, value: object = None) -> str:
    pad = " " * (4 * depth)
    return pad + key if value is None else f"{pad}{key:<{42 - 4 * depth}}: {value}"


def fabric_block(nvl: NvlFacts, gpu: int) -> str:
    """GPU ``gpu``'s ``Fabric`` section (lines joined, no trailing newline)."""
    if not nvl.registered:
        return "\n".join([
            _kv(1, "Fabric"), _kv(2, "State", "Not Started"), _kv(2, "Status", "N/A"),
            _kv(2, "CliqueId", "N/A"), _kv(2, "ClusterUUID", "N/A"), _kv(2, "Health"),
            _kv(3, "Summary", "N/A"), _kv(3, "Bandwidth", "N/A")])
    slow = gpu in nvl.degraded
    return "\n".join([
        _kv(1, "Fabric"), _kv(2, "State", "Completed"), _kv(2, "Status", "Success"),
        _kv(2, "CliqueId", nvl.clique_id), _kv(2, "ClusterUUID", nvl.cluster_uuid),
        _kv(2, "Health"), _kv(3, "Summary", "Unhealthy" if gpu in nvl.degraded else "Healthy"),
        _kv(3, "Bandwidth", "Degraded" if slow else "Full")])


def with_fabric(query: str, nvl: NvlFacts) -> str:
    """``nvidia-smi -q`` text with each GPU's Fabric section before its performance state."""
    parts = query.split(_PERF)
    out = [parts[0]]
    for gpu, rest in enumerate(parts[1:]):
        out.append("\n" + fabric_block(nvl, gpu) + _PERF + rest)
    return "".join(out)


def with_dead_links(status: str, nvl: NvlFacts) -> str:
    """``nvidia-smi nvlink -s`` text with every dead port's line ``<inactive>``."""
    if not nvl.dead:
        return status
    out, gpu = [], -1
    for line in status.split("\n"):
        if line.startswith("GPU "):
            gpu += 1
        elif line.startswith("\t Link "):
            port = int(line.split(":", 1)[0].rsplit(" ", 1)[1])
            if port in nvl.dead.get(gpu, ()):
                line = f"\t Link {port}: <inactive>"
        out.append(line)
    return "\n".join(out)


def imex_status(nvl: NvlFacts | None) -> str:
    """``nvidia-imex-ctl -q``: the local daemon's state."""
    return "READY\n" if nvl is not None and nvl.imex_running else _NOT_FOUND


def imex_domain(nvl: NvlFacts | None, clock_s: float) -> str:
    """``nvidia-imex-ctl -N``: every tray of the domain and who is connected to whom."""
    if nvl is None or not nvl.imex_running:
        return _NOT_FOUND
    t = time.gmtime(BASE_UNIX_S + clock_s)
    stamp = f"{t.tm_mon}/{t.tm_mday}/{t.tm_year} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.000"
    lines = [_LEGEND, stamp, "Nodes:"]
    for k, (ip, up) in enumerate(nvl.imex):
        state = f"{'READY':<20} - Version: {IMEX_VERSION}" if up else "UNAVAILABLE"
        lines.append(f"{f'Node #{k}':<9} - {ip:<15} - {state}")
    n = len(nvl.imex)
    lines += ["", " Nodes From\\To  " + "".join(f"{k:<4}" for k in range(n)).rstrip()]
    for a, (_, up_a) in enumerate(nvl.imex):
        cells = ("C" if up_a and up_b else "I" if not up_a else "N"
                 for _, up_b in nvl.imex)
        lines.append(f"{a:>8}        " + "   ".join(cells))
    whole = all(up for _, up in nvl.imex)
    lines += ["", f"Domain State: {'UP' if whole else 'DEGRADED'}"]
    return "\n".join(lines) + "\n"


def fm_service(nvl: NvlFacts | None) -> str:
    """``systemctl is-active nvidia-fabricmanager`` on a compute tray: none runs there."""
    return "inactive\n"


def fabric_states(nvl: NvlFacts | None, gpus: int) -> str:
    """``nvidia-smi --query-gpu=index,fabric.state,fabric.status --format=csv,noheader``."""
    if nvl is None:  # a node in no NVLink domain: no GPU in a fabric
        return "".join(f"{g}, [N/A], [N/A]\n" for g in range(gpus))
    row = "Completed, Success" if nvl.registered else "Not Started, [N/A]"
    return "".join(f"{g}, {row}\n" for g in range(gpus))
