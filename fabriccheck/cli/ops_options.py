"""The operations flags shared by sweep, gate and bisect (history, scheduler, actions, metrics).

``run_cmd`` adds these parameters to its commands and builds :class:`OpsOptions` with
:func:`ops_options`; the behaviour lives in :mod:`fabriccheck.actions.session`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from fabriccheck.actions.session import OpsOptions

Db = Annotated[str | None, typer.Option(
    "--db", help="History database (default $FABRICCHECK_DB or "
                 "~/.local/state/fabriccheck/history.sqlite).", rich_help_panel="History")]
NoHistory = Annotated[bool, typer.Option(
    "--no-history", help="Do not record this run.", rich_help_panel="History")]
Resume = Annotated[str | None, typer.Option(
    "--resume", metavar="RUN_ID", help="Continue a killed run: its finished rounds are "
    "replayed from history (use the same flags and --seed).", rich_help_panel="History")]
Scheduler = Annotated[str | None, typer.Option(
    "--scheduler", help="slurm | kubernetes: idle nodes come from it (when no nodes are "
    "given) and actions go to it.", rich_help_panel="Scheduler and actions")]
Partition = Annotated[str | None, typer.Option(
    "--partition", help="Slurm partition to take idle nodes from.",
    rich_help_panel="Scheduler and actions")]
Selector = Annotated[str | None, typer.Option(
    "--selector", help="Kubernetes label selector for the nodes.",
    rich_help_panel="Scheduler and actions")]
SkipTested = Annotated[float, typer.Option(
    "--skip-tested-within", metavar="SECONDS", help="Sweep: leave out nodes tested this "
    "recently (from history).", rich_help_panel="Scheduler and actions")]
Apply = Annotated[bool, typer.Option(
    "--apply", help="Act (drain / cordon confirmed-bad nodes, resume recovered ones); "
    "without it actions are only planned and logged.", rich_help_panel="Scheduler and actions")]
MaxDrain = Annotated[float, typer.Option(
    "--max-drain", metavar="FRACTION", help="Never take out more than this share of the tested "
    "nodes in one run; above it nothing is done (fabric-wide problem).",
    rich_help_panel="Scheduler and actions")]
ExcludeFile = Annotated[str | None, typer.Option(
    "--exclude-file", metavar="FILE", help="Keep this exclude list (Slurm hostlist, or one host "
    "a line) of confirmed-bad nodes up to date.", rich_help_panel="Scheduler and actions")]
Metrics = Annotated[str | None, typer.Option(
    "--metrics", metavar="FILE", help="Write Prometheus metrics of this run (textfile "
    "collector format, atomically).", rich_help_panel="Scheduler and actions")]


def ops_options(
    *,
    db: str | None = None,
    no_history: bool = False,
    resume: str | None = None,
    scheduler: str | None = None,
    partition: str | None = None,
    selector: str | None = None,
    skip_tested_within: float = 0.0,
    apply: bool = False,
    max_drain: float = 0.1,
    exclude_file: str | None = None,
    metrics: str | None = None,
) -> OpsOptions:
    """The :class:`OpsOptions` for the flags above."""
    return OpsOptions(
        db=db, no_history=no_history, resume=resume, scheduler=scheduler, partition=partition,
        selector=selector, skip_tested_within_s=skip_tested_within, apply=apply,
        max_drain=max_drain, exclude_file=exclude_file, metrics=metrics,
    )  # fmt: skip
