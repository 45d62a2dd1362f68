"""Prometheus metrics of the last run: a textfile-collector file (atomic) or an HTTP endpoint.

Gauges (the last run's values; a new run replaces them):

- ``fabriccheck_node_health{node}`` 1 healthy, 0.5 suspect, 0 bad/unreachable (untested: absent)
- ``fabriccheck_node_state{node,state}`` 1 for the node's current state (one series per state)
- ``fabriccheck_nic_bandwidth_gbps{node,nic,probe}`` lowest Gb/s measured through the NIC
- ``fabriccheck_node_busbw_gbytes_per_second{node,probe}`` lowest collective busbw with the node
- ``fabriccheck_link_bandwidth_gbps{a,b,probe}`` lowest Gb/s of flows certainly on the link
  (needs the topology: IB routes, or the links every ECMP path shares)
- ``fabriccheck_link_health{a,b}`` 1 ok, 0.5 suspect, 0 bad for links with a verdict
- ``fabriccheck_run_duration_seconds{mode}``, ``fabriccheck_run_test_seconds{mode}``,
  ``fabriccheck_run_rounds{mode}``, ``fabriccheck_run_tests{mode}``,
  ``fabriccheck_run_timestamp_seconds{mode}``, ``fabriccheck_nodes{mode,state}``,
  ``fabriccheck_actions{action,status}``, ``fabriccheck_actions_withheld{mode}``
- ``fabriccheck_signal_readings{signal,status}`` readings per status (pass, fail, retest,
  glitch, suspect, untested), ``fabriccheck_signal_min{signal}`` / ``_max{signal}`` the value
  range, ``fabriccheck_signal_value{signal,target,status}`` every reading that did not pass
- ``fabriccheck_node_warnings{node,target,check}`` 1 per warn-level node-local finding of the
  last run (docs/node-checks.md; the job may run, someone should look)
- ``fabriccheck_run_info{mode,executor,faults,seed}`` 1: which executor produced these numbers
  (``sim``: simulated, with its faults file and seed; alert rules should match ``executor!="sim"``)
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabriccheck.errors import ConfigError
from fabriccheck.models import RunResult, nic_node

if TYPE_CHECKING:  # prometheus_client is imported when metrics are built (CLI start-up)
    from prometheus_client import CollectorRegistry, Gauge

HEALTH_VALUE = {"healthy": 1.0, "suspect": 0.5, "bad": 0.0, "unreachable": 0.0}
STATES = ("healthy", "suspect", "bad", "unreachable", "untested")


def _certain_links(topology: Any, src: str, dst: str) -> set[tuple[str, str]]:
    """Links a flow certainly crosses: its IB route, else the links all ECMP paths share."""
    if getattr(topology, "fabric", "") == "infiniband":
        path = topology.route(src, dst)
        return set(path or ())
    paths = topology.paths(src, dst)
    if not paths:
        return set()
    common = set(paths[0])
    for p in paths[1:]:
        common &= set(p)
    return common


def _node_states(result: RunResult) -> dict[str, str]:
    states: dict[str, str] = {}
    for v in result.verdicts:
        if v.kind == "node":
            states[v.name] = v.state
    for n in result.unreachable:
        states[n] = "unreachable"
    for n in result.bad_nodes:
        states[n] = "bad"
    tested = {n for o in result.observations for n in o.test.nodes}
    for n in result.nodes:
        states.setdefault(n, "healthy" if n in tested else "untested")
    return states


def build_registry(
    result: RunResult,
    *,
    topology: Any = None,
    actions: Iterable[dict[str, Any]] = (),
    now_s: float | None = None,
) -> CollectorRegistry:
    """A registry holding the last run's gauges (see the module docstring)."""
    from prometheus_client import CollectorRegistry, Gauge

    reg = CollectorRegistry(auto_describe=True)

    def g(name: str, doc: str, labels: tuple[str, ...]) -> Gauge:
        return Gauge(name, doc, labels, registry=reg)

    states = _node_states(result)
    _node_gauges(g, states)
    _bandwidth_gauges(g, result, topology)
    _run_gauges(g, result, states, now_s)
    _action_gauges(g, result, actions)
    _signal_gauges(g, result)
    _warning_gauges(g, result)
    return reg


def _warning_gauges(g: Any, result: RunResult) -> None:
    """One series per warn-level node-local finding (``check`` names the catalogue entry)."""
    warns = result.extra.get("warnings") or []
    if not warns:
        return
    gauge = g("fabriccheck_node_warnings", "Warn-level node-local findings of the last run",
              ("node", "target", "check"))  # fmt: skip
    for w in warns:
        gauge.labels(w["target"].split("/", 1)[0], w["target"], w.get("check", "")).set(1.0)


def _signal_gauges(g: Any, result: RunResult) -> None:
    """Per signal: readings per status, the lowest and highest value, and the value of every
    reading that did not pass (passing ones stay out: 8 NICs x thousands of nodes)."""
    signals = result.extra.get("signals") or {}
    if not signals:
        return
    counts = g("fabriccheck_signal_readings", "Readings of the signal per status in the last run",
               ("signal", "status"))  # fmt: skip
    low = g("fabriccheck_signal_min", "Lowest value of the signal in the last run", ("signal",))
    high = g("fabriccheck_signal_max", "Highest value of the signal in the last run", ("signal",))
    odd = g("fabriccheck_signal_value", "Value of a reading that did not pass (node or node/nic)",
            ("signal", "target", "status"))  # fmt: skip
    for name, sig in sorted(signals.items()):
        tally: dict[str, int] = {}
        values = []
        for target, v in sorted(sig.get("values", {}).items()):
            tally[v["status"]] = tally.get(v["status"], 0) + 1
            if v.get("value") is not None:
                values.append(float(v["value"]))
                if v["status"] != "pass":
                    odd.labels(name, target, v["status"]).set(float(v["value"]))
        for status, n in sorted(tally.items()):
            counts.labels(name, status).set(n)
        if values:
            low.labels(name).set(min(values))
            high.labels(name).set(max(values))


def _node_gauges(g: Any, states: dict[str, str]) -> None:
    health = g("fabriccheck_node_health", "1 healthy, 0.5 suspect, 0 bad or unreachable", ("node",))
    state = g("fabriccheck_node_state", "1 for the node's state in the last run", ("node", "state"))
    for node, st in sorted(states.items()):
        if st in HEALTH_VALUE:
            health.labels(node).set(HEALTH_VALUE[st])
        for s in STATES:
            state.labels(node, s).set(1.0 if s == st else 0.0)


def _lowest_values(result: RunResult, topology: Any) -> tuple[dict, dict, dict]:
    """Lowest value per (node, nic, probe), (node, probe) for busbw, and (a, b, probe)."""
    nic_bw: dict[tuple[str, str, str], float] = {}
    node_bus: dict[tuple[str, str], float] = {}
    link_bw: dict[tuple[str, str, str], float] = {}
    for o in result.observations:
        if o.value is None:
            continue
        if o.unit == "Gb/s":
            for f in o.test.flows:
                for ep in (f.src, f.dst):
                    key = (nic_node(ep), ep.split("/", 1)[-1], o.test.probe)
                    nic_bw[key] = min(nic_bw.get(key, o.value), o.value)
                if topology is not None:
                    for a, b in _certain_links(topology, f.src, f.dst):
                        lk = (a, b, o.test.probe)
                        link_bw[lk] = min(link_bw.get(lk, o.value), o.value)
        elif o.unit == "GB/s":
            for n in o.test.nodes:
                key2 = (n, o.test.probe)
                node_bus[key2] = min(node_bus.get(key2, o.value), o.value)
    return nic_bw, node_bus, link_bw


def _bandwidth_gauges(g: Any, result: RunResult, topology: Any) -> None:
    nic_bw, node_bus, link_bw = _lowest_values(result, topology)
    nic_g = g("fabriccheck_nic_bandwidth_gbps", "Lowest Gb/s measured through the NIC",
              ("node", "nic", "probe"))  # fmt: skip
    for (node, nic, probe), v in sorted(nic_bw.items()):
        nic_g.labels(node, nic, probe).set(v)
    bus_g = g("fabriccheck_node_busbw_gbytes_per_second",
              "Lowest collective bus bandwidth (GB/s) of a test with the node", ("node", "probe"))
    for (node, probe), v in sorted(node_bus.items()):
        bus_g.labels(node, probe).set(v)
    link_g = g("fabriccheck_link_bandwidth_gbps", "Lowest Gb/s of flows certainly on the link",
               ("a", "b", "probe"))  # fmt: skip
    for (a, b, probe), v in sorted(link_bw.items()):
        link_g.labels(a, b, probe).set(v)
    link_h = g("fabriccheck_link_health", "1 ok, 0.5 suspect, 0 bad", ("a", "b"))
    for v in result.verdicts:
        if v.kind == "link" and v.link is not None:
            link_h.labels(*v.link).set(HEALTH_VALUE.get(v.state, 1.0))
    for a, b in result.bad_links:
        link_h.labels(a, b).set(0.0)


def _run_gauges(g: Any, result: RunResult, states: dict[str, str], now_s: float | None) -> None:
    mode = result.mode
    for name, doc, value in (
        ("fabriccheck_run_duration_seconds", "Wall time of the last run", result.wall_seconds),
        ("fabriccheck_run_test_seconds", "Summed test time of the last run", result.test_seconds),
        ("fabriccheck_run_rounds", "Rounds of the last run", result.rounds),
        ("fabriccheck_run_tests", "Tests of the last run", result.tests),
        ("fabriccheck_run_timestamp_seconds", "When the last run ended (unix time)",
         time.time() if now_s is None else now_s),
    ):  # fmt: skip
        g(name, doc, ("mode",)).labels(mode).set(float(value))
    counts = g("fabriccheck_nodes", "Nodes per state in the last run", ("mode", "state"))
    for s in STATES:
        counts.labels(mode, s).set(sum(1 for st in states.values() if st == s))
    sim = result.extra.get("executor") == "sim"
    g("fabriccheck_run_info", "1; labels say which executor produced the last run's numbers",
      ("mode", "executor", "faults", "seed")).labels(
        mode, str(result.extra.get("executor") or "unknown"),
        str(result.extra.get("faults") or "") if sim else "",
        str(result.extra.get("seed", "")) if sim else "").set(1.0)  # fmt: skip


def _action_gauges(g: Any, result: RunResult, actions: Iterable[dict[str, Any]]) -> None:
    acts = g("fabriccheck_actions", "Actions of the last run by outcome", ("action", "status"))
    tally: dict[tuple[str, str], int] = {}
    for a in actions:
        k = (a.get("action", ""), a.get("status", ""))
        tally[k] = tally.get(k, 0) + 1
    for (action, status), n in sorted(tally.items()):
        acts.labels(action, status).set(n)
    withheld = bool(result.extra.get("actions", {}).get("withheld", False))
    g("fabriccheck_actions_withheld", "1 when the drain budget stopped every action",
      ("mode",)).labels(result.mode).set(1.0 if withheld else 0.0)  # fmt: skip


def render_metrics(result: RunResult, **kwargs: Any) -> str:
    """The Prometheus text exposition of the last run."""
    from prometheus_client import generate_latest

    return generate_latest(build_registry(result, **kwargs)).decode()


def write_metrics(path: str | os.PathLike[str], result: RunResult, **kwargs: Any) -> Path:
    """Write the textfile-collector file atomically (temp file + rename in the same directory)."""
    from prometheus_client import write_to_textfile

    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        write_to_textfile(str(p), build_registry(result, **kwargs))
    except OSError as exc:
        raise ConfigError(f"cannot write metrics: {exc.strerror}", source=str(p),
                          hint="pass a writable --metrics FILE") from exc  # fmt: skip
    return p


def serve_metrics(result: RunResult, *, port: int, addr: str = "0.0.0.0", **kwargs: Any):
    """Serve the last run's metrics over HTTP (``/metrics``); returns (server, thread)."""
    from prometheus_client import start_http_server

    return start_http_server(port, addr=addr, registry=build_registry(result, **kwargs))
