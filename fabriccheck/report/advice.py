"""What the operator should do next: the headline and the concrete steps and commands (pure).

The report's first screen is built from :func:`headline` and :func:`next_steps`: one line saying
what is broken, then one step per problem (drain, check a NIC, replace a cable, bring a node
back) with shell commands that can be pasted as they are. Commands are suggestions for the common
schedulers and tools (Slurm ``scontrol``, Kubernetes ``kubectl``, ``mlxlink``/``ibstat``,
``ethtool``); fabriccheck's ``actions`` layer is what drains automatically.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from fabriccheck.models import BAD, SUSPECT, RunResult, link_key, nic_node
from fabriccheck.report.view import HUNG, UNREACHABLE, RunView, compact, natural_key

#: at most this many per-node commands before they are merged into one hostlist command
PER_NODE_LIMIT = 12
#: more bad links than this are one step (a list) instead of one step each
LINK_STEPS_MAX = 3


@dataclass(frozen=True)
class Step:
    """One thing to do; ``level``: ``bad`` / ``hung`` / ``unreachable`` / ``suspect`` / ``info``."""

    level: str
    title: str
    detail: str = ""
    commands: tuple[str, ...] = ()
    targets: tuple[str, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class Headline:
    level: str  # ok | bad | unreachable | suspect
    text: str
    verdict: str  # the one-word answer: GO / DRAIN / FIX / CANNOT TEST / WATCH


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def headline(result: RunResult, view: RunView) -> Headline:
    """The one line at the top of the page: what is broken, or that nothing is."""
    parts = []
    if result.drain:
        parts.append(f"{_plural(len(result.drain), 'node')} to drain")
    if result.bad_links:
        parts.append(f"{_plural(len(result.bad_links), 'link')} to repair")
    if result.link_suspects:
        parts.append(f"{_plural(len(result.link_suspects), 'suspect link set')}")
    if result.unreachable:
        parts.append(f"{_plural(len(result.unreachable), 'node')} unreachable")
    suspects = view.nodes_in(SUSPECT)
    if suspects and not parts:
        parts.append(f"{_plural(len(suspects), 'suspect node')} (not confirmed)")
    gate = result.mode == "gate"
    if result.drain or result.bad_links:
        verdict = "DO NOT START" if gate else ("DRAIN" if result.drain else "REPAIR")
        return Headline(BAD, ", ".join(parts), verdict)
    if result.unreachable:
        return Headline(UNREACHABLE, ", ".join(parts), "CANNOT TEST")
    if parts:
        return Headline(SUSPECT, ", ".join(parts), "WATCH")
    n = len(view.run_nodes)
    return Headline("ok", f"all {_plural(n, 'node')} healthy", "GO" if gate else "HEALTHY")


def _reason_of(view: RunView, node: str) -> str:
    return view.node_reason.get(node, "")


def drain_commands(nodes: list[str], reason: str, scheduler: str = "slurm") -> tuple[str, ...]:
    """The commands of one scheduler (``slurm`` or ``kubernetes``) that take ``nodes`` out.

    >>> drain_commands(["node-002", "node-001"], "bad NIC")[0]
    "scontrol update NodeName='node-[001-002]' State=DRAIN Reason='fabriccheck: bad NIC'"
    >>> drain_commands(["node-001"], "bad NIC mlx5_3")[0]
    "scontrol update NodeName=node-001 State=DRAIN Reason='fabriccheck: bad NIC mlx5_3'"
    >>> drain_commands(["node-002", "node-001"], "bad NIC", "kubernetes")[0]
    'kubectl cordon node-001 node-002'
    """
    if scheduler == "kubernetes":
        names = " ".join(sorted(nodes, key=natural_key))
        return (f"kubectl cordon {names}",
                f"kubectl taint nodes {names} fabriccheck.io/health=bad:NoSchedule")  # fmt: skip
    return (
        f"scontrol update NodeName={shlex.quote(compact(nodes))} State=DRAIN "
        f"Reason={shlex.quote('fabriccheck: ' + reason)}",
    )


def _nic_checks(nic: str, fabric: str) -> tuple[str, ...]:
    node, _, dev = nic.partition("/")
    q = shlex.quote
    if dev.startswith("mlx"):
        cmds = [
            f"ssh {q(node)} ibstat {q(dev)}",
            f"ssh {q(node)} mlxlink -d {q(dev)} -m -c -e",
        ]
        if fabric == "roce":
            cmds.append(f"ssh {q(node)} rdma link show {q(dev + '/1')}")
        return tuple(cmds)
    return (
        f"ssh {q(node)} ip -s link show {q(dev)}",
        f"ssh {q(node)} ethtool -S {q(dev)}",
    )


def _link_checks_many(ends: list[str], fabric: str) -> tuple[str, ...]:
    if fabric == "infiniband":
        pattern = " ".join(f"-e {shlex.quote(e)}" for e in ends[:30])
        return (f"iblinkinfo | grep -F {pattern}", "ibdiagnet --pc   # port error counters")
    return ("# switch CLI: show interface counters / optics on these ports",)


def _link_checks(a: str, b: str, fabric: str) -> tuple[str, ...]:
    if fabric == "infiniband":
        return (
            f"iblinkinfo | grep -F -e {shlex.quote(a)} -e {shlex.quote(b)}",
            "ibdiagnet --pc   # port error counters on every link",
        )
    return (f"# switch CLI: show interface counters / optics on the {a} <-> {b} ports",)


def describe_links(links: list[tuple[str, str]], limit: int = 6) -> str:
    """Links in few words: a full bipartite set as ``A ↔ B`` hostlists, else the first few.

    >>> describe_links([("leaf-0-2", "spine-0"), ("leaf-0-2", "spine-1")])
    'leaf-0-2 ↔ spine-[0-1]'
    """
    keys = {link_key(a, b) for a, b in links}
    left = sorted({a for a, _ in keys}, key=natural_key)
    right = sorted({b for _, b in keys}, key=natural_key)
    if len(keys) > 1 and len(keys) == len(left) * len(right) and not set(left) & set(right):
        return f"{compact(left, 60)} ↔ {compact(right, 60)}"
    shown = ", ".join(f"{a} ↔ {b}" for a, b in sorted(keys)[:limit])
    return shown + (f" … and {len(keys) - limit} more" if len(keys) > limit else "")


def _drain_why(node: str, result: RunResult, view: RunView) -> str:
    nics = [n.split("/", 1)[1] for n in result.bad_nics if nic_node(n) == node]
    if nics:
        return "bad NIC " + ", ".join(nics)
    if node in result.hung or view.node_state.get(node) == HUNG:
        return "tests hung"
    if node in result.bad_nodes:
        return "slow with every partner"
    return (_reason_of(view, node) or "failed")[:80]


def _drain_steps(result: RunResult, view: RunView) -> list[Step]:
    """Drain commands per scheduler, never mixed in one block: the run's scheduler only, or
    Slurm then Kubernetes as two steps when the run did not name one."""
    nodes = sorted(result.drain, key=natural_key)
    why = {n: _drain_why(n, result, view) for n in nodes}
    detail = "; ".join(f"{n}: {why[n]}" for n in nodes[:PER_NODE_LIMIT])
    if len(nodes) > PER_NODE_LIMIT:
        detail += f"; … and {len(nodes) - PER_NODE_LIMIT:,} more (verdict table below)"
        slurm = drain_commands(nodes, "fabric health check failed")
    else:
        slurm = tuple(drain_commands([n], why[n])[0] for n in nodes)
    kubernetes = drain_commands(nodes, "", "kubernetes")
    title = f"Drain {_plural(len(nodes), 'node')}: {compact(nodes, 120)}"
    scheduler = (result.extra.get("actions") or {}).get("backend")
    if scheduler == "kubernetes":
        return [Step(BAD, title, detail, kubernetes, tuple(nodes))]
    steps = [Step(BAD, title, detail, slurm, tuple(nodes))]
    if scheduler != "slurm":
        steps.append(Step(BAD, f"Or on Kubernetes: cordon {_plural(len(nodes), 'node')}",
                          "the same nodes, for a Kubernetes cluster", kubernetes, tuple(nodes)))
    return steps


def retest_command(node: str, view: RunView, topology: str) -> str:
    """A gate over ``node`` and a healthy partner, to confirm a repair (empty: no partner).

    The partner is a healthy node of the same leaf group when there is one, so the re-test
    crosses as few links as possible.
    """
    if not topology:
        return ""
    group = view.groups[view.group_of[node]].nodes if node in view.group_of else ()
    healthy = [n for n in view.run_nodes if view.node_state[n] == "healthy"]
    near = [n for n in group if view.node_state.get(n) == "healthy"]
    partner = (near or healthy or [None])[0]
    if partner is None:
        return ""
    nodes = shlex.quote(f"{node},{partner}")
    return f"fabriccheck gate --topology {shlex.quote(topology)} {nodes}  # + --executor etc."


def next_steps(
    result: RunResult, view: RunView, fabric: str = "", topology: str = ""
) -> list[Step]:
    """The steps for the first screen, most urgent first.

    ``topology`` (the topology's file or name) enables the re-test commands.
    """
    steps: list[Step] = []
    hung = set(result.hung) | set(view.nodes_in(HUNG))
    if result.drain:
        steps.extend(_drain_steps(result, view))
    steps += _nic_steps(result, view, fabric, topology)
    steps += _node_steps(result, view, topology, hung)
    steps += _hung_steps(view, hung)
    steps += _link_steps(result, fabric)
    steps += [_link_suspect_step(sus, fabric) for sus in result.link_suspects]
    if result.unreachable:
        steps.append(_unreachable_step(result))
    suspects = [n for n in view.nodes_in(SUSPECT) if n not in result.drain]
    if suspects:
        steps.append(_watch_step(suspects))
    steps += _notes(result)
    return steps


def _nic_steps(result: RunResult, view: RunView, fabric: str, topology: str) -> list[Step]:
    """One step per bad NIC (at most PER_NODE_LIMIT): check it, then re-test its node."""
    return [
        Step(
            BAD,
            f"Check NIC {nic} (cable, transceiver, firmware), then re-test its node",
            _reason_of(view, nic_node(nic)),
            tuple(c for c in (*_nic_checks(nic, fabric),
                              retest_command(nic_node(nic), view, topology)) if c),  # fmt: skip
            (nic,),
        )
        for nic in sorted(result.bad_nics, key=natural_key)[:PER_NODE_LIMIT]
    ]


def _node_steps(result: RunResult, view: RunView, topology: str, hung: set[str]) -> list[Step]:
    """One step per node bad on every rail that no bad NIC or hang explains: check inside it."""
    bad_nic_nodes = {nic_node(n) for n in result.bad_nics}
    node_only = [
        n for n in sorted(result.bad_nodes, key=natural_key)
        if n not in bad_nic_nodes and n not in hung
    ]  # fmt: skip
    steps = []
    for n in node_only[:PER_NODE_LIMIT]:
        q = shlex.quote(n)
        steps.append(
            Step(
                BAD,
                f"Check node {n}: every rail slow → intra-node path (PCIe, NVLink, GPU)",
                _reason_of(view, n),
                tuple(c for c in (
                    f"ssh {q} nvidia-smi topo -m",
                    f"ssh {q} 'dmesg -T | grep -iE \"xid|mlx5|pcie\"'",
                    retest_command(n, view, topology)) if c),  # fmt: skip
                (n,),
            )
        )
    return steps


def _hung_steps(view: RunView, hung: set[str]) -> list[Step]:
    """One step per node whose tests hung: look for stuck processes."""
    steps = []
    for n in sorted(hung, key=natural_key)[:PER_NODE_LIMIT]:
        q = shlex.quote(n)
        steps.append(
            Step(
                HUNG,
                f"Node {n}: its tests hung and were killed — look for stuck processes",
                _reason_of(view, n),
                (
                    f"ssh {q} 'pgrep -af \"_perf|ib_write_bw|iperf3\"'",
                    f"ssh {q} 'dmesg -T | tail -50'",
                ),
                (n,),
            )
        )
    return steps


def _link_steps(result: RunResult, fabric: str) -> list[Step]:
    """One step per bad link, or a single listing step when there are more than LINK_STEPS_MAX."""
    links = sorted(link_key(*lk) for lk in result.bad_links)
    if len(links) > LINK_STEPS_MAX:
        listed = ", ".join(f"{a} ↔ {b}" for a, b in links[:40])
        more = f" … and {len(links) - 40} more (verdict table)" if len(links) > 40 else ""
        ends = sorted({e for lk in links for e in lk}, key=natural_key)
        return [Step(
            BAD, f"Repair {len(links)} links: reseat or replace their cables/optics",
            f"{listed}{more}. Localized from the routes of failing and passing tests; no node "
            "is drained for them. Many bad links at once can also mean a bad spine or noise: "
            "check the switch first.",
            _link_checks_many(ends, fabric),
            tuple(f"{a} -- {b}" for a, b in links),
        )]  # fmt: skip
    return [
        Step(
            BAD,
            f"Repair link {a} ↔ {b}: reseat or replace the cable/optics",
            _ported(result, a, b) + "localized from the routes of failing and passing tests; "
            "no node is drained for it",
            _link_checks(a, b, fabric),
            (f"{a} -- {b}",),
        )
        for a, b in links
    ]


def _ported(result: RunResult, a: str, b: str) -> str:
    """``cable leaf-1 port 17 ↔ spine-0 port 3; `` from ``extra["cables"]`` ("" without ports)."""
    for e in result.extra.get("cables") or ():
        if sorted(e.get("link") or ()) == sorted((a, b)) and (e.get("a_port") or e.get("b_port")):
            return f"cable {str(e.get('cable', '')).replace(' -- ', ' ↔ ')}; "
    return ""


def _link_suspect_step(sus: dict[str, Any], fabric: str) -> Step:
    """The step for one ECMP suspect set: one of its links is bad, check their counters."""
    cands = [(str(c[0]), str(c[1])) for c in sus.get("candidates", ()) if len(c) == 2]
    evidence = [str(e) for e in sus.get("evidence", ())]
    values = [str(v) for v in sus.get("values", ())]
    seen = ", ".join(
        f"{t} ({v})" if v else t
        for t, v in zip(evidence, values + [""] * len(evidence), strict=False)
    )
    detail = (
        "ECMP hides which path a flow took: this is the smallest set of links that explains "
        "the failing flows; no node is drained for it. Check these ports' error counters."
        + (f" Failing tests: {seen}." if seen else "")
    )
    checks = ()
    if len(cands) <= 4:
        checks = tuple(c for a, b in cands for c in _link_checks(a, b, fabric))
    return Step(
        SUSPECT,
        f"One of {_plural(len(cands), 'link')} is bad: {describe_links(cands)}",
        detail,
        checks,
        tuple(f"{a} -- {b}" for a, b in cands),
    )


def _unreachable_step(result: RunResult) -> Step:
    """The step that brings the unreachable nodes back (they were not tested)."""
    nodes = sorted(result.unreachable, key=natural_key)
    return Step(
        UNREACHABLE,
        f"Bring back {_plural(len(nodes), 'node')}: {compact(nodes, 120)} — not tested",
        "could not be reached (ssh / Ray agent): check power, BMC, network; then re-test",
        tuple(f"ping -c 2 {shlex.quote(n)}" for n in nodes[:3]),
        tuple(nodes),
    )


def _watch_step(suspects: list[str]) -> Step:
    """The step that keeps an eye on suspect nodes (failed once, not confirmed, not drained)."""
    return Step(
        SUSPECT,
        f"Watch {_plural(len(suspects), 'suspect node')}: {compact(suspects, 120)}",
        "failed once but not confirmed by an independent test: not drained",
        (),
        tuple(suspects),
    )


def _notes(result: RunResult) -> list[Step]:
    """What the run could not settle (from the orchestrator's extra keys), as info steps."""
    extra = result.extra
    notes = [Step("info", w) for w in result.fabric_warnings]
    notes += [Step("info", f"Node-local warning on {w['target']}: {w['part']}: {w['what']}",
                   str(w.get("fix") or ""), (), (w["target"].split("/", 1)[0],))
              for w in extra.get("warnings") or ()]
    named = [str(n) for n in extra.get("log_suspects") or ()]
    if named:
        hcas = ", ".join(str(h) for h in extra.get("log_hcas") or ())
        found = [n for n in named if n in result.drain]
        notes.append(Step(
            "info", f"The job log named {compact(named, 120)}"
            + (f" (HCAs {hcas})" if hcas else ""),
            f"confirmed bad: {compact(found, 120)}" if found
            else "none of them failed here: the timeout was probably not the fabric",
        ))  # fmt: skip
    if extra.get("budget_exhausted"):
        why = str(extra.get("stop_reason") or "time or test budget reached")
        notes.append(Step("info", f"Stopped early: {why} — some suspects may be unconfirmed",
                          "re-run a sweep over the suspects to settle them"))  # fmt: skip
    untested = [str(n) for n in extra.get("untested") or ()]
    if untested:
        title = f"{_plural(len(untested), 'node')} not tested: {compact(untested, 120)}"
        notes.append(Step("info", title, "", (), tuple(untested)))
    for sus in extra.get("unconfirmed_link_failures") or ():
        cands = [(str(c[0]), str(c[1])) for c in sus.get("candidates", ()) if len(c) == 2]
        if cands:
            notes.append(Step(
                "info", f"Seen once, not confirmed: one of {_plural(len(cands), 'link')} "
                f"{describe_links(cands)}",
                "a single failing flow no other test reproduced; nothing to do unless it recurs",
            ))  # fmt: skip
    glitches = [str(t) for t in extra.get("glitches") or ()]
    if glitches:
        shown = ", ".join(glitches[:8]) + (" …" if len(glitches) > 8 else "")
        notes.append(Step("info", f"{_plural(len(glitches), 'transient failure')} did not "
                                  "reproduce (treated as glitches)", shown))  # fmt: skip
    return notes
