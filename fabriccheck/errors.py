"""The whole exception tree of fabriccheck.

::

    FabricCheckError                 fabriccheck itself failed (never "a node is bad": a result)
     ├── ConfigError                 bad file, field or flag                       -> exit 2
     ├── ParseError                  tool output that cannot be read (tool, excerpt)
     └── ExecutorError               the executor or inventory could not test      -> exit 3
          ├── ConnectError           host not reachable (network, DNS, refused)
          ├── AuthError              host reached, credentials refused / host key unknown
          ├── TaskTimeout            a remote command outlived its timeout
          └── RemoteCommandError     a remote command could not be started or cleaned up

Every message says what, where (file:field, host, command) and what to do; ``hint`` carries the
"what to do" part separately so the CLI can print it on its own.
"""

from __future__ import annotations


class FabricCheckError(Exception):
    """Base of every error fabriccheck raises on purpose."""

    exit_code = 3

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigError(FabricCheckError):
    """A file, field or flag is wrong. ``source`` is the file (or flag), ``field`` the key path."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        where = ":".join(p for p in (source, field) if p)
        super().__init__(f"{where}: {message}" if where else message, hint=hint)
        self.source = source
        self.field = field


class ParseError(FabricCheckError):
    """Tool output could not be read. ``tool`` names the format, ``excerpt`` the offending text."""

    exit_code = 2

    def __init__(self, message: str, *, tool: str, excerpt: str = "", hint: str | None = None):
        super().__init__(f"{tool}: {message}", hint=hint)
        self.tool = tool
        self.excerpt = excerpt[:200]


class ExecutorError(FabricCheckError):
    """The executor (or inventory) could not run tests. ``host`` names the host when known."""

    exit_code = 3

    def __init__(self, message: str, *, host: str | None = None, hint: str | None = None):
        super().__init__(f"{host}: {message}" if host else message, hint=hint)
        self.host = host


class ConnectError(ExecutorError):
    """The host could not be reached."""


class AuthError(ExecutorError):
    """The host was reached but refused our credentials, or its host key is not known."""


class TaskTimeout(ExecutorError):
    """A remote command did not finish within its timeout (it has been killed)."""


class RemoteCommandError(ExecutorError):
    """A remote command could not be started, or its process tree could not be cleaned up."""
