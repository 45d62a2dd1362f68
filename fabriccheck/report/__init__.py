"""Reports: HTML/JSON/CSV renderers of a run, written together by :func:`render_report`.

``render_report(result, topology, out_dir)`` writes ``index.html`` (self-contained: open it from
disk, no network), ``results.json`` (the full run, re-renderable with ``fabriccheck report``),
``observations.csv`` (one row per test) and ``topology.json`` (what the pictures were drawn
from: a reference to the topology file, or the topology itself in the explicit file form).
"""

from __future__ import annotations

from fabriccheck.report.files import load_run_dir, render_report
from fabriccheck.report.html import render_html
from fabriccheck.report.tabular import render_csv, render_json

__all__ = ["load_run_dir", "render_csv", "render_html", "render_json", "render_report"]
