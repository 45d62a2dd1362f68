"""A tool output's lines read in one regex scan where that gives what ``str.splitlines`` and
``str.strip`` give line by line (pure helpers shared by the judges)."""

from __future__ import annotations

import re

#: line breaks ``str.splitlines`` knows besides ``\n``
OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
#: a line's blanks in a multi-line pattern: whitespace but ``\n``
H = r"[^\S\n]"
_STRIPPED = re.compile(rf"^({H}*)(\S(?:[^\n]*\S)?){H}*$", re.M)


def newline_breaks_only(text: str) -> bool:
    """True when ``str.splitlines`` splits ``text`` at ``\\n`` only (then one multi-line regex
    scan sees the same lines).

    >>> newline_breaks_only("a\\nb\\n"), newline_breaks_only("a\\r\\nb")
    (True, False)
    """
    return not any(c in text for c in OTHER_BREAKS)


def stripped_lines(text: str, tabsize: int | None = None) -> list[tuple[str, str]]:
    """``(leading blanks, stripped line)`` of each line of ``text`` that is not blank, in
    order; ``tabsize``: tabs expanded first, as ``str.expandtabs`` does line by line.

    >>> stripped_lines("GPU 0\\n\\n    Pending : No  \\n")
    [('', 'GPU 0'), ('    ', 'Pending : No')]
    """
    if newline_breaks_only(text):
        if tabsize is not None and "\t" in text:
            text = text.expandtabs(tabsize)  # columns restart at each \n, as per line
        return _STRIPPED.findall(text)
    out = []
    for raw in text.splitlines():
        if tabsize is not None:
            raw = raw.expandtabs(tabsize)
        if line := raw.strip():
            out.append((raw[:len(raw) - len(raw.lstrip())], line))
    return out


def last_line_open(text: str) -> bool:
    """The text's last line (as ``str.splitlines`` splits) is not blank and has no ``\\n``
    after it: an output cut there may have cut it mid-value.

    >>> last_line_open("a\\nStatus : Succ"), last_line_open("a\\nb\\n"), last_line_open("a\\n  ")
    (True, False, False)
    """
    if not text or text.endswith("\n"):
        return False
    last = text.rpartition("\n")[2] if newline_breaks_only(text) else text.splitlines()[-1]
    return bool(last.strip())
