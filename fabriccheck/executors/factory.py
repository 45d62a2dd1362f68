"""Executor factory: ``--executor sim|ssh|ray`` to a ready :class:`~.base.Executor`."""

from __future__ import annotations

from typing import Any

from fabriccheck.errors import ConfigError
from fabriccheck.executors.base import Executor
from fabriccheck.faults import FaultSet
from fabriccheck.specs import TestSpec
from fabriccheck.topology.model import Topology

#: executor kinds this factory knows (each engineer adds their branch in make_executor)
KNOWN_KINDS = ("sim", "ssh", "ray")


def make_executor(
    kind: str,
    *,
    topology: Topology,
    spec: TestSpec | None = None,
    faults: FaultSet | None = None,
    seed: int = 0,
    inventory: Any = None,
    ray_address: str | None = None,
    **opts: Any,
) -> Executor:
    """Build the executor named ``kind``.

    Parameters
    ----------
    kind : str
        ``sim`` (the embedded simulator); ``ssh`` and ``ray`` when their modules are present.
    topology, spec, faults, seed
        The fabric, the test spec, injected faults (simulator only) and the random seed.
    inventory, ray_address, **opts
        Backend-specific settings (hosts and credentials, Ray cluster address, ...).

    Raises
    ------
    ConfigError
        Unknown kind, or faults given to an executor that cannot inject them.
    """
    if kind == "sim":
        from fabriccheck.executors.sim import SimExecutor

        return SimExecutor(topology, spec, faults or FaultSet(), seed, **opts)
    if kind == "ssh":
        from fabriccheck.executors.ssh import SSHExecutor

        _refuse_faults("ssh", faults)
        if inventory is None:
            raise ConfigError(
                "the ssh executor needs an inventory file",
                field="--inventory",
                hint="see docs/ssh.md; `fabriccheck lab up --json` prints one for the lab",
            )
        return SSHExecutor(inventory, **opts)
    if kind == "ray":
        from fabriccheck.executors.ray.executor import RayExecutor

        _refuse_faults("ray", faults)
        return RayExecutor(ray_address, inventory, **opts)
    raise ConfigError(
        f"unknown executor {kind!r}",
        field="--executor",
        hint=f"use one of: {', '.join(KNOWN_KINDS)}",
    )


def _refuse_faults(kind: str, faults: FaultSet | None) -> None:
    """A real-host executor (``ssh``, ``ray``) cannot inject faults: refuse any given."""
    if faults:
        raise ConfigError(
            f"the {kind} executor runs on real hosts and cannot inject faults",
            field="--faults",
            hint="make faults real with `fabriccheck lab up TOPOLOGY --faults F`",
        )
