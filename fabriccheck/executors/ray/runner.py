"""The Ray executor's HostRunner: probe commands started, awaited and killed by agent actors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from fabriccheck.errors import ConnectError, TaskTimeout
from fabriccheck.executors.launch_runner import StepOutput
from fabriccheck.inventory.ray_session import ray_get
from fabriccheck.probes.launch import HostCommand


class AgentSource(Protocol):
    """What the runner needs from the executor (the executor imports the runner, not back)."""

    guard_s: float
    rpc_timeout_s: float
    leftovers: list[str]

    def agent(self, host: str) -> Any: ...

def _reach(ref: Any, timeout_s: float, host: str, what: str) -> Any:
    """``ray_get`` on an agent call; an agent that does not answer in time is unreachable."""
    try:
        return ray_get(ref, timeout_s, host=host, what=what)
    except TaskTimeout as exc:
        raise ConnectError(f"{exc.message} (the fabriccheck agent did not answer)",
                           hint=exc.hint) from exc


@dataclass(frozen=True)
class _Handle:
    host: str
    agent: Any
    ref: int


class RayHostRunner:
    """:class:`~fabriccheck.executors.launch_runner.HostRunner` over per-node agent actors."""

    def __init__(self, executor: AgentSource) -> None:
        self._ex = executor

    def start(self, step: HostCommand, tag: str) -> _Handle:
        agent = self._ex.agent(step.host)
        ref = _reach(agent.start.remote(list(step.argv), dict(step.env), self._ex.guard_s),
                     self._ex.rpc_timeout_s, step.host, f"start {step.argv[0]} ({tag})")
        return _Handle(step.host, agent, int(ref))

    def wait(self, handle: _Handle, timeout_s: float) -> StepOutput:
        out = _reach(handle.agent.wait.remote(handle.ref, timeout_s),
                     timeout_s + self._ex.rpc_timeout_s, handle.host, "wait")
        return StepOutput(out["stdout"], out["stderr"], out["exit_code"], out["finished"])

    def kill(self, handle: _Handle) -> StepOutput:
        out = _reach(handle.agent.kill.remote(handle.ref), self._ex.rpc_timeout_s + 10.0,
                     handle.host, "kill")
        handle.agent.forget.remote(handle.ref)
        if out.get("leftover"):
            self._ex.leftovers.append(f"{handle.host}: {out['leftover']} process(es) survived kill")
        return StepOutput(out["stdout"], out["stderr"], out["exit_code"], True)
