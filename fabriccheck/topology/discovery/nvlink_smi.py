"""NVLink domains imported from every tray's saved ``nvidia-smi -q`` into a topology's YAML.

``fabriccheck topology import --nvlink-smi DIR`` (docs/nvl72.md, docs/topologies.md): one file
per compute tray, named by its host as the topology names it (``node-001.txt``; the suffixes
:data:`SUFFIXES` are dropped, any other name is the host). The trays whose GPUs report the same
fabric ``ClusterUUID`` and ``CliqueId`` share a domain
(:func:`~fabriccheck.topology.nvlink_import.domains_from_smi`); the domains are appended to the
topology as ``nvlink_domains:`` and the result is loaded once more, so what is written loads.

Bad input is one line naming the file, the field and what to do: a missing or empty folder, a
file that is not ``nvidia-smi -q`` output, two files for one host, a tray that is not a node of
the topology or whose GPU count is not the node's, a topology that has domains already. A tray
whose GPUs report no cluster (an HGX node, a registration not completed) or disagree is left
out with a warning naming its file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from fabriccheck.errors import ConfigError
from fabriccheck.topology.discovery.bounded_read import read_tool_output
from fabriccheck.topology.discovery.common import MAX_DUMP_BYTES
from fabriccheck.topology.dump import domains_yaml
from fabriccheck.topology.fields import parse_yaml
from fabriccheck.topology.load import topology_from_dict
from fabriccheck.topology.model import Topology
from fabriccheck.topology.nvlink_import import ImportedDomains, domains_from_smi

__all__ = ["SmiTrays", "read_nvlink_smi", "with_nvlink_domains"]

#: file name endings dropped to get the host (``node-001.txt`` is ``node-001``)
SUFFIXES = (".txt", ".log", ".out", ".q")
_ATTACHED = re.compile(r"^Attached GPUs\s*:\s*(\d+)\s*$", re.M)
_CLUSTER = re.compile(r"^\s+ClusterUUID\s*:", re.M)
_SAVE = "save each tray's `nvidia-smi -q` as <host>.txt, e.g. nvidia-smi -q > node-001.txt"


@dataclass
class SmiTrays:
    """The trays read: host -> its file, host -> its text, and the domains they make."""

    files: dict[str, Path] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    found: ImportedDomains = field(default_factory=ImportedDomains)

    @property
    def gpus_per_tray(self) -> int | None:
        """The domains' GPUs per tray when they agree (what imported nodes are given)."""
        counts = {d.gpus_per_tray for d in self.found.domains.values()}
        return counts.pop() if len(counts) == 1 else None


def host_of(path: Path) -> str:
    """The host a file is named after.

    >>> host_of(Path("smi/node-001.txt")), host_of(Path("gb-07.rack2.example"))
    ('node-001', 'gb-07.rack2.example')
    """
    for suffix in SUFFIXES:
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            return path.name[: -len(suffix)]
    return path.name


def _files(paths: list[Path]) -> dict[str, Path]:
    """host -> file of every given file and of every file in a given folder (dot files left
    out)."""
    out: dict[str, Path] = {}
    for p in paths:
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
            if not found:
                raise ConfigError("the folder holds no file", source=str(p), hint=_SAVE)
        elif p.exists():
            found = [p]
        else:
            raise ConfigError("no such file or folder", source=str(p),
                              hint="give the folder of per-tray nvidia-smi -q outputs")
        for f in found:
            host = host_of(f)
            if host in out:
                raise ConfigError(f"a second file for host {host!r} (also {out[host]})",
                                  source=str(f), field="file name", hint="one file per tray")
            out[host] = f
    return out


def read_nvlink_smi(paths: list[Path]) -> SmiTrays:
    """Read every tray's ``nvidia-smi -q`` (files or folders of them) and group the trays into
    NVLink domains.

    Raises
    ------
    ConfigError
        No file, an unreadable or binary file, a file that is not ``nvidia-smi -q`` output,
        two files for one host, or no tray in any NVLink domain.
    """
    trays = SmiTrays(files=_files(paths))
    for host, f in trays.files.items():
        text = read_tool_output(f, max_bytes=MAX_DUMP_BYTES)
        if not _ATTACHED.search(text):
            raise ConfigError("not nvidia-smi -q output (no 'Attached GPUs' line)",
                              source=str(f), field="Attached GPUs", hint=_SAVE)
        trays.texts[host] = text
    trays.found = domains_from_smi(trays.texts)
    if not trays.found.domains:
        where = str(paths[0]) if len(paths) == 1 else ", ".join(map(str, paths))
        raise ConfigError(
            f"no NVLink domain in {len(trays.files)} file(s): no tray's GPUs report a fabric "
            "ClusterUUID and CliqueId", source=where, field="Fabric / ClusterUUID",
            hint="give GB200/GB300 trays' nvidia-smi -q, taken once their fabric State is "
            "Completed")
    return trays


def warnings_of(trays: SmiTrays) -> list[str]:
    """One line per tray left out of every domain, naming its file."""
    return [f"{trays.files[h]}: Fabric / ClusterUUID: {why}: {h} is in no NVLink domain (an "
            "HGX node, or a tray whose fabric registration is not Completed)"
            for h, why in sorted(trays.found.unplaced.items())]


def _check_trays(trays: SmiTrays, topo: Topology) -> None:
    for d in trays.found.domains.values():
        for host in d.trays:
            f = str(trays.files[host])
            if host not in topo.nodes:
                raise ConfigError(f"host {host!r} is not a node of topology {topo.name!r}",
                                  source=f, field="file name",
                                  hint="name each file after its host as the topology names it "
                                  "(topology show), e.g. node-001.txt")
            gpus = len(_CLUSTER.findall(trays.texts[host]))
            if topo.nodes[host].gpus != d.gpus_per_tray:
                raise ConfigError(
                    f"{host} has {gpus} GPU(s) in the fabric ({d.name}: {d.gpus_per_tray} per "
                    f"tray), the topology gives the node {topo.nodes[host].gpus}", source=f,
                    field="Attached GPUs", hint="set the node's gpus (--gpus-per-node on import) "
                    "to the tray's")



def with_nvlink_domains(text: str, trays: SmiTrays, *, source: str) -> tuple[str, list[str]]:
    """``text`` (a topology's YAML) with ``nvlink_domains:`` appended from ``trays``, and the
    warnings (trays left out).

    Raises
    ------
    ConfigError
        The topology has domains already; a tray is not one of its nodes or has another GPU
        count (named by its file).
    """
    topo = topology_from_dict(parse_yaml(text, source), source=source)
    if topo.domains:
        raise ConfigError(f"topology {topo.name!r} has NVLink domains already", source=source,
                          field="nvlink_domains",
                          hint="import into a topology without them (remove nvlink_domains, or "
                          "use the explicit form instead of the nvl72 generator)")
    _check_trays(trays, topo)
    out = text.rstrip("\n") + "\n" + "\n".join(domains_yaml(trays.found.domains.values())) + "\n"
    topology_from_dict(parse_yaml(out, source), source=source)  # what is written loads
    return out, warnings_of(trays)
