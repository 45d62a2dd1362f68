"""Before a run: check the flags, load topology and spec, pick the nodes, build the executor."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabriccheck.actions.session import refuse_simulated_actions
from fabriccheck.cli.run_options import RunOptions
from fabriccheck.errors import ConfigError

EXECUTORS = ("sim", "ssh", "ray")


@dataclass
class Setup:
    topology: Any
    spec: Any
    nodes: list[str]
    executor: Any
    explicit: bool = True  # the user named the nodes (else: all of the topology / inventory)
    params: dict | None = None  # kept with the run in history (topology file, spec, seed, ...)


def check_flags(mode: str, opts: RunOptions) -> None:
    """Refuse what must never run, before anything is loaded or any scheduler contacted."""
    if opts.executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {opts.executor!r}", source="--executor",
                          hint=f"use one of {', '.join(EXECUTORS)}")  # fmt: skip
    refuse_simulated_actions(opts.executor, opts.ops())
    if opts.faults and opts.executor != "sim":
        raise ConfigError("faults are injected by the simulator only", source="--faults",
                          hint="drop --faults or use --executor sim")  # fmt: skip
    if mode == "gate" and not (_named_nodes(opts) or opts.resume
                               or os.environ.get("SLURM_JOB_NODELIST")):  # fmt: skip
        raise ConfigError(
            "gate needs the job's nodes: none given and not inside a Slurm allocation",
            source="NODES", hint="run it in the job (srun/sbatch set SLURM_JOB_NODELIST) or "
            "name them: fabriccheck gate 'node-[01-04]' -t TOPOLOGY")  # fmt: skip


def _named_nodes(opts: RunOptions) -> bool:
    return bool(opts.node_args or opts.nodes or opts.node_file)


def _node_names(opts: RunOptions) -> list[str]:
    from fabriccheck.inventory.static import expand_nodes, load_node_file

    names: list[str] = []
    for part in opts.node_args or []:
        names += expand_nodes(part, source="NODES")
    if opts.nodes:
        names += expand_nodes(opts.nodes)
    if opts.node_file:
        names += load_node_file(opts.node_file)
    return names


def setup(opts: RunOptions) -> Setup:
    """Topology, spec, nodes and executor of a run (a :class:`ConfigError` when one is wrong)."""
    from fabriccheck.executors.factory import make_executor
    from fabriccheck.specs import resolve_spec
    from fabriccheck.topology import load_topology

    if opts.topology is None:
        raise ConfigError("a topology is needed to plan and localize", source="--topology",
                          hint="pass --topology FILE (see `fabriccheck topology list`)")
    topo = load_topology(opts.topology)
    test_spec = resolve_spec(opts.spec, topo)
    inv = None
    if opts.inventory:
        from fabriccheck.inventory.file import load_inventory

        inv = load_inventory(opts.inventory)
    names = _node_names(opts)
    explicit = bool(names)
    if not names:
        names = list(inv.nodes()) if inv is not None and hasattr(inv, "nodes") else \
            sorted(topo.nodes)
    fault_set = None
    if opts.faults:
        from fabriccheck.faults import load_faults

        fault_set = load_faults(opts.faults)
    exe = make_executor(opts.executor, topology=topo, spec=test_spec, faults=fault_set,
                        seed=opts.seed, inventory=inv, ray_address=opts.ray_address)
    params = {"topology": topo.source or opts.topology, "spec": test_spec.name,
              "seed": opts.seed, "executor": opts.executor, "faults": faults_path(opts)}
    return Setup(topo, test_spec, list(dict.fromkeys(names)), exe, explicit, params)


def faults_path(opts: RunOptions) -> str | None:
    """The faults file as an absolute path (history and reports outlive the working dir)."""
    return str(Path(opts.faults).resolve()) if opts.faults else None


def provenance(opts: RunOptions) -> dict[str, Any]:
    """What produced the numbers, for the run result: ``executor`` (+ sim: faults and seed)."""
    if opts.executor != "sim":
        return {"executor": opts.executor}
    return {"executor": "sim", "faults": faults_path(opts), "seed": opts.seed}
