"""The report's view of a run: component states, node groups and per-test ratios (pure).

Everything the figures and tables need is derived here from a :class:`~fabriccheck.models.RunResult`
and an optional :class:`~fabriccheck.topology.model.Topology`, so the renderers only lay it out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import hostlist

from fabriccheck.models import (
    BAD,
    HEALTHY,
    SUSPECT,
    UNREACHABLE,
    UNTESTED,
    LinkKey,
    Observation,
    RunResult,
    link_key,
    nic_node,
)
from fabriccheck.topology.model import Topology

HUNG = "hung"
#: node states from least to most severe (a node shows its most severe one)
NODE_STATES = (UNTESTED, HEALTHY, SUSPECT, BAD, HUNG, UNREACHABLE)
_SEVERITY = {s: i for i, s in enumerate(NODE_STATES)}
#: nodes per group when there is no topology to group them by leaf
DEFAULT_GROUP_SIZE = 32

_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple:
    """Sort key that orders ``node-2`` before ``node-10``.

    >>> sorted(["node-10", "node-2"], key=natural_key)
    ['node-2', 'node-10']
    """
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(name))


def compact(names: Iterable[str], limit: int = 0) -> str:
    """Names as a Slurm hostlist (``node-[001-004,017]``); ``limit`` > 0 truncates the text.

    >>> compact(["node-002", "node-001", "node-017"])
    'node-[001-002,017]'
    """
    names = sorted(set(names), key=natural_key)
    if not names:
        return ""
    try:
        text = hostlist.collect_hostlist(names)
    except (ValueError, hostlist.BadHostlist):  # names hostlist cannot express
        text = ",".join(names)
    if limit and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def worse(a: str, b: str) -> str:
    """The more severe of two node states."""
    return a if _SEVERITY.get(a, 0) >= _SEVERITY.get(b, 0) else b


def obs_ratio(obs: Observation) -> float | None:
    """Measured / expected (the spec floor when nothing is expected); None without a number."""
    if obs.value is None:
        return None
    ref = obs.expected or obs.floor
    if not ref:
        return None
    return obs.value / ref


@dataclass(frozen=True)
class Group:
    """Nodes shown together in aggregated figures: the nodes behind one leaf (or leaf set)."""

    label: str
    nodes: tuple[str, ...]
    leaves: tuple[str, ...] = ()


@dataclass
class RunView:
    """States of every component of a run, as the report shows them."""

    nodes: list[str]  # every node drawn (run nodes first, then topology-only ones)
    run_nodes: list[str]
    node_state: dict[str, str]
    node_reason: dict[str, str]
    nic_state: dict[str, str]
    link_state: dict[LinkKey, str]
    tested: set[str]
    groups: list[Group]
    group_of: dict[str, int]
    node_obs: dict[str, list[Observation]] = field(default_factory=dict)

    def count(self, state: str) -> int:
        return sum(1 for n in self.run_nodes if self.node_state[n] == state)

    def nodes_in(self, *states: str) -> list[str]:
        return [n for n in self.run_nodes if self.node_state[n] in states]


def _verdict_state(state: str, reason: str) -> str:
    if state == BAD and ("hang" in reason.lower() or "hung" in reason.lower()):
        return HUNG
    return state


def build_view(result: RunResult, topology: Topology | None) -> RunView:
    """Derive node, NIC and link states and node groups from a run (and its topology)."""
    run_nodes = sorted(set(result.nodes), key=natural_key)
    extra = []
    if topology is not None:
        extra = sorted(set(topology.nodes) - set(run_nodes), key=natural_key)
    nodes = run_nodes + extra

    node_obs: dict[str, list[Observation]] = {}
    for obs in result.observations:
        for n in obs.test.nodes:
            node_obs.setdefault(n, []).append(obs)
    tested = {n for n, obs in node_obs.items() if any(o.status != UNREACHABLE for o in obs)}
    state, reason = _node_states(result, nodes, tested)
    groups = node_groups(nodes, topology)
    group_of = {n: i for i, g in enumerate(groups) for n in g.nodes}
    return RunView(
        nodes=nodes,
        run_nodes=run_nodes,
        node_state=state,
        node_reason=reason,
        nic_state=_nic_states(result),
        link_state=_link_states(result),
        tested=tested,
        groups=groups,
        group_of=group_of,
        node_obs=node_obs,
    )


def _node_states(result: RunResult, nodes: list[str], tested: set[str]
                 ) -> tuple[dict[str, str], dict[str, str]]:
    """Each node's most severe state (healthy if tested, else untested, then raised by the
    node and NIC verdicts and the run's lists) and the reason for it."""
    state = {n: (HEALTHY if n in tested else UNTESTED) for n in nodes}
    reason: dict[str, str] = {}

    def mark(node: str, st: str, why: str = "") -> None:
        state[node] = worse(state.get(node, UNTESTED), st)
        if why and (state[node] == st or node not in reason):
            reason[node] = why

    for v in result.verdicts:
        st = _verdict_state(v.state, v.reason)
        if v.kind == "node":
            mark(v.name, st, v.reason if st != HEALTHY else "")
        elif v.kind == "nic" and st in (BAD, SUSPECT):
            mark(nic_node(v.name), st, f"{v.name}: {v.reason}".rstrip(": "))
    for n in result.suspects:
        mark(n, SUSPECT)
    for nic in result.bad_nics:
        mark(nic_node(nic), BAD, reason.get(nic_node(nic), f"bad NIC {nic}"))
    for n in result.bad_nodes:
        mark(n, BAD)
    for n in result.drain:
        mark(n, BAD)
    for n in result.hung:
        mark(n, HUNG, reason.get(n, "tests hung"))
    for n in result.unreachable:
        mark(n, UNREACHABLE, reason.get(n, "could not be reached"))
    return state, reason


def _nic_states(result: RunResult) -> dict[str, str]:
    """Each NIC's state from its verdict; the run's bad NICs are bad."""
    nic_state: dict[str, str] = {}
    for v in result.verdicts:
        if v.kind == "nic":
            nic_state[v.name] = _verdict_state(v.state, v.reason)
    for nic in result.bad_nics:
        nic_state[nic] = BAD
    return nic_state


def _link_states(result: RunResult) -> dict[LinkKey, str]:
    """Each link's state from its verdict; candidates of a link suspect set are suspect
    (unless bad); the run's bad links are bad."""
    link_state: dict[LinkKey, str] = {}
    for v in result.verdicts:
        if v.kind == "link":
            key = v.link if v.link is not None else _parse_link(v.name)
            if key is not None:
                link_state[link_key(*key)] = _verdict_state(v.state, v.reason)
    for sus in result.link_suspects:
        for cand in sus.get("candidates", ()):
            key = link_key(*cand)
            if link_state.get(key) != BAD:
                link_state[key] = SUSPECT
    for lk in result.bad_links:
        link_state[link_key(*lk)] = BAD
    return link_state


def _parse_link(name: str) -> LinkKey | None:
    """``"a -- b"`` → ``(a, b)``; None for anything else (e.g. a set ``"a -- b | c -- d"``)."""
    keys = link_names(name)
    return keys[0] if len(keys) == 1 and "|" not in name else None


def link_names(text: str) -> list[LinkKey]:
    """Every ``a -- b`` link written in ``text`` (pieces separated by ``|``).

    >>> link_names("leaf-0-2 -- spine-0 | leaf-0-2 -- spine-1 | ... (16 links)")
    [Link(a='leaf-0-2', b='spine-0'), Link(a='leaf-0-2', b='spine-1')]
    """
    out = []
    for piece in text.split("|"):
        parts = [p.strip() for p in piece.split(" -- ")]
        if len(parts) == 2 and all(p and " " not in p for p in parts):
            out.append(link_key(*parts))
    return out


def node_groups(nodes: list[str], topology: Topology | None) -> list[Group]:
    """Nodes grouped by the leaf switches they hang off (in node order).

    Without a topology (or for nodes it does not know) consecutive runs of
    :data:`DEFAULT_GROUP_SIZE` nodes form a group.
    """
    by_key: dict[tuple[str, ...], list[str]] = {}
    loose: list[str] = []
    for n in nodes:
        if topology is not None and n in topology.nodes and topology.nodes[n].nics:
            try:
                key = topology.node_leaves(n)
            except KeyError:
                key = ()
            if key:
                by_key.setdefault(key, []).append(n)
                continue
        loose.append(n)
    groups = [Group(compact(lv, 40), tuple(members), lv) for lv, members in by_key.items()]
    if topology is not None:
        groups = _by_pod(groups, topology)
    for i in range(0, len(loose), DEFAULT_GROUP_SIZE):
        chunk = loose[i : i + DEFAULT_GROUP_SIZE]
        groups.append(Group(compact(chunk, 40), tuple(chunk)))
    groups.sort(key=lambda g: natural_key(g.nodes[0]))
    return groups


#: leaf groups are merged into pods when there are more than this many and they are small
POD_MERGE_GROUPS, POD_MERGE_MEAN_NODES = 64, 8


def _by_pod(groups: list[Group], topology: Topology) -> list[Group]:
    """Many small leaf groups (a 3-tier fat-tree) → one group per pod: leaves sharing spines."""
    if len(groups) <= POD_MERGE_GROUPS:
        return groups
    if sum(len(g.nodes) for g in groups) / len(groups) >= POD_MERGE_MEAN_NODES:
        return groups
    adj: dict[str, set[str]] = {}
    for a, b in topology.links:
        if a in topology.switches and b in topology.switches:
            adj.setdefault(a, set()).add(b)
            adj.setdefault(b, set()).add(a)
    pods: dict[frozenset[str], list[Group]] = {}
    for g in groups:
        up = frozenset(s for lf in g.leaves for s in adj.get(lf, ()) if topology.switches[s].tier
                       != "leaf")  # fmt: skip
        pods.setdefault(up, []).append(g)
    if not 1 < len(pods) <= len(groups) // 2:
        return groups
    out = []
    for members in pods.values():
        leaves = tuple(lf for g in members for lf in g.leaves)
        nodes = tuple(n for g in members for n in g.nodes)
        out.append(Group(compact(leaves, 40), nodes, leaves))
    return out


def merge_groups(groups: list[Group], max_count: int) -> list[Group]:
    """Merge consecutive groups so there are at most ``max_count`` (for big matrices)."""
    if len(groups) <= max_count:
        return groups
    per = -(-len(groups) // max_count)
    out = []
    for i in range(0, len(groups), per):
        chunk = groups[i : i + per]
        members = tuple(n for g in chunk for n in g.nodes)
        leaves = tuple(lf for g in chunk for lf in g.leaves)
        out.append(Group(compact(members, 40), members, leaves))
    return out
