"""Attribution: which node, NIC or link explains the failing observations, with evidence.

Passing observations are trusted (noise only ever makes a healthy test look *bad*), so anything a
passing test touched is exonerated: its nodes, its NICs and the links it surely crossed (the
route on InfiniBand; on RoCE only links every equal-cost path shares). Each failing observation
is then explained by the components it touched that are *not* exonerated, and a greedy minimum
hitting set picks the fewest explanations (nodes first, then NICs, then links). A failure with
nothing left to blame is noise (a glitch). A component is only **bad** with enough independent
evidence (see :func:`infer`); otherwise it is a **suspect** and the planner confirms it.

:func:`infer` is a pipeline: :data:`RULES`, an ordered tuple of named rules, each run in turn
over one working state (:class:`~fabriccheck.inference.attribute_work.Work`). A new rule is a
function of that state (:mod:`~fabriccheck.inference.attribute_rules`, or a module of its own)
plus one line in :data:`RULES`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fabriccheck.inference.attribute_rules import (
    beyond_chance,
    beyond_noise,
    co_suspects,
    collect_unreachable,
    exonerate,
    explain_failures,
    explained_by_bad_partners,
    flakiness,
    intra,
    judge_devices,
    judge_hangs,
    localize,
    nic_rival_links,
    note_rivals,
    pin_failures,
    rejudge_across_bad_links,
)
from fabriccheck.inference.attribute_work import Work
from fabriccheck.inference.intra import is_solo
from fabriccheck.inference.state import Inference
from fabriccheck.models import Observation
from fabriccheck.topology.view import FabricView

#: attribution's rules, in the order :func:`infer` runs them over one :class:`Work`
RULES: tuple[tuple[str, Callable[[Work], None]], ...] = (
    ("exonerate", exonerate),  # passing tests clear their nodes, NICs and links
    ("unreachable", collect_unreachable),
    ("hangs", judge_hangs),
    ("failures", explain_failures),  # each failure's candidates; the hitting set; glitches
    ("pins", pin_failures),  # the node a failure pins; dark switches; passes per node
    ("devices", judge_devices),  # the nodes and NICs the hitting set chose
    ("rivals", note_rivals),  # a suspect NIC's failures that links explain as well
    ("links", localize),
    ("beyond-noise", beyond_noise),
    ("bad-links", rejudge_across_bad_links),  # a bad NIC's failures a bad link explains
    ("bad-partners", explained_by_bad_partners),  # ... or a bad partner does
    ("chance", beyond_chance),  # convictions the run's noise could explain: suspects
    ("co-suspects", co_suspects),
    ("nic-rival-links", nic_rival_links),
    ("flakiness", flakiness),
    ("intra", intra),  # the 1x tests, judged apart
)


def infer(
    observations: Sequence[Observation],
    view: FabricView,
    *,
    node_min_fails: int = 4,
    confirmed_min_fails: int = 3,
    screen_links: bool = False,
) -> Inference:
    """Attribute every failing observation so far (pure; call again after every round).

    Rules (docs/how-it-finds-faults.md "Confirm before blaming"):

    - **hung**: a node that never finished a test and hung with at least two different partners;
      one hang is a suspect.
    - **unreachable**: the executor named it; not drained.
    - **bad node**: no passing test at all, failing with at least two partners on at least two
      rails and ``node_min_fails`` tests, or a failed confirmation against a known-good node.
    - **bad NIC**: never passed, failing with at least two partners and a failed confirmation
      against a known-good node (``confirmed_min_fails`` failing tests in all).
    - **links**: see :func:`fabriccheck.inference.localize.localize_links`; with
      ``screen_links``, every switch link is also screened for failing one test in five
      (:mod:`fabriccheck.inference.link_screen`).

    They run as :data:`RULES`, in order, over one :class:`Work`.

    Returns
    -------
    Inference
    """
    w = Work([o for o in observations if not is_solo(o)],  # 1x: judged apart
             [o for o in observations if is_solo(o)], view, node_min_fails, confirmed_min_fails,
             screen_links)
    for _name, rule in RULES:
        rule(w)
    return w.inf
