"""History store: write and query times by cluster size (prints a table; not a test).

Usage: .venv/bin/python bench/bench_store.py [--sizes 256,1024,4096] [--runs 10]
Each run is a two-round ib_write_bw sweep (N tests); rows show seconds per run written round by
round, and the time of the lemon, drift and baseline queries over all runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fabriccheck.store import Store  # noqa: E402
from tests.runfactory import build_run, nodes  # noqa: E402


def bench(n: int, runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        store = Store(Path(d) / "h.sqlite")
        names = nodes(n)
        write_s = 0.0
        for k in range(runs):
            result = build_run(names, node_gbps={names[3]: 100.0}, seed=k)
            t0 = time.perf_counter()
            run_id = store.begin_run("sweep", names, sku="h100", started_s=1e9 + k)
            for rnd in (0, 1):
                store.record_round(run_id, rnd, [o for o in result.observations
                                                 if o.test.round == rnd])  # fmt: skip
            store.finish_run(run_id, result)
            write_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        lemons = store.lemon_nodes()
        lemon_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        store.drifting_nodes()
        drift_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        store.baseline("h100", "ib_write_bw", 2)
        base_s = time.perf_counter() - t0
        size_mb = (Path(d) / "h.sqlite").stat().st_size / 1e6
        store.close()
    assert lemons[0].node == names[3]
    return {"nodes": n, "obs/run": n, "write s/run": write_s / runs, "lemons s": lemon_s,
            "drift s": drift_s, "baseline s": base_s, "db MB": size_mb}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="256,1024,4096")
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    rows = [bench(int(s), args.runs) for s in args.sizes.split(",")]
    cols = list(rows[0])
    print(" | ".join(f"{c:>12}" for c in cols))
    for r in rows:
        print(" | ".join(f"{r[c]:>12.3f}" if isinstance(r[c], float) else f"{r[c]:>12}"
                         for c in cols))  # fmt: skip


if __name__ == "__main__":
    main()
