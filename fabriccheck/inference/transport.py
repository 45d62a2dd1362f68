"""Transport fallbacks judged: a node whose NCCL left the fast path, from what its nccl tests'
NCCL INFO lines say (:mod:`fabriccheck.probes.nccl_transport`), even when the bandwidth passed.

Every inter-node nccl test keeps, in its observation's ``facts["transport"]``, per host: the
network its ranks used (``ib`` for InfiniBand and RoCE alike, ``socket``), whether their NET
channels used GPUDirect RDMA, which ranks, which devices (:func:`host_transport`). The rules:

- **sockets**: a node whose ranks used ``NET/Socket`` in any inter-node test is **bad**, when
  another node of the run used NET/IB (its peers prove the fabric and the job's settings work):
  an IB device is unusable on it or its ``NCCL_IB_HCA`` is wrong. Every node on sockets is one
  job-wide setting, not a node fault: a run warning, nothing drained.
- **host memory**: a node whose IB NET channels lacked ``GDRDMA`` in every inter-node test that
  says, while another node's had it, is **bad**: GPUDirect RDMA is off on it (``nvidia_peermem``
  not loaded, or its GPU-NIC path too long), NCCL stages every chunk through host memory. None
  with GDRDMA anywhere is a run warning.
- A failing or hung nccl test that holds such a node is **explained** by it: it is left out of
  the bandwidth attribution (:func:`explained_out`), so the node's partners, NICs and links are
  neither blamed nor made suspects for the slow tests it caused.

The transport lines are what NCCL itself printed about its setup, not a measurement: no noise
makes a healthy node print ``NET/Socket``, so one test is evidence enough.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from fabriccheck.inference.wording import listing
from fabriccheck.models import BAD, FAIL, HANG, Observation, Test, Verdict
from fabriccheck.probes.nccl_transport import IB, SOCKET, rank_ranges
from fabriccheck.probes.results import NcclTestsResult, RankTransport

SOCKET_FIX = ("an IB device unusable on it or NCCL_IB_HCA wrong; check ibstat, NCCL_IB_HCA, "
              "NCCL_SOCKET_IFNAME")
GDR_FIX = ("NCCL stages every chunk through host memory; check lsmod | grep nvidia_peermem "
           "(nv_peer_mem on older drivers, or a DMA-BUF capable driver and kernel), and "
           "nvidia-smi topo -m for GPU-NIC pairs across CPU sockets")


def host_transport(ranks: Sequence[RankTransport]) -> dict[str, dict]:
    """Per host, what its ranks with a NET channel used: ``net`` (``socket`` when any rank used
    sockets), ``gdr`` (False when any IB rank's channels lacked GDRDMA, None unknown),
    ``ranks`` (the fallen-back ones when some did, else all) and ``hcas``.

    >>> host_transport([RankTransport("a", 8, "socket", False, ("eth0",)),
    ...                 RankTransport("a", 9, "socket", False, ("eth0",)),
    ...                 RankTransport("b", 0, "ib", True, ("mlx5_0",))])["a"]
    {'net': 'socket', 'gdr': False, 'ranks': '8-9', 'hcas': ['eth0']}
    """
    by_host: dict[str, list[RankTransport]] = {}
    for r in ranks:
        if r.net is not None:
            by_host.setdefault(r.host, []).append(r)
    out: dict[str, dict] = {}
    for host, rs in sorted(by_host.items()):
        socket = [r for r in rs if r.net == SOCKET]
        flags = [r.gdr for r in rs if r.net != SOCKET and r.gdr is not None]
        no_gdr = [r for r in rs if r.net != SOCKET and r.gdr is False]
        shown = socket or no_gdr or rs
        out[host] = {
            "net": SOCKET if socket else rs[0].net,
            "gdr": False if socket else (all(flags) if flags else None),
            "ranks": rank_ranges(r.rank for r in shown if r.rank is not None),
            "hcas": sorted({h for r in shown for h in r.hcas}),
        }
    return out


def rank_node(t: RankTransport, nodes: Sequence[str], n_ranks: int) -> str | None:
    """The test node a rank ran on: its host when that is a node's name (or the same short
    name: NCCL cuts the hostname at its first dot), else by its rank (the launcher places
    ``ranks / nodes`` consecutive ranks per node, in the order the test lists its nodes);
    None when neither says.

    >>> rank_node(RankTransport("gpu17.cluster", 9, "ib", True), ("node-016", "node-017"), 16)
    'node-017'
    >>> rank_node(RankTransport("node-016", None, "ib", True), ("node-016.x", "node-017.x"), 0)
    'node-016.x'
    """
    if t.host in nodes:
        return t.host
    short = {n.split(".")[0]: n for n in nodes}
    if t.host.split(".")[0] in short:
        return short[t.host.split(".")[0]]
    per = n_ranks // len(nodes) if nodes and n_ranks % len(nodes) == 0 else 0
    if per and t.rank is not None and 0 <= t.rank < n_ranks:
        return nodes[t.rank // per]
    return None


def transport_facts(parsed: object, test: Test | None = None) -> dict:
    """An nccl test's ``Observation.facts`` entry: ``{"transport": host_transport(...)}`` when
    its output showed a NET channel (or the network chosen for a multi-host job), else ``{}``.
    With ``test``, hosts are the test's node names (:func:`rank_node`; a rank on no node of the
    test is left out)."""
    if not isinstance(parsed, NcclTestsResult) or not parsed.transport:
        return {}
    ranks = parsed.transport
    if test is not None:
        n_ranks = parsed.ranks or len(ranks)
        ranks = tuple(replace(t, host=node) for t in ranks
                      if (node := rank_node(t, test.nodes, n_ranks)) is not None)
    hosts = host_transport(ranks)
    return {"transport": hosts} if hosts else {}


@dataclass
class _Seen:
    """One node's transport over the run's inter-node nccl tests."""

    socket: list[tuple[str, str]] = field(default_factory=list)  # (test id, ranks)
    no_gdr: list[tuple[str, str]] = field(default_factory=list)
    gdr: int = 0  # tests whose IB channels used GDRDMA
    ib: int = 0  # tests over IB (or a net plugin)
    net: str = IB  # the network of those (a net plugin's name where one was used)
    hcas: set[str] = field(default_factory=set)


@dataclass
class TransportState:
    """What the run's nccl tests say about each node's transport (see the module doc)."""

    bad_nodes: dict[str, Verdict] = field(default_factory=dict)
    #: failing / hung nccl test ids a fallen-back member explains
    explained: frozenset[str] = frozenset()
    #: node -> {"net", "gdr", "tests"} over the run's inter-node nccl tests
    nodes: dict[str, dict] = field(default_factory=dict)
    #: one entry per fallback: node, to (socket | host_memory), ranks, tests, hcas, reason
    fallbacks: list[dict] = field(default_factory=list)
    #: run-wide findings (every node on sockets / without GPUDirect RDMA): nothing drained
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """``result.extra["transport"]``."""
        return {"fallbacks": self.fallbacks, "warnings": list(self.warnings),
                "nodes": dict(sorted(self.nodes.items()))}


def judge_transport(observations: Sequence[Observation]) -> TransportState:
    """Judge the transport of every node the run's inter-node nccl tests saw (pure).

    >>> from fabriccheck.models import Test
    >>> def obs(tid, facts):
    ...     return Observation(Test(tid, "nccl", tuple(facts)), "pass",
    ...                        facts={"transport": facts})
    >>> ib = {"net": "ib", "gdr": True, "ranks": "0-7", "hcas": ["mlx5_0"]}
    >>> sock = {"net": "socket", "gdr": False, "ranks": "8-15", "hcas": ["eth0"]}
    >>> st = judge_transport([obs("t1", {"n1": ib, "n2": sock})])
    >>> sorted(st.bad_nodes), st.fallbacks[0]["to"]
    (['n2'], 'socket')
    """
    seen: dict[str, _Seen] = {}
    for o in observations:
        hosts = (o.facts or {}).get("transport") if o.test.probe == "nccl" else None
        if not hosts or len(o.test.nodes) < 2:
            continue
        for host, t in hosts.items():
            if host not in o.test.nodes:
                continue  # a host the test does not name: no node to judge
            s = seen.setdefault(host, _Seen())
            s.hcas.update(t.get("hcas") or ())
            if t["net"] == SOCKET:
                s.socket.append((o.test.test_id, t.get("ranks", "")))
                continue
            s.ib += 1
            s.net = t["net"]
            if t.get("gdr") is True:
                s.gdr += 1
            elif t.get("gdr") is False:
                s.no_gdr.append((o.test.test_id, t.get("ranks", "")))
    state = TransportState()
    state.nodes = {n: {"net": SOCKET if s.socket else s.net, "gdr": _gdr(s),
                       "tests": len(s.socket) + s.ib} for n, s in seen.items()}
    _judge_sockets(seen, state)
    _judge_gdr(seen, state)
    state.explained = frozenset(
        o.test.test_id for o in observations
        if o.test.probe == "nccl" and len(o.test.nodes) > 1 and _slow(o)
        and set(o.test.nodes) & set(state.bad_nodes))
    return state


def _gdr(s: _Seen) -> bool | None:
    if s.socket:
        return False
    if s.no_gdr:
        return False if not s.gdr else None  # mixed: per-NIC, not one setting
    return True if s.gdr else None


def _slow(o: Observation) -> bool:
    """A failure by its number (below the floor) or a hang: what a fallback causes (a tool
    error, e.g. an IB completion error, is not explained by it)."""
    return o.status == HANG or (o.status == FAIL and o.value is not None)


def _tests_text(evidence: list[tuple[str, str]]) -> tuple[str, str]:
    """(ranks, ``in r3-00012`` or ``in r3-00012 (+2 more tests)``) of a node's evidence."""
    ranks = evidence[0][1]
    more = f" (+{len(evidence) - 1} more test(s))" if len(evidence) > 1 else ""
    return ranks, f"in {evidence[0][0]}{more}"


def _judge_sockets(seen: dict[str, _Seen], state: TransportState) -> None:
    on_socket = sorted(n for n, s in seen.items() if s.socket)
    if not on_socket:
        return
    peers = sorted(n for n, s in seen.items() if s.ib)
    if not peers:
        state.warnings.append(
            f"NCCL used NET/Socket on every node its tests saw ({listing(on_socket)}): a "
            "job-wide setting (NCCL_IB_DISABLE, NCCL_IB_HCA, NCCL_NET, the container's "
            "/dev/infiniband), not a node fault; check ibstat, NCCL_IB_HCA, NCCL_SOCKET_IFNAME")
        return
    used = "NET/IB" if all(seen[n].net == IB for n in peers) else "their network"
    for node in on_socket:
        s = seen[node]
        ranks, where = _tests_text(s.socket)
        why = (f"NCCL used NET/Socket on {node} (ranks {ranks}) {where} while its peers used "
               f"{used} ({listing(peers, 3)}): {SOCKET_FIX}")
        _blame(state, node, "socket", ranks, s.socket, why, sorted(s.hcas))


def _judge_gdr(seen: dict[str, _Seen], state: TransportState) -> None:
    off = sorted(n for n, s in seen.items() if s.no_gdr and not s.gdr and not s.socket)
    if not off:
        return
    peers = sorted(n for n, s in seen.items() if s.gdr)
    if not peers:
        state.warnings.append(
            f"GPUDirect RDMA was off on every node its NCCL tests saw ({listing(off)}): every "
            f"NET channel lacked GDRDMA; {GDR_FIX}")
        return
    for node in off:
        s = seen[node]
        ranks, where = _tests_text(s.no_gdr)
        why = (f"GPUDirect RDMA off on {node}: its NET channels (ranks {ranks}) lacked GDRDMA "
               f"{where} while its peers' had it ({listing(peers, 3)}): {GDR_FIX}")
        _blame(state, node, "host_memory", ranks, s.no_gdr, why, sorted(s.hcas))


def _blame(state: TransportState, node: str, to: str, ranks: str,
           evidence: list[tuple[str, str]], why: str, hcas: list[str]) -> None:
    ids = tuple(dict.fromkeys(t for t, _ in evidence))
    state.bad_nodes[node] = Verdict("node", node, BAD, why, ids)
    state.fallbacks.append({"node": node, "to": to, "ranks": ranks, "tests": list(ids),
                            "hcas": hcas, "reason": why})


def explained_out(observations: Sequence[Observation], state: TransportState
                  ) -> list[Observation]:
    """The observations the bandwidth attribution judges: all but the slow nccl tests a
    fallen-back member explains."""
    if not state.explained:
        return list(observations)
    return [o for o in observations if o.test.test_id not in state.explained]


def merge_transport_verdicts(inf, state: TransportState):
    """``inf`` (an :class:`~fabriccheck.inference.attribute.Inference`) with the fallen-back
    nodes bad (their reasons joined where traffic blamed the same node), no longer node or hang
    suspects."""
    for node, v in state.bad_nodes.items():
        old = inf.bad_nodes.get(node)
        inf.bad_nodes[node] = v if old is None else replace(
            old, reason=f"{v.reason}; {old.reason}", evidence=v.evidence + old.evidence)
        inf.node_suspects.pop(node, None)
        inf.hang_suspects.pop(node, None)
    return inf


def add_transport_results(result, state: TransportState) -> None:
    """Into a finished run's result: ``extra["transport"]`` (:meth:`TransportState.to_json`
    plus ``unseen``: the nodes in play no inter-node nccl test showed NCCL's transport of, so
    a fallback there would have gone unnoticed) and the run-wide transport warnings as fabric
    warnings (the run exits 1).

    >>> from fabriccheck.models import RunResult
    >>> res = RunResult("gate", ["a", "b", "c"], drain=["c"])
    >>> add_transport_results(res, TransportState(nodes={"a": {"net": "ib"}}))
    >>> res.extra["transport"]["unseen"], res.fabric_warnings
    (['b'], [])
    """
    out = state.to_json()
    gone = {*result.drain, *result.unreachable, *result.hung}
    out["unseen"] = [n for n in result.nodes if n not in state.nodes and n not in gone]
    result.extra["transport"] = out
    result.fabric_warnings = list(dict.fromkeys([*result.fabric_warnings, *state.warnings]))
