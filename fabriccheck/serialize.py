"""Run results to and from plain JSON-able dicts (the ``--json`` run-result contract).

``run_result_to_dict`` gives the contract keys first (docs/design.md), then extras; with
``observations=True`` every test's observation with its raw result is included too (reports,
history). ``run_result_from_dict`` reverses it, so a stored run can be re-rendered.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from fabriccheck.models import Flow, Observation, RawResult, RunResult, Test, Verdict, link_key


def test_to_dict(test: Test) -> dict[str, Any]:
    return {
        "test_id": test.test_id,
        "probe": test.probe,
        "nodes": list(test.nodes),
        "flows": [_flow_to_list(f) for f in test.flows],
        "round": test.round,
        "purpose": test.purpose,
        "timeout_s": test.timeout_s,
        "params": dict(test.params),
    }


def _flow_to_list(f: Flow) -> list[Any]:
    """``[src, dst]``, plus ``[[a, b], ...]`` (its learned switch links) when the path is known."""
    if f.path is None:
        return [f.src, f.dst]
    return [f.src, f.dst, [[lk[0], lk[1]] for lk in f.path]]


def _flow_from_list(f: list[Any]) -> Flow:
    if len(f) > 2:
        return Flow(f[0], f[1], tuple(link_key(a, b) for a, b in f[2]))
    return Flow(f[0], f[1])


def test_from_dict(d: dict[str, Any]) -> Test:
    return Test(
        test_id=d["test_id"],
        probe=d["probe"],
        nodes=tuple(d["nodes"]),
        flows=tuple(_flow_from_list(f) for f in d.get("flows", [])),
        round=d.get("round", 0),
        purpose=d.get("purpose", "sweep"),
        timeout_s=d.get("timeout_s", 120.0),
        params=d.get("params", {}),
    )


_RAW_FIELDS = tuple(f.name for f in fields(RawResult))


def observation_to_dict(obs: Observation, *, raw: bool = True) -> dict[str, Any]:
    d: dict[str, Any] = {
        "test": test_to_dict(obs.test),
        "status": obs.status,
        "value": obs.value,
        "unit": obs.unit,
        "floor": obs.floor,
        "expected": obs.expected,
        "reason": obs.reason,
    }
    if obs.findings:
        d["findings"] = list(obs.findings)
    if obs.facts:
        d["facts"] = obs.facts
    if raw and obs.raw is not None:
        r = {name: getattr(obs.raw, name) for name in _RAW_FIELDS}  # flat (asdict copies deep)
        r["unreachable"] = list(obs.raw.unreachable)
        r["commands"] = list(obs.raw.commands)
        d["raw"] = r
    return d


def observation_from_dict(d: dict[str, Any]) -> Observation:
    raw = d.get("raw")
    return Observation(
        test=test_from_dict(d["test"]),
        status=d["status"],
        value=d.get("value"),
        unit=d.get("unit", ""),
        floor=d.get("floor"),
        expected=d.get("expected"),
        reason=d.get("reason", ""),
        findings=tuple(d.get("findings", ())),
        facts=dict(d.get("facts", {})),
        raw=None
        if raw is None
        else RawResult(
            **{
                **raw,
                "unreachable": tuple(raw.get("unreachable", ())),
                "commands": tuple(raw.get("commands", ())),
            }
        ),
    )


def verdict_to_dict(v: Verdict) -> dict[str, Any]:
    d = {
        "kind": v.kind,
        "name": v.name,
        "state": v.state,
        "reason": v.reason,
        "evidence": list(v.evidence),
    }
    if v.link is not None:
        d["link"] = list(v.link)
    return d


def verdict_from_dict(d: dict[str, Any]) -> Verdict:
    link = d.get("link")
    return Verdict(
        kind=d["kind"],
        name=d["name"],
        state=d["state"],
        reason=d.get("reason", ""),
        evidence=tuple(d.get("evidence", ())),
        link=tuple(link) if link else None,  # type: ignore[arg-type]
    )


def run_result_to_dict(result: RunResult, *, observations: bool = False) -> dict[str, Any]:
    """The run-result contract: ``rounds, tests, test_seconds, bad_nodes, bad_nics, bad_links,
    link_suspects, unreachable, drain`` always; more keys after them."""
    d: dict[str, Any] = {
        "rounds": result.rounds,
        "tests": result.tests,
        "test_seconds": round(result.test_seconds, 3),
        "bad_nodes": list(result.bad_nodes),
        "bad_nics": list(result.bad_nics),
        "bad_links": [list(lk) for lk in result.bad_links],
        "link_suspects": list(result.link_suspects),
        "unreachable": list(result.unreachable),
        "drain": list(result.drain),
        "mode": result.mode,
        "nodes": list(result.nodes),
        "hung": list(result.hung),
        "suspects": list(result.suspects),
        "fabric_warnings": list(result.fabric_warnings),
        "wall_seconds": round(result.wall_seconds, 3),
        "healthy": result.healthy,
        "exit_code": result.exit_code,
        "verdicts": [verdict_to_dict(v) for v in result.verdicts if v.state != "healthy"],
    }
    d.update(result.extra)
    if observations:
        d["verdicts"] = [verdict_to_dict(v) for v in result.verdicts]
        d["observations"] = [observation_to_dict(o) for o in result.observations]
    return d


def run_result_from_dict(d: dict[str, Any]) -> RunResult:
    known = {
        "rounds", "tests", "test_seconds", "bad_nodes", "bad_nics", "bad_links", "link_suspects",
        "unreachable", "drain", "mode", "nodes", "hung", "suspects", "fabric_warnings",
        "wall_seconds", "healthy", "exit_code", "verdicts", "observations",
    }  # fmt: skip
    return RunResult(
        mode=d.get("mode", "sweep"),
        nodes=list(d.get("nodes", [])),
        rounds=d["rounds"],
        tests=d["tests"],
        test_seconds=d["test_seconds"],
        wall_seconds=d.get("wall_seconds", 0.0),
        bad_nodes=list(d["bad_nodes"]),
        bad_nics=list(d["bad_nics"]),
        bad_links=[tuple(lk) for lk in d["bad_links"]],  # type: ignore[misc]
        link_suspects=list(d["link_suspects"]),
        unreachable=list(d["unreachable"]),
        hung=list(d.get("hung", [])),
        suspects=list(d.get("suspects", [])),
        drain=list(d["drain"]),
        fabric_warnings=list(d.get("fabric_warnings", [])),
        verdicts=[verdict_from_dict(v) for v in d.get("verdicts", [])],
        observations=[observation_from_dict(o) for o in d.get("observations", [])],
        extra={k: v for k, v in d.items() if k not in known},
    )
