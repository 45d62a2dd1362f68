"""A Prometheus exporter over history: the newest finished run's metrics, re-read per scrape."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric

from fabriccheck.actions.metrics import build_registry
from fabriccheck.store.db import Store


def _latest_registry(path: str, mode: str | None, executor: str | None = "real"):
    with Store(path) as store:
        run_id = store.latest_finished(mode, executor=executor)
        if run_id is None:
            return None
        result = store.load_result(run_id)
        finished_s = store.run(run_id).finished_s
        acts = [{"action": a.action, "status": a.status} for a in store.actions(run_id=run_id)]
    return build_registry(result, actions=acts, now_s=finished_s)


def latest_metrics_text(path: str, *, mode: str | None = None,
                        executor: str | None = "real") -> str:  # fmt: skip
    """The text exposition of the newest finished run ("" when there is none); by default of
    the newest real run (a simulated one never shows up as a real node's health)."""
    reg = _latest_registry(path, mode, executor)
    return generate_latest(reg).decode() if reg is not None else ""


class HistoryCollector:
    """A prometheus_client collector that rebuilds the metrics from history on every scrape."""

    def __init__(self, path: str, *, mode: str | None = None,
                 executor: str | None = "real") -> None:  # fmt: skip
        self.path, self.mode, self.executor = path, mode, executor

    def collect(self) -> Iterator[Metric]:
        reg = _latest_registry(self.path, self.mode, self.executor)
        if reg is not None:
            yield from reg.collect()
