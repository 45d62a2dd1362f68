"""Value types shared by every layer: tests, raw results, observations, verdicts and run results.

Names of things are plain strings everywhere:

- a node: ``"node-017"``; a NIC endpoint: ``"node-017/mlx5_3"``; a switch: ``"leaf-0-3"``;
- a link: the sorted pair of its endpoints, see :func:`link_key`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import Any, NamedTuple


class StrEnum(str, Enum):
    """An enum whose members are their string values everywhere (JSON, f-strings, ``==``)."""

    __str__ = str.__str__
    __format__ = str.__format__


class Probe(StrEnum):
    """The probes fabriccheck knows (docs/design.md "Words")."""

    NCCL = "nccl"
    IB_WRITE_BW = "ib_write_bw"
    IPERF3 = "iperf3"
    ALLREDUCE_CPU = "allreduce-cpu"
    SIGNAL = "signal"  # a signal's command (docs/design.md "Signals"); never a pair probe


class Purpose(StrEnum):
    """Why a test runs."""

    SWEEP = "sweep"  # a pairing round (or an untested node's first test)
    SCALE = "scale"  # a collective over a group at scale (4x/8x)
    CONFIRM = "confirm"  # a suspect against known-good partners
    LOCALIZE = "localize"  # link tomography: retests and probes of candidate links
    BISECT = "bisect"  # a part of a failing group, padded with known-good nodes
    PREFLIGHT = "preflight"  # node-local checks before any traffic
    DOMAIN = "domain"  # an NVLink-domain collective (multi-node NVLink, no network; nvl72.md)


class Status(StrEnum):
    """How one observation ended."""

    PASS = "pass"
    FAIL = "fail"
    HANG = "hang"
    UNREACHABLE = "unreachable"
    ERROR = "error"


class State(StrEnum):
    """A component's verdict (docs/design.md "Words")."""

    HEALTHY = "healthy"
    SUSPECT = "suspect"
    BAD = "bad"
    UNREACHABLE = "unreachable"
    UNTESTED = "untested"
    FLAKY = "flaky"  # fails some tests and passes others, beyond what noise explains


class RoundKind(StrEnum):
    """What a round is for (progress lines and the report name it)."""

    SWEEP = "sweep"
    SCALE = "scale"
    FOLLOW_UP = "follow-up"
    PREFLIGHT = "preflight"  # node-local signals before any traffic (and their retests)
    SIGNALS = "signals"  # signals of level 2, 4 or 8 (groups), after the sweep


#: the probes fabriccheck knows
PROBES = tuple(p.value for p in Probe)

#: Observation.status values
PASS, FAIL, HANG, UNREACHABLE, ERROR = (Status.PASS, Status.FAIL, Status.HANG,
                                        Status.UNREACHABLE, Status.ERROR)
STATUSES = tuple(Status)

#: Verdict.state values
HEALTHY, SUSPECT, BAD, UNTESTED = State.HEALTHY, State.SUSPECT, State.BAD, State.UNTESTED
STATES = tuple(State)


class Link(NamedTuple):
    """A switch link as the ordered pair of its endpoints (make one with :meth:`of`).

    It is a tuple, so it is written to JSON as ``[a, b]`` and compares equal to ``(a, b)``.

    >>> Link.of("spine-1", "leaf-0-0")
    Link(a='leaf-0-0', b='spine-1')
    >>> str(Link.of("spine-1", "leaf-0-0"))
    'leaf-0-0 -- spine-1'
    """

    a: str
    b: str

    @classmethod
    def of(cls, x: str, y: str) -> Link:
        return cls(x, y) if x <= y else cls(y, x)

    def __str__(self) -> str:
        return f"{self.a} -- {self.b}"


LinkKey = Link


def link_key(a: str, b: str) -> Link:
    """The canonical (sorted) name of the link between endpoints ``a`` and ``b``.

    >>> link_key("spine-1", "leaf-0-0")
    Link(a='leaf-0-0', b='spine-1')
    """
    return Link.of(a, b)


def nic_node(endpoint: str) -> str:
    """The node a NIC endpoint belongs to.

    >>> nic_node("node-017/mlx5_3")
    'node-017'
    """
    return endpoint.split("/", 1)[0]


@dataclass(frozen=True)
class Flow:
    """Traffic one test sends from one NIC endpoint to another (``node/nic`` on both sides).

    ``path``: the switch-to-switch links this exact flow takes, when learned (a traceroute on
    its own 5-tuple, see :mod:`fabriccheck.learn_paths`); None: only its candidates are known.
    ``partial``: when the trace stopped part-way (probes died), the links the flow may use
    beyond the last switch that answered: fewer candidates than the whole ECMP set.
    """

    src: str
    dst: str
    path: tuple[LinkKey, ...] | None = None
    partial: tuple[LinkKey, ...] | None = None


@dataclass(frozen=True)
class ProbeParams(Mapping):
    """A test's typed probe settings, and why a follow-up test exists.

    It reads like a mapping of the fields that are set (``"rails" in p``, ``p.get("iters")``,
    ``dict(p)``), so executors and JSON see only what a test uses; unknown names are refused.

    >>> p = ProbeParams.of({"size_bytes": 1 << 20, "rails": [3]})
    >>> p.rails, dict(p)
    ((3,), {'size_bytes': 1048576, 'rails': (3,)})
    """

    # what the tools run
    size_bytes: int | None = None
    min_bytes: int | None = None
    rails: tuple[int, ...] | None = None
    duration_s: float | None = None
    iters: int | None = None
    streams: int | None = None
    gpus_per_node: int | None = None
    collective: str | None = None
    #: a pinned 5-tuple (RoCE/ECMP): the flow's source and destination port (iperf3 ``--cport``
    #: and ``-p``; a traceroute with the same ports learns its path)
    sport: int | None = None
    dport: int | None = None
    # why the test exists (follow-ups): the planner's and inference's bookkeeping
    retest_of: str | None = None  # a failing test id retested on the same route
    probe_of: str | None = None  # the link ("a -- b") a localization probe crosses
    batch: str | None = None  # a RoCE localization batch ("leaf>leaf")
    bisect_of: str | None = None  # the failing group a bisection part comes from
    recheck_of: str | None = None  # the part (NIC, "a -- b" link) an intermittence recheck samples
    wave: int | None = None  # run after the round's earlier waves, on the same NICs (repeats)
    # signals (probe "signal"): which one, its command template, the NIC it reads (per: nic)
    signal: str | None = None
    command: str | None = None
    nic: str | None = None
    #: a judged kernel-log reading: judge only events after this ISO time (the node's last check)
    since: str | None = None
    #: a closing counter read: the preflight reading (test id) whose counters it is compared with
    #: over the run's span
    span_of: str | None = None
    #: an NVLink-domain test (purpose ``domain``): its domain, how its trays were carved
    #: (``full``, ``half``, ``quarter``, ``gpu``), the carving (1, 2) and, for a per-GPU test,
    #: the one GPU index every tray runs on
    domain: str | None = None
    carve: str | None = None
    carving: int | None = None
    gpu: int | None = None

    @classmethod
    def of(cls, values: Mapping[str, Any] | None) -> ProbeParams:
        if isinstance(values, ProbeParams):
            return values
        values = dict(values or {})
        unknown = sorted(set(values) - _PARAM_NAMES)
        if unknown:
            raise ValueError(f"unknown test parameter(s) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(_PARAM_NAMES))}")
        if values.get("rails") is not None:
            values["rails"] = tuple(values["rails"])
        return cls(**values)

    def __getitem__(self, key: str) -> Any:
        value = getattr(self, key, None) if key in _PARAM_NAMES else None
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self):
        return (k for k in _PARAM_ORDER if getattr(self, k) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


_PARAM_ORDER = tuple(ProbeParams.__dataclass_fields__)
_PARAM_NAMES = frozenset(_PARAM_ORDER)


@dataclass(frozen=True)
class Test:
    """One planned test: a probe over a group of nodes, with the NIC-level flows it creates.

    ``flows`` say which NICs talk to which (a ring edge per rail for a collective, one pair for
    ``ib_write_bw``); together with the topology they give the links a test touches.
    ``params`` holds the typed probe settings (:class:`ProbeParams`; a plain mapping given here
    is converted and checked).
    """

    test_id: str
    probe: str
    nodes: tuple[str, ...]
    flows: tuple[Flow, ...] = ()
    round: int = 0
    purpose: str = Purpose.SWEEP  # a Purpose (strings from older files compare equal)
    timeout_s: float = 120.0
    params: ProbeParams = field(default_factory=ProbeParams, compare=False, hash=False)

    __test__ = False  # not a pytest class

    def __post_init__(self) -> None:
        if not isinstance(self.params, ProbeParams):
            object.__setattr__(self, "params", ProbeParams.of(self.params))

    @property
    def group_size(self) -> int:
        return len(self.nodes)

    @cached_property  # frozen: the flows never change (judging asks a million times a sweep)
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
    ``findings`` are a judged node-local reading's findings (``{severity, part, what, line,
    check, fix}``, docs/node-checks.md); ``facts`` what its parser read (e.g. the kernel log's
    last stamp, the next check's start).
    """

    test: Test
    status: str
    value: float | None = None
    unit: str = ""
    floor: float | None = None
    expected: float | None = None
    reason: str = ""
    raw: RawResult | None = None
    findings: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    facts: dict[str, Any] = field(default_factory=dict, compare=False)

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
    """The outcome of one sweep, gate or bisect run (the ``--json`` contract in docs/design.md)."""

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
    def exit_code(self) -> int:
        """docs/design.md exit codes: 3 when nothing could be tested; 1 when anything is bad, flaky,
        suspect, unreachable or a fabric warning (or, with ``--strict``, a warn-level node-local
        finding); 3 when part of the scope stayed untested (nodes or NICs); 0 only when
        everything in scope was judged healthy (warn-level findings listed)."""
        tested = any(v.kind == "node" and v.state not in (UNTESTED, UNREACHABLE)
                     for v in self.verdicts)
        if not tested:
            return 3
        if (self.drain or self.bad_links or self.unreachable or self.suspects
                or self.link_suspects or self.fabric_warnings or self.extra.get("flaky")
                or self.extra.get("bad_switches")
                or (self.extra.get("strict") and self.extra.get("warnings"))):
            return 1
        return 3 if self.extra.get("untested") else 0

    @property
    def healthy(self) -> bool:
        """True only when every node and NIC in scope was judged healthy (exit code 0)."""
        return self.exit_code == 0
