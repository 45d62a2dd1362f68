"""Values the input files' fields take (the models and the loaders both read them): a test
spec's collectives and fabrics, a topology's fabrics and switch tiers."""

from __future__ import annotations

COLLECTIVES = ("all_reduce", "all_gather", "alltoall", "sendrecv", "reduce_scatter", "broadcast")
SPEC_FABRICS = ("infiniband", "roce", "any")
#: a topology's fabric, and its switch tiers from the bottom up
FABRICS = ("roce", "infiniband")
TIERS = ("leaf", "spine", "core")
_SIZE_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size_bytes(value: object) -> int | None:
    """A message size: an integer, or a string with a binary suffix (``8M``, ``16G``, ``64KiB``).

    >>> parse_size_bytes("8M"), parse_size_bytes(65536), parse_size_bytes("64KiB")
    (8388608, 65536, 65536)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        return None
    text = value.strip().upper().removesuffix("IB").removesuffix("B")
    number, suffix = text[:-1], text[-1:]
    if suffix.isdigit():
        number, suffix = text, ""
    if suffix not in _SIZE_SUFFIX or not number.isdigit():
        return None
    return int(number) * _SIZE_SUFFIX[suffix]
