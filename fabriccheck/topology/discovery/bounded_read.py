"""Reading one tool output with bounds: at most so many bytes, within so many seconds.

Shared by ``fabriccheck parse`` (through :mod:`fabriccheck.probes._input`) and the topology
importers; it sits here, below probes, so both may use it (docs/architecture.md arrows).

``fabriccheck parse`` takes any path: a regular file, a pipe, ``/dev/urandom`` or ``-`` (stdin).
Regular files are read up to the cap; anything else is read as a stream, chunk by chunk, with a
deadline. Hitting either bound, or reading binary data, is a one-line :class:`ConfigError`.
"""

from __future__ import annotations

import os
import select
import stat
import sys
import time
from pathlib import Path

from fabriccheck.errors import ConfigError

#: the most a tool output may weigh (a NCCL_DEBUG=INFO job log of a large job can be hundreds
#: of MB: cut it, e.g. with ``tail -c``)
MAX_INPUT_BYTES = 64 * 2**20
#: the longest a stream (pipe, device, stdin) may take to reach its end
MAX_INPUT_S = 30.0
_CHUNK = 1 << 20


def read_tool_output(path: str | Path, *, max_bytes: int = MAX_INPUT_BYTES,
                     timeout_s: float = MAX_INPUT_S) -> str:
    """The text of ``path`` (``-`` is stdin), decoded as UTF-8 with replacement.

    Raises
    ------
    ConfigError
        Missing or unreadable, larger than ``max_bytes``, a stream that does not end within
        ``timeout_s``, or binary data (the message is one line naming the path).
    """
    source = str(path)
    try:
        if source == "-":
            data = _read_stdin(source, max_bytes, timeout_s)
        else:
            with open(path, "rb") as f:
                if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    data = f.read(max_bytes + 1)
                else:
                    data = _read_stream(f.fileno(), source, max_bytes, timeout_s)
    except FileNotFoundError:
        raise ConfigError("no such file", source=source) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", source=source) from None
    if len(data) > max_bytes:
        raise ConfigError(
            f"more than {_size(max_bytes)}: read stopped there, nothing parsed", source=source,
            hint="give one tool output; cut a long log first, e.g. tail -c 32M FILE")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # PowerShell's `>` writes UTF-16
        return data.decode("utf-16", errors="replace")
    if _binary(data):
        raise ConfigError("binary data, not tool output", source=source,
                          hint="give the text a tool printed")
    return data.decode("utf-8", errors="replace")


def _read_stdin(source: str, max_bytes: int, timeout_s: float) -> bytes:
    stdin = getattr(sys.stdin, "buffer", sys.stdin)
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):  # an in-memory stdin (tests, embedding)
        data = stdin.read(max_bytes + 1)
        return data.encode() if isinstance(data, str) else data
    return _read_stream(fd, source, max_bytes, timeout_s)


def _read_stream(fd: int, source: str, max_bytes: int, timeout_s: float) -> bytes:
    """Chunks of ``fd`` until its end, ``max_bytes + 1`` bytes or the deadline."""
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    total = 0
    while total <= max_bytes:
        left = deadline - time.monotonic()
        ready = select.select([fd], [], [], max(0.0, left))[0] if left > 0 else []
        if not ready:
            raise ConfigError(
                f"input did not end within {timeout_s:g} s ({_size(total)} read), nothing "
                "parsed", source=source, hint="save the tool output to a file and parse that")
        chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if len(chunks) == 1 and _binary(chunk):
            break  # /dev/urandom & co: no need to read on
    return b"".join(chunks)


def _binary(data: bytes) -> bool:
    """NUL bytes, or more than 10 % control bytes in the first 64 KiB (tabs, line ends and
    ANSI escapes allowed)."""
    head = data[:65536]
    if not head:
        return False
    if b"\x00" in head:
        return True
    control = sum(1 for b in head if b < 32 and b not in (9, 10, 13, 27, 12, 8))
    return control > len(head) // 10


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"
