"""``fabriccheck report``: re-render a stored run's report (from a directory, file or run id)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fabriccheck.cli.app import app, err, exit_on_error, out, write_json
from fabriccheck.errors import ConfigError, FabricCheckError
from fabriccheck.models import RunResult

if TYPE_CHECKING:  # networkx is imported only when a topology is loaded
    from fabriccheck.topology.model import Topology


def _from_db(run_id: str, db: Path | None) -> tuple[RunResult, Topology | None, list[str]]:
    from fabriccheck.serialize import run_result_from_dict
    from fabriccheck.store import Store, default_db_path

    path = db or default_db_path()
    if not Path(path).is_file():
        raise ConfigError(
            f"{run_id!r} is not a report directory or file, and there is no history database",
            source=str(path), hint="give a report directory, a results.json, or --db FILE",
        )  # fmt: skip
    with Store(path) as store:
        try:
            rec = store.run(run_id)
        except ConfigError:
            raise ConfigError(
                f"{run_id!r} is not a report directory or file, and there is no run {run_id!r} "
                f"in {path}",
                hint="`fabriccheck history runs` lists run ids; or give a report directory "
                     "(e.g. reports/demo-...)") from None  # fmt: skip
        if rec.summary is None:
            hint = ("it is still running (or was killed: continue it with `fabriccheck "
                    f"{rec.mode} --resume {run_id}`)" if rec.status == "running"
                    else f"{rec.error}" if rec.error else None)  # fmt: skip
            raise ConfigError(f"run {run_id!r} {rec.status}: no verdicts to report",
                              source=str(path), hint=hint)  # fmt: skip
        result = run_result_from_dict({"mode": rec.mode, "nodes": rec.nodes, **rec.summary})
        result.observations = store.observations(run_id)
        if "history" not in result.extra:
            result.extra["history"] = _history(store, rec)
    result.extra.setdefault("run_id", run_id)
    result.extra.setdefault("started_s", rec.started_s)
    topology, warnings = None, []
    source = rec.params.get("topology") if isinstance(rec.params, dict) else None
    if source:
        from fabriccheck.topology import load_topology

        try:
            topology = load_topology(source)
        except FabricCheckError as exc:
            warnings.append(f"{exc.message}; drawing nodes only")
    return result, topology, warnings


def _history(store, rec, limit: int = 30) -> dict:
    """States of this run's unhealthy nodes over the stored runs up to it (for sparklines)."""
    import time

    from fabriccheck.report.charts import history_from_runs

    summary = rec.summary or {}
    nodes = {*summary.get("drain", ()), *summary.get("unreachable", ()),
             *summary.get("suspects", ()), *summary.get("bad_nodes", ())}  # fmt: skip
    if not nodes:
        return {}
    past = [r for r in store.runs(limit=500) if r.started_s <= rec.started_s and r.summary]
    past = sorted(past, key=lambda r: r.started_s)[-limit:]
    runs = [{"run_id": r.run_id, "nodes": r.nodes, "summary": r.summary,
             "time": time.strftime("%Y-%m-%d %H:%M", time.gmtime(r.started_s))} for r in past]
    return history_from_runs(runs, nodes)


@app.command("report")
def report(
    run: Annotated[str, typer.Argument(
        help="A report directory, a results.json file, or a run id from the history DB.")],
    out_dir: Annotated[Path | None, typer.Option(
        "-o", "--out", help="Where to write (default: beside results.json; reports/<id>).")] = None,
    db: Annotated[Path | None, typer.Option(
        "--db", help="History database for a run id (default: $FABRICCHECK_DB).")] = None,
    topology_file: Annotated[str | None, typer.Option(
        "--topology", "-t", help="Topology file or bundled name to draw the run on.")] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the written paths as JSON.")] = False,
) -> None:  # fmt: skip
    """Render index.html, results.json and observations.csv for a stored run."""
    from fabriccheck.report import load_run_dir, render_report

    with exit_on_error(one_line=True):
        path = Path(run)
        if path.exists():
            result, topology, warnings = load_run_dir(path)
            default_out = path if path.is_dir() else path.parent
        else:
            result, topology, warnings = _from_db(run, db)
            default_out = Path("reports") / run
        if topology_file:
            from fabriccheck.topology import load_topology

            topology = load_topology(topology_file)
            warnings = []
        for w in warnings:
            err.print(f"warning: {w}", highlight=False, markup=False)
        index = render_report(result, topology, out_dir or default_out)
    files = [str(index.parent / n) for n in ("index.html", "results.json", "observations.csv")]
    if json_:
        write_json({"index": str(index), "files": files})
    else:
        out.print(f"report: {index}", highlight=False, markup=False)
