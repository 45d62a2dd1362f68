"""The one set of options sweep, gate and bisect share, declared once.

:func:`run_command` registers a command whose parameters are the shared ones (a positional
hostlist ``NODES``, ``--nodes``, topology, executor, history, scheduler and actions flags ...)
followed by the command's own; the command receives them as one :class:`RunOptions`::

    @run_command("sweep", budget_s=None)
    def sweep(opts: RunOptions, scale: Scale = 0) -> None: ...

Per-command defaults of shared options are given as keyword arguments (gate: ``budget_s=300``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Annotated, Any

import typer

from fabriccheck.actions.session import OpsOptions
from fabriccheck.cli import ops_options as oo

_RUN = "Run"
_EXE = "Executor"


def _opt(*names: str, help: str, panel: str = _RUN, **kw: Any) -> Any:
    return typer.Option(*names, help=help, rich_help_panel=panel, **kw)


@dataclass
class RunOptions:
    """What sweep, gate and bisect were asked, from their shared flags."""

    node_args: list[str] | None = None
    nodes: str | None = None
    node_file: str | None = None
    topology: str | None = None
    spec: str | None = None
    executor: str = "sim"
    faults: str | None = None
    seed: int = 0
    inventory: str | None = None
    ray_address: str | None = None
    probe: str | None = None
    budget_s: float | None = None
    json_: bool = False
    report: str | None = None
    verbose: int = 0
    quiet: bool = False
    db: str | None = None
    no_history: bool = False
    resume: str | None = None
    scheduler: str | None = None
    apply: bool = False
    max_drain: float = 0.1
    exclude_file: str | None = None
    metrics: str | None = None
    signals: list[str] | None = None
    no_preflight: bool = False
    strict: bool = False

    def signal_policy(self) -> dict[str, Any]:
        """``signals`` (read from every ``--signals FILE``) and ``preflight`` for the policy.

        Raises
        ------
        ConfigError
            A bad signals file (one line: file, entry, field), or one name in two files.
        """
        from fabriccheck.errors import ConfigError
        from fabriccheck.probes.signal_value import resolve_parser
        from fabriccheck.specs import load_signals

        seen: dict[str, str] = {}
        out = []
        for path in self.signals or []:
            for i, sig in enumerate(load_signals(path)):
                if sig.parser is not None:
                    try:
                        resolve_parser(sig.parser)
                    except ConfigError as exc:
                        raise ConfigError(f"no signal parser {sig.parser!r}", source=path,
                                          field=f"signals[{i}].parser", hint=exc.hint) from None
                if sig.name in seen:
                    raise ConfigError(f"signal {sig.name!r} is also in {seen[sig.name]}",
                                      source=path, field="signals",
                                      hint="give each signal one name across --signals files")
                seen[sig.name] = path
                out.append(sig)
        return {"signals": tuple(out), "preflight": not self.no_preflight,
                "strict": self.strict}

    def ops(self, **extra: Any) -> OpsOptions:
        """The operations options (history, scheduler, actions) of this run."""
        return oo.ops_options(db=self.db, no_history=self.no_history, resume=self.resume,
                              scheduler=self.scheduler, apply=self.apply,
                              max_drain=self.max_drain, exclude_file=self.exclude_file,
                              metrics=self.metrics, **extra)  # fmt: skip


#: name -> (annotation, default) of every shared parameter, in --help order
SHARED: dict[str, tuple[Any, Any]] = {
    "node_args": (Annotated[list[str] | None, typer.Argument(
        metavar="NODES", show_default=False,
        help="Hostlists of the nodes to test, e.g. 'node-[01-04]' (same as --nodes).")], None),
    "nodes": (Annotated[str | None, _opt("--nodes", "--nodelist",
                                         help="Hostlist, e.g. 'node-[001-016,020]'.")], None),
    "node_file": (Annotated[str | None, _opt("--node-file",
                                             help="File with one hostlist a line.")], None),
    "topology": (Annotated[str | None, _opt("--topology", "-t",
                                            help="Topology file or name.")], None),
    "spec": (Annotated[str | None, _opt("--spec", help="Test spec file or bundled name.")], None),
    "probe": (Annotated[str | None, _opt(
        "--probe", help="Pair probe: ib_write_bw|iperf3|nccl|allreduce-cpu (default: the first "
                        "of these the test spec defines).")], None),
    "budget_s": (Annotated[float | None, _opt("--budget-s",
                                              help="Hard cap on test time (s).")], None),
    "json_": (Annotated[bool, _opt("--json", help="Print only the run-result JSON.")], False),
    "report": (Annotated[str | None, _opt("--report",
                                          help="Write a report into this dir.")], None),
    "verbose": (Annotated[int, _opt("--verbose", "-v", count=True,
                                    help="More progress on stderr (-vv: debug).")], 0),
    "quiet": (Annotated[bool, _opt("--quiet", "-q",
                                   help="No progress on stderr; errors only.")], False),
    "executor": (Annotated[str, _opt("--executor", "-e", help="sim | ssh | ray", panel=_EXE)],
                 "sim"),
    "faults": (Annotated[str | None, _opt("--faults", help="Faults file (simulator only).",
                                          panel=_EXE)], None),
    "seed": (Annotated[int, _opt("--seed", help="Seed for pairing and the simulator.",
                                 panel=_EXE)], 0),
    "inventory": (Annotated[str | None, _opt("--inventory", help="Inventory file (hosts, SSH).",
                                             panel=_EXE)], None),
    "ray_address": (Annotated[str | None, _opt("--ray-address", help="Ray cluster address.",
                                               panel=_EXE)], None),
    "db": (oo.Db, None),
    "no_history": (oo.NoHistory, False),
    "resume": (oo.Resume, None),
    "scheduler": (oo.Scheduler, None),
    "apply": (oo.Apply, False),
    "max_drain": (oo.MaxDrain, 0.1),
    "exclude_file": (oo.ExcludeFile, None),
    "metrics": (oo.Metrics, None),
    "signals": (Annotated[list[str] | None, _opt(
        "--signals", help="Signals file (docs/design.md 'Signals'); repeatable.")], None),
    "no_preflight": (Annotated[bool, _opt(
        "--no-preflight", help="Skip the built-in preflight checks (GPUs, ports, PCIe, "
                               "counters, kernel log).")], False),
    "strict": (Annotated[bool, _opt(
        "--strict", help="Exit 1 on warn-level node-local findings too (by default they are "
                         "listed and the run exits 0; docs/node-checks.md).")], False),
}  # fmt: skip

assert set(SHARED) == {f.name for f in fields(RunOptions)}


def _signature(body: Callable[..., Any], defaults: dict[str, Any]) -> inspect.Signature:
    """Shared parameters (with per-command defaults) then the body's own (after ``opts``)."""
    unknown = set(defaults) - set(SHARED)
    if unknown:
        raise TypeError(f"not shared run options: {sorted(unknown)}")
    kind = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter(name, kind, annotation=ann, default=defaults.get(name, default))
              for name, (ann, default) in SHARED.items()]  # fmt: skip
    own = list(inspect.signature(body, eval_str=True).parameters.values())[1:]
    return inspect.Signature([*params, *(p.replace(kind=kind) for p in own)])


def run_command(name: str, **defaults: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``body(opts: RunOptions, **own)`` as the command ``name`` (see module doc)."""
    from fabriccheck.cli.app import app

    def register(body: Callable[..., Any]) -> Callable[..., Any]:
        sig = _signature(body, defaults)

        def command(**kwargs: Any) -> Any:
            shared = {k: kwargs.pop(k) for k in SHARED}
            return body(RunOptions(**shared), **kwargs)

        command.__signature__ = sig  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in sig.parameters.values()}
        command.__name__, command.__doc__ = body.__name__, body.__doc__
        app.command(name)(command)
        return body

    return register
