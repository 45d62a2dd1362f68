"""Value types shared by every layer: tests, raw results, observations, verdicts and run results.

Names of things are plain strings everywhere:

- a node: ``"node-017"``; a NIC endpoint: ``"node-017/mlx5_3"``; a switch: ``"leaf-0-3"``;
- a link: the sorted pair of its endpoints, see :func:`link_key`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: the probes fabriccheck knows (DESIGN.md "Words")
PROBES = ("nccl", "ib_write_bw", "iperf3", "allreduce-cpu")

#: Observation.status values
PASS, FAIL, HANG, UNREACHABLE, ERROR = "pass", "fail", "hang", "unreachable", "error"
STATUSES = (PASS, FAIL, HANG, UNREACHABLE, ERROR)

#: Verdict.state values (DESIGN.md "Words")
HEALTHY, SUSPECT, BAD, UNTESTED = "healthy", "suspect", "bad", "untested"
STATES = (HEALTHY, SUSPECT, BAD, UNREACHABLE, UNTESTED)

LinkKey = tuple[str, str]


def link_key(a: str, b: str) -> LinkKey:
    """The canonical (sorted) name of the link between endpoints ``a`` and ``b``.

    >>> link_key("spine-1", "leaf-0-0")
    ('leaf-0-0', 'spine-1')
    """
    return (a, b) if a <= b else (b, a)


def nic_node(endpoint: str) -> str:
    """The node a NIC endpoint belongs to.

    >>> nic_node("node-017/mlx5_3")
    'node-017'
    """
    return endpoint.split("/", 1)[0]


@dataclass(frozen=True)
class Flow:
    """Traffic one test sends from one NIC endpoint to another (``node/nic`` on both sides)."""

    src: str
    dst: str


@dataclass(frozen=True)
class Test:
    """One planned test: a probe over a group of nodes, with the NIC-level flows it creates.

    ``flows`` say which NICs talk to which (a ring edge per rail for a collective, one pair for
    ``ib_write_bw``); together with the topology they give the links a test touches.
    ``params`` holds probe options (collective, sizes, rails, ...).
    """

    test_id: str
    probe: str
    nodes: tuple[str, ...]
    flows: tuple[Flow, ...] = ()
    round: int = 0
    purpose: str = "sweep"  # sweep | confirm | bisect | gate
    timeout_s: float = 120.0
    params: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    __test__ = False  # not a pytest class

    @property
    def group_size(self) -> int:
        return len(self.nodes)

    @property
    def nics(self) -> tuple[str, ...]:
        """Every NIC endpoint the test's flows use, sorted."""
        return tuple(sorted({e for f in self.flows for e in (f.src, f.dst)}))


@dataclass(frozen=True)
class RawResult:
    """What an executor returns for one test: raw text and facts, never parsed numbers.

    ``exit_code`` is None when the command was killed (timeout) or never started.
    ``duration_s`` is the wall time the test took (simulated time for the simulator).
    ``unreachable`` names the hosts that could not be reached; ``error`` an executor-level problem.
    ``commands`` are the exact commands run, so a human can rerun one.
    """

    test_id: str
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = 0
    duration_s: float = 0.0
    timed_out: bool = False
    unreachable: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class Observation:
    """One test's outcome as judged: status, the judged number and what was expected.

    ``value`` is in ``unit`` (``GB/s`` busbw for collectives, ``Gb/s`` for ib_write_bw/iperf3).
    """

    test: Test
    status: str
    value: float | None = None
    unit: str = ""
    floor: float | None = None
    expected: float | None = None
    reason: str = ""
    raw: RawResult | None = None

    @property
    def passed(self) -> bool:
        return self.status == PASS


@dataclass(frozen=True)
class Verdict:
    """The state of one component with the evidence behind it.

    ``kind`` is ``node``, ``nic`` or ``link``; ``name`` the node, ``node/nic``, or for a link
    ``"a -- b"`` with ``link`` holding the key. ``evidence`` lists test ids.
    """

    kind: str
    name: str
    state: str
    reason: str = ""
    evidence: tuple[str, ...] = ()
    link: LinkKey | None = None


@dataclass
class RunResult:
    """The outcome of one sweep, gate or bisect run (the ``--json`` contract in DESIGN.md)."""

    mode: str
    nodes: list[str]
    rounds: int = 0
    tests: int = 0
    test_seconds: float = 0.0
    wall_seconds: float = 0.0
    bad_nodes: list[str] = field(default_factory=list)
    bad_nics: list[str] = field(default_factory=list)
    bad_links: list[LinkKey] = field(default_factory=list)
    link_suspects: list[dict[str, Any]] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    hung: list[str] = field(default_factory=list)
    suspects: list[str] = field(default_factory=list)
    drain: list[str] = field(default_factory=list)
    fabric_warnings: list[str] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        return not (self.drain or self.bad_links or self.unreachable)
