"""Long adversarial lines are read in linear time: no regex backtracks over a line.

A quadratic pattern turns one 200 KB line into minutes (it did: a nccl-tests header key, the
perftest header box, launcher labels glued into rows, Ray's repeat suffix, detection signs);
the timeout marks a hang, not a speed goal (speeds are in bench/bench_parse.py).
"""

from __future__ import annotations

import pytest

from fabriccheck.errors import ParseError
from fabriccheck.probes.detect import detect_tool
from fabriccheck.probes.iperf3 import parse_iperf3
from fabriccheck.probes.nccl_log import scan_nccl_log
from fabriccheck.probes.nccl_tests import parse_nccl_tests
from fabriccheck.probes.perftest import parse_perftest
from fabriccheck.topology.discovery.ibnet_parse import parse_ibnetdiscover
from fabriccheck.topology.discovery.lldp import parse_lldp

N = 100_000
PREFIXES = ["", "# nThread 1 nGpus 1 ", " Device : ", "h:1:2 [0] NCCL WARN ", "(pid=1) ",
            '[1] "S-1"[1] # ', "Interface: ", "[  5]   0.00-1.00   sec ",
            "Interface: eth0\n  SysName: x", "CA 1 1 0x1 4x QDR x",
            "SW 1 1 0x1 4x QDR - CA 1 1 0x2 ( '"]
UNITS_EXTRA = ["' - '"]
UNITS = ["ab ", "a", " ", "\t", "1x", "a:", "[1]", "0[0]", "nThread 1 nGpus 1 "]
PARSERS = [parse_nccl_tests, parse_perftest, parse_iperf3, scan_nccl_log, detect_tool,
           parse_ibnetdiscover, parse_lldp]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("prefix", PREFIXES)
def test_long_lines_finish(prefix):
    for unit in UNITS + UNITS_EXTRA:
        line = prefix + unit * (N // len(unit)) + "\n"
        for parse in PARSERS:
            try:
                parse(line)
            except ParseError:
                pass
