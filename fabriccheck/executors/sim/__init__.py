"""The fabric simulator: a digital twin that prints what the real tools would print."""

from __future__ import annotations

from fabriccheck.executors.sim.executor import SimExecutor

__all__ = ["SimExecutor"]
