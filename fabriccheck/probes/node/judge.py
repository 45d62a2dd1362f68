"""The one entry point from a node-local tool output to its report (pure): detect the tool,
judge with the catalogue, in the context the preflight knows (what ports the topology uses,
since when the kernel log is new, how long the counters' window was)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from importlib import import_module

from fabriccheck.errors import ParseError
from fabriccheck.probes._text import strip_source_line
from fabriccheck.probes.node import NODE_TOOLS
from fabriccheck.probes.node.catalogue import Catalogue, builtin_catalogue
from fabriccheck.probes.node.findings import NodeReport


@dataclass(frozen=True)
class NodeContext:
    """What the judgement may know beyond the text (all optional; ``parse`` knows none).

    ``since``: kernel-log events before it were judged by an earlier check (history keeps it per
    node and boot); None reads the whole log and says so. ``since_uptime_s``: the same for a log
    stamped in seconds since boot (``[ 8123.402117]``), valid for ``boot_id``. ``boot_id``: the
    boot the history's ``since`` belongs to. ``window_s``: seconds between the first and last
    counter read when the text does not say. ``uptime_s``: seconds since boot (``/proc/uptime``),
    the time base of lifetime counter totals. ``used_ports``: NIC or netdev names the topology
    uses (a down port outside it is info); None when unknown. ``expected_gpus``: GPUs the spec
    says a node has.
    """

    since: datetime | None = None
    since_uptime_s: float | None = None
    boot_id: str | None = None
    window_s: float | None = None
    uptime_s: float | None = None
    used_ports: frozenset[str] | None = None
    expected_gpus: int | None = None


#: tool -> (module, judge function); each judge is ``(text, catalogue, context) -> NodeReport``
JUDGES: Mapping[str, tuple[str, str]] = {
    "nvidia-smi": ("smi_table", "judge_table"),
    "nvidia-smi-L": ("smi_table", "judge_list"),
    "nvidia-smi-topo": ("smi_table", "judge_topo"),
    "nvidia-smi-q": ("smi_query", "judge_query"),
    "nvidia-smi-qx": ("smi_xml", "judge_xml"),
    "nvidia-smi-nvlink": ("smi_nvlink", "judge_nvlink"),
    "kernel-log": ("kernel", "judge_kernel_log"),
    "ibstat": ("ports", "judge_ibstat"),
    "ibstatus": ("ports", "judge_ibstatus"),
    "ib-sysfs": ("ports", "judge_sysfs_text"),
    "ethtool": ("ports", "judge_ethtool"),
    "perfquery": ("counters", "judge_perfquery"),
    "ethtool-S": ("counters", "judge_ethtool_stats"),
    "lspci": ("pcie", "judge_lspci"),
    "rocm-smi": ("amd", "judge_rocm_smi"),
    "amd-smi": ("amd", "judge_amd_smi"),
    "node-config": ("config", "judge_node_config"),
    "nic-config": ("config_nic", "judge_nic_config"),
    "imex": ("imex", "judge_imex"),
}
assert set(JUDGES) == set(NODE_TOOLS)

#: detection order: (tool, module, predicate); the first predicate that holds names the tool.
#: Specific formats first (XML, JSON, sectioned outputs); a stamped kernel log before the
#: formats that accept bare driver messages.
DETECTORS: tuple[tuple[str, str, str], ...] = (
    ("node-config", "config", "looks_like_node_config"),
    ("nic-config", "config", "looks_like_nic_config"),
    ("imex", "imex", "looks_like_imex"),
    ("nvidia-smi-qx", "smi_xml", "looks_like_xml"),
    ("rocm-smi", "amd", "looks_like_rocm_smi"),
    ("amd-smi", "amd", "looks_like_amd_smi"),
    ("nvidia-smi-q", "smi_query", "looks_like_query"),
    ("nvidia-smi-nvlink", "smi_nvlink", "looks_like_nvlink"),
    ("nvidia-smi-topo", "smi_table", "looks_like_topo"),
    # before the table's "only nvidia-smi messages" case: a log of Xid 79 lines is a log
    ("kernel-log", "kernel", "looks_like_kernel_log"),
    ("nvidia-smi", "smi_table", "looks_like_table"),
    ("nvidia-smi-L", "smi_table", "looks_like_list"),
    ("perfquery", "counters", "looks_like_perfquery"),
    ("ethtool-S", "counters", "looks_like_ethtool_stats"),
    ("ibstat", "ports", "looks_like_ibstat"),
    ("ibstatus", "ports", "looks_like_ibstatus"),
    ("ethtool", "ports", "looks_like_ethtool"),
    ("ib-sysfs", "ports", "looks_like_sysfs_text"),
    ("lspci", "pcie", "looks_like_lspci"),
)


def _fn(module: str, name: str):
    return getattr(import_module(f"fabriccheck.probes.node.{module}"), name)


def detect_node_tool(text: str, among: Collection[str] | None = None) -> str | None:
    """The node-local tool that printed ``text``, or None when none did; ``among``: only
    these tools can have (a preflight knows which family its command runs).

    >>> detect_node_tool("hello") is None
    True
    """
    for tool, module, predicate in DETECTORS:
        if among is not None and tool not in among:
            continue
        try:
            fn = _fn(module, predicate)
        except (ImportError, AttributeError):  # a family not built yet
            continue
        if fn(text):
            return tool
    return None


def judge_node_text(text: str, tool: str | None = None, *, catalogue: Catalogue | None = None,
                    context: NodeContext | None = None) -> NodeReport:
    """Judge one node-local tool output.

    Raises
    ------
    ParseError
        ``tool`` unknown, or None and the text is no node-local tool's output.
    """
    text = strip_source_line(text)
    tool = tool or detect_node_tool(text)
    if tool is None:
        raise ParseError("not the output of a node-local tool", tool="detect",
                         excerpt=text.strip()[:120],
                         hint=f"name the tool with --tool: {', '.join(NODE_TOOLS)}")
    if tool not in JUDGES:
        raise ParseError(f"unknown node-local tool {tool!r}", tool="detect",
                         hint=f"use one of {', '.join(NODE_TOOLS)}")
    module, name = JUDGES[tool]
    return _fn(module, name)(text, catalogue or builtin_catalogue(), context or NodeContext())
