"""Signal values: regex group, built-in parsers and plugins from the entry-point group.

The plugin test installs a real distribution: a ``*.dist-info`` folder with an
``entry_points.txt`` on ``sys.path`` (no monkeypatching of importlib.metadata), so the lookup
goes through ``importlib.metadata.entry_points`` exactly as for a pip-installed plugin.
"""

from __future__ import annotations

import pytest

from fabriccheck.errors import ConfigError, ParseError
from fabriccheck.probes import signal_value
from fabriccheck.probes.signal_value import BUILTIN_PARSERS, extract_value


def test_regex_takes_the_first_match():
    assert extract_value("a 12 Gb/sec\nb 7 Gb/sec", regex=r"(?P<value>\d+) Gb/sec") == 12.0


def test_regex_without_a_match_or_number_is_a_parse_error():
    with pytest.raises(ParseError):
        extract_value("nothing", regex=r"(?P<value>\d+) Gb/sec")
    with pytest.raises(ParseError, match="not a number"):
        extract_value("rate: fast", regex=r"rate: (?P<value>\w+)")


def test_every_builtin_parser_refuses_garbage_with_a_parse_error():
    for name, fn in BUILTIN_PARSERS.items():
        with pytest.raises(ParseError):
            fn("sh: 1: tool: not found\n")
        with pytest.raises(ParseError):
            extract_value("sh: 1: tool: not found\n", parser=name)


def test_unknown_parser_names_the_known_ones():
    with pytest.raises(ConfigError, match="nvidia-smi-gpus"):
        extract_value("x", parser="no-such-parser")


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "fcplug_demo.py").write_text(
        "def temp_max(text):\n"
        "    return max(float(w) for w in text.split() if w.isdigit())\n"
        "def broken(text):\n"
        "    raise KeyError('boom')\n")
    dist = tmp_path / "fcplug_demo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fcplug-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[fabriccheck.signals]\ngpu-temp-max = fcplug_demo:temp_max\n"
        "broken-plugin = fcplug_demo:broken\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    signal_value.plugin_parsers.cache_clear()
    yield
    signal_value.plugin_parsers.cache_clear()


def test_entry_point_parser_is_found_and_used(plugin):
    assert "gpu-temp-max" in signal_value.plugin_parsers()
    assert extract_value("GPU temps 41 77 52", parser="gpu-temp-max") == 77.0


def test_a_plugin_failing_on_odd_text_is_a_parse_error_not_a_crash(plugin):
    with pytest.raises(ParseError, match="broken-plugin"):
        extract_value("x", parser="broken-plugin")
