"""A signal's value from its command's text: a regex's ``value`` group, or a named parser (pure).

Parsers are ``text -> float`` callables. The built-in ones read the preflight tools' real formats
(one module per tool in this package); more come from the entry-point group
``fabriccheck.signals`` (``importlib.metadata``): a distribution declares, e.g. in its
``pyproject.toml``::

    [project.entry-points."fabriccheck.signals"]
    gpu-temp-max = "mysite.signals:gpu_temp_max"     # def gpu_temp_max(text: str) -> float

and a signal says ``parser: gpu-temp-max``. A built-in name wins over a plugin of the same name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from fabriccheck.errors import ConfigError, ParseError
from fabriccheck.probes import ethtool_stats, ib_sysfs, ibstat, kernel_log, nvidia_smi, perfquery
from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.probes.node.findings import FAULT, Finding
from fabriccheck.probes.node.judge import NodeContext, detect_node_tool, judge_node_text

SignalParser = Callable[[str], float]
ENTRY_POINT_GROUP = "fabriccheck.signals"

#: the built-in parsers, by the name a signal's ``parser:`` gives
BUILTIN_PARSERS: Mapping[str, SignalParser] = {
    "nvidia-smi-gpus": nvidia_smi.gpu_count,
    "nvidia-smi-unhealthy": nvidia_smi.unhealthy_gpus,
    "ib-port-state": ib_sysfs.port_state,
    "ib-port-rate": ib_sysfs.port_rate_gbps,
    "pcie-width-ratio": ib_sysfs.pcie_width_ratio,
    "pcie-link-ratio": ib_sysfs.pcie_link_ratio,
    "ibstat-active-ports": ibstat.active_ports,
    "ibstat-min-rate": ibstat.min_rate_gbps,
    "perfquery-error-growth": perfquery.error_growth,
    "ethtool-error-growth": ethtool_stats.error_growth,
    "kernel-hw-events": kernel_log.hardware_events,
}


#: parsers that judge a node-local output with the catalogue (docs/node-checks.md): the value is
#: the number of fault findings, and the findings ride along (warns are listed, infos recorded);
#: None means the tool is detected (counters: perfquery or ethtool -S)
NODE_PARSERS: Mapping[str, str | None] = {
    "node-gpu": "nvidia-smi-q",
    "node-nvlink": "nvidia-smi-nvlink",
    "node-kernel": "kernel-log",
    "node-counters": None,
    "node-config": "node-config",
    "nic-config": "nic-config",
    "node-imex": "imex",
}


#: what ``node-counters`` reads: perfquery (InfiniBand) or ethtool -S (RoCE)
COUNTER_TOOLS = ("perfquery", "ethtool-S")


@dataclass(frozen=True)
class Reading:
    """A signal's value and, for a judged node-local output, its findings and facts."""

    value: float
    findings: tuple[Finding, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)


def node_reading(text: str, parser: str, context: NodeContext | None = None,
                 catalogue: Catalogue | None = None) -> Reading:
    """Judge ``text`` with node parser ``parser`` (:data:`NODE_PARSERS`): the value is how many
    fault findings there are (a leading ``/proc/uptime`` line is the counters judge's to read:
    the time base of lifetime counters); an incomplete output adds a warn.

    >>> node_reading("", "node-kernel").value
    Traceback (most recent call last):
    ...
    fabriccheck.errors.ParseError: node-kernel: empty output
    """
    if not text.strip():
        raise ParseError("empty output", tool=parser)
    context = context or NodeContext()
    tool = NODE_PARSERS[parser] or detect_node_tool(text, among=COUNTER_TOOLS)
    if tool is None:
        raise ParseError("not counter output (perfquery or ethtool -S)", tool=parser,
                         excerpt=text)
    report = judge_node_text(text, tool, catalogue=catalogue, context=context)
    findings = report.findings
    if not report.complete:
        findings += (Finding("warn", "incomplete", "node", f"{tool}: incomplete output: "
                             f"{report.reason or 'it stops early'}",
                             fix="run the command by hand on the node; see its stderr"),)
    faults = sum(1 for f in findings if f.severity == FAULT)
    return Reading(float(faults), findings, report.facts)


@lru_cache(maxsize=1)
def plugin_parsers() -> dict[str, SignalParser]:
    """Parsers registered under the entry-point group ``fabriccheck.signals`` (loaded once;
    call ``plugin_parsers.cache_clear()`` after installing one in-process)."""
    from importlib.metadata import entry_points

    out: dict[str, SignalParser] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plugin is a config problem, named
            raise ConfigError(f"entry point {ep.name!r} ({ep.value}) does not load: {exc}",
                              source=ENTRY_POINT_GROUP,
                              hint="fix or uninstall the plugin's distribution") from exc
        if not callable(obj):
            raise ConfigError(f"entry point {ep.name!r} ({ep.value}) is not callable",
                              source=ENTRY_POINT_GROUP, hint="point it at a text -> float function")
        out.setdefault(ep.name, obj)
    return out


def resolve_parser(name: str) -> SignalParser:
    """The parser called ``name``: a built-in, else a plugin.

    Raises
    ------
    ConfigError
        No parser has that name (the hint lists the known ones).
    """
    if name in BUILTIN_PARSERS:
        return BUILTIN_PARSERS[name]
    if name in NODE_PARSERS:
        return lambda text: node_reading(text, name).value
    plugins = plugin_parsers()
    if name in plugins:
        return plugins[name]
    known = ", ".join(sorted({*BUILTIN_PARSERS, *NODE_PARSERS, *plugins}))
    raise ConfigError(f"no signal parser {name!r}", field="parser",
                      hint=f"built-in or entry point ({ENTRY_POINT_GROUP}): {known}")


def extract_reading(text: str, *, regex: str | None = None, parser: str | None = None,
                    context: NodeContext | None = None,
                    catalogue: Catalogue | None = None) -> Reading:
    """:func:`extract_value`, or for a node parser (:data:`NODE_PARSERS`) the judged reading
    with its findings (``context``/``catalogue``: what the run knows, the spec's catalogue)."""
    if parser in NODE_PARSERS:
        return node_reading(text, parser, context, catalogue)
    return Reading(extract_value(text, regex=regex, parser=parser))


def extract_value(text: str, *, regex: str | None = None, parser: str | None = None) -> float:
    """The signal's value in ``text``: the first match of ``regex``'s group ``value``, or what
    parser ``parser`` returns.

    >>> extract_value("400 Gb/sec (4X NDR)", regex=r"(?P<value>\\d+) Gb/sec")
    400.0

    Raises
    ------
    ParseError
        No match, a value that is not a number, or the parser failed.
    """
    if regex is not None:
        m = re.search(regex, text, re.M)
        if m is None or m.group("value") is None:
            raise ParseError(f"no match for {regex!r}", tool="signal", excerpt=text)
        return _number(m.group("value"), text)
    if parser is None:
        raise ParseError("neither a regex nor a parser", tool="signal")
    fn = resolve_parser(parser)
    if parser in BUILTIN_PARSERS or parser in NODE_PARSERS:  # ours: a bug must show
        return _number(fn(text), text)
    try:
        value = fn(text)
    except ParseError:
        raise
    except Exception as exc:  # a plugin's failure on odd text is an unparseable result
        raise ParseError(f"parser {parser!r} failed: {type(exc).__name__}: {exc}",
                         tool="signal", excerpt=text) from exc
    return _number(value, text)


def _number(value: object, text: str) -> float:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ParseError(f"value {value!r} is not a number", tool="signal", excerpt=text) from None
    if out != out:  # NaN
        raise ParseError("value is NaN", tool="signal", excerpt=text)
    return out
