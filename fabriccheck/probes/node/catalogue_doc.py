"""The catalogue rendered into docs/node-checks.md (generated, never hand-copied).

``python -m fabriccheck.probes.node.catalogue_doc`` rewrites the block between
``<!-- catalogue -->`` and ``<!-- /catalogue -->``; ``--check`` exits 1 when it is stale
(``tests/probes/node/test_catalogue.py`` runs the check).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from fabriccheck.probes.node.catalogue import Catalogue, builtin_catalogue

DOC = Path(__file__).resolve().parents[3] / "docs" / "node-checks.md"
_BLOCK = re.compile(r"(<!-- catalogue -->\n)(.*?)(<!-- /catalogue -->)", re.S)
_FAMILIES = (("xid-", "GPU Xid events (kernel log)"), ("kern-", "Kernel log lines by meaning"),
             ("gpu-", "NVIDIA GPU state (nvidia-smi)"),
             ("amd-", "AMD GPU state (rocm-smi, amd-smi)"),
             ("port-", "Ports (ibstat, ibstatus, sysfs, ethtool)"),
             ("ctr-", "Port counters (perfquery, ethtool -S)"), ("eth-", "Ethernet"),
             ("pcie-", "PCIe links (lspci)"),
             ("cfg-", "Configuration: node-config, nic-config (docs/config-checks.md)"))


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def render(cat: Catalogue) -> str:
    """The markdown tables of ``cat``, one per family, in catalogue order."""
    out: list[str] = []
    seen: set[str] = set()
    for prefix, title in _FAMILIES:
        entries = [e for e in cat.with_prefix(prefix) if e.id not in seen]
        if not entries:
            continue
        out += [f"### {title}", "", "| check | severity | part | what | fix | thresholds | "
                "source |", "|---|---|---|---|---|---|---|"]
        for e in entries:
            seen.add(e.id)
            out.append(f"| `{e.id}` | **{e.severity}** | {_cell(e.part)} | {_cell(e.what)} | "
                       f"{_cell(e.fix)} | {_cell(_params(dict(e.params)))} | "
                       f"{_cell(e.source)} |")
        out.append("")
    rest = [e for i, e in cat.entries.items() if i not in seen]
    if rest:
        out += ["### Other", "", "| check | severity | part | what | fix | source |",
                "|---|---|---|---|---|---|"]
        out += [f"| `{e.id}` | **{e.severity}** | {_cell(e.part)} | {_cell(e.what)} | "
                f"{_cell(e.fix)} | {_cell(e.source)} |" for e in rest]
        out.append("")
    return "\n".join(out)


def rewrite(text: str, cat: Catalogue) -> str:
    """``text`` with its catalogue block regenerated."""
    if not _BLOCK.search(text):
        raise ValueError("no <!-- catalogue --> ... <!-- /catalogue --> block")
    return _BLOCK.sub(lambda m: m[1] + render(cat) + m[3], text)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    old = DOC.read_text(encoding="utf-8")
    new = rewrite(old, builtin_catalogue())
    if check:
        if new != old:
            sys.stderr.write(f"{DOC} is stale: run python -m fabriccheck.probes.node."
                             "catalogue_doc\n")
            return 1
        return 0
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
