"""``fabriccheck sweep | gate | bisect | demo``: run a health check; say what was found and why.

Exit codes: 0 healthy · 1 faults found (gate: do not start the job) · 2 usage/config error ·
3 could not test. With ``--json`` stdout holds only the run-result contract JSON, whose
``exit_code`` is the process's; progress goes to stderr either way (``-q``: none).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, redirect_stdout
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer

from fabriccheck.actions.session import OpsOptions
from fabriccheck.cli import ops_options as oo
from fabriccheck.cli.app import app, err, exit_on_error, out, set_verbosity, write_json
from fabriccheck.cli.app import quiet as is_quiet
from fabriccheck.cli.run_options import RunOptions, run_command
from fabriccheck.cli.run_setup import Setup, check_flags, provenance, setup
from fabriccheck.errors import FabricCheckError
from fabriccheck.models import RunResult

DEMO_TOPOLOGY = "roce-rail-64"

Scale = Annotated[int, typer.Option("--scale", help="Add a collective round over groups of "
                                                    "this many nodes (0: off).")]


def demo_faults() -> Path:
    """The demo's faults file, bundled with the package (works from a wheel, any directory)."""
    return Path(str(resources.files("fabriccheck._bundled") / "topologies" / "faults"
                    / "demo-roce-64.yaml"))  # fmt: skip


DEMO_FAULTS = demo_faults()


class _Progress:
    """Per-round progress on stderr: the round's test time and the run's total so far."""

    def __init__(self, quiet: bool) -> None:
        self.quiet, self.total_s, self.t0 = quiet, 0.0, time.monotonic()

    def __call__(self, ev: dict) -> None:
        total = float(ev.get("test_seconds", 0.0))
        this, self.total_s = total - self.total_s, total
        if self.quiet:
            return
        purposes = ", ".join(f"{n} {p}" for p, n in sorted(ev.get("purposes", {}).items()))
        err.print(f"[cyan]round {ev['round']}[/] ({ev.get('kind', '')}): {ev['tests']} tests "
                  f"({purposes}), {ev.get('failed', 0)} not passing · test time {this:.0f} s "
                  f"(total {total:.0f} s) · wall {time.monotonic() - self.t0:.1f} s",
                  highlight=False)  # fmt: skip


def _session_run(mode, s: Setup, policy, session, opts: RunOptions, log_suspects) -> RunResult:
    from fabriccheck.orchestrator import run
    from fabriccheck.planning.preflight import run_signals

    nodes = session.select_nodes(s.nodes, explicit=s.explicit, known=s.topology.nodes)
    if not (opts.quiet or opts.json_):
        err.print(f"[bold]{mode}[/] of {len(nodes)} nodes on {s.topology.name} "
                  f"({s.topology.fabric}), spec {s.spec.name}, executor {s.executor.name}",
                  highlight=False)  # fmt: skip
    session.begin(nodes, params=s.params)
    policy = policy.with_(kernel_since=session.kernel_since(nodes))
    with session.hold(nodes):
        signals, _ = run_signals(s.spec, s.topology, nodes, policy)
        executor = session.wrap(s.executor, s.spec, signals)
        return run(mode, nodes, s.topology, s.spec, executor, policy,
                   progress=_Progress(opts.quiet), log_suspects=log_suspects)  # fmt: skip


def _run(mode: str, s: Setup, policy, opts: RunOptions, *, ops: OpsOptions,
         log_suspects: tuple[str, ...] = (), extra: dict | None = None) -> RunResult:
    """Run the orchestrator inside the operations session (history, scheduler hold, actions);
    a run that ends without a result is recorded as refused, failed, crashed or interrupted."""
    from fabriccheck.actions.session import OpsSession

    session = OpsSession(mode, ops, sku=s.spec.sku, fabric=s.topology.fabric,
                         executor=opts.executor)  # fmt: skip
    try:
        result = _session_run(mode, s, policy, session, opts, log_suspects)
        result.extra.update({**provenance(opts), **(extra or {})})
        result.extra["exit_code"] = result.exit_code  # kept in history too
        if session.run_id:
            result.extra["run_id"] = session.run_id
        session.finish(result, topology=s.topology)
    except BaseException as exc:
        why = str(exc) if isinstance(exc, FabricCheckError) else f"{type(exc).__name__}: {exc}"
        session.abort(_end_state(exc), why)
        raise
    finally:
        s.executor.close()
        session.close()
    if opts.report:
        result.extra["report"] = str(_write_report(result, s.topology, opts.report))
    return result


def _end_state(exc: BaseException) -> str:
    """The history state of a run that ended with ``exc`` (exit 2: refused, 3: failed)."""
    if isinstance(exc, FabricCheckError):
        return "refused" if exc.exit_code == 2 else "failed"
    return "interrupted" if isinstance(exc, KeyboardInterrupt) else "crashed"


def _write_report(result: RunResult, topology, out_dir: str) -> Path:
    from fabriccheck.report import render_report

    return Path(render_report(result, topology, out_dir))


def _finish(result: RunResult, json_: bool, code: int) -> None:
    from fabriccheck.cli.run_summary import print_summary
    from fabriccheck.serialize import run_result_to_dict

    result.extra["exit_code"] = code
    if json_:
        write_json(run_result_to_dict(result))
    else:
        print_summary(result, out)
    raise typer.Exit(code)


Levels = Annotated[str | None, typer.Option(
    "--levels", help="Ladder levels (nodes per test), e.g. 1,2 (default: the spec's levels, "
                     "else 1,2,4,8).")]


LinkScreen = Annotated[str | None, typer.Option(
    "--link-screen", help="auto | on | off: the link screen's top-up rounds, which clear every "
                          "switch link of failing one test in five (InfiniBand; auto: fabrics "
                          "of up to 4,096 switch links).")]


def _policy_flags(levels: str | None = None, link_screen: str | None = None,
                  **_: Any) -> dict[str, Any]:
    """The policy fields the flags ``--levels`` and ``--link-screen`` set (a
    :class:`ConfigError` naming a bad one)."""
    from fabriccheck.planning.ladder import parse_levels
    from fabriccheck.policy import link_screen_policy

    out: dict[str, Any] = link_screen_policy(link_screen)
    if levels is not None:
        out["levels"] = parse_levels(levels)
    return out


def _policy(mode: str, spec=None, levels: str | None = None, link_screen: str | None = None,
            **kw):
    from fabriccheck.policy import BisectPolicy, GatePolicy, SweepPolicy, spec_probes

    kw = {k: v for k, v in kw.items() if v is not None}
    if spec is not None:  # probes default to what the test spec defines
        kw.update(spec_probes(spec, kw.get("pair_probe")))
    kw.update(_policy_flags(levels, link_screen))
    if levels is None and spec is not None and getattr(spec, "levels", None) and mode != "bisect":
        kw["levels"] = spec.levels
    return {"gate": GatePolicy, "bisect": BisectPolicy, "sweep": SweepPolicy}[mode](**kw)


@contextmanager
def _run_guard(mode: str, opts: RunOptions) -> Iterator[None]:
    """Errors inside become one line and an exit code; with --json a run that could not test
    (exit 3) still prints a result object, and whatever the run itself prints goes to stderr:
    stdout is the JSON alone (Ray's driver, for one, prints cluster events on stdout from a
    background thread, and has no public switch for it)."""
    set_verbosity(opts.verbose, opts.quiet)
    opts.quiet = is_quiet()  # -q before or after the command
    quiet_stdout = redirect_stdout(sys.stderr) if opts.json_ else nullcontext()
    try:
        with exit_on_error(one_line=True), quiet_stdout:
            yield
    except typer.Exit as stop:
        if opts.json_ and stop.exit_code == 3:  # could not test: scripts still get a result
            write_json({"mode": mode, "exit_code": 3, "error": str(stop.__cause__),
                        **provenance(opts)})  # fmt: skip
        raise


def _run_mode(mode: str, opts: RunOptions, ops: OpsOptions, **policy) -> None:
    """Check, set up, run and report one sweep or gate."""
    with _run_guard(mode, opts):
        _policy_flags(**policy)  # a bad flag fails before anything loads
        check_flags(mode, opts)
        s = setup(opts)
        pol = _policy(mode, spec=s.spec, seed=opts.seed, pair_probe=opts.probe,
                      budget_s=opts.budget_s, **opts.signal_policy(), **policy)  # fmt: skip
        result = _run(mode, s, pol, opts, ops=ops)
    _finish(result, opts.json_, result.exit_code)


@run_command("sweep")
def sweep(opts: RunOptions, scale: Scale = 0, partition: oo.Partition = None,
          selector: oo.Selector = None, skip_tested_within: oo.SkipTested = 0.0,
          levels: Levels = None, link_screen: LinkScreen = None) -> None:
    """The ladder over idle nodes (1x, 2x, 4x, 8x; two carvings per level >= 2): attribution,
    confirmation, bisection, link localization."""
    ops = opts.ops(partition=partition, selector=selector, skip_tested_within=skip_tested_within)
    _run_mode("sweep", opts, ops, scale_group_size=scale, levels=levels,
              link_screen=link_screen)


@run_command("gate", budget_s=300.0)
def gate(opts: RunOptions, levels: Levels = None) -> None:
    """Pre-job gate: 1x beside one rail-pair round, one collective over the job's nodes (a
    second pair round only if something failed).

    Nodes: NODES / --nodes, else the Slurm allocation (SLURM_JOB_NODELIST).
    Exit 0 go, 1 bad nodes (listed), 2 usage error, 3 could not test.
    """
    _run_mode("gate", opts, opts.ops(), levels=levels)


@run_command("bisect")
def bisect(opts: RunOptions,
           job_log: Annotated[str | None, typer.Option("--job-log", help="The job's NCCL log.")]
           = None, job: Annotated[str | None, typer.Option(
               "--job", help="Slurm job id: its nodes and log (scontrol/sacct).")] = None,
           hostfile: Annotated[str | None, typer.Option(
               "--hostfile", help="The job's hostfile (rank -> host where the log is silent).")]
           = None, scale: Annotated[int, typer.Option("--scale", help="Group size for the "
                                                       "bisection at scale.")] = 8) -> None:
    """After a NCCL timeout: test the job's nodes (log suspects first) and bisect to the culprit;
    say whether it was the fabric (job_log.conclusion)."""
    from fabriccheck.cli.bisect_scope import finish, resolve_scope

    with _run_guard("bisect", opts):
        check_flags("bisect", opts)
        s = setup(opts)
        scope = resolve_scope(s, explicit=s.explicit, job_log=job_log, job=job,
                              hostfile=hostfile)
        named = scope.log.suspect_hosts if scope.log is not None else ()
        pol = _policy("bisect", spec=s.spec, seed=opts.seed, pair_probe=opts.probe,
                      budget_s=opts.budget_s, scale_group_size=scope.scale_for(scale),
                      **opts.signal_policy())
        result = _run("bisect", s, pol, opts, ops=opts.ops(), log_suspects=named,
                      extra=scope.info())
    code = finish(scope, result, result.exit_code, json_=opts.json_, console=out)
    if opts.report and scope.log is not None:  # again, now with the conclusion (job_log)
        result.extra["report"] = str(_write_report(result, s.topology, opts.report))
    _finish(result, opts.json_, code)


@app.command("demo")
def demo(seed: Annotated[int, typer.Option("--seed", help="Seed for pairing and the simulator.")]
         = 0, json_: Annotated[bool, typer.Option("--json", help="Print only the run-result "
                                                  "JSON.")] = False,
         out_dir: Annotated[str | None, typer.Option("--out", help="Report directory.")] = None,
         quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")]
         = False) -> None:  # fmt: skip
    """A sweep of the bundled 64-node RoCE cluster with five injected faults, in seconds."""
    faults = str(demo_faults())
    stamp = time.strftime("%Y%m%d-%H%M%S")
    opts = RunOptions(topology=DEMO_TOPOLOGY, faults=faults, seed=seed, json_=json_,
                      quiet=quiet, report=out_dir or str(Path("reports") / f"demo-{stamp}"))
    set_verbosity(0, quiet)
    opts.quiet = quiet = is_quiet()
    if not (json_ or quiet):
        err.print(f"[bold]demo[/]: injected faults from {faults} (3% jitter, 1% glitches)",
                  highlight=False)
    with exit_on_error(one_line=True):
        s = setup(opts)
        result = _run("sweep", s, _policy("sweep", spec=s.spec, seed=seed), opts,
                      ops=OpsOptions(no_history=True))
    if json_:
        _finish(result, json_, 0)
    from fabriccheck.cli.run_summary import print_summary, print_truth

    print_summary(result, out)
    print_truth(result, faults, out)
    if result.extra.get("report"):  # last line: where to look next
        out.print(f"open the report: {Path(result.extra['report']).resolve()}", highlight=False)
