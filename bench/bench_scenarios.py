"""Scenario benchmark (issue 12): verdict quality over the scenario families of tests/scenarios.py.

Every family runs on IB and RoCE rail-optimized and IB 2- and 3-tier fat-trees over several
seeds, through the public API only (``orchestrator.run`` on a ``SimExecutor``). One table per
family, one row per topology kind (and mode), then a summary across families. Columns:

- **recall**: injected node/NIC/hang faults found over those injected in scope. A node fault
  (slow, hung) or a NIC fault (degraded, down) counts as found when its *node* is in ``drain``
  (the exact NIC need not be named); an unreachable node when it is in ``unreachable``; an
  intermittent NIC (``intermittent``) when its node is drained or it (or its node) is reported
  flaky.
- **false drains**: healthy nodes in ``drain`` (total, and runs with any).
- **silent**: runs that "pass silently": ``healthy`` true, or the docs/design.md exit code 0,
  while a fault was injected in scope or anything is left unjudged (suspects, link suspects,
  untested nodes/NICs, or a NIC no completed test touched that the result does not list); shown
  as ``total (h/e)``: h runs said ``healthy`` true, e runs would exit 0.
- **exit**: the exit code docs/design.md gives, computed from the result's fields: 1 when
  anything is bad, flaky, suspect, unreachable or a fabric warning; else 3 when anything is
  untested; else 0. Shown as counts ``0/1/3``.
- **false flaky**: parts called flaky that no injected fault makes intermittent (a NIC behind
  a half-speed leaf, a link a probe crossed beside the flapping one), summed over runs.
- **right**: runs with every injected device fault found, no false drain, nothing falsely
  called flaky and the right exit (1
  when a fault is in scope, 0 when not). ``fabric_slow``: right is no drains and exit 1 with a
  fabric warning. "right" judges what an operator acts on (drains, exit); where links and
  switches are localized is in the next two columns.
- **links x+s/t**: injected switch-link faults named exactly (``bad_links``) + inside a reported
  candidate set of <= 2 links / injected (summed over runs; a flaky NIC's link is not counted).
- **switch**: ``switch_down`` runs whose spine/leaf is named in ``bad_switches``.
- **untested NICs**: runs with NICs in scope that no completed test touched and that the
  result does not list (their node not drained, hung or unreachable).
- **rounds** mean/max (the whole run: the 1x/2x/4x/8x ladder alone is 8 rounds); **over bar**:
  runs whose last verdict (``verdict_rounds``: every bad, hung, unreachable and link verdict)
  came later than issue 12 allows (round 3; 5 when a link fault is injected); **CPU s** the
  whole run (simulator included), summed.
- summary **exit ≠ reported**: runs whose result carries its own ``exit_code`` (attribute or
  ``extra``) different from the one computed here ('-' while results carry none).

Run: ``python bench/bench_scenarios.py [--seeds N] [--first-seed K] [--quick] [FAMILY ...]``
(default 5 seeds from 0; ``--quick``: 1 seed, no 1,024-node row; ``--first-seed`` picks seeds
nobody looked at for a held-out check).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fabriccheck.executors.sim import SimExecutor  # noqa: E402
from fabriccheck.faults import FaultSet  # noqa: E402
from fabriccheck.models import link_key, nic_node  # noqa: E402
from fabriccheck.orchestrator import run  # noqa: E402
from fabriccheck.policy import BisectPolicy, GatePolicy, SweepPolicy  # noqa: E402
from fabriccheck.specs import resolve_spec  # noqa: E402
from tests.scenarios import FAMILIES, TOPOLOGY_KINDS, Scenario, scenario  # noqa: E402

POLICIES = {"sweep": SweepPolicy, "gate": GatePolicy, "bisect": BisectPolicy}


@dataclass
class Score:
    """One run, judged against its scenario."""

    truth: int = 0
    found: int = 0
    drained: int = 0
    false_drains: int = 0
    false_flaky: int = 0  # parts called flaky that no injected fault makes intermittent
    silent: bool = False
    silent_healthy: bool = False  # res.healthy true while a fault is in scope / unjudged
    silent_exit0: bool = False  # docs/design.md exit 0 while a fault is in scope / unjudged
    exit_code: int = 0
    right: bool = False
    links: tuple[int, int, int] = (0, 0, 0)
    switch: bool | None = None
    unlisted_nics: int = 0
    rounds: int = 0
    cpu_s: float = 0.0
    over_bar: bool = False  # more rounds than the bar (3; 5 with link faults)
    exit_mismatch: bool | None = None  # the result's own exit_code differs (None: not given)
    error: str = ""


# ---- reading a result (fields the verdict rewrite may add are read where they are) ------------
def listed(res, name: str) -> list:
    """A result field as a list: the attribute when set, else ``extra[name]``, else []."""
    value = getattr(res, name, None)
    if value is None or callable(value):
        value = res.extra.get(name)
    return list(value or [])


def names(items: Iterable) -> set[str]:
    """Component names from a list of strings or of dicts (``name`` / ``component`` / ``nic``)."""
    out = set()
    for x in items:
        if isinstance(x, dict):
            x = x.get("name") or x.get("component") or x.get("nic") or x.get("node")
        if isinstance(x, str):
            out.add(x)
    return out


def flaky(res) -> set[str]:
    return names(listed(res, "flaky")) | {v.name for v in res.verdicts if v.state == "flaky"}


def untested(res) -> set[str]:
    return names(listed(res, "untested")) | {v.name for v in res.verdicts
                                             if v.state == "untested"}


def design_exit(res) -> int:
    """The exit code docs/design.md gives, from the result's fields."""
    bad = (res.drain or res.bad_nodes or res.bad_nics or res.bad_links or res.hung
           or listed(res, "bad_switches") or flaky(res))
    if bad or res.suspects or res.link_suspects or res.unreachable or res.fabric_warnings:
        return 1
    return 3 if untested(res) else 0


def unlisted_untested_nics(res, sc: Scenario) -> int:
    """NICs in scope no completed test touched, not listed and not on a drained/lost node."""
    touched = {e for o in res.observations if str(o.status) in ("pass", "fail")
               for f in o.test.flows for e in (f.src, f.dst)}
    covered = set(res.drain) | set(res.unreachable) | set(res.hung) | untested(res)
    return sum(1 for n in sc.nodes if n not in covered
               for nic in sc.topology.nodes[n].nics
               if nic.endpoint not in touched and nic.endpoint not in covered)


# ---- scoring ---------------------------------------------------------------------------------
def device_truth(sc: Scenario, fs: FaultSet) -> tuple[set[str], set[str], set[str]]:
    """(nodes to drain, unreachable nodes, intermittent NIC endpoints) in scope."""
    scope = set(sc.nodes)
    drain = set(fs.drain_nodes()) & scope
    return drain, set(fs.unreachable_nodes()) & scope, {
        n for n in sc.flaky_nics if nic_node(n) in scope}


def link_score(res, sc: Scenario, fs: FaultSet) -> tuple[int, int, int]:
    """(exact, in a candidate set of <= 2, injected) for switch-link faults."""
    if sc.expect == "fabric_warning":
        return 0, 0, 0
    mine = {link_key(n, sc.topology.attachment[n]) for n in sc.flaky_nics}
    truth = {link_key(*k) for k in fs.bad_links()} - mine
    # an intermittent link is named when it is flaky (a verdict of its own, docs/design.md)
    named = {link_key(*k) for k in res.bad_links} | {
        link_key(*k.split(" -- ")) for k in flaky(res) if " -- " in k}
    exact = truth & named
    small = [{link_key(*c) for c in s.get("candidates", [])} for s in res.link_suspects]
    # an intermittent link left undecided is a suspect of its own ("a -- b")
    undecided = [{link_key(*x.split(" -- "))} for x in names(res.suspects) if " -- " in x]
    small += [set().union(*undecided)] if undecided else []
    in_set = {k for k in truth - exact if any(k in s and len(s) <= 2 for s in small)}
    return len(exact), len(in_set), len(truth)


def false_flaky(res, sc: Scenario, fs: FaultSet) -> set[str]:
    """Parts called flaky that no injected fault explains: not an intermittent NIC (or its
    node), not an injected link, not a part of a node with a device fault."""
    links = {f"{a} -- {b}" for a, b in (link_key(*k) for k in fs.bad_links())}
    faulty = set(fs.drain_nodes()) | {nic_node(n) for n in sc.flaky_nics}
    return {x for x in flaky(res) if x not in links and x not in sc.flaky_nics
            and (" -- " in x or nic_node(x) not in faulty)}


def score(sc: Scenario, fs: FaultSet, res, cpu_s: float) -> Score:
    drain_t, unreach_t, flaky_t = device_truth(sc, fs)
    drain, fl = set(res.drain), flaky(res)
    found = len(drain & drain_t) + len(set(res.unreachable) & unreach_t) + sum(
        1 for n in flaky_t if nic_node(n) in drain or n in fl or nic_node(n) in fl)
    truth = len(drain_t) + len(unreach_t) + len(flaky_t)
    false = drain - drain_t - {nic_node(n) for n in flaky_t}
    code, unlisted = design_exit(res), unlisted_untested_nics(res, sc)
    false_fl = len(false_flaky(res, sc, fs))
    injected = sc.expect != "healthy"
    unjudged = bool(res.suspects or res.link_suspects or untested(res) or unlisted)
    flagged = injected or unjudged
    silent_h, silent_0 = bool(res.healthy) and flagged, code == 0 and flagged
    if sc.expect == "fabric_warning":
        right = not drain and code == 1 and bool(res.fabric_warnings)
    else:
        right = (found == truth and not false and not false_fl
                 and code == (1 if injected else 0) and not (silent_h or silent_0))
    switch = None
    if sc.switch is not None:
        switch = sc.switch in names(listed(res, "bad_switches"))
    reported = getattr(res, "exit_code", None)
    reported = res.extra.get("exit_code") if reported is None else reported
    bar = 5 if fs.bad_links() else 3
    return Score(truth=truth, found=found, drained=len(drain), false_drains=len(false),
                 false_flaky=false_fl,
                 silent=silent_h or silent_0, silent_healthy=silent_h, silent_exit0=silent_0,
                 exit_code=code, right=right, links=link_score(res, sc, fs), switch=switch,
                 unlisted_nics=int(bool(unlisted)), rounds=res.rounds, cpu_s=cpu_s,
                 over_bar=max(res.extra.get("verdict_rounds", {}).values(), default=0) > bar,
                 exit_mismatch=None if reported is None else reported != code)


def run_one(sc: Scenario, seed: int) -> Score:
    """Run ``sc`` through the public API and judge it; a crash is recorded, not raised."""
    topo, faults, nodes, mode = sc
    spec = resolve_spec(None, topo)
    fs = FaultSet.from_dict(faults)
    c0 = time.process_time()
    try:
        res = run(mode, nodes, topo, spec, SimExecutor(topo, spec, fs, seed=seed),
                  POLICIES[mode](mode=mode, seed=seed), log_suspects=sc.log_suspects)
    except Exception as exc:  # noqa: BLE001 - a crash is a measured outcome here
        return Score(error=f"{type(exc).__name__}: {exc}"[:120],
                     cpu_s=time.process_time() - c0)
    return score(sc, fs, res, time.process_time() - c0)


# ---- tables ----------------------------------------------------------------------------------
TITLES = {
    "density": "5-10% of nodes faulty (node_slow 0.5-0.7, nic_degraded 0.25/0.5, nic_down, "
               "node_hang, node_unreachable), 16-256 nodes (+ one IB rail 1,024-node run)",
    "multi_per_node_leaf": "2-3 faults on one node (2 NICs + maybe slow); 1-3 faulty nodes and "
                           "a half-speed uplink on one leaf",
    "fabric_slow": "every link and NIC at 80% (link_degraded 0.8 on every link, attachment "
                   "links included); right = no drains, exit 1, a fabric warning",
    "noise_only": "no fault, jitter 3%, glitches 1-2%; right = exit 0, nothing unjudged",
    "switch_down": "every link of one spine down, or every uplink of one leaf at half speed",
    "intermittent": "one leaf uplink flapping (p 0.3-0.6) + one NIC failing ~1 test in 3 "
                    "(link_flapping 0.33 on its attachment link)",
    "small_jobs": "gate / bisect on 2-16 nodes of a 128-256-node fabric, 0-2 device faults "
                  "among them (bisect: log names the culprit half the time)",
    "odd_leaves": "odd leaf groups / pods and odd node counts (last leaf partial), 2-4 device "
                  "faults + one uplink degraded or down",
}


def silent(scores: list[Score]) -> str:
    """``total (healthy:true / exit 0)`` silent passes."""
    return (f"{sum(s.silent for s in scores)} ({sum(s.silent_healthy for s in scores)}/"
            f"{sum(s.silent_exit0 for s in scores)})")


HEAD = ("| rows | runs | recall | false drains | runs w/ false drain | false flaky | "
        "silent (h/e) | right | "
        "exit 0/1/3 | links x+s/t | switch | untested NICs | rounds mean/max | over bar | "
        "CPU s | crashed |")


@dataclass
class Tally:
    """Scores of one row (or family) of a table."""

    scores: list[Score] = field(default_factory=list)

    def row(self, label: str) -> str:
        ok = [s for s in self.scores if not s.error]
        if not ok:
            return f"| {label} | {len(self.scores)} |" + " - |" * 13 + f" {len(self.scores)} |"
        truth, found = sum(s.truth for s in ok), sum(s.found for s in ok)
        recall = f"{found / truth:.2f} ({found}/{truth})" if truth else "-"
        exits = "/".join(str(sum(s.exit_code == c for s in ok)) for c in (0, 1, 3))
        lx, ls, lt = (sum(s.links[i] for s in ok) for i in range(3))
        sw = [s.switch for s in ok if s.switch is not None]
        rounds = [s.rounds for s in ok]
        return (f"| {label} | {len(ok)} | {recall} | {sum(s.false_drains for s in ok)} | "
                f"{sum(s.false_drains > 0 for s in ok)} | {sum(s.false_flaky for s in ok)} | "
                f"{silent(ok)} | {sum(s.right for s in ok)}/{len(ok)} | {exits} | "
                f"{f'{lx}+{ls}/{lt}' if lt else '-'} | "
                f"{f'{sum(sw)}/{len(sw)}' if sw else '-'} | {sum(s.unlisted_nics for s in ok)} | "
                f"{sum(rounds) / len(rounds):.1f} / {max(rounds)} | "
                f"{sum(s.over_bar for s in ok)} | {sum(s.cpu_s for s in self.scores):.1f} | "
                f"{len(self.scores) - len(ok)} |")


def bench_family(family: str, seeds: int, big: bool, first: int = 0) -> Tally:
    """Run ``family`` on every topology kind over ``seeds`` seeds from ``first``; print its
    table."""
    rows: dict[str, Tally] = {}
    total = Tally()
    errors: list[str] = []
    jobs = [(kind, seed, None) for kind in TOPOLOGY_KINDS
            for seed in range(first, first + seeds)]
    if big and family == "density":
        jobs.append(("ib-rail", first, 1024))
    for kind, seed, n in jobs:
        sc = scenario(family, kind, seed, n)
        s = run_one(sc, seed)
        label = sc.label if n is None else f"{sc.label} 1,024 nodes"
        rows.setdefault(label, Tally()).scores.append(s)
        total.scores.append(s)
        if s.error:
            errors.append(f"{family}/{kind}/seed {seed}: {s.error}")
    print(f"\n### {family}: {TITLES.get(family, family)}\n")
    print(HEAD)
    print("|" + "---|" * (HEAD.count("|") - 1))
    for label in sorted(rows):
        print(rows[label].row(label))
    print(total.row("**all**"), flush=True)
    for e in errors:
        print(f"\ncrashed: {e}")
    return total


def mismatches(scores: list[Score]) -> str:
    """Runs whose reported ``exit_code`` differs from docs/design.md's; '-' when none reports
    one."""
    given = [s.exit_mismatch for s in scores if s.exit_mismatch is not None]
    return f"{sum(given)}/{len(given)}" if given else "-"


def summary(tallies: dict[str, Tally]) -> None:
    print("\n### summary across families\n")
    print("| family | runs | recall | drain precision | false drains (runs) | false flaky | "
          "silent (h/e) | right | rounds mean/max | over bar | exit ≠ reported | CPU s | "
          "crashed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    everything = Tally()
    for family, t in [*tallies.items(), ("**all**", everything)]:
        if t is not everything:
            everything.scores += t.scores
        ok = [s for s in t.scores if not s.error]
        truth, found = sum(s.truth for s in ok), sum(s.found for s in ok)
        drained = sum(s.drained for s in ok)
        false = sum(s.false_drains for s in ok)
        rounds = [s.rounds for s in ok] or [0]
        print(f"| {family} | {len(ok)} | {f'{found / truth:.3f}' if truth else '-'} | "
              f"{f'{(drained - false) / drained:.3f}' if drained else '-'} | "
              f"{false} ({sum(s.false_drains > 0 for s in ok)}) | "
              f"{sum(s.false_flaky for s in ok)} | {silent(ok)} | "
              f"{sum(s.right for s in ok)}/{len(ok)} | "
              f"{sum(rounds) / len(rounds):.1f} / {max(rounds)} | {sum(s.over_bar for s in ok)} | "
              f"{mismatches(ok)} | {sum(s.cpu_s for s in t.scores):.1f} | "
              f"{len(t.scores) - len(ok)} |")


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="first seed (held-out checks: seeds nobody tuned on)")
    ap.add_argument("--quick", action="store_true", help="1 seed, no 1,024-node row")
    ap.add_argument("families", nargs="*", metavar="FAMILY", help=", ".join(FAMILIES))
    args = ap.parse_args(argv)
    unknown = sorted(set(args.families) - set(FAMILIES))
    if unknown:
        ap.error(f"unknown family {unknown[0]!r}; one of {', '.join(FAMILIES)}")
    seeds = 1 if args.quick else args.seeds
    t0 = time.monotonic()
    tallies = {f: bench_family(f, seeds, not args.quick, args.first_seed)
               for f in args.families or FAMILIES}
    summary(tallies)
    print(f"\n{seeds} seed(s) from {args.first_seed} per family and topology kind; "
          f"wall {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
