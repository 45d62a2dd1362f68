"""Parse speed per parser over the real fixtures (MB/s), plus big inputs built from them.

Run: ``.venv/bin/python bench/bench_parse.py [--seconds 0.5]``. Prints a table; asserts nothing.
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
from fabriccheck.probes.nccl_tests import parse_nccl_tests  # noqa: E402
from fabriccheck.probes.perftest import parse_perftest  # noqa: E402
from tests.conftest import LOCAL_FIXTURES, SHARED_FIXTURES, read_fixture  # noqa: E402

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


def _rate(fn, texts: list[str], seconds: float) -> tuple[float, int]:
    size = sum(len(t.encode()) for t in texts)
    reps, start = 0, time.perf_counter()
    while True:
        for t in texts:
            fn(t)
        reps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return size * reps / elapsed / 1e6, reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=0.5, help="time per measurement")
    args = ap.parse_args()
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
