"""Shared test fixtures: where the real published tool outputs live."""

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
