"""A run's judgement with its signals: the traffic's attribution with the signals' verdicts and
the transport fallbacks merged in, round by round (:func:`infer_run`), and the finished run's
result (:func:`assemble_result`: :func:`~fabriccheck.inference.verdicts.build_result`, the
ladder, the signal readings, suspects and untested parts, and each node's NCCL transport). The
loop (:mod:`fabriccheck.orchestrator`) only plans, executes and records; what the observations
mean is decided here.
"""

from __future__ import annotations

from collections.abc import Sequence

from fabriccheck.inference.attribute import infer
from fabriccheck.inference.signals import SignalState, evaluate_signals, merge_signal_verdicts
from fabriccheck.inference.state import Inference
from fabriccheck.inference.transport import (
    add_transport_results,
    explained_out,
    judge_transport,
    merge_transport_verdicts,
)
from fabriccheck.inference.verdicts import RunEnd, build_result
from fabriccheck.models import RunResult
from fabriccheck.policy import SweepPolicy
from fabriccheck.run_history import RunHistory
from fabriccheck.specs import SignalSpec
from fabriccheck.topology.view import FabricView


def infer_run(history: RunHistory, view: FabricView, signals: Sequence[SignalSpec],
              last: SignalState | None = None, *, screen_links: bool = False
              ) -> tuple[Inference, SignalState]:
    """Attribution of the traffic so far, with the signals' own verdicts and the transport
    fallbacks the nccl tests' NCCL INFO lines show (:mod:`fabriccheck.inference.transport`)
    merged in; the slow tests a fallen-back node explains are left out of the attribution.

    Parameters
    ----------
    history
        The run's rounds so far.
    view
        The fabric.
    signals
        Every signal the run reads.
    last
        The signal state of the previous call: the signals are judged again only when a round
        brought new readings.
    screen_links
        Screen every switch link for intermittence
        (:func:`fabriccheck.inference.link_screen.screens_links`).

    Returns
    -------
    tuple of Inference and SignalState
    """
    readings = history.signal_observations
    sig = last if last is not None and last.readings == len(readings) else \
        evaluate_signals(readings, signals, view.peer_class)
    transport = judge_transport(history.observations)
    inf = infer(explained_out(history.observations, transport), view,
                screen_links=screen_links)
    return merge_transport_verdicts(merge_signal_verdicts(inf, sig), transport), sig


def assemble_result(mode: str, nodes: list[str], history: RunHistory, inf: Inference,
                    view: FabricView, policy: SweepPolicy, end: RunEnd, sig: SignalState,
                    skipped: Sequence[str], ladder: dict | None = None) -> RunResult:
    """The finished run's :class:`RunResult`: the verdicts
    (:func:`~fabriccheck.inference.verdicts.build_result`), the ladder climbed (``ladder``,
    when the run had one) and the signals (:func:`add_signal_results`)."""
    result = build_result(mode, nodes, history, inf, view, policy, end)
    if ladder is not None:
        result.extra["ladder"] = ladder
    add_signal_results(result, sig, history, skipped)
    add_transport_results(result, judge_transport(history.observations))
    result.extra["strict"] = policy.strict
    return result


def add_signal_results(result: RunResult, sig: SignalState, history: RunHistory,
                       skipped: Sequence[str]) -> None:
    """Signal readings into the run result: the ``signals`` key, suspects, untested parts, the
    readings themselves (``signal_observations``) and the configuration peers (``config``)."""
    result.extra["signals"] = sig.to_json()
    result.extra["preflight_skipped"] = list(skipped)
    drain = set(result.drain)
    new = [v for k, v in sorted(sig.suspects.items())
           if k not in drain and k.split("/", 1)[0] not in drain]
    result.verdicts += new
    result.suspects = sorted({*result.suspects, *(v.name for v in new)})
    gone = drain | set(result.unreachable) | set(result.hung)
    result.extra["untested"] = [*result.extra.get("untested", []),
                                *(f"signal {name} on {target}" for name, target in sig.untested
                                  if not set(target.split("/", 1)[0].split("+")) & gone)]
    result.extra["signal_readings"] = len(history.signal_observations)
    gone = {t for t in (*result.drain, *result.unreachable)}
    result.extra["warnings"] = [w for w in sig.warnings
                                if w["target"].split("/", 1)[0] not in gone]
    result.extra["node_info"] = len(sig.info)
    result.extra["kernel_log"] = kernel_log_scope(history)
    # per configuration setting: the peers' majority and the parts unlike it (config_peers)
    result.extra["config"] = sig.config


def kernel_log_scope(history: RunHistory) -> dict:
    """Per node, where its judged kernel log ended (``until``: the next check's start) and
    from when it was read (``since``; None: since boot, the node had no earlier check)."""
    out: dict[str, dict] = {}
    for o in history.signal_observations:
        if o.test.params.get("signal") != "kernel-log" or not o.facts:
            continue
        out[o.test.nodes[0]] = {"since": o.test.params.get("since"),
                                "until": o.facts.get("last_stamp")}
    return out
