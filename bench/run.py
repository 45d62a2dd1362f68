"""Run every benchmark script in bench/ (``bench_*.py``), one after the other; print their tables.

Usage: ``python bench/run.py [NAME ...]`` (names filter, e.g. ``sweep topology``).
Exit code: the number of scripts that failed (0 when all ran).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    scripts = sorted(BENCH.glob("bench_*.py"))
    if argv:
        scripts = [s for s in scripts if any(a in s.stem for a in argv)]
    failed = 0
    for script in scripts:
        print(f"\n=== {script.name} ===", flush=True)
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, str(script)], cwd=BENCH.parent)
        took = time.monotonic() - t0
        status = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode})"
        print(f"--- {script.name}: {status} in {took:.1f} s", flush=True)
        failed += proc.returncode != 0
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
