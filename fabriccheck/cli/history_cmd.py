"""``fabriccheck history nodes | runs | drift | actions``: what the history database remembers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fabriccheck.cli.app import app, exit_on_error, out, write_json
from fabriccheck.errors import ConfigError

history = typer.Typer(
    help="What past runs say: lemon nodes, runs, drifting bandwidth, actions taken.",
    no_args_is_help=True,
)
app.add_typer(history, name="history")

Db = Annotated[
    str | None,
    typer.Option("--db", help="History database (default $FABRICCHECK_DB or "
                              "~/.local/state/fabriccheck/history.sqlite)."),
]  # fmt: skip
Json = Annotated[bool, typer.Option("--json", help="Print only JSON.")]
Limit = Annotated[int, typer.Option("--limit", help="At most this many rows.")]
Executor = Annotated[str | None, typer.Option(
    "--executor", metavar="sim|ssh|ray|real|all",
    help="Only runs by this executor; 'real': all but the simulator.")]
EXECUTOR_CHOICES = ("sim", "ssh", "ray", "real", "all")


def _executor(value: str | None, default: str | None) -> str | None:
    """The store's executor filter for ``--executor`` (None: every run)."""
    value = value or default
    with exit_on_error(one_line=True):
        if value is not None and value not in EXECUTOR_CHOICES:
            raise ConfigError(f"unknown executor {value!r}", source="--executor",
                              hint=f"use one of {', '.join(EXECUTOR_CHOICES)}")  # fmt: skip
    return None if value == "all" else value


def _open(db: str | None):
    """The history database; a missing, foreign or too new one is one error line and exit 2."""
    from fabriccheck.store import Store, default_db_path

    path = Path(db) if db else default_db_path()
    with exit_on_error(one_line=True):
        if not path.exists():
            raise ConfigError("no history database here", source=str(path),
                              hint="run a sweep with --db PATH first, or pass --db")  # fmt: skip
        return Store(path)


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


@history.command("nodes")
def nodes_cmd(
    db: Db = None,
    json_: Json = False,
    limit: Limit = 20,
    last_runs: Annotated[int, typer.Option("--last-runs", help="Look at this many runs.")] = 50,
    executor: Executor = None,
) -> None:
    """Lemon nodes: nodes implicated again and again, highest score first, with the signals.

    Real runs only unless --executor says otherwise (simulated faults make no real lemon).
    """
    with _open(db) as store:
        lemons = store.lemon_nodes(last_runs=last_runs,
                                   executor=_executor(executor, "real"))[:limit]
    if json_:
        write_json([s.to_json() for s in lemons])
        return
    if not lemons:
        out.print("no node was implicated in the stored runs")
        return
    t = Table(title=f"lemon nodes (last {last_runs} runs; --json has every signal)")
    t.add_column("node", no_wrap=True, min_width=max(len(s.node) for s in lemons))
    for col in ("score", "bad", "susp", "unr", "fail/tests", "drained", "back", "flaps",
                "state"):  # fmt: skip
        t.add_column(col, justify="left" if col == "state" else "right", no_wrap=True,
                     min_width=len(col))
    for s in lemons:
        g = s.signals
        t.add_row(
            s.node, f"{s.score:.1f}", str(g["bad_runs"]), str(g["suspect_runs"]),
            str(g["unreachable_runs"]), f"{g['failed_tests']}/{g['tests']}", str(g["drained"]),
            str(g["returned"]), str(g["flaps"]), s.last_state,
        )  # fmt: skip
    out.print(t)


@history.command("runs")
def _run_row(r) -> dict:
    summary = r.summary or {}
    row = {
        "run_id": r.run_id, "mode": r.mode, "status": r.status, "executor": r.executor,
        "started_s": r.started_s, "finished_s": r.finished_s, "sku": r.sku,
        "nodes": len(r.nodes), "rounds": r.rounds, "drain": summary.get("drain", []),
        "actions_withheld": (summary.get("actions") or {}).get("withheld", False),
        "exit_code": summary.get("exit_code"), "error": r.error,
    }  # fmt: skip
    if r.executor == "sim":
        row.update(faults=r.params.get("faults"), seed=r.params.get("seed"))
    return row


@history.command("runs")
def runs_cmd(db: Db = None, json_: Json = False, limit: Limit = 20,
             executor: Executor = None) -> None:  # fmt: skip
    """Stored runs, newest first, with the executor that produced them (sim runs are simulated).

    status: running (or killed: continue it with --resume), finished, failed (could not test),
    refused (usage error), crashed, interrupted.
    """
    with _open(db) as store:
        rows = [_run_row(r) for r in store.runs(limit=limit,
                                                 executor=_executor(executor, None))]
    if json_:
        write_json(rows)
        return
    t = Table(title="runs")
    for col in ("run id", "mode", "executor", "status", "started", "nodes", "rounds", "drain"):
        t.add_column(col, no_wrap=True)
    for r in rows:
        drain = ", ".join(r["drain"][:5]) + (" ..." if len(r["drain"]) > 5 else "")
        if r["actions_withheld"]:
            drain += " (actions withheld)"
        status = r["status"] + (f": {r['error']}" if r["error"] else "")
        t.add_row(r["run_id"], r["mode"], r["executor"] or "-", status, _when(r["started_s"]),
                  str(r["nodes"]), str(r["rounds"]), drain or "-")  # fmt: skip
    out.print(t)


@history.command("drift")
def drift_cmd(
    db: Db = None,
    json_: Json = False,
    probe: Annotated[str | None, typer.Option("--probe", help="Only this probe.")] = None,
    min_drop: Annotated[float, typer.Option("--min-drop", help="Smallest drop (0..1).")] = 0.05,
    executor: Executor = None,
) -> None:
    """Nodes whose bandwidth falls across sweeps (relative to their peers), before they fail."""
    with _open(db) as store:
        drift = store.drifting_nodes(probe=probe, min_drop=min_drop,
                                     executor=_executor(executor, "real"))
    if json_:
        write_json([d.to_json() for d in drift])
        return
    if not drift:
        out.print("no node is drifting")
        return
    t = Table(title="drifting nodes")
    for col in ("node", "probe", "group", "runs", "drop", "latest", "floor", "below floor"):
        t.add_column(col)
    for d in drift:
        t.add_row(d.node, d.probe, str(d.group_size), str(d.runs), f"{d.drop_fraction:.1%}",
                  f"{d.latest_value:g}" if d.latest_value is not None else "-",
                  f"{d.latest_floor:g}" if d.latest_floor is not None else "-",
                  "yes" if d.below_floor else "no")  # fmt: skip
    out.print(t)


@history.command("actions")
def actions_cmd(
    db: Db = None,
    json_: Json = False,
    node: Annotated[str | None, typer.Option("--node", help="Only this node.")] = None,
) -> None:
    """Every drain/resume fabriccheck took (or would have: dry-run, withheld) and why."""
    with _open(db) as store:
        acts = store.actions(node=node)
    rows = [
        {"node": a.node, "action": a.action, "backend": a.backend, "status": a.status,
         "reason": a.reason, "evidence": list(a.evidence), "at_s": a.at_s, "run_id": a.run_id}
        for a in acts
    ]  # fmt: skip
    if json_:
        write_json(rows)
        return
    t = Table(title="actions")
    for col in ("when", "node", "action", "status", "reason"):
        t.add_column(col)
    for r in rows:
        t.add_row(_when(r["at_s"]), r["node"], r["action"], r["status"], r["reason"])
    out.print(t)


@history.command("metrics")
def metrics_cmd(
    db: Db = None,
    port: Annotated[int | None, typer.Option(
        "--port", help="Serve /metrics on this port (re-read on every scrape) instead of "
                       "printing once.")] = None,
    addr: Annotated[str, typer.Option("--addr", help="Address to serve on.")] = "0.0.0.0",
    mode: Annotated[str | None, typer.Option("--mode", help="Only runs of this mode.")] = None,
    executor: Executor = None,
) -> None:
    """Prometheus metrics of the newest finished run, printed or served over HTTP.

    Real runs only unless --executor says otherwise (a simulated run is no node's health).
    """
    import threading

    from fabriccheck.actions.exporter import HistoryCollector, latest_metrics_text

    exe = _executor(executor, "real")
    store = _open(db)
    path = store.path
    store.close()
    if port is None:
        text = latest_metrics_text(path, mode=mode, executor=exe)
        if not text:
            from fabriccheck.cli.app import err

            err.print(f"no finished run{'' if exe is None else f' by executor {exe}'} in {path}"
                      " (simulated runs: --executor sim)", highlight=False, markup=False)
        out.print(text, end="", markup=False, highlight=False)
        return
    from prometheus_client import CollectorRegistry, start_http_server

    reg = CollectorRegistry(auto_describe=False)
    reg.register(HistoryCollector(path, mode=mode, executor=exe))
    server, thread = start_http_server(port, addr=addr, registry=reg)
    from fabriccheck.cli.app import err

    err.print(f"serving metrics of {path} on http://{addr}:{port}/metrics", highlight=False)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


@history.command("prune")
def prune_cmd(
    db: Db = None,
    json_: Json = False,
    keep_days: Annotated[float, typer.Option("--keep-days", help="Delete runs older than this "
                                             "(actions are kept).")] = 180.0,
    keep_raw_days: Annotated[float, typer.Option("--keep-raw-days", help="Drop raw tool output "
                                                 "older than this.")] = 14.0,
) -> None:
    """Retention: old runs out, old raw tool output stripped (numbers and verdicts stay)."""
    with _open(db) as store:
        done = store.prune(keep_days=keep_days, keep_raw_days=keep_raw_days)
    if json_:
        write_json(done)
    else:
        out.print(f"deleted {done['runs_deleted']} runs, stripped raw output of "
                  f"{done['raw_stripped']} observations", highlight=False)
