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
#: run commands record history by default: tests write it to a throwaway place, never to ~
if "FABRICCHECK_DB" not in os.environ:
    _HISTORY_DIR = tempfile.mkdtemp(prefix="fc-test-history-")
    atexit.register(shutil.rmtree, _HISTORY_DIR, ignore_errors=True)
    os.environ["FABRICCHECK_DB"] = os.path.join(_HISTORY_DIR, "history.sqlite")


def read_fixture(relpath: str) -> str:
    """A shared fixture's text with its first ``# source:`` line stripped (see INDEX.md)."""
    path = SHARED_FIXTURES / relpath
    if not path.exists():
        path = LOCAL_FIXTURES / relpath
    text = path.read_text(encoding="utf-8", errors="replace")
    first, _, rest = text.partition("\n")
    return rest if first.startswith("# source:") else text


@pytest.fixture
def fixture_text():
    return read_fixture
