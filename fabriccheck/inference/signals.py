"""Signals judged (docs/design.md "Signals"): each reading against its bound, then against its
peers.

A signal reading is **direct evidence about the node (or NIC) itself** -- the node says it sees 7
GPUs, the NIC says its PCIe link trained at x8 -- so there is no partner or path to share the
blame with, which is what the "independent evidence" rule (two partners, two rounds) guards
against. What can still mislead is noise in the reading, so:

- a value beyond its bound by more than :data:`NOISE_MARGIN` (relative to the bound) is **bad**
  at once: the node, or the NIC for ``per: nic`` signals, is drained with the signal's name,
  value and bound as its reason;
- a value beyond its bound but within that margin is retested once (the planner asks for it):
  failing again is bad, passing makes the first reading a glitch; until the retest has run the
  part is a suspect (a bound of 0 has no such margin: any excess is beyond it);
- a value that passes its bound but sits far from the same signal's values on the other nodes
  (robust z and a relative gap, like the bandwidth peers, and at least halfway from their median
  to the bound) is a **suspect**: reported, never drained on peers alone;
- a reading that could not be taken (command failed, no value, timeout, a command the
  simulator does not know) leaves that signal **untested** on that node or NIC.

Signals of level 2, 4 and 8 read a group: a failing group makes its nodes suspects (a group
reading cannot tell its members apart), never bad.

Configuration readings (``node-config``, ``nic-config``: facts with ``config`` settings) are also
judged against the parts' peers of the same class after the per-target judgement
(:mod:`~fabriccheck.inference.config_peers`): a fault outlier is bad (drained, the finding as its
reason), a warn one is listed in ``warnings``, a fleet split without a clear majority is info;
``config`` in the state holds what the peers hold per setting.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone

from fabriccheck.errors import ConfigError, ParseError
from fabriccheck.inference.config_peers import judge_peers
from fabriccheck.inference.counter_span import span_raw
from fabriccheck.models import (
    BAD,
    ERROR,
    FAIL,
    PASS,
    SUSPECT,
    UNREACHABLE,
    Observation,
    RawResult,
    Test,
    Verdict,
)
from fabriccheck.probes.node.catalogue import Catalogue, builtin_catalogue
from fabriccheck.probes.node.config import SETTING_CHECKS
from fabriccheck.probes.node.findings import FAULT, INFO, WARN
from fabriccheck.probes.node.judge import NodeContext
from fabriccheck.probes.signal_value import extract_reading
from fabriccheck.specs import SignalSpec

#: a failing value closer than this share of the bound is retested before blame
NOISE_MARGIN = 0.10
#: peers: a passing value is a suspect when its robust z exceeds this and ...
PEER_Z = 4.0
#: ... it is this share of the median (or of the bound) away from the median
PEER_MIN_GAP = 0.25
#: fewest readings of one signal before peers are compared
PEER_MIN_COUNT = 4


def target_of(test: Test) -> str:
    """What a signal test reads: ``node`` or ``node/nic`` (level 1); the group, ``a+b+..``."""
    base = "+".join(test.nodes)
    nic = test.params.get("nic")
    return f"{base}/{nic}" if nic and len(test.nodes) == 1 else (
        f"{base}@{nic}" if nic else base)


def bound_text(sig: SignalSpec) -> str:
    """``>= 400 Gb/s``, ``<= 0 lines`` or ``in [4, 4]``."""
    u = f" {sig.unit}" if sig.unit else ""
    if sig.pass_min is not None and sig.pass_max is not None:
        return f"in [{sig.pass_min:g}, {sig.pass_max:g}]{u}"
    if sig.pass_min is not None:
        return f">= {sig.pass_min:g}{u}"
    return f"<= {sig.pass_max:g}{u}"


def _violation(value: float, sig: SignalSpec) -> tuple[float, float] | None:
    """(bound, relative distance beyond it) when ``value`` fails, else None."""
    if sig.pass_min is not None and value < sig.pass_min:
        return sig.pass_min, (sig.pass_min - value) / max(abs(sig.pass_min), 1e-9)
    if sig.pass_max is not None and value > sig.pass_max:
        scale = abs(sig.pass_max) if sig.pass_max else float("inf")
        return sig.pass_max, (value - sig.pass_max) / scale if scale != float("inf") else 1.0
    return None


_TICK = timedelta(microseconds=1)
_SLEEP = re.compile(r"\bsleep (\d+(?:\.\d+)?)\b")


def node_context(test: Test) -> NodeContext:
    """What the run knows for a judged node-local reading: ``params.since`` (ISO 8601), the end
    of the node's last judged kernel log (history), and the counters' window (the ``sleep N``
    between the reads of its command)."""
    window = _SLEEP.search(str(test.params.get("command") or ""))
    since = test.params.get("since")
    when = None
    if since:
        when = datetime.fromisoformat(str(since).replace(",", ".").replace("Z", "+00:00"))
        # the last judged event was stamped ``since``: the next check starts just after it
        when = (when if when.tzinfo else when.replace(tzinfo=timezone.utc)) + _TICK
    return NodeContext(since=when, window_s=float(window[1]) if window else None)


def _fault_text(findings: Sequence[dict]) -> str:
    faults = [f for f in findings if f["severity"] == FAULT]
    return "; ".join(f"{f['part']}: {f['what']}" for f in faults[:3]) + (
        f" (+{len(faults) - 3} more)" if len(faults) > 3 else "")


def judge_signal(test: Test, raw: RawResult, sig: SignalSpec,
                 catalogue: Catalogue | None = None,
                 earlier: Mapping[str, Observation] | None = None) -> Observation:
    """One signal test's observation: ``pass``/``fail`` with its value, or ``error`` /
    ``unreachable`` with the reason (never an exception for a bad reading). A judged node-local
    reading (``parser: node-*``) carries its findings; ``catalogue`` is the spec's. A closing
    counter read (``params.span_of``) is judged with its preflight reading from ``earlier``
    (the run's signal readings by test id) over the run's span
    (:mod:`~fabriccheck.inference.counter_span`)."""
    unit = sig.unit
    if raw.unreachable:
        return Observation(test, UNREACHABLE, unit=unit, raw=raw,
                           reason=f"unreachable: {', '.join(raw.unreachable)}")
    if raw.timed_out or raw.exit_code is None:
        return Observation(test, ERROR, unit=unit, raw=raw,
                           reason=f"no reading: timed out after {test.timeout_s:g} s")
    if raw.error:
        return Observation(test, ERROR, unit=unit, raw=raw, reason=f"no reading: {raw.error}")
    if raw.exit_code:  # a failed command's text is not a reading (a refused dmesg is not 0)
        tail = (raw.stderr.strip().splitlines() or [""])[-1][:120]
        return Observation(test, ERROR, unit=unit, raw=raw, reason=(
            f"no reading: command exited {raw.exit_code}" + (f": {tail}" if tail else "")))
    context, text, over = node_context(test), raw.stdout, ""
    joined = span_raw(test, raw, earlier or {}, context.window_s)
    if joined is not None:
        text, context = joined[0].stdout, replace(context, window_s=joined[1])
        over = f" over the run's {joined[1]:.0f} s"
    try:
        reading = extract_reading(text, regex=sig.value, parser=sig.parser,
                                  context=context, catalogue=catalogue)
    except (ParseError, ConfigError, ValueError) as exc:
        return Observation(test, ERROR, unit=unit, raw=raw, reason=f"no reading: {exc}")
    value = reading.value
    found = tuple(f.to_json() for f in reading.findings)
    bad = _violation(value, sig)
    floor = sig.pass_min if sig.pass_min is not None else sig.pass_max
    if bad is None:
        return Observation(test, PASS, value, unit, floor=floor, raw=raw,
                           reason=f"{sig.name} {value:g} {bound_text(sig)}{over}",
                           findings=found, facts=dict(reading.facts))
    why = f"signal {sig.name}: {value:g}{' ' + unit if unit else ''} fails {bound_text(sig)}"
    if found:
        why = f"signal {sig.name}: {_fault_text(found)}{over}"
    return Observation(test, FAIL, value, unit, floor=bad[0], raw=raw, reason=why,
                       findings=found, facts=dict(reading.facts))


def judge_signal_round(tests: Sequence[Test], raws: Sequence[RawResult],
                       signals: Mapping[str, SignalSpec],
                       catalogue: Catalogue | None = None,
                       earlier: Mapping[str, Observation] | None = None) -> list[Observation]:
    """:func:`judge_signal` over a round (tests and raws in the same order)."""
    return [judge_signal(t, r, signals[str(t.params["signal"])], catalogue, earlier)
            for t, r in zip(tests, raws, strict=True)]


@dataclass
class SignalReadings:
    """Every target's readings of one signal, and what they add up to."""

    spec: SignalSpec
    readings: dict[str, list[Observation]] = field(default_factory=dict)
    status: dict[str, str] = field(default_factory=dict)  # target -> pass|fail|suspect|...
    reason: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        values = {}
        for target, obs in sorted(self.readings.items()):
            last = next((o for o in reversed(obs) if o.value is not None), obs[-1])
            status = self.status[target]
            entry = {"value": last.value, "status": status}
            if status != "pass":  # a passing reading needs no story (thousands of NICs)
                entry["reason"] = self.reason[target]
                entry["tests"] = [o.test.test_id for o in obs]
            values[target] = entry
        s = self.spec
        return {"level": s.level, "per": s.per, "unit": s.unit,
                "pass": {k: v for k, v in (("min", s.pass_min), ("max", s.pass_max))
                         if v is not None},
                "values": values}


@dataclass
class SignalState:
    """What the run's signal readings say: verdicts, retests wanted, the ``signals`` JSON."""

    by_signal: dict[str, SignalReadings] = field(default_factory=dict)
    bad_nodes: dict[str, Verdict] = field(default_factory=dict)
    bad_nics: dict[str, Verdict] = field(default_factory=dict)
    suspects: dict[str, Verdict] = field(default_factory=dict)
    #: (signal, target) readings that could not be taken
    untested: list[tuple[str, str]] = field(default_factory=list)
    #: failing readings within noise of their bound, not yet retested
    retest: list[Observation] = field(default_factory=list)
    #: how many readings were judged
    readings: int = 0
    #: warn-level node-local findings of each target's last reading (the job may run; listed)
    warnings: list[dict] = field(default_factory=list)
    #: info-level findings (recorded only)
    info: list[dict] = field(default_factory=list)
    #: per configuration setting what the peers hold (run JSON ``config``)
    config: dict[str, dict] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {name: r.to_json() for name, r in sorted(self.by_signal.items())}


def evaluate_signals(observations: Sequence[Observation], signals: Sequence[SignalSpec],
                     peer_class: Callable[[str], object] | None = None) -> SignalState:
    """Judge every signal reading of the run so far (pure; see the module doc for the rules).

    ``peer_class`` maps a target (node or ``node/nic``) to its kind of part: only targets of
    one class are each other's peers (the run passes a NIC's line rate, so an EDR port reading
    100 Gb/s is not an outlier among HDR ports reading 200)."""
    specs = {s.name: s for s in signals}
    state = SignalState(readings=len(observations))
    for o in observations:
        name = str(o.test.params.get("signal"))
        if name not in specs:
            continue
        r = state.by_signal.setdefault(name, SignalReadings(specs[name]))
        r.readings.setdefault(target_of(o.test), []).append(o)
    for r in state.by_signal.values():
        for target, obs in r.readings.items():
            _judge_target(r, target, obs, state)
            _note_findings(r.spec.name, target, obs, state)
        _judge_peers(r, state, peer_class)
    _judge_config_peers(state, peer_class)
    return state


def _judge_config_peers(state: SignalState,
                        peer_class: Callable[[str], object] | None = None) -> None:
    """Every part's configuration settings (the last judged reading's ``facts["config"]``)
    against its peers of the same class: the part's kind (NIC speed) and its ``config_class``
    (SKU, NIC model)."""
    settings: dict[str, dict] = {}
    classes: dict[str, tuple] = {}
    labels: dict[tuple, str] = {}
    skip: dict[str, set[str]] = {}
    severities: dict[str, str] = {}
    readings: dict[tuple[str, str], tuple[SignalReadings, Observation]] = {}
    for name, r in state.by_signal.items():
        for target, obs in r.readings.items():
            last = next((o for o in reversed(obs) if o.status in (PASS, FAIL)
                         and isinstance(o.facts.get("config"), dict)), None)
            if last is None or len(last.test.nodes) != 1:
                continue
            kind = peer_class(target) if peer_class is not None else None
            sku = str(last.facts.get("config_class") or "")
            cls = (name, kind, sku)
            # a node's settings may come from more than one signal (node-config; gpu-health's
            # NVLink clique): merged, each judged with the reading that gave it
            settings[target] = {**settings.get(target, {}), **last.facts["config"]}
            if sku or target not in classes:  # the class of the reading that names the SKU
                classes[target] = cls
            labels[cls] = " ".join(x for x in (sku, f"{kind:g} Gb/s" if isinstance(
                kind, int | float) else kind if isinstance(kind, str) else "") if x)
            skip.setdefault(target, set()).update(last.facts.get("config_judged") or ())
            severities.update(last.facts.get("config_severity") or {})
            for setting in last.facts["config"]:
                readings[(target, setting)] = (r, last)
    if not settings:
        return
    peers = judge_peers(settings, classes, severities, skip, labels=labels)
    state.config = peers.summary
    cat = builtin_catalogue()
    for o in peers.outliers:
        r, last = readings[(o.target, o.setting)]
        check = SETTING_CHECKS.get(o.setting, "")
        part = f"nic {o.target.split('/', 1)[1]}" if "/" in o.target else "node"
        entry = {"target": o.target, "signal": r.spec.name, "severity": o.severity,
                 "part": part, "what": f"{o.what} (peers)", "line": "", "check": check,
                 "fix": cat.entry(check).fix if check in cat else ""}
        if o.severity == FAULT:
            why = f"signal {r.spec.name}: {o.what}"
            old = r.reason.get(o.target) if r.status.get(o.target) == "fail" else None
            r.status[o.target] = "fail"
            r.reason[o.target] = f"{old}; {o.what}" if old else why
            kind = "nic" if "/" in o.target else "node"
            _add(state.bad_nics if kind == "nic" else state.bad_nodes,
                 Verdict(kind, o.target, BAD, why, (last.test.test_id,)))
        elif o.severity == WARN:
            state.warnings.append(entry)
        else:
            state.info.append(entry)
    for sp in peers.splits:
        state.info.append({"target": "*", "signal": "config", "severity": INFO, "part": "node",
                           "what": sp.what, "line": "", "check": "cfg-peers-split",
                           "fix": cat.entry("cfg-peers-split").fix})


def _note_findings(name: str, target: str, obs: list[Observation], state: SignalState) -> None:
    """The warn and info findings of ``target``'s last judged reading of signal ``name``."""
    last = next((o for o in reversed(obs) if o.status in (PASS, FAIL)), None)
    if last is None:
        return
    for f in last.findings:
        entry = {"target": target, "signal": name, **f}
        if f["severity"] == WARN:
            state.warnings.append(entry)
        elif f["severity"] == INFO:
            state.info.append(entry)


def _judge_target(r: SignalReadings, target: str, obs: list[Observation],
                  state: SignalState) -> None:
    sig = r.spec
    measured = [o for o in obs if o.status in (PASS, FAIL)]
    if not measured:
        r.status[target], r.reason[target] = "untested", obs[-1].reason
        state.untested.append((sig.name, target))
        return
    fails = [o for o in measured if o.status == FAIL]
    last = measured[-1]
    if not fails:
        r.status[target], r.reason[target] = "pass", last.reason
        return
    first = fails[0]
    near = (_violation(first.value, sig) or (0.0, 1.0))[1] <= NOISE_MARGIN  # type: ignore[arg-type]
    if len(measured) == 1 and near:
        r.status[target] = "retest"
        r.reason[target] = first.reason + " (within noise of the bound: retested before blame)"
        state.retest.append(first)
        # open until the retest runs (a run that ends first leaves it a suspect, not healthy)
        kind = "nic" if "/" in target else "node"
        state.suspects.setdefault(target, Verdict(kind, target, SUSPECT, r.reason[target],
                                                  (first.test.test_id,)))
        return
    if last.status == PASS and len(fails) == 1 and near:
        r.status[target] = "glitch"
        r.reason[target] = f"{first.reason} once, within noise of the bound; the retest passed"
        return
    ids = tuple(o.test.test_id for o in fails)
    why = first.reason + ("" if not near else f" (and again: {fails[-1].value:g})")
    _blame(r, target, first.test, why, ids, state)


def _blame(r: SignalReadings, target: str, test: Test, why: str, ids: tuple[str, ...],
           state: SignalState) -> None:
    if len(test.nodes) > 1:  # a group reading: its members are suspects, never bad
        r.status[target], r.reason[target] = "suspect", why + " (group reading)"
        for n in test.nodes:
            state.suspects.setdefault(n, Verdict("node", n, SUSPECT,
                                                 f"in a failing group: {why}", ids))
        return
    r.status[target], r.reason[target] = "fail", why
    node = test.nodes[0]
    if r.spec.per == "nic" and test.params.get("nic"):
        e = f"{node}/{test.params['nic']}"
        _add(state.bad_nics, Verdict("nic", e, BAD, why, ids))
    else:
        _add(state.bad_nodes, Verdict("node", node, BAD, why, ids))


def _add(into: dict[str, Verdict], v: Verdict) -> None:
    old = into.get(v.name)
    into[v.name] = v if old is None else replace(
        old, reason=f"{old.reason}; {v.reason}", evidence=old.evidence + v.evidence)


def _judge_peers(r: SignalReadings, state: SignalState,
                 peer_class: Callable[[str], object] | None = None) -> None:
    """Passing values far from the signal's other values of the same class of part are
    suspects (never drained)."""
    classes: dict[object, dict[str, float]] = {}
    for t, obs in r.readings.items():
        if r.status.get(t) == "pass" and obs[-1].value is not None:
            key = peer_class(t) if peer_class is not None else None
            classes.setdefault(key, {})[t] = obs[-1].value
    for latest in classes.values():
        _judge_peer_class(r, latest, state)


def _judge_peer_class(r: SignalReadings, latest: dict[str, float], state: SignalState) -> None:
    sig = r.spec
    if len(latest) < PEER_MIN_COUNT:
        return
    values = list(latest.values())
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values) * 1.4826
    bound = sig.pass_min if sig.pass_min is not None else sig.pass_max
    gap = PEER_MIN_GAP * max(abs(med), abs(bound or 0.0))
    for target, v in latest.items():
        dev = v - med
        low_bad = sig.pass_min is not None and dev < 0
        high_bad = sig.pass_max is not None and dev > 0
        if not (low_bad or high_bad) or abs(dev) <= max(gap, PEER_Z * mad):
            continue
        edge = sig.pass_min if low_bad else sig.pass_max
        if edge is not None and abs(dev) <= 0.5 * abs(edge - med):
            continue  # nearer its peers than its bound: a counter's few stray counts
        obs = r.readings[target][-1]
        why = (f"signal {sig.name}: {v:g}{' ' + sig.unit if sig.unit else ''} passes "
               f"{bound_text(sig)} but is far from its peers (median {med:g})")
        r.status[target], r.reason[target] = "suspect", why
        kind = "nic" if "/" in target else "node"
        state.suspects.setdefault(target, Verdict(kind, target, SUSPECT, why,
                                                  (obs.test.test_id,)))


def merge_signal_verdicts(inf, state: SignalState):
    """``inf`` (an :class:`~fabriccheck.inference.attribute.Inference`) with the signals' bad
    nodes and NICs added (their reasons joined where traffic blamed the same part); suspects
    stay in ``state`` (they must not send the planner after traffic confirmations)."""
    for into, extra in ((inf.bad_nodes, state.bad_nodes), (inf.bad_nics, state.bad_nics)):
        for v in extra.values():
            _add(into, v)
    return inf

