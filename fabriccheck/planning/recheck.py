"""The intermittence recheck: enough samples of a part to tell an intermittent part from noise,
in ONE round.

A sweep gives a NIC two to eight tests, too few to tell a part that fails one test in three from
1-2 % measurement glitches. A part with a failure nothing else explains ("lonely", see
:mod:`fabriccheck.inference.flaky`) gets samples like a confirmation (client against one
proven-good partner, server from another, at once: links are full duplex) in **waves** that run
after the round's own tests (``params.wave``: each wave starts when the one before has ended;
the round count does not grow, its test time does: about ``waves x (setup +
recheck_duration_s)``), ``policy.recheck_samples`` samples a part in all.

The waves come in :data:`BLOCKS` blocks, each with partners (IB link: flows) the part has not
had in an earlier block, where the fabric has them: a partner that is itself intermittent, or a
path over a flapping link, then spoils one block's samples, not all of them, and
``inference.flaky`` can set the worst partner's samples aside. Every sample carries
``params.recheck_of`` (the part), which is what the second-stage test in
``inference.flaky`` counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fabriccheck.models import Link, Test, nic_node
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.confirm import GoodPool, plan_nic_confirm
from fabriccheck.planning.link_probes import plan_link_probes
from fabriccheck.planning.roce_link_probes import plan_roce_link_probes

#: blocks of waves with fresh partners (each block: 2 partners per NIC, or fresh IB flows)
BLOCKS = 4


def plan_recheck(b: RoundBuilder, nics: Sequence[str], links: Sequence[Link], pool: GoodPool,
                 good_nics: set[str], local: Sequence[str] = (),
                 met: Mapping[str, frozenset[str]] | None = None, *, seed: int = 0,
                 blocks: int = BLOCKS) -> int:
    """Samples of every candidate, in waves 1.. of this round (after the round's own tests,
    so they never take a NIC or link the confirmations need, and the NICs the round's tests
    use are free again): per NIC a client test against one proven-good partner and a server
    test from another, per IB link fresh known-good flows across it and no other suspect
    link; ``policy.recheck_samples`` samples a part in all, over ``blocks`` blocks of waves
    with partners new to the part in each block where there are any.
    Returns the number of samples planned."""
    met = met or {}
    # partners are proven good and not candidates themselves: a failure then points at the
    # part, and a small leaf's few NICs are left to the candidates' own samples
    good_nics = good_nics - set(nics)
    want = b.policy.recheck_samples
    blocks, per_block = _block_shape(b, want, blocks)
    parts = [*nics, *(str(Link.of(*lk)) for lk in links)]
    need = dict.fromkeys(parts, want)
    used: dict[str, set[str]] = {nic: set() for nic in nics}
    made, wave = 0, 1
    # a part that found no partner in a block (the block's resources went to others) gets
    # its samples in the next: up to twice the blocks, so the round's waves at most double
    proven: dict[str, int] = dict.fromkeys(nics, 0)  # samples with a proven-good partner
    link_parts = set(parts) - set(nics)
    for k in range(2 * blocks):
        # parts with no proven-good partner yet choose first (a small leaf's one uplink goes
        # to each of its candidates in turn), then those furthest from their samples
        todo_nics = sorted((x for x in nics if need[x] > 0),
                           key=lambda x: (proven[x] > 0, -need[x]))
        todo_links = [lk for lk in links if need[str(Link.of(*lk))] > 0]
        if not todo_nics and not todo_links:
            break
        groups = [(p, t) for p, t in _block(b, todo_nics, todo_links, pool, good_nics, local,
                                            met, used, seed + 7919 * k) if t]
        if not groups:
            break
        n, wave = _lay_block(b, groups, link_parts, need, proven, good_nics, wave, per_block)
        made += n
    return made


def _block_shape(b: RoundBuilder, want: int, blocks: int) -> tuple[int, int]:
    """How the ``want`` samples of a part are laid out: two a wave at most, over ``blocks``
    blocks (one on RoCE; never more than the waves). Returns the blocks and the waves of a
    block."""
    waves = max(1, -(-want // 2))  # two samples a wave at most
    # RoCE: fresh partners soon sit on other leaves, and a failing cross-leaf sample beside a
    # round's other failures at its leaf is possible ECMP contention that hides a slow link's
    # evidence (inference.contention): one block, partners as a confirmation picks them
    blocks = max(1, min(blocks if b.view.fabric == "infiniband" else 1, waves))
    return blocks, -(-waves // blocks)


def _lay_block(b: RoundBuilder, groups: Sequence[tuple[str, Sequence[Test]]],
               link_parts: set[str], need: dict[str, int], proven: dict[str, int],
               good_nics: set[str], first: int, per_block: int) -> tuple[int, int]:
    """One block's tests as samples in waves ``first`` .. ``first + per_block - 1`` (RoCE
    links: :func:`_spread_aimed`, over up to twice as many), each part up to its ``need``
    (counted down); ``proven`` counts a NIC's samples whose partners are all ``good_nics``.
    Returns the samples planned and the first wave left free."""
    # RoCE links: their aimed flows share the link (and its spine) with each other
    ib = b.view.fabric == "infiniband"
    aimed = {p: t for p, t in groups if p in link_parts and not ib}
    made, wave = 0, first
    for _ in range(per_block):
        for part, tests in groups:
            if part in aimed:
                continue
            for t in tests[:max(0, need[part])]:
                _sample(b, t, part, wave)
                need[part] -= 1
                made += 1
                if part in proven and set(t.nics) - {part} <= good_nics:
                    proven[part] += 1
        wave += 1
    if aimed:
        n, end = _spread_aimed(b, aimed, need, first, first + 2 * per_block)
        made, wave = made + n, max(wave, end)
    return made, wave


def _spread_aimed(b: RoundBuilder, aimed: Mapping[str, Sequence[Test]], need: dict[str, int],
                  first: int, last: int) -> tuple[int, int]:
    """RoCE link samples in waves ``first`` .. ``last - 1``: one flow of a link a wave (its
    flows in turn), and no two links with a switch in common in one wave. Flows pinned onto
    one link (or onto two links of one spine: ``leaf-0 - spine - leaf-1`` crosses both) in
    one wave would share it and fail for that alone (max-min sharing), so a healthy link would
    look intermittent. Returns the samples planned and the first wave left free."""
    made, wave, turn = 0, first, 0
    while wave < last and any(need[p] > 0 for p in aimed):
        busy: set[str] = set()
        for part, tests in aimed.items():
            ends = set(part.split(" -- "))
            if need[part] <= 0 or busy & ends:
                continue
            busy |= ends
            t = tests[turn % len(tests)]
            _sample(b, t, part, wave)
            need[part] -= 1
            made += 1
        wave += 1
        turn += 1
    return made, wave


def plan_topup(b: RoundBuilder, nics: Sequence[str], counts: Mapping[str, int],
               want: int) -> int:
    """Short samples for NICs with fewer than ``want`` finished tests, in waves after the
    round's other waves: per leaf and rail, the NICs in scope (``nics``) form a ring, shifted
    every wave, so each NIC sends to one neighbour and receives from another (two samples a
    wave, crossing no switch link). The samples are ordinary tests (no ``recheck_of``): the
    screen of :mod:`fabriccheck.inference.flaky` counts them, and a lonely failure among them
    makes its NIC a recheck candidate. Returns the number of samples planned."""
    need = {x: want - counts.get(x, 0) for x in nics if counts.get(x, 0) < want}
    if not need:
        return 0
    topo = b.view.topology
    rings: dict[tuple[str, int], list[str]] = {}
    for x in sorted(nics):
        rings.setdefault((topo.attachment.get(x, ""), topo.nics[x].rail), []).append(x)
    first = b.next_wave()
    made = 0
    for w in range(-(-max(need.values()) // 2)):
        sub = RoundBuilder(b.round_no, b.view, b.spec, b.policy)
        for (_, rail), ring in sorted(rings.items()):
            if len(ring) < 2:
                continue  # alone on its leaf and rail: partnerless, see planning.partnerless
            shift = 1 + w % (len(ring) - 1)
            for i, src in enumerate(ring):
                dst = ring[(i + shift) % len(ring)]
                if need.get(src, 0) <= 0 and need.get(dst, 0) <= 0:
                    continue
                t = sub.add_flow(nic_node(src), nic_node(dst), rail, "sweep")
                if t is None:
                    continue
                b.add_in_wave(t, first + w, duration_s=b.policy.recheck_duration_s)
                made += 1
                for x in (src, dst):
                    need[x] = need.get(x, 0) - 1
    return made


def _block(b: RoundBuilder, nics: Sequence[str], links: Sequence[Link], pool: GoodPool,
           good_nics: set[str], local: Sequence[str], met: Mapping[str, frozenset[str]],
           used: dict[str, set[str]], seed: int) -> list[tuple[str, list[Test]]]:
    """One block's tests per part, planned on their own resources (a block's waves run
    apart from the round's tests and from other blocks). ``used``: each NIC's partners of
    earlier blocks, avoided while others exist."""
    sub = RoundBuilder(b.round_no, b.view, b.spec, b.policy)
    mine: dict[str, list[Test]] = {nic: [] for nic in nics}

    def plan(nic: str, **kw: object) -> None:
        start = len(sub.tests)
        plan_nic_confirm(nic, sub, pool, good_nics, local,
                         met=met.get(nic_node(nic), frozenset()), **kw)  # type: ignore[arg-type]
        mine[nic].extend(sub.tests[start:])

    # first every part's proven-good partners (across leaves when its leaf has none: a
    # two-node leaf's other NIC may be a candidate too, and two candidates sampling each
    # other split nothing), one direction for every part before the other (a small leaf
    # may have one uplink: its candidates share it), new partners first, then old ones
    # (the server pass runs in reverse order: the part last to find room as a client is
    # first as a server). RoCE: a same-leaf partner, proven or not, before one across
    # leaves (a failing cross-leaf sample beside other failures at its leaf is possible
    # ECMP contention and counts for nobody)
    proven = b.view.fabric == "infiniband"
    for direction, order in (("client", nics), ("server", nics[::-1])):
        for nic in order:
            now = {n for t in mine[nic] for n in t.nodes}
            before = len(mine[nic])
            plan(nic, used=set(used[nic]) | now, proven=proven, directions=(direction,))
            if len(mine[nic]) == before and used[nic]:
                plan(nic, used=now, proven=proven, directions=(direction,))
    # ... then, for parts whose block found no room across leaves, a local partner that
    # passed elsewhere (``inference.flaky`` sets a failing partner's samples aside)
    for nic in nics:
        if not mine[nic]:
            plan(nic)
    groups: list[tuple[str, list[Test]]] = []
    for nic in nics:
        tests = mine[nic]
        if len(tests) == 1:  # one partner only: it also runs the other way
            t = tests[0]
            back = sub.add_flow(t.nodes[1], t.nodes[0], b.view.topology.nics[nic].rail,
                                "confirm")
            tests = tests + [back] if back is not None else tests
        used[nic].update(n for t in tests for n in t.nodes)
        groups.append((nic, tests))
    for link in links:
        start = len(sub.tests)
        if b.view.fabric == "infiniband":
            plan_link_probes((), (link,), sub, good_nics, seed=seed, retest=False,
                             later=False)
        else:  # RoCE: flows aimed at the link, pinned onto it by their learned paths
            plan_roce_link_probes((link,), sub, good_nics, seed=seed, per_link=2)
        groups.append((str(Link.of(*link)), sub.tests[start:]))
    return groups


def _sample(b: RoundBuilder, t: Test, part: str, wave: int) -> Test:
    """A recheck sample of ``part``: a short test in ``wave``."""
    return b.add_in_wave(t, wave, recheck_of=part, duration_s=b.policy.recheck_duration_s)
