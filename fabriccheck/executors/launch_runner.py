"""Running a ProbeLaunch on real hosts, shared by the SSH and Ray executors.

An executor supplies a :class:`HostRunner` (start a command on a host, wait for it, kill its
process tree); :func:`run_launch` does the rest the same way for every backend:

1. start every background step (servers) and wait until its ``wait_port`` listens on its host;
2. start every foreground step, then wait for all of them against one deadline (the timeout);
3. kill every step still running (background steps always), even on timeout or error;
4. return the output step's stdout in a :class:`~fabriccheck.models.RawResult`.

An unreachable host (:class:`ConnectError` / :class:`AuthError` from ``start``) makes the test's
result ``unreachable=(host,)``; other tests go on. :func:`run_tests` runs a round with bounded
concurrency and a distinct TCP port per test.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from fabriccheck.errors import AuthError, ConnectError, ExecutorError
from fabriccheck.models import RawResult, Test
from fabriccheck.probes.launch import HostCommand, ProbeLaunch

#: seconds one remote "is the port listening yet" check may loop before we look at the server
PORT_POLL_CHUNK_S = 1.0


@dataclass
class StepOutput:
    """What one host command printed so far; ``finished`` once it exited (``exit_code`` set)."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    finished: bool = False


class HostRunner(Protocol):
    """Runs commands on hosts. The only thing an executor backend must implement.

    ``start`` returns at once with a handle (raises :class:`ConnectError` / :class:`AuthError`
    when the host cannot be reached, :class:`RemoteCommandError` when the command cannot start).
    ``wait`` blocks up to ``timeout_s`` and returns the output so far. ``kill`` ends the
    command's whole process tree on its host (idempotent) and returns the final output.
    """

    def start(self, step: HostCommand, tag: str) -> Any: ...

    def wait(self, handle: Any, timeout_s: float) -> StepOutput: ...

    def kill(self, handle: Any) -> StepOutput: ...


def _port_check(host: str, port: int, tries: int) -> HostCommand:
    script = (
        'p=$1; n=$2; i=0; while [ "$i" -lt "$n" ]; do '
        'ss -Hltn "sport = :$p" 2>/dev/null | grep -q . && exit 0; '
        "i=$((i+1)); sleep 0.05; done; exit 1"
    )
    return HostCommand(host=host, argv=("sh", "-c", script, "sh", str(port), str(tries)),
                       role="check")


def run_command(runner: HostRunner, step: HostCommand, timeout_s: float, tag: str) -> StepOutput:
    """Run one command to completion (killed after ``timeout_s``) and return its output."""
    handle = runner.start(step, tag)
    out = runner.wait(handle, timeout_s)
    return out if out.finished else runner.kill(handle)


def wait_for_port(
    runner: HostRunner, step: HostCommand, handle: Any, deadline: float, tag: str
) -> str:
    """Wait until ``step.wait_port`` listens on ``step.host``: ``ok``, ``exited`` or ``timeout``."""
    assert step.wait_port is not None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return "timeout"
        chunk = min(PORT_POLL_CHUNK_S, left)
        check = _port_check(step.host, step.wait_port, max(1, int(chunk / 0.05)))
        if run_command(runner, check, chunk + 5.0, f"{tag}.port").exit_code == 0:
            return "ok"
        if runner.wait(handle, 0).finished:
            return "exited"


def _kill_all(
    runner: HostRunner, handles: dict[int, Any], outputs: dict[int, StepOutput]
) -> list[str]:
    problems = []
    for i, handle in handles.items():
        if i in outputs and outputs[i].finished:
            continue
        try:
            outputs[i] = runner.kill(handle)
        except ExecutorError as exc:
            problems.append(f"cleanup failed: {exc}")
    return problems


def _stderr(launch: ProbeLaunch, outputs: dict[int, StepOutput]) -> str:
    parts = []
    for i, step in enumerate(launch.steps):
        text = outputs[i].stderr if i in outputs else ""
        if text.strip():
            parts.append(f"--- {step.host} ({step.role}) ---\n{text.rstrip()}\n")
    return "".join(parts)


@dataclass
class _LaunchState:
    """What one launch has started and seen so far; ``current`` is the step being started."""

    current: HostCommand | None
    handles: dict[int, Any] = field(default_factory=dict)
    outputs: dict[int, StepOutput] = field(default_factory=dict)
    unreachable: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    timed_out: bool = False


def run_launch(
    runner: HostRunner, test_id: str, launch: ProbeLaunch, timeout_s: float
) -> RawResult:
    """Run one test's launch on its hosts and return its raw result (never raises for a host).

    Parameters
    ----------
    runner : HostRunner
        The backend (SSH, Ray) that starts/waits/kills commands on hosts.
    test_id : str
        Names the result and tags the remote commands.
    launch : ProbeLaunch
        The steps from :func:`fabriccheck.probes.commands.build_launch`.
    timeout_s : float
        Hard limit for the whole test; then everything still running is killed.

    Returns
    -------
    RawResult
        ``timed_out`` on timeout (exit_code None), ``unreachable`` naming hosts that could not be
        reached, ``error`` for other executor-level problems.
    """
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    order = [i for i, s in enumerate(launch.steps) if s.background]
    order += [i for i, s in enumerate(launch.steps) if not s.background]
    run = _LaunchState(current=launch.steps[order[0]] if order else None)
    try:
        if _start_steps(runner, test_id, launch, order, deadline, run):
            _wait_foreground(runner, launch, order, deadline, run)
    except (ConnectError, AuthError) as exc:
        run.unreachable.append(exc.host or (run.current.host if run.current else "?"))
        run.errors.append(str(exc))
    except ExecutorError as exc:
        run.errors.append(str(exc))
    finally:
        _collect_finished(runner, launch, run)
        run.errors += _kill_all(runner, run.handles, run.outputs)
    out_idx = launch.output_step % len(launch.steps) if launch.steps else 0
    main = run.outputs.get(out_idx, StepOutput())
    exit_code: int | None = None
    if not run.timed_out and not run.unreachable and main.finished:
        exit_code = _exit_code(launch, order, run.outputs, main)
    if run.timed_out:
        run.errors.append(f"timed out after {timeout_s:g} s; killed")
    return RawResult(
        test_id=test_id,
        stdout=main.stdout,
        stderr=_stderr(launch, run.outputs),
        exit_code=exit_code,
        duration_s=time.monotonic() - t0,
        timed_out=run.timed_out,
        unreachable=tuple(dict.fromkeys(run.unreachable)),
        commands=launch.rendered,
        error="; ".join(run.errors) or None,
    )


def _start_steps(
    runner: HostRunner, test_id: str, launch: ProbeLaunch, order: list[int], deadline: float,
    run: _LaunchState,
) -> bool:  # fmt: skip
    """Start the steps in ``order``, each server until its port listens; False if one did not."""
    for i in order:
        step = run.current = launch.steps[i]
        run.handles[i] = runner.start(step, f"{test_id}.{i}")
        if step.background and step.wait_port is not None:
            state = wait_for_port(runner, step, run.handles[i], deadline, f"{test_id}.{i}")
            if state == "timeout":
                run.timed_out = True
                return False
            if state == "exited":
                run.outputs[i] = runner.wait(run.handles[i], 0)
                run.errors.append(f"{step.host}: {step.argv[0]} exited before listening on "
                                  f"port {step.wait_port}")
                return False
    return True


def _wait_foreground(
    runner: HostRunner, launch: ProbeLaunch, order: list[int], deadline: float,
    run: _LaunchState,
) -> None:  # fmt: skip
    """Wait for every foreground step against the one deadline; timed out at the first late one."""
    for i in order:
        if launch.steps[i].background:
            continue
        run.outputs[i] = runner.wait(run.handles[i], max(0.0, deadline - time.monotonic()))
        if not run.outputs[i].finished:
            run.timed_out = True
            return


def _collect_finished(runner: HostRunner, launch: ProbeLaunch, run: _LaunchState) -> None:
    """Pick up foreground steps that finished meanwhile (before everything left is killed)."""
    for i, handle in run.handles.items():
        if i not in run.outputs or not run.outputs[i].finished:
            try:
                out = runner.wait(handle, 0)
            except ExecutorError:
                continue
            if out.finished and not launch.steps[i].background:
                run.outputs[i] = out


def _exit_code(
    launch: ProbeLaunch, order: list[int], outputs: dict[int, StepOutput], main: StepOutput
) -> int | None:
    """The output step's exit code, else the first failing foreground one; None if one has none."""
    codes = [outputs[i].exit_code for i in order
             if not launch.steps[i].background and i in outputs]
    exit_code = main.exit_code or next((c for c in codes if c), None) or 0
    if any(c is None for c in codes):
        exit_code = None
    return exit_code


def run_tests(
    runner: HostRunner,
    tests: Sequence[Test],
    build: Callable[[Test, int], ProbeLaunch],
    *,
    max_parallel: int = 32,
) -> list[RawResult]:
    """Run a round: every test's launch at the same time (at most ``max_parallel`` at once).

    ``build(test, index)`` makes the launch (the index gives each test its own port); it is called
    for every test before anything runs, so a configuration error fails the round up front.
    Results come back in the order of ``tests``.
    """
    launches = [build(t, i) for i, t in enumerate(tests)]
    if not tests:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(max_parallel, len(tests)))) as pool:
        futures = [
            pool.submit(run_launch, runner, t.test_id, launch, t.timeout_s)
            for t, launch in zip(tests, launches, strict=True)
        ]
        return [f.result() for f in futures]
