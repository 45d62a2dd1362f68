"""The examples in the report modules' docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ("advice", "charts", "ladder_table", "path_overlay", "paths", "signals_table", "svg",
           "tabular", "view")


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    mod = importlib.import_module(f"fabriccheck.report.{name}")
    result = doctest.testmod(mod)
    assert result.attempted > 0 and result.failed == 0
