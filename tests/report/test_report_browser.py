"""The report in a real browser (headless Chromium): loads offline, runs its script, is not blank.

Skipped when Debian's ``chromium`` is not installed (``make test`` installs it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fabriccheck.report import render_report
from tests.report.report_runs import Faults, build_run, rail_topology
from tests.report.test_report_xss import evil_run

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt: chromium)")

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars",
)  # fmt: skip
CONSOLE = re.compile(r"INFO:CONSOLE[^\]]*\] \"(.*)\", source: (\S*)")


def chromium(tmp: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)


def page_check(tmp: Path, index: Path) -> tuple[str, list[str]]:
    """The DOM after scripts ran, and every console message the page logged."""
    run = chromium(tmp, index.as_uri(), "--enable-logging=stderr", "--v=0", "--dump-dom")
    assert run.returncode == 0, run.stderr[-2000:]
    page = index.as_uri()
    return run.stdout, [m for m, src in CONSOLE.findall(run.stderr) if src.startswith(page)]


def screenshot_stats(tmp: Path, index: Path, name: str) -> tuple[int, float, tuple]:
    """Distinct colours, the non-white fraction and the banner's colour of a 1400x1000 shot."""
    from PIL import Image

    png = tmp / name
    run = chromium(tmp, index.as_uri(), f"--screenshot={png}", "--window-size=1400,1000")
    assert run.returncode == 0 and png.exists(), run.stderr[-2000:]
    img = Image.open(png).convert("RGB")
    assert img.size == (1400, 1000)
    colours = img.getcolors(maxcolors=img.width * img.height) or []
    grey = img.convert("L").histogram()
    non_white = sum(grey[:235]) / (img.width * img.height)
    return len(colours), non_white, img.getpixel((1300, 70))


@pytest.mark.parametrize("n", [8, 1024])
def test_report_loads_in_chromium_without_errors_and_is_not_blank(tmp_path, n):
    pytest.importorskip("PIL", reason="pillow is in the test extra")
    topo = rail_topology(n, per_leaf=4 if n <= 16 else 32, spines=4 if n <= 16 else 16)
    nodes = sorted(topo.nodes)
    faults = Faults(bad_nic=f"{nodes[2]}/mlx5_3", unreachable=nodes[-1],
                    bad_link=("leaf-0-1", "spine-1"))  # fmt: skip
    index = render_report(build_run(topo, faults), topo, tmp_path / "report")
    dom, console = page_check(tmp_path, index)
    assert console == [], console  # no JS error, no CSP violation, no failed load
    assert 'data-verdict="DRAIN"' in dom  # the page script ran to its end
    assert f"{nodes[2]}/mlx5_3" in dom
    colours, non_white, banner = screenshot_stats(tmp_path, index, f"shot-{n}.png")
    assert colours > 50, colours
    assert non_white > 0.10, non_white
    red = (0xD7, 0x26, 0x3D)  # the DRAIN banner fills the top of the first screen
    assert all(abs(a - b) < 12 for a, b in zip(banner, red, strict=True)), banner


def test_hostile_page_runs_no_injected_code(tmp_path):
    run, topo = evil_run()
    index = render_report(run, topo, tmp_path / "evil")
    dom, console = page_check(tmp_path, index)
    assert console == [], console
    assert 'data-verdict="DRAIN"' in dom
    assert "alert(" not in " ".join(console)
    assert dom.count("<script") == 2


def test_table_sorting_and_filter_scripts_work(tmp_path):
    """report.js on a small page: a header click sorts numerically, the filter box hides rows."""
    from importlib import resources

    js = resources.files("fabriccheck.report").joinpath("templates", "report.js").read_text()
    page = tmp_path / "sort.html"
    page.write_text(
        "<!DOCTYPE html><html><body>"
        '<input data-filter="t" id="f">'
        '<table class="sortable" id="t"><thead><tr><th>name</th><th>value</th></tr></thead>'
        "<tbody><tr><td>b</td><td data-sort='10'>10.0</td></tr>"
        "<tr><td>a</td><td data-sort='9'>9.0</td></tr>"
        "<tr><td>c</td><td data-sort='100'>100.0</td></tr></tbody></table>"
        f"<script>{js}</script><script>"
        "document.querySelectorAll('th')[1].click();"
        "var f = document.getElementById('f'); f.value = 'c';"
        "f.dispatchEvent(new Event('input'));"
        "</script></body></html>",
        encoding="utf-8",
    )
    dom, console = page_check(tmp_path, page)
    assert console == [], console
    cells = re.findall(r"<tr( hidden=\"\")?><td>(\w)</td>", dom)
    assert [c for _, c in cells] == ["a", "b", "c"]  # 9 < 10 < 100: numeric, not text order
    assert [bool(h) for h, _ in cells] == [True, True, False]  # filter 'c' hides a and b
    assert 'aria-sort="ascending"' in dom
