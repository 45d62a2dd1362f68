"""Slurm inventory: idle nodes from ``sinfo``, a reservation that holds them, the gate's job nodes.

Parsers are pure (``parse_*``) and read what ``sinfo``/``scontrol`` print; :class:`SlurmInventory`
runs the commands through a :data:`~fabriccheck.inventory.command.Runner`.

A node is *idle* only when Slurm says exactly that: base state ``idle`` with no flag (``idle*`` is
not responding, ``idle~`` powered off, ``IDLE+DRAIN`` drained, ``IDLE+PLANNED`` promised to a
pending job). A sweep never tests anything else.
"""

from __future__ import annotations

import getpass
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import hostlist

from fabriccheck.errors import ConfigError, ExecutorError
from fabriccheck.inventory.command import Runner, run_command

#: suffix characters sinfo appends to a state (sinfo(1) "NODE STATE CODES")
STATE_SUFFIXES = {
    "*": "not_responding",
    "~": "powered_off",
    "#": "powering_up",
    "!": "pending_power_down",
    "%": "powering_down",
    "$": "maintenance_reservation",
    "@": "pending_reboot",
    "^": "reboot_issued",
    "-": "planned",
}

#: short (default ``sinfo``) state names -> long names
SHORT_STATES = {
    "alloc": "allocated",
    "mix": "mixed",
    "drng": "draining",
    "drain": "drained",
    "comp": "completing",
    "resv": "reserved",
    "plnd": "planned",
    "futr": "future",
    "unk": "unknown",
    "npc": "perfctrs",
    "pow_dn": "power_down",
    "pow_up": "powering_up",
}

#: extra ``+FLAG`` words that do not make an idle node busy
HARMLESS_FLAGS = frozenset({"cloud", "dynamic_norm", "dynamic_future"})


@dataclass(frozen=True)
class SlurmNodeState:
    """One node's state as Slurm reported it.

    ``base`` is the long base state (``idle``, ``allocated``, ``mixed``, ``drained``, ``down``...),
    ``flags`` the ``+FLAG`` words and suffix meanings (``drain``, ``not_responding``...).
    """

    node: str
    state: str
    base: str
    flags: frozenset[str] = frozenset()

    def is_idle(self, *, reserved_ok: bool = False) -> bool:
        """True when nothing runs or is about to run here and the node is usable.

        ``reserved_ok`` accepts an idle node inside a reservation (ours, while we hold it).
        """
        allowed = HARMLESS_FLAGS | ({"reserved", "maint"} if reserved_ok else set())
        if self.base == "reserved" and reserved_ok:
            return not (self.flags - allowed)
        return self.base == "idle" and not (self.flags - allowed)


def is_drained_idle(st: SlurmNodeState) -> bool:
    """Drained with nothing running (``drained``, ``IDLE+DRAIN``): safe to test for recovery.

    >>> is_drained_idle(parse_state("n", "drained")), is_drained_idle(parse_state("n", "draining"))
    (True, False)
    """
    if st.base == "drained":
        return not (st.flags - HARMLESS_FLAGS)
    return st.base == "idle" and not (st.flags - HARMLESS_FLAGS - {"drain"})


def parse_state(node: str, state: str) -> SlurmNodeState:
    """Normalize a state as printed by ``sinfo`` (``idle*``, ``drained``, ``alloc``) or ``scontrol``
    (``IDLE+DRAIN``, ``DOWN*+DRAIN``).

    >>> parse_state("n1", "idle*").flags
    frozenset({'not_responding'})
    >>> parse_state("n1", "IDLE+DRAIN").is_idle()
    False
    >>> parse_state("n1", "idle").is_idle()
    True
    """
    words = state.strip().lower().split("+")
    flags: set[str] = set()
    cleaned = []
    for word in words:
        while word and word[-1] in STATE_SUFFIXES:
            flags.add(STATE_SUFFIXES[word[-1]])
            word = word[:-1]
        cleaned.append(word)
    base = SHORT_STATES.get(cleaned[0], cleaned[0]) if cleaned and cleaned[0] else "unknown"
    flags.update(w for w in cleaned[1:] if w)
    return SlurmNodeState(node=node, state=state.strip(), base=base, flags=frozenset(flags))


def _header_columns(line: str) -> list[str] | None:
    cols = line.split()
    upper = [c.upper() for c in cols]
    if "STATE" in upper and any(c.startswith("NODELIST") or c == "HOSTNAMES" for c in upper):
        return upper
    return None


def parse_sinfo(text: str) -> list[SlurmNodeState]:
    """Node states from ``sinfo`` output, one entry per (node, listed state), in order.

    Reads per-node lines without a header (``sinfo -h -N -o '%N %T'``, ``sinfo -h -o %n,%T``,
    ``sinfo -h -N -O NodeList,...,StateLong``: node first, state last) and tables with a header
    naming ``STATE`` and ``NODELIST`` (default ``sinfo``, ``sinfo -Nel``), whose node lists are
    hostlist expressions (``adev[6,13,15]``). A node listed in several partitions appears once per
    line; :func:`idle_from_sinfo` takes the most cautious reading.
    """
    out: list[SlurmNodeState] = []
    header: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        cols = _header_columns(line)
        if cols is not None:
            header = cols
            continue
        if header is not None:
            parts = line.split(None, len(header) - 1)
            state_i = header.index("STATE")
            list_i = next(
                i for i, c in enumerate(header) if c.startswith("NODELIST") or c == "HOSTNAMES"
            )
            if len(parts) <= max(state_i, list_i):
                continue
            for node in hostlist.expand_hostlist(parts[list_i].split()[0]):
                out.append(parse_state(node, parts[state_i]))
            continue
        parts = line.replace(",", " ").split()
        if len(parts) < 2:
            continue
        out.append(parse_state(parts[0], parts[-1]))
    return out


def idle_from_sinfo(states: Iterable[SlurmNodeState], *, reserved_ok: bool = False) -> list[str]:
    """Nodes whose every listed state is idle, in first-seen order (one busy listing excludes)."""
    order: dict[str, bool] = {}
    for st in states:
        ok = st.is_idle(reserved_ok=reserved_ok)
        order[st.node] = order.get(st.node, True) and ok
    return [n for n, ok in order.items() if ok]


def parse_scontrol_show_node(text: str) -> dict[str, dict[str, str]]:
    """``scontrol show node`` records as ``{node: {key: value}}``.

    ``Reason=`` and ``OS=`` run to the end of their line (they contain spaces); records start at
    ``NodeName=``, with or without the usual continuation indentation.
    """
    records: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        for rest_key in ("Reason=", "OS="):
            if line.startswith(rest_key):
                if current is not None:
                    current[rest_key[:-1]] = line[len(rest_key) :]
                break
        else:
            for token in line.split():
                key, sep, value = token.partition("=")
                if not sep:
                    continue
                if key == "NodeName":
                    current = {}
                    records[value] = current
                if current is not None:
                    current[key] = value
    return records


def gate_nodes(env: Mapping[str, str] | None = None) -> list[str]:
    """The nodes of the current Slurm job, from ``SLURM_JOB_NODELIST`` (hostlist syntax).

    >>> gate_nodes({"SLURM_JOB_NODELIST": "gpu[01-03],gpu07"})
    ['gpu01', 'gpu02', 'gpu03', 'gpu07']
    """
    env = os.environ if env is None else env
    value = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not value:
        raise ConfigError(
            "SLURM_JOB_NODELIST is not set",
            source="environment",
            hint="run `fabriccheck gate` inside a Slurm allocation (srun/sbatch) or pass the nodes",
        )
    try:
        return list(hostlist.expand_hostlist(value))
    except hostlist.BadHostlist as exc:
        raise ConfigError(
            f"bad hostlist {value!r}: {exc}", source="environment", field="SLURM_JOB_NODELIST"
        ) from exc


class SlurmInventory:
    """Idle nodes of a Slurm cluster and a reservation that keeps jobs off them while tested.

    Parameters
    ----------
    partition : str, optional
        Only nodes of this partition.
    runner : Runner, optional
        Runs ``sinfo``/``scontrol`` (default: a subprocess with a timeout).
    timeout_s : float
        Per-command timeout.
    """

    name = "slurm"

    def __init__(
        self, *, partition: str | None = None, runner: Runner | None = None, timeout_s: float = 30.0
    ) -> None:
        self.partition = partition
        self.runner = runner or run_command
        self.timeout_s = timeout_s
        self._held: set[str] = set()
        self._recovering: set[str] = set()

    def _sinfo(self, nodes: Sequence[str] | None = None) -> list[SlurmNodeState]:
        argv = ["sinfo", "-h", "-N", "-o", "%N %T"]
        if self.partition:
            argv += ["-p", self.partition]
        if nodes:
            argv += ["-n", hostlist.collect_hostlist(list(nodes))]
        return parse_sinfo(self.runner(argv, self.timeout_s))

    def states(self, nodes: Sequence[str] | None = None) -> dict[str, SlurmNodeState]:
        """The current state of every node (or of ``nodes``); the most cautious listing wins."""
        out: dict[str, SlurmNodeState] = {}
        for st in self._sinfo(nodes):
            if st.node not in out or out[st.node].is_idle(reserved_ok=True):
                out[st.node] = st
        return out

    def idle_nodes(
        self, *, exclude: Iterable[str] = (), recovering: Iterable[str] = ()
    ) -> list[str]:
        """Nodes Slurm reports idle now, minus ``exclude`` (e.g. nodes tested recently).

        ``recovering`` are nodes fabriccheck drained earlier (``store.held_nodes()``): they are
        included while drained and otherwise idle, so a later sweep can find them healthy and
        resume them.
        """
        skip = set(exclude)
        states = self._sinfo()
        idle = idle_from_sinfo(states)
        back = set(recovering)
        self._recovering = back
        for st in states:
            if st.node in back and st.node not in idle and is_drained_idle(st):
                idle.append(st.node)
        return [n for n in idle if n not in skip]

    def recheck_idle(self, nodes: Sequence[str]) -> list[str]:
        """The subset of ``nodes`` still idle right now (call just before each round).

        Nodes inside our own reservation count as idle, and so do drained nodes we are
        re-testing (``recovering``) while nothing runs on them; anything else Slurm says is
        busy, drained, down or planned is dropped.
        """
        if not nodes:
            return []
        states = self._sinfo(nodes)
        held = self._held
        ok = set()
        for node in idle_from_sinfo(states, reserved_ok=True):
            st = [s for s in states if s.node == node]
            if all(s.is_idle() for s in st) or node in held:
                ok.add(node)
        for s in states:  # nodes we drained and are re-testing stay in while nothing runs there
            if s.node in self._recovering and all(
                is_drained_idle(x) for x in states if x.node == s.node
            ):
                ok.add(s.node)
        return [n for n in nodes if n in ok]

    @contextmanager
    def reserve(
        self, nodes: Sequence[str], *, name: str | None = None, duration_min: int = 60
    ) -> Iterator[str]:
        """Hold exactly ``nodes`` in a Slurm reservation for the duration of the ``with`` block.

        Slurm refuses the reservation when a job runs on any of them (no ``IGNORE_JOBS``), so a
        node that stopped being idle is never tested. The reservation is deleted on exit, also
        when the block raises. Yields the reservation name (for ``srun --reservation``).
        """
        if not nodes:
            raise ConfigError("no nodes to reserve", source="slurm inventory")
        name = name or f"fabriccheck-{os.getpid()}-{int(time.time())}"
        argv = [
            "scontrol", "create", "reservation", f"ReservationName={name}",
            f"Nodes={hostlist.collect_hostlist(list(nodes))}", "StartTime=now",
            f"Duration={int(duration_min)}", f"Users={getpass.getuser()}",
        ]  # fmt: skip
        self.runner(argv, self.timeout_s)
        self._held.update(nodes)
        try:
            yield name
        finally:
            self._held.difference_update(nodes)
            try:
                self.runner(["scontrol", "delete", f"ReservationName={name}"], self.timeout_s)
            except ExecutorError:
                # retry once: a controller busy at this moment must not leave nodes reserved
                time.sleep(1.0)
                self.runner(["scontrol", "delete", f"ReservationName={name}"], self.timeout_s)

    def close(self) -> None:
        """Nothing to release beyond :meth:`reserve`'s own cleanup."""
