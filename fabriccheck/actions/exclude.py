"""The exclude list: nodes jobs should avoid, as a Slurm hostlist or a one-host-per-line hostfile.

``hostlist`` format is one line for ``sbatch --exclude=$(cat FILE)`` (``node-[003,017]``);
``hostfile`` format is one host per line (MPI hostfiles, ``srun -x`` via ``--exclude=./FILE``).
Reading accepts both (and ``#`` comments). Writes are atomic (temp file + rename).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import hostlist

from fabriccheck.errors import ConfigError

FORMATS = ("hostlist", "hostfile")


def parse_exclude(text: str, *, source: str = "<exclude>") -> list[str]:
    """Hosts named by an exclude file in either format, in order, without duplicates.

    >>> parse_exclude("node-[001-003],gpu7\\n")
    ['node-001', 'node-002', 'node-003', 'gpu7']
    >>> parse_exclude("# bad\\nnode-001\\nnode-002  slots=8\\n")
    ['node-001', 'node-002']
    """
    out: dict[str, None] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        token = line.split()[0]  # hostfile lines may carry "slots=N"
        try:
            out.update(dict.fromkeys(hostlist.expand_hostlist(token)))
        except hostlist.BadHostlist as exc:
            raise ConfigError(f"bad host list {token!r}: {exc}", source=source,
                              field=f"line {lineno}") from exc  # fmt: skip
    return list(out)


def guess_format(path: Path) -> str:
    """``hostfile`` for an existing multi-line file or a ``*.hosts``/``*hostfile*`` name."""
    if path.exists():
        text = path.read_text()
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
        if len(lines) > 1:
            return "hostfile"
        if lines:
            return "hostlist"
    name = path.name.lower()
    return "hostfile" if name.endswith(".hosts") or "hostfile" in name else "hostlist"


def render_exclude(nodes: Iterable[str], fmt: str = "hostlist") -> str:
    """The file text for ``nodes`` in ``fmt`` (sorted; empty file when no node)."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown exclude format {fmt!r}", hint=f"use one of {FORMATS}")
    nodes = sorted(set(nodes))
    if not nodes:
        return ""
    if fmt == "hostfile":
        return "\n".join(nodes) + "\n"
    return hostlist.collect_hostlist(nodes) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename (readers never see a half-written file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def update_exclude_file(
    path: str | os.PathLike[str],
    *,
    add: Iterable[str] = (),
    remove: Iterable[str] = (),
    fmt: str | None = None,
) -> list[str]:
    """Add ``add`` and drop ``remove`` from the exclude file at ``path``; returns its hosts.

    The format is kept from the existing file (or guessed from the name) unless ``fmt`` says.
    """
    p = Path(path)
    fmt = fmt or guess_format(p)
    current = parse_exclude(p.read_text(), source=str(p)) if p.exists() else []
    drop = set(remove)
    hosts = sorted((set(current) | set(add)) - drop)
    write_atomic(p, render_exclude(hosts, fmt))
    return hosts
