"""Every example in every module's docstrings runs (a doctest that is never run rots: the cover
planner's example claimed one round crossed every link from the day it was written)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import fabriccheck

MODULES = sorted(m.name for m in pkgutil.walk_packages(fabriccheck.__path__, "fabriccheck.")
                 if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
