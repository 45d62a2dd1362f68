"""InfiniBand/RoCE port and PCIe attributes read from sysfs (pure).

``/sys/class/infiniband/<hca>/ports/<p>/state`` prints ``4: ACTIVE``, ``.../rate`` prints
``400 Gb/sec (4X NDR)``; ``/sys/class/infiniband/<hca>/device/{current,max}_link_width`` print
the PCIe lane counts (``16``) and ``.../{current,max}_link_speed`` ``32.0 GT/s PCIe``.
"""

from __future__ import annotations

import re

from fabriccheck.errors import ParseError

#: IB port states (``enum ib_port_state``) by number
PORT_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
_STATE = re.compile(r"^\s*(\d+):\s*([A-Z_]+)\s*$", re.M)
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?) Gb/sec", re.M)
_NUMBER_LINE = re.compile(r"^\s*x?(\d+)\s*$", re.M)
_SPEED_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?) GT/s", re.M)


def port_state(text: str) -> float:
    """The port state number (4 = ACTIVE).

    >>> port_state("4: ACTIVE")
    4.0
    """
    m = _STATE.search(text)
    if m is None:
        raise ParseError("expected '<n>: <STATE>'", tool="sysfs port state", excerpt=text)
    return float(m[1])


def port_rate_gbps(text: str) -> float:
    """The port rate in Gb/s.

    >>> port_rate_gbps("400 Gb/sec (4X NDR)")
    400.0
    """
    m = _RATE.search(text)
    if m is None:
        raise ParseError("expected '<n> Gb/sec'", tool="sysfs port rate", excerpt=text)
    return float(m[1])


def pcie_width_ratio(text: str) -> float:
    """Current PCIe link width over the maximum, from ``cat current_link_width max_link_width``
    (two lines: ``8`` then ``16`` gives 0.5).

    >>> pcie_width_ratio("16\\n16\\n")
    1.0
    >>> pcie_width_ratio("8\\n16\\n")
    0.5
    """
    widths = [int(m[1]) for m in _NUMBER_LINE.finditer(text)]
    if len(widths) < 2 or widths[1] <= 0:
        raise ParseError("expected two lane counts (current, then max)", tool="sysfs pcie width",
                         excerpt=text)
    return widths[0] / widths[1]


def pcie_link_ratio(text: str) -> float:
    """The worse of width and speed, each current over max, from ``cat current_link_width
    max_link_width current_link_speed max_link_speed`` (``16``, ``16``, ``16.0 GT/s PCIe``,
    ``32.0 GT/s PCIe`` gives 0.5: a Gen5 slot running at Gen4).

    >>> pcie_link_ratio("16\\n16\\n32.0 GT/s PCIe\\n32.0 GT/s PCIe\\n")
    1.0
    >>> pcie_link_ratio("16\\n16\\n16.0 GT/s PCIe\\n32.0 GT/s PCIe\\n")
    0.5
    """
    width = pcie_width_ratio(text)
    speeds = [float(m[1]) for m in _SPEED_LINE.finditer(text)]
    if len(speeds) < 2 or speeds[1] <= 0:
        raise ParseError("expected two link speeds (current, then max: '32.0 GT/s PCIe')",
                         tool="sysfs pcie speed", excerpt=text)
    return min(width, speeds[0] / speeds[1])
