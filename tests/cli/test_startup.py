"""CLI start-up stays light: ``--help`` and ``topology show`` import no heavy backend library."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

#: imported only by the executors/inventories/reports that need them (STYLE: lazy)
HEAVY = ("ray", "paramiko", "pandas", "torch")

_PROBE = """
import contextlib, io, json, sys
import fabriccheck.cli.main as m
with contextlib.redirect_stdout(io.StringIO()):
    code = m.main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _modules_after(*args: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert data["code"] == 0, proc.stderr
    return set(data["modules"])


@pytest.mark.parametrize(
    "args",
    [("--help",), ("topology", "show", "roce-rail-64")],
    ids=["help", "topology-show"],
)
def test_cli_start_up_imports_no_heavy_library(args):
    loaded = _modules_after(*args)
    assert "fabriccheck.cli.run_cmd" in loaded  # the probe really ran the whole CLI
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}


def test_topology_show_does_not_load_networkx():
    assert "networkx" not in _modules_after("topology", "show", "roce-rail-64")


def test_help_does_not_load_metrics_store_networkx_or_parsers():
    loaded = _modules_after("--help")
    for name in ("prometheus_client", "networkx", "sqlite3", "fabriccheck.probes.detect"):
        assert name not in loaded, name
