"""Shared test fixtures: where the real published tool outputs live; how tests share workers.

``make test`` runs the suite on every core with pytest-xdist (``-n auto --dist loadgroup``).
Every worker is its own process, so this file's temporary history database and config home are
per worker. Tests that hold a machine-wide resource are put on one worker by
:func:`pytest_collection_modifyitems` (see :data:`XDIST_GROUPS`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

#: CI (CI=true) replays the same examples every run, so a landing never depends on a random
#: draw; locally hypothesis explores new examples each run. HYPOTHESIS_PROFILE overrides.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev")
)

REPO = Path(__file__).resolve().parent.parent
#: ../shared/fixtures beside the clone (CI puts shared/ next to the repo);
#: FABRICCHECK_FIXTURES overrides
SHARED_FIXTURES = Path(
    os.environ.get("FABRICCHECK_FIXTURES", REPO.parent / "shared" / "fixtures")
).resolve()
LOCAL_FIXTURES = REPO / "tests" / "fixtures"
#: why tests over third-party outputs are skipped on a bare clone (CI has ../shared beside it)
SHARED_ABSENT = (
    f"third-party tool outputs are read in place from {SHARED_FIXTURES} (never copied into the "
    "repo); it is absent here (set FABRICCHECK_FIXTURES, or put shared/ beside the clone)"
)
#: mark a test that reads ``SHARED_FIXTURES`` directly
requires_shared = pytest.mark.skipif(not SHARED_FIXTURES.is_dir(), reason=SHARED_ABSENT)
#: the user's own config file never changes what a test runs (tests/cli/test_config.py sets one)
os.environ.pop("FABRICCHECK_CONFIG", None)
_CONFIG_HOME = tempfile.mkdtemp(prefix="fc-test-config-")
atexit.register(shutil.rmtree, _CONFIG_HOME, ignore_errors=True)
os.environ["XDG_CONFIG_HOME"] = _CONFIG_HOME
#: the console is one width wherever the suite runs (a terminal's, or 80 without one, and an
#: xdist worker's longer temporary paths would squeeze a table's other columns out)
os.environ["COLUMNS"] = "160"
#: run commands record history by default: tests write it to a throwaway place, never to ~
if "FABRICCHECK_DB" not in os.environ:
    _HISTORY_DIR = tempfile.mkdtemp(prefix="fc-test-history-")
    atexit.register(shutil.rmtree, _HISTORY_DIR, ignore_errors=True)
    os.environ["FABRICCHECK_DB"] = os.path.join(_HISTORY_DIR, "history.sqlite")


def read_fixture(relpath: str) -> str:
    """A shared fixture's text with its first ``# source:`` line stripped (see INDEX.md).

    Looked up in ``../shared/fixtures`` then ``tests/fixtures``; when it is in neither and
    ``../shared`` is absent, the calling test (or module) is skipped with the reason.
    """
    path = SHARED_FIXTURES / relpath
    if not path.exists():
        path = LOCAL_FIXTURES / relpath
    if not path.exists() and not SHARED_FIXTURES.is_dir():
        # inside a test: that test is skipped; at import time: the module is
        pytest.skip(f"{relpath}: {SHARED_ABSENT}", allow_module_level=True)
    text = path.read_text(encoding="utf-8", errors="replace")
    first, _, rest = text.partition("\n")
    return rest if first.startswith("# source:") else text


@pytest.fixture
def fixture_text():
    return read_fixture


#: xdist groups (``--dist loadgroup``): the tests of one group run on one worker, one at a time.
#: ``machine``: tests that hold something machine-wide. The namespace lab (root's network
#: namespaces, sshd, tc, and the real Slurm and Ray clusters inside them): their bandwidth is
#: measured (two labs at once on two cores make the shaped links miss their rates) and lab-4 is
#: one session singleton per worker. Real Ray clusters (one at a time: each starts its own GCS,
#: raylet and workers). Tests that look for stray probe processes machine-wide by command line
#: (``pgrep -af 'iperf3 -s -1 -B 127.'``), so no other worker's live iperf3 server may run then.
#: ``doc-<page>:<line>``: the commands of one doc block (tests/docs/test_doc_commands.py), which
#: read each other's files.
MACHINE_WIDE = ("tests/executors/test_ssh.py", "tests/executors/test_contract.py",
                "tests/executors/test_ray_contract.py")


def _xdist_group(item: pytest.Item) -> str | None:
    if item.get_closest_marker("lab") or item.get_closest_marker("ray"):
        return "machine"
    cmd = getattr(item, "callspec", None) and item.callspec.params.get("cmd")
    if item.nodeid.startswith("tests/docs/test_doc_commands.py::") and cmd is not None:
        return f"doc-{cmd.doc.name}:{cmd.block}"  # a block's commands read each other's files
    if item.nodeid.split("::", 1)[0] in MACHINE_WIDE:
        return "machine"
    return None


#: the slow tier's timeout where a test sets none (pyproject's 300 s is the fast tier's): its
#: sweeps of thousands of nodes take minutes of CPU, more when both workers are busy
SLOW_TIMEOUT_S = 1200


def pytest_itemcollected(item: pytest.Item) -> None:
    """Each test's xdist group, set as it is collected (xdist's worker-side
    ``collection_modifyitems`` reads the groups into the test ids the scheduler sees); a slow
    test's timeout."""
    if item.get_closest_marker("slow") and item.get_closest_marker("timeout") is None:
        item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
    if not item.config.pluginmanager.hasplugin("xdist"):  # -p no:xdist: the mark is unknown
        return
    if item.get_closest_marker("xdist_group") is None:
        group = _xdist_group(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
