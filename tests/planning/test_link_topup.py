"""The link top-up (issue 31): open switch links get the crossings asked for, in waves that
never put two flows on one link direction or one NIC (two flows sharing a link would fail for
that alone), nor make a NIC send or receive two at once."""

from __future__ import annotations

from collections import Counter

import pytest

from fabriccheck.inference.link_screen import crossings
from fabriccheck.models import FAIL, Observation, RawResult
from fabriccheck.planning.build import RoundBuilder
from fabriccheck.planning.link_topup import plan_link_topup
from fabriccheck.policy import SweepPolicy
from fabriccheck.specs import resolve_spec
from tests.planning.fabrics import make_view


def _crossed(view, tests) -> Counter:
    return Counter(lk for t in tests for lk in crossings(
        Observation(t, FAIL, value=1.0, raw=RawResult(t.test_id)), view))


@pytest.mark.parametrize("kind", ["rail-optimized", "fat-tree"])
def test_every_link_gets_its_crossings_in_clean_waves(kind):
    view = make_view(kind)
    b = RoundBuilder(9, view, resolve_spec(None, view.topology), SweepPolicy())
    need = dict.fromkeys(view.switch_links, 6)
    made = plan_link_topup(b, sorted(view.topology.attachment), need, waves=40)
    assert made == len(b.tests) > 0
    got = _crossed(view, b.tests)
    assert min(got[lk] for lk in view.switch_links) >= 6
    per_wave: dict[int, list] = {}
    for t in b.tests:
        assert t.params.wave >= 1 and t.params.duration_s == SweepPolicy().recheck_duration_s
        per_wave.setdefault(t.params.wave, []).append(t)
    for tests in per_wave.values():
        for end in ("src", "dst"):  # a NIC sends one flow and receives one: full duplex
            used = [getattr(f, end) for t in tests for f in t.flows]
            assert len(used) == len(set(used)), f"a NIC is the {end} of two flows of a wave"
        hops = [h for t in tests for f in t.flows for h in view.directed_hops(f.src, f.dst)
                if h[0] in view.topology.switches and h[1] in view.topology.switches]
        assert hops and len(hops) == len(set(hops)), "a link direction in two flows of a wave"


def test_only_the_links_asked_for_and_no_more_than_asked():
    view = make_view()
    spec = resolve_spec(None, view.topology)
    nics = sorted(view.topology.attachment)
    b = RoundBuilder(9, view, spec, SweepPolicy())
    assert plan_link_topup(b, nics, {}) == 0 and not b.tests
    one = sorted(view.switch_links)[0]
    b = RoundBuilder(9, view, spec, SweepPolicy())
    assert plan_link_topup(b, nics, {one: 4}) >= 2
    assert _crossed(view, b.tests)[one] >= 4 and len(b.tests) <= 4


def test_a_link_no_nic_in_scope_reaches_is_left_without_looping():
    view = make_view()
    b = RoundBuilder(9, view, resolve_spec(None, view.topology), SweepPolicy())
    leaf = "leaf-0-0"
    up = sorted(lk for lk in view.switch_links if leaf in lk)[0]
    far = [x for x, sw in view.topology.attachment.items() if sw != leaf]
    # NICs of one rail only on other leaves: nothing routes over leaf-0-0's uplink
    rail0 = [x for x in far if view.topology.nics[x].rail == 1]
    assert plan_link_topup(b, rail0, {up: 5}) == 0
