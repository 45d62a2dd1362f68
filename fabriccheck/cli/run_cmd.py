"""``fabriccheck sweep | gate | bisect | demo``: run a health check; say what was found and why.

Exit codes: 0 healthy · 1 faults found (gate: do not start the job) · 2 usage/config error ·
3 could not test. With ``--json`` stdout holds only the run-result contract JSON; progress goes
to stderr either way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from fabriccheck.actions.session import OpsOptions
from fabriccheck.cli import ops_options as oo
from fabriccheck.cli.app import app, err, out, write_json
from fabriccheck.errors import ConfigError, ExecutorError
from fabriccheck.models import RunResult

REPO = Path(__file__).resolve().parents[2]
DEMO_TOPOLOGY = "roce-rail-64"
DEMO_FAULTS = REPO / "topologies" / "faults" / "demo-roce-64.yaml"

Topo = Annotated[str | None, typer.Option("--topology", "-t", help="Topology file or name.")]
Spec = Annotated[str | None, typer.Option("--spec", help="Test spec file or bundled name.")]
Nodes = Annotated[str | None, typer.Option("--nodes", "--nodelist",
                                           help="Hostlist, e.g. 'node-[001-016,020]'.")]
NodeFile = Annotated[str | None, typer.Option("--node-file", help="File with one hostlist a line.")]
Exe = Annotated[str, typer.Option("--executor", "-e", help="sim | ssh | ray")]
Faults = Annotated[str | None, typer.Option("--faults", help="Faults file (simulator only).")]
Seed = Annotated[int, typer.Option("--seed", help="Seed for pairing and the simulator.")]
Inv = Annotated[str | None, typer.Option("--inventory", help="Inventory file (hosts, SSH).")]
RayAddr = Annotated[str | None, typer.Option("--ray-address", help="Ray cluster address.")]
Json = Annotated[bool, typer.Option("--json", help="Print only the run-result JSON.")]
Report = Annotated[str | None, typer.Option("--report", help="Write a report into this dir.")]
Probe = Annotated[str | None, typer.Option(
    "--probe", help="Pair probe: ib_write_bw|iperf3|nccl|allreduce-cpu (default: the first of "
                    "these the test spec defines).")]
Scale = Annotated[int, typer.Option("--scale", help="Add a collective round over groups of "
                                                    "this many nodes (0: off).")]
Budget = Annotated[float | None, typer.Option("--budget-s", help="Hard cap on test time (s).")]


@dataclass
class Setup:
    topology: Any
    spec: Any
    nodes: list[str]
    executor: Any
    explicit: bool = True  # the user named the nodes (else: all of the topology / inventory)
    params: dict | None = None  # kept with the run in history (topology file, spec, seed, ...)


def _setup(topology: str | None, spec: str | None, nodes: str | None, node_file: str | None,
           executor: str, faults: str | None, seed: int, inventory: str | None,
           ray_address: str | None, positional: list[str] | None = None) -> Setup:
    from fabriccheck.executors.factory import make_executor
    from fabriccheck.inventory.static import expand_nodes, load_node_file
    from fabriccheck.specs import resolve_spec
    from fabriccheck.topology import load_topology

    if topology is None:
        raise ConfigError("a topology is needed to plan and localize", source="--topology",
                          hint="pass --topology FILE (see `fabriccheck topology list`)")
    topo = load_topology(topology)
    test_spec = resolve_spec(spec, topo)
    inv = None
    if inventory:
        from fabriccheck.inventory.file import load_inventory

        inv = load_inventory(inventory)
    names: list[str] = []
    for part in positional or []:
        names += expand_nodes(part, source="NODES")
    if nodes:
        names += expand_nodes(nodes)
    if node_file:
        names += load_node_file(node_file)
    explicit = bool(names)
    if not names:
        names = list(inv.nodes()) if inv is not None and hasattr(inv, "nodes") else \
            sorted(topo.nodes)
    if faults and executor != "sim":
        raise ConfigError("faults are injected by the simulator only", source="--faults",
                          hint="drop --faults or use --executor sim")
    fault_set = None
    if faults:
        from fabriccheck.faults import load_faults

        fault_set = load_faults(faults)
    exe = make_executor(executor, topology=topo, spec=test_spec, faults=fault_set, seed=seed,
                        inventory=inv, ray_address=ray_address)
    params = {"topology": topo.source or topology, "spec": test_spec.name, "seed": seed,
              "executor": executor, "faults": faults}
    return Setup(topo, test_spec, list(dict.fromkeys(names)), exe, explicit, params)


def _progress(quiet: bool):
    def show(ev: dict) -> None:
        if quiet:
            return
        purposes = ", ".join(f"{n} {p}" for p, n in sorted(ev["purposes"].items()))
        err.print(f"[cyan]round {ev['round']}[/] ({ev['kind']}): {ev['tests']} tests "
                  f"({purposes}), {ev['failed']} not passing · test time "
                  f"{ev['test_seconds']:.0f} s", highlight=False)
    return show


def _run(mode: str, s: Setup, policy, *, json_: bool, report: str | None,
         log_suspects: tuple[str, ...] = (), extra: dict | None = None,
         ops: OpsOptions | None = None) -> RunResult:
    """Run the orchestrator inside the operations session (history, scheduler hold, actions)."""
    from fabriccheck.actions.session import OpsSession
    from fabriccheck.orchestrator import run

    session = OpsSession(mode, ops or OpsOptions(no_history=True), sku=s.spec.sku,
                         fabric=s.topology.fabric)
    try:
        nodes = session.select_nodes(s.nodes, explicit=s.explicit, known=s.topology.nodes)
        if not json_:
            err.print(f"[bold]{mode}[/] of {len(nodes)} nodes on {s.topology.name} "
                      f"({s.topology.fabric}), spec {s.spec.name}, executor {s.executor.name}",
                      highlight=False)
        session.begin(nodes, params=s.params)
        with session.hold(nodes):
            executor = session.wrap(s.executor, s.spec)
            result = run(mode, nodes, s.topology, s.spec, executor, policy,
                         progress=_progress(False), log_suspects=log_suspects)
        result.extra.update(extra or {})
        if session.run_id:
            result.extra["run_id"] = session.run_id
        session.finish(result, topology=s.topology)
    finally:
        s.executor.close()
        session.close()
    if report:
        result.extra["report"] = str(_write_report(result, s.topology, report))
    return result


def _write_report(result: RunResult, topology, out_dir: str) -> Path:
    try:
        from fabriccheck.report import render_report
    except ImportError:
        import json

        from fabriccheck.serialize import run_result_to_dict

        path = Path(out_dir)
        path.mkdir(parents=True, exist_ok=True)
        (path / "results.json").write_text(
            json.dumps(run_result_to_dict(result, observations=True), indent=2, default=str))
        return path / "results.json"
    return Path(render_report(result, topology, out_dir))


def _finish(result: RunResult, json_: bool, code: int) -> None:
    from fabriccheck.cli.run_summary import print_summary
    from fabriccheck.serialize import run_result_to_dict

    if json_:
        write_json(run_result_to_dict(result))
    else:
        print_summary(result, out)
    raise typer.Exit(code)


def _exit_code(result: RunResult, mode: str) -> int:
    tested = any(v.kind == "node" and v.state not in ("untested", "unreachable")
                 for v in result.verdicts)
    if not tested:
        return 3
    found = bool(result.drain or result.bad_links)
    if mode == "gate":
        found = found or bool(result.suspects) or bool(result.unreachable)
        if not found and result.extra.get("untested"):
            return 3
    else:
        found = found or bool(result.unreachable) or bool(result.link_suspects)
    return 1 if found else 0


def _policy(mode: str, spec=None, **kw):
    from fabriccheck.policy import BisectPolicy, GatePolicy, SweepPolicy, spec_probes

    kw = {k: v for k, v in kw.items() if v is not None}
    if spec is not None:  # probes default to what the test spec defines
        kw.update(spec_probes(spec, kw.get("pair_probe")))
    return {"gate": GatePolicy, "bisect": BisectPolicy}.get(mode, SweepPolicy)(**kw) \
        if mode != "sweep" else SweepPolicy(**kw)


@app.command("sweep")
def sweep(topology: Topo = None, spec: Spec = None, nodes: Nodes = None,
          node_file: NodeFile = None, executor: Exe = "sim", faults: Faults = None,
          seed: Seed = 0, inventory: Inv = None, ray_address: RayAddr = None, json_: Json = False,
          report: Report = None, probe: Probe = None, scale: Scale = 0,
          budget_s: Budget = None, db: oo.Db = None, no_history: oo.NoHistory = False,
          resume: oo.Resume = None, scheduler: oo.Scheduler = None,
          partition: oo.Partition = None, selector: oo.Selector = None,
          skip_tested_within: oo.SkipTested = 0.0, apply: oo.Apply = False,
          max_drain: oo.MaxDrain = 0.1, exclude_file: oo.ExcludeFile = None,
          metrics: oo.Metrics = None) -> None:
    """Two-round sweep of idle nodes: attribution, confirmation, bisection, link localization."""
    ops = oo.ops_options(db=db, no_history=no_history, resume=resume, scheduler=scheduler,
                         partition=partition, selector=selector,
                         skip_tested_within=skip_tested_within, apply=apply,
                         max_drain=max_drain, exclude_file=exclude_file, metrics=metrics)
    s = _setup(topology, spec, nodes, node_file, executor, faults, seed, inventory, ray_address)
    pol = _policy("sweep", spec=s.spec, seed=seed, pair_probe=probe, scale_group_size=scale,
                  budget_s=budget_s)
    result = _run("sweep", s, pol, json_=json_, report=report, ops=ops)
    _finish(result, json_, _exit_code(result, "sweep"))


@app.command("gate")
def gate(node_args: Annotated[list[str] | None, typer.Argument(
             metavar="NODES", help="Hostlists of the job's nodes.")] = None,
         topology: Topo = None, spec: Spec = None, nodes: Nodes = None,
         node_file: NodeFile = None, executor: Exe = "sim", faults: Faults = None,
         seed: Seed = 0, inventory: Inv = None, ray_address: RayAddr = None,
         json_: Json = False, report: Report = None, probe: Probe = None,
         budget_s: Annotated[float, typer.Option("--budget-s", help="Hard cap on test time.")]
         = 300.0, db: oo.Db = None, no_history: oo.NoHistory = False,
         resume: oo.Resume = None, scheduler: oo.Scheduler = None, apply: oo.Apply = False,
         max_drain: oo.MaxDrain = 0.1, exclude_file: oo.ExcludeFile = None,
         metrics: oo.Metrics = None) -> None:
    """Pre-job gate: one round over the job's nodes (a second only if something failed).

    Exit 0 go, 1 bad nodes (listed), 3 could not test.
    """
    ops = oo.ops_options(db=db, no_history=no_history, resume=resume, scheduler=scheduler,
                         apply=apply, max_drain=max_drain, exclude_file=exclude_file,
                         metrics=metrics)
    s = _setup(topology, spec, nodes, node_file, executor, faults, seed, inventory, ray_address,
               positional=node_args)
    pol = _policy("gate", spec=s.spec, seed=seed, pair_probe=probe, budget_s=budget_s)
    try:
        result = _run("gate", s, pol, json_=json_, report=report, ops=ops)
    except ExecutorError as exc:
        raise typer.Exit(3) from exc
    _finish(result, json_, _exit_code(result, "gate"))


@app.command("bisect")
def bisect(topology: Topo = None, spec: Spec = None, nodes: Nodes = None,
           node_file: NodeFile = None, executor: Exe = "sim", faults: Faults = None,
           seed: Seed = 0, inventory: Inv = None, ray_address: RayAddr = None,
           json_: Json = False, report: Report = None, probe: Probe = None,
           job_log: Annotated[str | None, typer.Option("--job-log", help="The job's NCCL log.")]
           = None, job: Annotated[str | None, typer.Option(
               "--job", help="Slurm job id: its nodes and log (scontrol/sacct).")] = None,
           hostfile: Annotated[str | None, typer.Option(
               "--hostfile", help="The job's hostfile (rank -> host where the log is silent).")]
           = None, scale: Annotated[int, typer.Option("--scale", help="Group size for the "
                                                       "bisection at scale.")] = 8,
           db: oo.Db = None, no_history: oo.NoHistory = False, resume: oo.Resume = None,
           scheduler: oo.Scheduler = None, apply: oo.Apply = False,
           max_drain: oo.MaxDrain = 0.1, exclude_file: oo.ExcludeFile = None,
           metrics: oo.Metrics = None) -> None:
    """After a NCCL timeout: test the job's nodes (log suspects first) and bisect to the culprit;
    say whether it was the fabric (job_log.conclusion)."""
    from fabriccheck.cli.bisect_scope import finish, resolve_scope

    s = _setup(topology, spec, nodes, node_file, executor, faults, seed, inventory, ray_address)
    scope = resolve_scope(s, explicit=s.explicit, job_log=job_log, job=job, hostfile=hostfile)
    named = scope.log.suspect_hosts if scope.log is not None else ()
    pol = _policy("bisect", spec=s.spec, seed=seed, pair_probe=probe,
                  scale_group_size=scope.scale_for(scale))
    ops = oo.ops_options(db=db, no_history=no_history, resume=resume, scheduler=scheduler,
                         apply=apply, max_drain=max_drain, exclude_file=exclude_file,
                         metrics=metrics)
    result = _run("bisect", s, pol, json_=json_, report=report, log_suspects=named,
                  extra=scope.info(), ops=ops)
    code = finish(scope, result, _exit_code(result, "bisect"), json_=json_, console=out)
    if report and scope.log is not None:  # again, now with the conclusion (job_log)
        result.extra["report"] = str(_write_report(result, s.topology, report))
    _finish(result, json_, code)


@app.command("demo")
def demo(seed: Seed = 0, json_: Json = False,
         out_dir: Annotated[str | None, typer.Option("--out", help="Report directory.")] = None
         ) -> None:
    """A sweep of the bundled 64-node RoCE cluster with five injected faults, in seconds."""
    faults = str(DEMO_FAULTS)
    s = _setup(DEMO_TOPOLOGY, None, None, None, "sim", faults, seed, None, None)
    if not json_:
        err.print(f"[bold]demo[/]: injected faults from {faults} (3% jitter, 1% glitches)",
                  highlight=False)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    report = out_dir or str(Path("reports") / f"demo-{stamp}")
    pol = _policy("sweep", spec=s.spec, seed=seed)
    result = _run("sweep", s, pol, json_=json_, report=report, extra={"faults": faults})
    if json_:
        _finish(result, json_, 0)
    from fabriccheck.cli.run_summary import print_summary, print_truth

    print_summary(result, out)
    print_truth(result, faults, out)
    if result.extra.get("report"):  # last line: where to look next
        out.print(f"open the report: {Path(result.extra['report']).resolve()}", highlight=False)
