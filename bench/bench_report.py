"""Benchmark: report size and render time (Python, and load in headless Chromium) by cluster size.

Run: ``.venv/bin/python bench/bench_report.py [--sizes 8,64,128,512,1024,4096] [--fabric roce]
[--no-browser]``. Each size is a simulated sweep (orchestrator + simulator, 3% jitter, 1%
glitches, a bad NIC, a slow node, a hung node, an unreachable node and a degraded spine link) on
a rail-optimized InfiniBand (or RoCE) fabric. Prints a table; no asserts. Browser time is
Chromium's ``--dump-dom`` wall time minus the same for an empty page (its start-up). ``paths``:
failing tests drawn on the topology picture, ``mode`` how (one line group per test, or counted
per link), ``path s`` the time to find their switch links (part of ``html s``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabriccheck.faults import FaultSet  # noqa: E402
from fabriccheck.report.html import render_html  # noqa: E402
from fabriccheck.report.path_overlay import per_test  # noqa: E402
from fabriccheck.report.paths import failing_paths  # noqa: E402
from fabriccheck.report.tabular import render_csv, render_json  # noqa: E402
from fabriccheck.specs import resolve_spec  # noqa: E402
from fabriccheck.topology.generators import generate, node_names  # noqa: E402

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def topology(nodes: int, fabric: str = "infiniband"):
    per_leaf = 4 if nodes <= 16 else 32
    spines = 4 if nodes <= 16 else min(32, max(8, nodes // 128))
    return generate({"kind": "rail-optimized", "nodes": nodes, "gpus_per_node": 8, "rails": 8,
                     "nodes_per_leaf": per_leaf, "spines": spines},
                    name=f"{fabric}-rail-{nodes}", fabric=fabric)


def faults(nodes: int) -> FaultSet:
    names = node_names(nodes)
    return FaultSet.from_dict({"noise": {"jitter": 0.03, "glitch_rate": 0.01}, "faults": [
        {"kind": "nic_degraded", "nic": f"{names[2]}/mlx5_3", "factor": 0.25},
        {"kind": "node_slow", "node": names[-3], "factor": 0.5},
        {"kind": "node_hang", "node": names[len(names) // 2]},
        {"kind": "node_unreachable", "node": names[-1]},
        {"kind": "link_degraded", "link": ["leaf-1-2", "spine-3"], "factor": 0.4},
    ]})


def browser_s(chromium: str, page: Path, tmp: Path) -> float:
    profile = tmp / "profile"
    t0 = time.perf_counter()
    subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                    "--window-size=1400,1000", page.as_uri()],
                   capture_output=True, timeout=300, check=False)
    return time.perf_counter() - t0


def main() -> None:
    from fabriccheck import orchestrator
    from fabriccheck.executors.sim.executor import SimExecutor

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="8,64,128,512,1024,4096")
    ap.add_argument("--fabric", default="infiniband", choices=("infiniband", "roce"))
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args()
    chromium = None if args.no_browser else shutil.which("chromium")
    tmp = Path(tempfile.mkdtemp(prefix="fc-bench-report-"))
    empty = tmp / "empty.html"
    empty.write_text("<!DOCTYPE html><title>x</title>")
    base = browser_s(chromium, empty, tmp) if chromium else 0.0
    print(f"{'nodes':>6} {'tests':>7} {'rounds':>6} {'paths':>5} {'mode':>8} {'path s':>6} "
          f"{'html MB':>8} {'html s':>7} {'json MB':>8} {'json s':>7} {'csv MB':>7} "
          f"{'browser s':>9}")
    for n in (int(s) for s in args.sizes.split(",")):
        topo = topology(n, args.fabric)
        spec = resolve_spec(None, topo)
        ex = SimExecutor(topo, spec, faults(n), seed=1)
        result = orchestrator.run("sweep", sorted(topo.nodes), topo, spec, ex)
        ex.close()
        tp = time.perf_counter()
        paths = failing_paths(result, topo)
        tp = time.perf_counter() - tp
        mode = "per-test" if per_test(paths, len(topo.nodes)) else "per-link"
        t0 = time.perf_counter()
        html = render_html(result, topo)
        t1 = time.perf_counter()
        js = render_json(result)
        t2 = time.perf_counter()
        csv = render_csv(result)
        page = tmp / f"report-{n}.html"
        page.write_text(html, encoding="utf-8")
        load = f"{browser_s(chromium, page, tmp) - base:9.2f}" if chromium else f"{'-':>9}"
        print(f"{n:>6} {result.tests:>7} {result.rounds:>6} {len(paths.tests):>5} {mode:>8} "
              f"{tp:>6.2f} {len(html.encode()) / 1e6:>8.2f} "
              f"{t1 - t0:>7.2f} {len(js) / 1e6:>8.1f} {t2 - t1:>7.2f} "
              f"{len(csv) / 1e6:>7.2f} {load}", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
