"""The README's demo sample is the demo's real output (timings and paths aside), not a copy."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from fabriccheck.cli.main import app
from tests.conftest import REPO

#: what differs from machine to machine: wall-clock times and where things are
VOLATILE = (
    (re.compile(r"wall \d+\.\d+ s"), "wall X s"),
    (re.compile(r"\(\d+\.\d+ s wall\)"), "(X s wall)"),
)


def _sample() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("$ fabriccheck demo --out /tmp/fabriccheck-demo\n", 1)[1].split("```")[0]
    return [ln for ln in block.splitlines()
            if ln != "..." and not ln.startswith(("demo: injected faults", "open the report"))]


def _normal(line: str) -> str:
    for pattern, repl in VOLATILE:
        line = pattern.sub(repl, line)
    return line.rstrip()


def test_readme_demo_sample_lines_are_real_output(tmp_path):
    r = CliRunner().invoke(app, ["demo", "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    real = {_normal(ln) for ln in (r.stdout + r.stderr).splitlines()}
    sample = _sample()
    assert len(sample) >= 15
    missing = [ln for ln in sample if _normal(ln) not in real]
    assert not missing, "README demo sample differs from `fabriccheck demo`:\n" + "\n".join(
        missing)
