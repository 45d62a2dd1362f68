"""Static inventory: node lists from ``--nodes`` (Slurm hostlist syntax) or from a file."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import hostlist

from fabriccheck.errors import ConfigError


def expand_nodes(spec: str, *, source: str = "--nodes") -> list[str]:
    """Expand a hostlist expression (``node[001-016,020]``, comma/space separated) to names.

    Order is kept, duplicates dropped.

    >>> expand_nodes("node-[001-003],node-010")
    ['node-001', 'node-002', 'node-003', 'node-010']
    """
    text = " ".join(spec.split())
    if not text:
        return []
    out: list[str] = []
    for part in _split_top_level(text):
        try:
            out.extend(hostlist.expand_hostlist(part))
        except hostlist.BadHostlist as exc:
            raise ConfigError(
                f"bad hostlist {part!r}: {exc}",
                source=source,
                hint="use names like node-[001-016,020] separated by commas",
            ) from exc
    return list(dict.fromkeys(out))


def _split_top_level(text: str) -> list[str]:
    """Split on commas/spaces that are not inside ``[...]``."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if depth == 0 and ch in ", ":
            if cur:
                parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if depth != 0:
        raise ConfigError(f"unbalanced brackets in {text!r}", source="--nodes")
    if cur:
        parts.append("".join(cur))
    return parts


def load_node_file(path: str | Path) -> list[str]:
    """Read node names from a file: one hostlist expression per line, ``#`` comments allowed.

    A YAML/JSON-ish ``nodes:`` list is also accepted (``- node-001`` lines).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read node list: {exc.strerror}", source=str(p)) from exc
    out: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line or line in ("nodes:", "---"):
            continue
        if line.startswith("- "):
            line = line[2:].strip().strip("'\"")
        out.extend(expand_nodes(line, source=f"{p}:{lineno}"))
    if not out:
        raise ConfigError("no nodes listed", source=str(p), hint="one hostlist per line")
    return list(dict.fromkeys(out))


def compress_nodes(names: Iterable[str]) -> str:
    """The compact hostlist form of ``names`` (for messages and Slurm commands).

    >>> compress_nodes(["node-001", "node-002", "node-003"])
    'node-[001-003]'
    """
    return hostlist.collect_hostlist(list(names))
