"""Per-round history: an executor wrapper that records every round as it completes and, on
``--resume``, replays the rounds a killed run already finished.

:class:`RecordingExecutor` wraps any executor. Under the orchestrator it writes each round the
run judged (:meth:`RecordingExecutor.on_round`: the orchestrator calls an executor's
``on_round``), in one transaction, so a crash loses at most the round in flight and nothing is
judged twice. Used alone (``records_rounds=True``), after each ``run_round`` it judges the raw
results against the spec itself (the same ``parse_raw`` + ``evaluate``) and writes them. Given
the completed rounds of an earlier attempt (``Store.resume_run``) it returns their recorded raw
results for the same tests instead of running them again: planning is deterministic for a seed,
so the resumed run re-plans the same rounds, gets the old answers instantly, and goes on live
from the first round that was not finished.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fabriccheck.models import Observation, RawResult, Test
from fabriccheck.store.db import Store


def test_key(test: Test) -> tuple[str, str, tuple[str, ...]]:
    """What identifies a test across a resumed run: id, probe and nodes."""
    return (test.test_id, test.probe, tuple(test.nodes))


test_key.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def _judge(test: Test, raw: RawResult, spec: Any, signals: Mapping[str, Any] | None = None
           ) -> Observation:
    """The observation the orchestrator would make (peer statistics aside); a signal reading
    is judged against its signal (value and bound), as the orchestrator does."""
    if test.probe == "signal":
        sig = (signals or {}).get(str(test.params.get("signal")))
        if sig is not None:
            from fabriccheck.inference.signals import judge_signal
            from fabriccheck.probes.node.catalogue import load_catalogue

            return judge_signal(test, raw, sig, load_catalogue(getattr(spec, "node_checks", None)))
        spec = None  # a signal's text means nothing to the traffic parsers
    if spec is not None:
        from fabriccheck.inference.evaluate import evaluate
        from fabriccheck.probes.detect import parse_raw

        return evaluate(test, raw, parse_raw(test, raw), spec)
    if raw.unreachable:
        status = "unreachable"
    elif raw.timed_out:
        status = "hang"
    else:
        status = "pass" if raw.exit_code == 0 else "error"
    return Observation(test, status, raw=raw)


class RecordingExecutor:
    """Wraps ``inner``; records each round into ``store`` under ``run_id``; replays ``replay``.

    Parameters
    ----------
    inner : Executor
        The executor that really runs tests.
    store, run_id
        Where rounds go (the run must have been begun).
    spec : TestSpec, optional
        Used to judge each round as it is written (without it: pass/hang/error from exit codes).
    replay : mapping of round -> observations, optional
        Completed rounds of an earlier attempt of the same run.
    signals : sequence of SignalSpec, optional
        The run's signals, to judge signal readings (value and bound) as they are written.
    records_rounds : bool
        True (default): write each round as ``run_round`` returns, judged here. False: the
        caller hands over its judged rounds with :meth:`on_round` (the orchestrator does).
    """

    def __init__(
        self,
        inner: Any,
        store: Store,
        run_id: str,
        *,
        spec: Any = None,
        replay: Mapping[int, Sequence[Observation]] | None = None,
        signals: Sequence[Any] = (),
        records_rounds: bool = True,
    ) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "executor")
        self.store = store
        self.run_id = run_id
        self.spec = spec
        self.signals = {s.name: s for s in signals}
        self.records_rounds = records_rounds
        self.replayed = 0
        self._replay: dict[tuple, RawResult] = {}
        for obs in (replay or {}).values():
            for o in obs:
                if o.raw is not None:
                    self._replay[test_key(o.test)] = o.raw
        self._next_round = 0

    def run_round(self, tests: Sequence[Test]) -> list[RawResult]:
        """Run (or replay) one round and record it before returning."""
        known = {i: self._replay[test_key(t)] for i, t in enumerate(tests)
                 if test_key(t) in self._replay}  # fmt: skip
        todo = [t for i, t in enumerate(tests) if i not in known]
        live = iter(self.inner.run_round(todo) if todo else [])
        raws = [known[i] if i in known else next(live) for i in range(len(tests))]
        self.replayed += len(known)
        # a round run in waves comes here once per wave: later waves belong to the round before
        later_wave = bool(tests) and all(t.params.wave for t in tests)
        round_no = max(0, self._next_round - 1) if later_wave else self._next_round
        self._next_round = round_no + 1
        if todo and self.records_rounds:  # a fully replayed round is already in the store
            obs = [_judge(t, r, self.spec, self.signals) for t, r in zip(tests, raws, strict=True)]
            self.store.record_round(self.run_id, round_no, obs)
        return raws

    def on_round(self, record: Any) -> None:
        """Write a round the caller judged (a :class:`~fabriccheck.run_history.RoundRecord`:
        ``number`` from 1); a fully replayed round is already in the store."""
        obs = record.observations
        if any(test_key(o.test) not in self._replay for o in obs):
            self.store.record_round(self.run_id, record.number - 1, list(obs))

    def close(self) -> None:
        self.inner.close()
