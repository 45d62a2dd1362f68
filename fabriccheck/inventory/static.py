"""Static inventory: node lists from ``--nodes`` (Slurm hostlist syntax) or from a file."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import hostlist

from fabriccheck.errors import ConfigError


def expand_nodes(spec: str, *, source: str = "--nodes", field: str | None = None) -> list[str]:
    """Expand a hostlist expression (``node[001-016,020]``, comma/space separated) to names.

    python-hostlist does the work (brackets, ranges, top-level commas); blanks separate
    expressions too. Order is kept, duplicates dropped. A bad expression raises a
    :class:`ConfigError` naming ``source`` (a flag, or a file with ``field`` = its line).

    >>> expand_nodes("node-[001-003],node-010")
    ['node-001', 'node-002', 'node-003', 'node-010']
    >>> expand_nodes("n[3-1]", source="nodes.txt", field="line 2")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fabriccheck.errors.ConfigError: nodes.txt:line 2: bad hostlist 'n[3-1]': start > stop (...)
    """
    text = ",".join(spec.split())
    try:
        names = hostlist.expand_hostlist(text)
    except hostlist.BadHostlist as exc:
        raise ConfigError(
            f"bad hostlist {spec.strip()!r}: {exc}",
            source=source,
            field=field,
            hint="use names like node-[001-016,020] separated by commas",
        ) from exc
    return list(dict.fromkeys(names))


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
        out.extend(expand_nodes(line, source=str(p), field=f"line {lineno}"))
    if not out:
        raise ConfigError("no nodes listed", source=str(p), hint="one hostlist per line")
    return list(dict.fromkeys(out))


def compress_nodes(names: Iterable[str]) -> str:
    """The compact hostlist form of ``names`` (for messages and Slurm commands).

    >>> compress_nodes(["node-001", "node-002", "node-003"])
    'node-[001-003]'
    """
    return hostlist.collect_hostlist(list(names))
