"""Bounded reading of one tool output for ``fabriccheck parse`` (lives below probes, shared with
the topology importers: :mod:`fabriccheck.topology.discovery.bounded_read`)."""

from __future__ import annotations

from fabriccheck.topology.discovery.bounded_read import (
    MAX_INPUT_BYTES,
    MAX_INPUT_S,
    read_tool_output,
)

__all__ = ["MAX_INPUT_BYTES", "MAX_INPUT_S", "read_tool_output"]
