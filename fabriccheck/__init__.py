"""fabriccheck: active fabric health checks for GPU training clusters."""

from __future__ import annotations

from fabriccheck.errors import (
    AuthError,
    ConfigError,
    ConnectError,
    ExecutorError,
    FabricCheckError,
    ParseError,
    RemoteCommandError,
    TaskTimeout,
)

__version__ = "0.1.0"

__all__ = [
    "AuthError",
    "ConfigError",
    "ConnectError",
    "ExecutorError",
    "FabricCheckError",
    "ParseError",
    "RemoteCommandError",
    "TaskTimeout",
    "__version__",
]
