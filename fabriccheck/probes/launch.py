"""How a test runs on real hosts: the ordered host commands a probe needs (pure values).

A probe's command builder (``probes/commands.py``) turns a :class:`~fabriccheck.models.Test` plus
host addresses into a :class:`ProbeLaunch`; the SSH and Ray executors run it the same way:

1. start every ``background`` step (servers), waiting until each one's ``wait_port`` listens;
2. run the foreground steps at the same time, each under the test's timeout;
3. return the stdout of step ``output_step`` (what the parser reads) in the RawResult;
4. kill every step's process tree (background ones always), even on timeout or error.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class HostCommand:
    """One command on one host. ``argv`` is run without a shell unless ``shell`` is set."""

    host: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    background: bool = False
    wait_port: int | None = None  # for background steps: TCP port to wait for before going on
    role: str = "client"  # server | client | rank

    def render(self) -> str:
        """The command as a human would paste it into a shell on ``host``."""
        envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        cmd = shlex.join(self.argv)
        return f"{envs} {cmd}" if envs else cmd


@dataclass(frozen=True)
class ProbeLaunch:
    steps: tuple[HostCommand, ...]
    output_step: int = -1  # index into steps of the step whose stdout is the tool output

    @property
    def rendered(self) -> tuple[str, ...]:
        """``host: command`` lines for RawResult.commands and reports."""
        return tuple(f"{s.host}: {s.render()}" for s in self.steps)
