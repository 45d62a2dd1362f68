"""The Ray executor: run a round of tests on the nodes of an existing Ray cluster.

How a round runs (``RayExecutor.run_round``):

1. read the cluster's live nodes and map each fabriccheck host to its Ray node
   (:mod:`fabriccheck.inventory.ray` naming rules; an inventory address or IP also matches);
2. **reserve** every test's group with a placement group
   (:mod:`~fabriccheck.executors.ray.reserve`): ``STRICT_SPREAD``, one bundle per node,
   each bundle pinned to its node by the ``ray.io/node-id`` label and holding the node's whole
   ``reserve_resources`` (default: the idle resource and ``GPU``), so no other Ray work that needs
   them lands there meanwhile; a group not reserved while no group of the round was for
   ``reserve_timeout_s`` (someone holds part of a node) is reported, not run;
3. run each test's :class:`~fabriccheck.probes.launch.ProbeLaunch` through
   :func:`~fabriccheck.executors.launch_runner.run_tests` with :class:`RayHostRunner`: one
   :class:`~fabriccheck.executors.ray.agent.HostAgent` actor per node (0 CPU, hard node affinity)
   starts each command in its own session, waits with a timeout, kills its process group;
4. always (``finally``) remove the round's placement groups; ``close()`` removes any left and
   kills every agent. Placement groups also die with the driver if it is killed.

Ray errors are mapped in :func:`fabriccheck.inventory.ray_session.map_ray_error`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from fabriccheck.errors import ConnectError, ExecutorError
from fabriccheck.executors.launch_runner import run_tests
from fabriccheck.executors.ray.reserve import (  # noqa: F401  (re-exported for callers)
    NODE_ID_LABEL,
    node_bundle,
    overlapping_groups,
    release_groups,
    reserve_groups,
    wait_reservations_gone,
)
from fabriccheck.executors.ray.runner import RayHostRunner
from fabriccheck.inventory.ray import IDLE_RESOURCE, RayNode, cluster_state, nodes_from_state
from fabriccheck.inventory.ray_session import connect, disconnect, map_ray_error, ray_get
from fabriccheck.models import RawResult, Test, nic_node
from fabriccheck.probes.launch import ProbeLaunch

#: makes the launch for one test: (test, nic endpoint -> ip, port) -> ProbeLaunch
LaunchBuilder = Callable[[Test, Mapping[str, str], int], ProbeLaunch]


def _default_builder(options: Any = None) -> LaunchBuilder:
    from fabriccheck.probes.commands import build_launch

    def build(test: Test, nic_ips: Mapping[str, str], port: int) -> ProbeLaunch:
        return build_launch(test, nic_ips, port=port, options=options)

    return build


class RayExecutor:
    """Runs rounds of tests on a Ray cluster (see the module docstring).

    Parameters
    ----------
    address : str, optional
        The cluster's GCS ``host:port`` (``--ray-address``) or ``auto``; ``None`` = the
        inventory's ``lab: ray_address`` (written by ``lab up --ray``; the driver's node IP is
        then the head's), else ``RAY_ADDRESS`` (none: :class:`~fabriccheck.errors.ConfigError`).
    inventory : Inventory or path, optional
        Host addresses, NIC IPs and probe settings (:mod:`fabriccheck.inventory.file`); without
        one, every NIC of a host resolves to its Ray node's IP.
    launch_builder : callable, optional
        ``(test, nic_ips, port) -> ProbeLaunch``; default
        :func:`fabriccheck.probes.commands.build_launch`.
    reserve_resources : tuple of str, optional
        Resources a group's placement group takes whole (the node's total) on each node;
        default ``(idle_resource, "GPU")``; ``()`` pins the group without holding resources.
        A node whose resources were released by the previous round is reserved again only
        after Ray returns them (~1 s on Ray 2.60), so holding resources costs ~1 s per round.
    idle_resource : str, optional
        Resource whose being entirely free makes a node idle; default ``GPU``, or ``CPU`` when no
        node of the cluster has a GPU.
    init_timeout_s, reserve_timeout_s, rpc_timeout_s : float
        Hard limits for ``ray.init``, for a group's reservation (counted from the last group
        of the round the GCS created: it creates them one by one, 1,024 take 30-70 s on two
        busy cores), and for one agent call.
    node_ip_address : str, optional
        This host's Ray node IP, when Ray cannot infer it.
    base_port : int
        First TCP port for probe servers; test ``i`` of a round uses ``base_port + i``.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        inventory: Any = None,
        *,
        launch_builder: LaunchBuilder | None = None,
        command_options: Any = None,
        reserve_resources: tuple[str, ...] | None = None,
        idle_resource: str | None = None,
        init_timeout_s: float = 30.0,
        reserve_timeout_s: float = 30.0,
        rpc_timeout_s: float = 20.0,
        node_ip_address: str | None = None,
        base_port: int = 18515,
        max_parallel: int = 64,
    ) -> None:
        if inventory is not None and not hasattr(inventory, "hosts"):
            from fabriccheck.inventory.file import load_inventory

            inventory = load_inventory(inventory)
        if not address and getattr(inventory, "ray_address", ""):
            # the lab's own cluster (`lab up --ray`): the driver runs beside its head
            address = inventory.ray_address
            node_ip_address = node_ip_address or address.rpartition(":")[0]
        self.address = address
        self.inventory = inventory
        if command_options is None and inventory is not None:
            from fabriccheck.probes.commands import CommandOptions

            command_options = CommandOptions(python=inventory.python, env=dict(inventory.env),
                                             **inventory.probe_options)
        self.build = launch_builder or _default_builder(command_options)
        self._reserve_given = reserve_resources
        self.reserve_resources: tuple[str, ...] = ()
        self.idle_resource = idle_resource
        self.reserve_timeout_s = reserve_timeout_s
        self.rpc_timeout_s = rpc_timeout_s
        self.base_port = base_port
        self.max_parallel = max_parallel
        self.guard_s = 600.0
        self.leftovers: list[str] = []
        self.reservations: dict[str, Any] = {}  # placement group name -> PlacementGroup
        self._agents: dict[str, Any] = {}
        self._agent_nodes: dict[str, str] = {}  # host -> node id its agent was placed on
        self._creating: dict[str, threading.Lock] = {}  # host -> held while its agent starts
        self._ambiguous: dict[str, list[RayNode]] = {}
        self._nodes: dict[str, RayNode] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._owns_connection = connect(address, timeout_s=init_timeout_s,
                                        node_ip_address=node_ip_address)
        try:
            self.refresh_nodes()
        except BaseException:
            if self._owns_connection:
                disconnect()
            raise

    # -- nodes -------------------------------------------------------------------------------
    def refresh_nodes(self) -> dict[str, RayNode]:
        """Re-read the cluster and map hosts to live Ray nodes; returns host -> node."""
        raw, available = cluster_state()
        if self.idle_resource is None:  # GPU clusters: GPUs; CPU-only clusters (the lab): CPUs
            has_gpu = any(float((n.get("Resources") or {}).get("GPU", 0)) > 0 for n in raw)
            self.idle_resource = IDLE_RESOURCE if has_gpu else "CPU"
        if not self.reserve_resources:
            given = self._reserve_given
            self.reserve_resources = tuple(dict.fromkeys(
                (self.idle_resource, "GPU") if given is None else given))
        nodes = nodes_from_state(raw, available, idle_resource=self.idle_resource)
        by_name: dict[str, list[RayNode]] = {}
        for node in nodes:
            by_name.setdefault(node.name, []).append(node)
        mapping = {name: group[0] for name, group in by_name.items() if len(group) == 1}
        self._ambiguous = {name: group for name, group in by_name.items() if len(group) > 1}
        if self.inventory is not None:  # an inventory address may name the node by IP/hostname
            for host in self.inventory.hosts.values():
                if host.name in mapping:
                    continue
                hits = [n for n in nodes if host.address in (n.ip, n.hostname)]
                if len(hits) == 1:
                    mapping[host.name] = hits[0]
        ip_count: dict[str, int] = {}
        for node in nodes:
            ip_count[node.ip] = ip_count.get(node.ip, 0) + 1
        for node in nodes:  # a host may also be named by its node's IP
            if ip_count[node.ip] == 1:
                mapping.setdefault(node.ip, node)
        with self._lock:  # agents on nodes that died or were replaced are dropped
            for host in list(self._agents):
                if host not in mapping or mapping[host].node_id != self._agent_nodes.get(host):
                    self._agents.pop(host)
        self._nodes = mapping
        return dict(mapping)

    @property
    def nodes(self) -> dict[str, RayNode]:
        """Host name -> Ray node, as of the last refresh."""
        return dict(self._nodes)

    def node(self, host: str) -> RayNode:
        """The Ray node standing for ``host``; :class:`ConnectError` if none or several.

        Several live nodes claim one host while a restarted raylet's old node is not yet declared
        dead, or when raylets share a hostname and carry no label: the host is not usable then.
        """
        if host in self._nodes:
            return self._nodes[host]
        if host in self._ambiguous:
            ids = ", ".join(n.node_id[:8] for n in self._ambiguous[host])
            raise ConnectError(f"several live Ray nodes claim this host ({ids})", host=host,
                               hint="label each raylet: ray start --labels "
                               "'{\"fabriccheck/host\": \"<name>\"}'")
        raise ConnectError("no live Ray node stands for this host", host=host,
                           hint="start a raylet there, or label it fabriccheck/host=<name>")

    def agent(self, host: str, timeout_s: float | None = None) -> Any:
        """The agent actor on ``host``'s node (created and checked on first use).

        Raises :class:`ConnectError` when the host has no live node or its agent does not come
        up within ``timeout_s`` (default ``rpc_timeout_s + 10``). Threads asking for one host at
        once create one agent: the others wait for it (within their own ``timeout_s``).
        """
        timeout_s = timeout_s or self.rpc_timeout_s + 10.0
        with self._lock:
            if host in self._agents:
                return self._agents[host]
            creating = self._creating.setdefault(host, threading.Lock())
        if not creating.acquire(timeout=timeout_s):
            raise ConnectError(f"the fabriccheck agent did not start within {timeout_s:g} s",
                               host=host, hint="the Ray node is overloaded or hung")
        try:
            with self._lock:
                if host in self._agents:  # another thread made it meanwhile
                    return self._agents[host]
            return self._new_agent(host, timeout_s)
        finally:
            creating.release()

    def _new_agent(self, host: str, timeout_s: float) -> Any:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from fabriccheck.executors.ray.agent import HostAgent

        node = self.node(host)
        actor_cls = ray.remote(HostAgent)
        agent = actor_cls.options(
            num_cpus=0, max_concurrency=64, max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
        ).remote(host)
        try:
            ray_get(agent.info.remote(), timeout_s, host=host, what="start the fabriccheck agent")
        except ExecutorError as exc:
            ray.kill(agent)
            raise ConnectError(exc.message, host=None, hint=exc.hint) from exc
        with self._lock:
            if host in self._agents:  # another thread won the race
                ray.kill(agent)
            else:
                self._agents[host] = agent
                self._agent_nodes[host] = node.node_id
            return self._agents[host]

    def unresponsive(self, hosts: Sequence[str], timeout_s: float = 5.0) -> set[str]:
        """Those of ``hosts`` whose agent cannot be reached (or created) within ``timeout_s``."""
        hosts = list(dict.fromkeys(hosts))

        def ping(host: str) -> bool:
            try:
                agent = self.agent(host, timeout_s)
                ray_get(agent.info.remote(), timeout_s, host=host, what="ping")
            except ExecutorError:
                with self._lock:
                    self._agents.pop(host, None)
                return False
            return True

        with ThreadPoolExecutor(max_workers=max(1, min(16, len(hosts)))) as pool:
            alive = list(pool.map(ping, hosts))
        return {h for h, ok in zip(hosts, alive, strict=True) if not ok}

    # -- reservations (fabriccheck.executors.ray.reserve) -----------------------------------
    def _bundle(self, node: RayNode) -> dict[str, float]:
        return node_bundle(node, self.reserve_resources)

    def reserve(self, tests: Sequence[Test]) -> dict[str, str]:
        """Reserve each group of the round; returns test_id -> problem for tests not reserved.

        One placement group per group; tests of a round that share nodes (a follow-up round
        may pair one suspect with two partners) share one placement group over their union.
        """
        return reserve_groups(tests, node_of=self.node, bundle_of=self._bundle,
                              reservations=self.reservations,
                              timeout_s=self.reserve_timeout_s)  # fmt: skip

    def release(self, names: Sequence[str] | None = None) -> None:
        """Remove placement groups (all of ours by default); errors are mapped and raised last."""
        release_groups(self.reservations, names)

    # -- rounds ------------------------------------------------------------------------------
    def _nic_ips(self, tests: Sequence[Test]) -> dict[str, str]:
        ips = dict(self.inventory.nic_ips()) if self.inventory is not None else {}
        for test in tests:
            for endpoint in {e for f in test.flows for e in (f.src, f.dst)}:
                if endpoint not in ips and nic_node(endpoint) in self._nodes:
                    ips[endpoint] = self._nodes[nic_node(endpoint)].ip
        return ips

    def hop_names(self) -> dict[str, str]:
        """Router interface address -> switch (the inventory's ``hops:``; {} without one)."""
        return dict(getattr(self.inventory, "hops", None) or {})

    def run_round(self, tests: Sequence[Test]) -> list[RawResult]:
        """Reserve, run and release one round; one RawResult per test, in order."""
        if self._closed:
            raise ExecutorError("the Ray executor is closed")
        if not tests:
            return []
        self.refresh_nodes()
        self.guard_s = max(t.timeout_s for t in tests) + 30.0
        nic_ips = self._nic_ips(tests)
        launches = {t.test_id: self.build(t, nic_ips, self.base_port + i)
                    for i, t in enumerate(tests)}
        results: dict[str, RawResult] = {}
        before = set(self.reservations)
        dead: set[str] = set()
        try:
            problems = self.reserve(tests)
            if problems:  # a dead host blocks its group's reservation: find out who
                blocked = [h for t in tests if t.test_id in problems for h in t.nodes]
                dead = self.unresponsive([h for h in blocked if h in self._nodes])
                dead |= {h for h in blocked if h not in self._nodes}  # gone or ambiguous
            for test in tests:
                if test.test_id in problems:
                    results[test.test_id] = _not_run(test, launches[test.test_id],
                                                     problems[test.test_id], dead)
            runnable = [t for t in tests if t.test_id not in results]
            ran = run_tests(RayHostRunner(self), runnable,
                            lambda t, _i: launches[t.test_id], max_parallel=self.max_parallel)
            results.update({r.test_id: r for r in self._died_during(runnable, ran)})
        except BaseException:
            self._kill_everything()
            raise
        finally:
            self.release([n for n in self.reservations if n not in before])
        return [results[t.test_id] for t in tests]

    def _died_during(self, tests: Sequence[Test], results: Sequence[RawResult]) -> list[RawResult]:
        """A test that did not finish cleanly while one of its hosts died (its raylet killed,
        the host down) is that host's ``unreachable``, not a failed measurement: its partner's
        iperf3 saw the connection reset, which says nothing about the partner's NIC. Only the
        hosts of such tests are pinged (``unresponsive``, 5 s at most)."""
        by_id = {t.test_id: t for t in tests}
        unclean = [r for r in results if not r.unreachable
                   and (r.exit_code != 0 or r.error or r.timed_out)]
        hosts = [h for r in unclean for h in by_id[r.test_id].nodes]
        dead = self.unresponsive(hosts) if hosts else set()
        unclean_ids = {r.test_id for r in unclean}
        if not dead:
            return list(results)
        out = []
        for r in results:
            gone = tuple(h for h in dict.fromkeys(by_id[r.test_id].nodes) if h in dead)
            if gone and r.test_id in unclean_ids:
                note = f"not responding after the test: {', '.join(gone)}"
                r = replace(r, exit_code=None, unreachable=gone,
                            error=f"{r.error}; {note}" if r.error else note)
            out.append(r)
        return out

    def _kill_everything(self) -> None:
        for host, agent in list(self._agents.items()):
            try:
                ray_get(agent.kill_all.remote(), self.rpc_timeout_s + 10.0, host=host)
            except ExecutorError as exc:
                self.leftovers.append(f"{host}: cleanup failed: {exc}")

    def close(self) -> None:
        """Release every reservation, stop every agent (killing what they run); idempotent."""
        if self._closed:
            return
        self._closed = True
        import ray

        try:
            self.release()
        finally:
            for host, agent in list(self._agents.items()):
                try:
                    ray_get(agent.shutdown.remote(), self.rpc_timeout_s + 10.0, host=host)
                except ExecutorError as exc:
                    self.leftovers.append(f"{host}: shutdown failed: {exc}")
                try:
                    ray.kill(agent)
                except Exception as exc:  # the actor may already be gone
                    self.leftovers.append(f"{host}: {map_ray_error(exc)}")
            self._agents.clear()
            if self._owns_connection:
                disconnect()

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _not_run(test: Test, launch: ProbeLaunch, problem: str, dead: set[str]) -> RawResult:
    missing = tuple(h for h in dict.fromkeys(test.nodes) if h in dead)
    if missing:
        problem = f"{problem}; not responding: {', '.join(missing)}"
    return RawResult(
        test_id=test.test_id, exit_code=None, unreachable=missing,
        commands=launch.rendered, error=problem,
    )
