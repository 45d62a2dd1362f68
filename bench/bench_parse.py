"""Parse speed: the fast paths against the state machines (issue 30), and MB/s per parser.

The first table gives, per tool and input set, ms per output of the line-by-line state machine
(``parse_*_reference``: before) and of the public parser (fast path, else the state machine:
after), and how many of the outputs the fast path read. Inputs: outputs the simulator renders
(``tests/probes/sim_outputs.py``: seeds, faults, both tools, every size) and the repo's
fixtures. The second table is the parse speed per parser over the real fixtures (MB/s), plus
big inputs built from them.

Run: ``.venv/bin/python bench/bench_parse.py [--seconds 0.5]``. Prints tables; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from fabriccheck.probes.detect import detect_tool  # noqa: E402
from fabriccheck.probes.iperf3 import parse_iperf3  # noqa: E402
from fabriccheck.probes.nccl_log import scan_nccl_log  # noqa: E402
from fabriccheck.probes.nccl_tests import (  # noqa: E402
    parse_nccl_tests,
    parse_nccl_tests_fast,
    parse_nccl_tests_reference,
)
from fabriccheck.probes.perftest import (  # noqa: E402
    parse_perftest,
    parse_perftest_fast,
    parse_perftest_reference,
)
from tests.conftest import LOCAL_FIXTURES, SHARED_FIXTURES, read_fixture  # noqa: E402
from tests.probes.sim_outputs import sim_outputs  # noqa: E402

#: tool -> (fixtures folder, state machine, public parser, fast path alone)
BEFORE_AFTER = {
    "nccl-tests": ("nccl-tests", parse_nccl_tests_reference, parse_nccl_tests,
                   parse_nccl_tests_fast),
    "perftest": ("perftest", parse_perftest_reference, parse_perftest, parse_perftest_fast),
}
PARSERS = {
    "nccl-tests": ("nccl-tests", parse_nccl_tests),
    "perftest": ("perftest", parse_perftest),
    "iperf3": ("iperf3", parse_iperf3),
    "nccl-log": ("nccl-logs", scan_nccl_log),
}


def _texts(folder: str) -> list[str]:
    return [read_fixture(f"{folder}/{p.name}")
            for root in (SHARED_FIXTURES, LOCAL_FIXTURES)
            for p in sorted((root / folder).glob("*.txt"))]


def _timed(fn, texts: list[str], seconds: float) -> tuple[int, float]:
    """Parse all of ``texts`` again and again for at least ``seconds``: (passes, elapsed)."""
    reps, start = 0, time.perf_counter()
    while True:
        for t in texts:
            fn(t)
        reps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return reps, elapsed


def _rate(fn, texts: list[str], seconds: float) -> tuple[float, int]:
    size = sum(len(t.encode()) for t in texts)
    reps, elapsed = _timed(fn, texts, seconds)
    return size * reps / elapsed / 1e6, reps


def _ms_per_output(fn, texts: list[str], seconds: float) -> float:
    reps, elapsed = _timed(fn, texts, seconds)
    return elapsed / (reps * len(texts)) * 1e3


def before_after(seconds: float) -> Table:
    """ms per output: state machine (before) and public parser (after), per tool and input."""
    table = Table("tool", "input", "outputs", "fast path", "before ms", "after ms", "speed-up",
                  title="fast path vs state machine (ms per output)")
    sim = sim_outputs()
    for tool, (folder, reference, public, fast) in BEFORE_AFTER.items():
        for name, texts in (("simulator", [t for k, t in sim if k == tool]),
                            ("repo fixtures", [read_fixture(f"{folder}/{p.name}") for p in
                                               sorted((LOCAL_FIXTURES / folder).glob("*.txt"))])):
            before = _ms_per_output(reference, texts, seconds)
            after = _ms_per_output(public, texts, seconds)
            read = sum(fast(t) is not None for t in texts)
            table.add_row(tool, name, str(len(texts)), str(read), f"{before:.4f}", f"{after:.4f}",
                          f"{before / after:.2f}x")
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=0.5, help="time per measurement")
    args = ap.parse_args()
    Console().print(before_after(args.seconds))
    table = Table("parser", "input", "files", "bytes", "reps", "MB/s", title="parse speed")
    for name, (folder, fn) in PARSERS.items():
        texts = _texts(folder)
        rate, reps = _rate(fn, texts, args.seconds)
        table.add_row(name, "fixtures", str(len(texts)), str(sum(map(len, texts))), str(reps),
                      f"{rate:.1f}")
    big_log = "\n".join(_texts("nccl-logs")) * 60  # ~1.5 MB job log
    a3 = read_fixture("nccl-tests/nccl_allreduce_h100_2node_16gpu_gcp_a3mega_ok.txt").splitlines()
    big_nccl = "\n".join(a3[:22] + a3[22:53] * 300 + a3[53:]) + "\n"  # -N 300: 9300 rows
    for name, fn, text in (("nccl-log", scan_nccl_log, big_log),
                           ("nccl-tests", parse_nccl_tests, big_nccl),
                           ("detect", detect_tool, big_log)):
        rate, reps = _rate(fn, [text], args.seconds)
        table.add_row(name, "large", "1", str(len(text)), str(reps), f"{rate:.1f}")
    Console().print(table)


if __name__ == "__main__":
    main()
