"""The kernel log (``dmesg``): GPU Xid events and mlx5 NIC errors (pure).

NVIDIA's driver logs ``NVRM: Xid (PCI:0000:18:00): 79, pid=..., GPU has fallen off the bus.``;
the mlx5 driver logs ``mlx5_core 0000:1a:00.0: ...`` lines, of which health-poll failures,
command timeouts, fatal errors and module (cable) errors mean a sick NIC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabriccheck.errors import ParseError

_XID = re.compile(r"NVRM: Xid \((?P<pci>[^)]*)\): (?P<code>\d+)")
_MLX5 = re.compile(r"mlx5_core (?P<pci>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])[: ]"
                   r".*?(?P<what>health|fatal|timeout|"
                   r"Cable error|module error|internal error|FW fatal|syndrome)", re.I)
#: Xids that are the application's fault, not the hardware's (13: graphics engine exception,
#: 31: MMU fault, 43: GPU stopped processing -- all commonly raised by user code)
APPLICATION_XIDS = frozenset({13, 31, 43})


@dataclass(frozen=True)
class KernelEvent:
    """One hardware event line: ``kind`` ``xid`` or ``mlx5``, the PCI address, the detail."""

    kind: str
    pci: str
    detail: str
    line: str


def parse_kernel_log(text: str) -> list[KernelEvent]:
    """Hardware events (Xids other than application ones, mlx5 errors) in ``dmesg`` text.

    >>> [e.detail for e in parse_kernel_log(
    ...     "[ 5.1] NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.")]
    ['79']
    """
    out = []
    for line in text.splitlines():
        if (m := _XID.search(line)) and int(m["code"]) not in APPLICATION_XIDS:
            out.append(KernelEvent("xid", m["pci"], m["code"], line.strip()))
        elif m := _MLX5.search(line):
            out.append(KernelEvent("mlx5", m["pci"], m["what"], line.strip()))
    return out


_STAMP = re.compile(r"^\s*(?:\[\s*\d+\.\d+\]|\w{3} ?\d{1,2} \d\d:\d\d:\d\d|<\d>)", re.M)


def hardware_events(text: str) -> float:
    """How many hardware event lines the kernel log holds.

    Raises
    ------
    ParseError
        Text that is not a kernel log (no ``[ seconds]`` stamps), e.g. ``dmesg: read kernel
        buffer failed: Operation not permitted``: no reading, never a clean 0.
    """
    if text.strip() and not _STAMP.search(text):
        raise ParseError("no kernel log lines ('[  seconds] ...')", tool="dmesg", excerpt=text)
    return float(len(parse_kernel_log(text)))
