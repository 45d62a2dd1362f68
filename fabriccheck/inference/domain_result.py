"""The NVLink-domain level's findings merged into the run result (docs/nvl72.md "In the run
result"): bad trays drained with an NVLink reason, suspects listed, switch trays and chips in
``bad_switches`` (no compute tray drained), a domain that rode the network or a rack with no
tray proven good a fabric warning,
and everything under the additive key ``nvlink``.

Runs without NVLink-domain tests are returned untouched (no ``nvlink`` key).
"""

from __future__ import annotations

from fabriccheck.inference.domain import DomainReport, localize_domains
from fabriccheck.inference.domain_state import domain_state
from fabriccheck.inference.nvl_hints import nvl_hints
from fabriccheck.models import BAD, SUSPECT, RunResult, Verdict
from fabriccheck.run_history import RunHistory
from fabriccheck.topology.model import Topology

__all__ = ["add_domain_results"]


def add_domain_results(result: RunResult, history: RunHistory, topology: Topology) -> None:
    """Judge the run's domain tests and merge the verdicts into ``result`` (in place)."""
    obs = history.domain_observations
    if not obs or not topology.domains:
        return
    traffic = history.by_test_id
    over_net = frozenset(v.name for v in result.verdicts
                         if v.kind == "node" and v.state == BAD
                         and any(e in traffic for e in v.evidence)
                         and not v.reason.startswith("drained for its bad NIC"))
    rep = localize_domains(domain_state(obs), topology, nvl_hints(history.signal_observations),
                           over_net)
    _merge(result, rep)
    result.extra["nvlink"] = {**rep.to_json(), **_transport(obs)}


def _merge(result: RunResult, rep: DomainReport) -> None:
    drain, suspects = set(result.drain), set(result.suspects)
    by_node = {v.name: i for i, v in enumerate(result.verdicts) if v.kind == "node"}
    for t in rep.trays:
        reason = f"NVLink domain {t.rack}: {t.reason}"
        if t.state == BAD:
            if t.tray not in drain:
                _set_verdict(result, by_node, Verdict("node", t.tray, BAD, reason,
                                                      tuple(t.evidence)))
            drain.add(t.tray)
            result.bad_nodes = sorted({*result.bad_nodes, t.tray})
        elif t.tray not in drain:
            _set_verdict(result, by_node, Verdict("node", t.tray, SUSPECT, reason,
                                                  tuple(t.evidence)))
            suspects.add(t.tray)
    result.drain = sorted(drain)
    result.suspects = sorted(suspects - drain)
    switches = [s["name"] for s in rep.switches]
    result.verdicts += [Verdict("switch", s["name"], BAD, f"NVLink domain {s['rack']}: "
                                f"{s['reason']}") for s in rep.switches]
    result.extra["bad_switches"] = [*result.extra.get("bad_switches", []), *switches]
    racks = [f"{r['rack']}: {r['reason']} ({', '.join(r['failed'][:4])})"
             for r in rep.rack_suspects]
    result.fabric_warnings = list(dict.fromkeys([*result.fabric_warnings, *rep.config, *racks]))


def _set_verdict(result: RunResult, by_node: dict[str, int], v: Verdict) -> None:
    i = by_node.get(v.name)
    if i is None:
        result.verdicts.append(v)
    else:
        result.verdicts[i] = v


def _transport(obs) -> dict:
    """How many domain tests proved their transport from NCCL's lines (and which did not)."""
    proven = [o.test.test_id for o in obs if (o.facts.get("transport") or {}).get("proven")]
    network = [o.test.test_id for o in obs if (o.facts.get("transport") or {}).get("network")]
    unproven = [o.test.test_id for o in obs
                if o.test.test_id not in proven and o.test.test_id not in network]
    return {"tests": len(obs), "transport": {"proven": len(proven), "network": network,
                                             "unproven": unproven[:20]}}
