"""The report directory: write every report file of a run, and read a stored run back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fabriccheck.errors import ConfigError, FabricCheckError
from fabriccheck.models import RunResult
from fabriccheck.report.html import render_html
from fabriccheck.report.tabular import render_csv, render_json
from fabriccheck.serialize import run_result_from_dict
from fabriccheck.topology.model import Topology

INDEX, RESULTS, OBSERVATIONS, TOPOLOGY = (
    "index.html", "results.json", "observations.csv", "topology.json",
)  # fmt: skip
#: above this many links topology.json only references the topology file (when there is one)
EMBED_MAX_LINKS = 20_000


def topology_document(topology: Topology) -> dict[str, Any]:
    """``topology.json``: ``{"source": file}`` when loaded from a file, else the explicit form."""
    if topology.source and not topology.source.startswith("<") and (
        len(topology.links) > EMBED_MAX_LINKS or Path(topology.source).is_file()
    ):
        return {"source": topology.source}
    return {
        "name": topology.name,
        "fabric": topology.fabric,
        "gpus_per_node": topology.gpus_per_node,
        **({"spec": topology.spec} if topology.spec else {}),
        "nodes": [
            {"name": n.name, "gpus": n.gpus,
             "nics": [{"name": c.name, "rail": c.rail, "gbps": c.gbps} for c in n.nics]}
            for n in topology.nodes.values()
        ],  # fmt: skip
        "switches": [{"name": s.name, "tier": s.tier} for s in topology.switches.values()],
        "links": [{"a": lk.a, "b": lk.b, "gbps": lk.gbps} for lk in topology.links.values()],
    }


def render_report(result: RunResult, topology: Topology | None, out_dir: str | Path) -> Path:
    """Write ``index.html``, ``results.json``, ``observations.csv`` (and ``topology.json``).

    Parameters
    ----------
    result
        The run to report.
    topology
        Its fabric (None: the pictures show nodes only).
    out_dir
        Directory to write into; created when missing, existing report files replaced.

    Returns
    -------
    Path
        The path of ``index.html``.

    Raises
    ------
    ConfigError
        ``out_dir`` cannot be created or written.
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / RESULTS).write_text(render_json(result), encoding="utf-8")
        (out / OBSERVATIONS).write_text(render_csv(result), encoding="utf-8")
        if topology is not None:
            (out / TOPOLOGY).write_text(
                json.dumps(topology_document(topology), separators=(",", ":")) + "\n",
                encoding="utf-8",
            )
        else:
            (out / TOPOLOGY).unlink(missing_ok=True)  # never pair a run with an old fabric
        index = out / INDEX
        index.write_text(render_html(result, topology), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot write the report: {exc.strerror or exc}", source=str(out),
            hint="choose another output directory with -o",
        ) from exc  # fmt: skip
    return index


def load_run_dir(path: str | Path) -> tuple[RunResult, Topology | None, list[str]]:
    """Read a stored run: a report directory or a ``results.json`` file.

    Returns
    -------
    (RunResult, Topology | None, warnings)
        The topology comes from ``topology.json`` beside the results, when it can be read;
        a problem with it is a warning (the report is drawn without it), not an error.

    Raises
    ------
    ConfigError
        No results file there, or it is not a fabriccheck run result.
    """
    p = Path(path)
    results = p / RESULTS if p.is_dir() else p
    if not results.is_file():
        raise ConfigError(
            "no results.json here", source=str(p),
            hint="give a report directory, a results.json file, or a run id with --db",
        )  # fmt: skip
    try:
        data = json.loads(results.read_text(encoding="utf-8"))
        result = run_result_from_dict(data)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"not readable JSON: {exc}", source=str(results)) from exc
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(
            f"not a fabriccheck run result (missing or bad {exc})", source=str(results),
        ) from exc  # fmt: skip
    topology, warnings = None, []
    topo_file = results.parent / TOPOLOGY
    if topo_file.is_file():
        topology, warn = read_topology_document(topo_file)
        warnings += warn
    return result, topology, warnings


def read_topology_document(path: Path) -> tuple[Topology | None, list[str]]:
    """Read ``topology.json`` (see :func:`topology_document`); problems become warnings."""
    from fabriccheck.topology.load import load_topology, topology_from_dict

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and set(doc) == {"source"}:
            return load_topology(doc["source"]), []
        return topology_from_dict(doc, source=str(path)), []
    except (OSError, json.JSONDecodeError) as exc:
        return None, [f"{path}: topology not readable ({exc}); drawing nodes only"]
    except FabricCheckError as exc:
        return None, [f"{exc.message}; drawing nodes only"]
