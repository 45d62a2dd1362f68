"""Following forwarding tables hop by hop: the route of one InfiniBand flow from LFTs."""

from __future__ import annotations

from fabriccheck.models import LinkKey, link_key


def lft_route(lft: dict[str, dict[str, str]], src: str, dst: str, s_sw: str, d_sw: str,
              max_hops: int) -> tuple[LinkKey, ...] | None:
    """The route ``src -> dst`` as link keys, each switch forwarding by its table's entry for
    ``dst``; None when a switch on the way has no entry (or the walk loops).

    >>> lft = {"l0": {"h2/m": "s0"}, "s0": {"h2/m": "l1"}, "l1": {"h2/m": "h2/m"}}
    >>> lft_route(lft, "h1/m", "h2/m", "l0", "l1", 3)
    (Link(a='h1/m', b='l0'), Link(a='l0', b='s0'), Link(a='l1', b='s0'), Link(a='h2/m', b='l1'))
    """
    walk = lft_walk(lft, dst, s_sw, d_sw, max_hops)
    if walk is None:
        return None
    hops = (src, *walk, dst)
    return tuple(link_key(a, b) for a, b in zip(hops, hops[1:], strict=False))


def lft_walk(lft: dict[str, dict[str, str]], dst: str, s_sw: str, d_sw: str, max_hops: int
             ) -> tuple[str, ...] | None:
    """The switches from ``s_sw`` to ``d_sw`` (both included) following each table's entry
    for ``dst``; None when a switch on the way has no entry (or the walk loops).

    >>> lft = {"l0": {"h2/m": "s0"}, "s0": {"h2/m": "l1"}}
    >>> lft_walk(lft, "h2/m", "l0", "l1", 3)
    ('l0', 's0', 'l1')
    """
    walk = [s_sw]
    cur = s_sw
    for _ in range(max_hops + 1):
        if cur == d_sw:
            return tuple(walk)
        nxt = lft.get(cur, {}).get(dst)
        if nxt is None or nxt == dst:
            return None
        walk.append(nxt)
        cur = nxt
    return None
