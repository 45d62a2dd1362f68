"""Node-local evidence judged as a careful operator does (docs/node-checks.md).

One module per tool family reads its output into :class:`~.findings.Finding` values whose
severity (``fault`` drain, ``warn`` list, ``info`` record) comes from the catalogue
(``catalogue/*.yaml``: data, each entry with its source). :func:`~.judge.judge_node_text` is the
one entry point: ``fabriccheck parse`` and the preflight give the same judgement.
"""

from __future__ import annotations

#: the node-local tool formats, by the name ``--tool`` and the ``tool`` JSON key use
NODE_TOOLS = (
    "nvidia-smi", "nvidia-smi-q", "nvidia-smi-qx", "nvidia-smi-L", "nvidia-smi-topo",
    "nvidia-smi-nvlink", "kernel-log", "ibstat", "ibstatus", "ib-sysfs", "perfquery",
    "ethtool", "ethtool-S", "lspci", "rocm-smi", "amd-smi", "node-config", "nic-config",
    "imex",
)
