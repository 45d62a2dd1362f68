"""nccl-tests result rows: one row's cells, in every layout.

Split on whitespace, never on column positions (tool-formats.md §1.1-1.4): 12 or 13 tokens
before the halves (with or without ``root``), ``-I 1`` per-iteration columns, ``-S``
timestamps, launcher tags at the start of a row or glued inside it (``-1[0]``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabriccheck.probes._text import to_float, to_int
from fabriccheck.probes.results import NcclRow

_TIMESTAMP_RE = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d")
#: launcher tags a row can carry at its start or glued into it (``-1[0]``, ``N/Anode1: ``)
ROW_PREFIX_RE = re.compile(r"^\s*(?:\[\d+\]:?|[A-Za-z][\w.-]{0,63}:(?=\s)|\d+:(?=\s))")
_ROW_GLUE_RE = re.compile(  # label lengths bounded: a long line stays linear
    r"[A-Za-z][\w.-]{0,63}/\d+ \[\d+\]:|(?<=[\dA])(?:\[\d+\]:?|[A-Za-z][\w.-]{0,63}:(?=\s))")
_TYPE_RE = re.compile(r"^[A-Za-z][\w]*$")
#: the start of a plain result row (size, count, type): a row cut by a wrap starts like this
ROW_START_RE = re.compile(r"^\s*\d+\s+\d+\s+[A-Za-z]\w*(?:\s|$)")


@dataclass
class Schema:
    """What the column header said (None: no header seen; the row's token count decides)."""

    has_root: bool | None = None
    rel_error: bool | None = None  # `error` column (pre-2022-08) instead of `#wrong`


def parse_row(s: str, schema: Schema) -> NcclRow | None:
    """The row ``s`` holds, or None when it is not one result row of any layout.

    >>> r = parse_row("  8  2  float  sum  -1  135.8  0.00  0.00  0  123.5  0.00  0.00  0",
    ...               Schema())
    >>> (r.size_bytes, r.root, r.time_inplace_us, r.wrong)
    (8, -1, 123.5, 0)
    """
    if "[" in s or ":" in s:
        s = _TIMESTAMP_RE.sub(" ", s)
        s = _ROW_GLUE_RE.sub(" ", s)
    toks = s.split()
    if not 11 <= len(toks) <= 22:
        return None
    size, count = to_int(toks[0]), to_int(toks[1])
    if size is None or count is None or size < 0 or count < 0 or not _TYPE_RE.match(toks[2]):
        return None
    i, redop = 3, None
    if _TYPE_RE.match(toks[3]):
        redop, i = toks[3], 4
    rest = toks[i:]
    root = None
    if len(rest) in (9, 17):
        root = to_int(rest[0])
        if root is None:
            return None
        rest = rest[1:]
    elif len(rest) not in (8, 16):
        return None
    half = len(rest) // 2
    rel_error = schema.rel_error if schema.rel_error is not None else root is None
    oop = _half(rest[:half], rel_error)
    inp = _half(rest[half:], rel_error)
    if oop is None or inp is None:
        return None
    return NcclRow(
        size_bytes=size, count=count, dtype=toks[2], redop=redop, root=root,
        time_us=oop[0], algbw_gbps=oop[1], busbw_gbps=oop[2], wrong=oop[3],
        time_inplace_us=inp[0], algbw_inplace_gbps=inp[1], busbw_inplace_gbps=inp[2],
        wrong_inplace=inp[3], max_rel_error=oop[4], max_rel_error_inplace=inp[4],
    )  # fmt: skip


def _half(toks: list[str], rel_error: bool):
    """(time, algbw, busbw, wrong, rel_error) of one half-row, or None if it is not numbers."""
    vals = [to_float(t) for t in toks[:3]]
    if any(v is None or v < 0 for v in vals):
        return None
    cell = toks[3]
    wrong: int | None = None
    err: float | None = None
    if cell != "N/A":
        num = to_float(cell)
        if num is None or num < 0:
            return None
        if rel_error:
            err = num
        else:
            wrong = int(num)
    for extra in toks[4:]:  # -I 1: i_min i_max i_p99 i_cv%
        if to_float(extra) is None:
            return None
    return vals[0], vals[1], vals[2], wrong, err
