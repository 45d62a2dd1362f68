"""The human summary of a run: what was found, and why (evidence), printed with rich."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from fabriccheck.models import RunResult, Verdict


def print_node_warnings(warns: list[dict], console: Console, limit: int = 12) -> None:
    """Warn-level node-local findings, one line each: where, what, and the fix."""
    for w in warns[:limit]:
        fix = f" [dim]({w['fix']})[/]" if w.get("fix") else ""
        console.print(f"[yellow]warn[/] {w['target']} {w['part']}: {w['what']}{fix}",
                      highlight=False, soft_wrap=False)
    if len(warns) > limit:
        console.print(f"[yellow]warn[/] … {len(warns) - limit} more (see warnings in --json)",
                      highlight=False)


def print_summary(result: RunResult, console: Console) -> None:
    """Print the findings of ``result`` with their reasons and evidence test ids."""
    found = [v for v in result.verdicts if v.state not in ("healthy", "untested")]
    warns = result.extra.get("warnings") or []
    console.print(
        f"\n{_headline(result, found, warns)}: {result.mode} of {len(result.nodes)} nodes in "
        f"{result.rounds} rounds, {result.tests} tests, {result.test_seconds:.0f} s of test time "
        f"({result.wall_seconds:.2f} s wall)", highlight=False)
    order = {"bad": 0, "unreachable": 1, "suspect": 2}
    for v in sorted(found, key=lambda v: (order.get(v.state, 3), v.kind != "node", v.name)):
        if v.kind == "node" and v.reason.startswith("drained for its bad NIC"):
            continue  # said by the NIC line
        _print_finding(v, result.extra.get("cables") or (), console)
    for w in result.fabric_warnings:
        console.print(f"[yellow]fabric warning:[/] {w}", highlight=False)
    print_node_warnings(warns, console)
    _print_actions(result, console)
    _print_gaps(result, console)
    _print_run_pointers(result, console)


def _headline(result: RunResult, found: list[Verdict], warns: list[dict]) -> str:
    """The run's one-word outcome, marked up: healthy, faults found, fabric warnings,
    incomplete, warnings (with ``--strict``) or could not test."""
    untested = result.extra.get("untested") or []
    head = "[bold green]healthy[/]" if not found and not result.fabric_warnings else (
        "[bold red]faults found[/]" if found else "[bold yellow]fabric warnings[/]")
    if not found and not result.fabric_warnings and untested:
        head = "[bold yellow]incomplete[/]"  # nothing wrong seen, but not everything tested
    if warns and head == "[bold green]healthy[/]":
        head = (f"[bold yellow]warnings[/] ({len(warns)}, exit 1: --strict)"
                if result.extra.get("strict") else
                f"[bold green]healthy[/] with {len(warns)} node-local warning(s) (exit 0)")
    if not result.tests:
        head = "[bold yellow]could not test[/]"
    return head


def _print_finding(v: Verdict, cables: Sequence[dict], console: Console) -> None:
    """One finding: its state, kind and name, why, the cable it names, its evidence test ids."""
    state = {"bad": "[bold red]bad[/]", "suspect": "[yellow]suspect[/]",
             "unreachable": "[magenta]unreachable[/]"}.get(v.state, v.state)
    if v.kind == "node" and v.reason.startswith("hung"):
        state = "[bold red]hung[/]"
    name = describe_links(v.name) if v.kind == "link" else v.name
    console.print(f"  {state} {v.kind} [bold]{name}[/]", highlight=False)
    why = v.reason.removeprefix("hung: ")
    console.print(f"      why: {why}", highlight=False, soft_wrap=False)
    cable_line = describe_cables(cables, v.kind, v.name)
    if cable_line:
        console.print(f"      {cable_line}", highlight=False, markup=False)
    if v.evidence:
        more = f" (+{len(v.evidence) - 6} more)" if len(v.evidence) > 6 else ""
        console.print(f"      [dim]evidence: {', '.join(v.evidence[:6])}{more}[/]",
                      highlight=False)


def _print_actions(result: RunResult, console: Console) -> None:
    """What to act on: the nodes to drain, the unreachable ones, the link suspect sets."""
    if result.drain:
        console.print(f"[bold]drain:[/] {', '.join(result.drain)}", highlight=False)
    if result.unreachable:
        console.print(f"[bold]unreachable (not drained, check the host):[/] "
                      f"{', '.join(result.unreachable)}", highlight=False)
    for s in result.link_suspects:
        console.print(f"[bold]link suspects:[/] one of {s['size']} link(s) explains "
                      f"{len(s.get('evidence', []))} failing flows: "
                      + describe_links(" | ".join(" -- ".join(c) for c in s["candidates"])),
                      highlight=False)


def _print_gaps(result: RunResult, console: Console) -> None:
    """What the run did not settle: glitches taken as noise, untested parts, signals without
    a reading."""
    glitches = result.extra.get("glitches") or []
    if glitches:
        console.print(f"[dim]{len(glitches)} single low test(s) not reproduced: treated as "
                      f"noise, nobody blamed ({', '.join(glitches[:5])}"
                      f"{' …' if len(glitches) > 5 else ''})[/]", highlight=False)
    thin = (result.extra.get("link_screen") or {}).get("thin") or []
    if thin:
        counts = sorted(x[2] for x in thin)
        console.print(f"[dim]link screen: {len(thin)} switch link(s) passed every test that "
                      f"crossed them, but {counts[0]}-{counts[-1]} crossings are too few to rule "
                      "out failing one test in five (the top-up's rounds ran out; --json "
                      "link_screen.thin)[/]", highlight=False)
    untested = result.extra.get("untested") or []
    parts = [u for u in untested if not u.startswith("signal ")]
    readings = [u.removeprefix("signal ") for u in untested if u.startswith("signal ")]
    if parts:
        console.print(f"[yellow]untested:[/] {', '.join(parts[:10])}"
                      f"{' …' if len(parts) > 10 else ''} (no test finished)", highlight=False)
    if readings:
        console.print(f"[yellow]signals without a reading:[/] {', '.join(readings[:6])}"
                      f"{' …' if len(readings) > 6 else ''} ({len(readings)} in all; the "
                      "command failed or printed no value: see the signals in --json)",
                      highlight=False)


def _print_run_pointers(result: RunResult, console: Console) -> None:
    """The closing lines: link coverage, why the run stopped, its run id and report path."""
    cov_line = describe_coverage(result.extra.get("link_coverage"), result.extra.get("routing"))
    if cov_line:
        console.print(f"[dim]{cov_line}[/]", highlight=False)
    stop = result.extra.get("stop_reason")
    if stop:
        console.print(f"[yellow]stopped:[/] {stop}", highlight=False)
    if result.extra.get("run_id"):
        console.print(f"run id: {result.extra['run_id']} (fabriccheck report "
                      f"{result.extra['run_id']})", highlight=False, markup=False)
    if result.extra.get("report"):
        console.print(f"report: {result.extra['report']}", highlight=False)


def describe_coverage(cov: dict | None, routing: str | None = None) -> str:
    """One line: the switch links the run's tests crossed, per tier, and where routes came from.

    >>> describe_coverage({"exercised": 3, "total": 4, "share": 0.75, "tiers": {
    ...     "leaf-spine": {"exercised": 2, "total": 2, "share": 1.0},
    ...     "spine-core": {"exercised": 1, "total": 2, "share": 0.5}}}, "d-mod-k")
    'switch links crossed: 3/4 (75%; leaf-spine 100%, spine-core 50%), routes: d-mod-k'
    >>> describe_coverage({"exercised": 0, "total": 0, "share": 1.0})
    ''
    """
    if not cov or not cov.get("total"):
        return ""
    tiers = ", ".join(f"{name} {100 * t['share']:.0f}%"
                      for name, t in sorted((cov.get("tiers") or {}).items()))
    line = (f"switch links crossed: {cov['exercised']}/{cov['total']} "
            f"({100 * cov['share']:.0f}%{'; ' + tiers if tiers else ''})")
    return line + (f", routes: {routing}" if routing else "")


#: cables named per verdict line at most
CABLES_SHOWN = 4


def _cable(entry: dict) -> str:
    """``leaf-1 port 17 <-> spine-0 port 3`` from an ``extra["cables"]`` entry."""
    return str(entry.get("cable", "")).replace(" -- ", " <-> ")


def describe_cables(entries, kind: str, name: str) -> str:
    """The cable line under a link or switch verdict (``extra["cables"]``; "" when none).

    >>> e = {"verdict": "leaf-1 -- spine-0", "kind": "link", "cable":
    ...      "leaf-1 port 17 -- spine-0 port 3", "a_port": [17], "b_port": [3], "of": 1}
    >>> describe_cables([e], "link", "leaf-1 -- spine-0")
    'pull cable leaf-1 port 17 <-> spine-0 port 3'
    >>> describe_cables([{**e, "cable": "leaf-1 -- spine-0", "a_port": [], "b_port": []}],
    ...                 "link", "leaf-1 -- spine-0")
    'cable leaf-1 <-> spine-0 (ports unknown: import the topology from ibnetdiscover to name them)'
    """
    mine = [e for e in entries if e.get("kind") == kind and e.get("verdict") == name]
    if not mine:
        return ""
    ported = any(e.get("a_port") or e.get("b_port") for e in mine)
    shown = ", ".join(_cable(e) for e in mine[:CABLES_SHOWN])
    more = f" (+{len(mine) - CABLES_SHOWN} more)" if len(mine) > CABLES_SHOWN else ""
    unknown = "" if ported else (" (ports unknown: import the topology from ibnetdiscover to "
                                 "name them)")
    if kind == "switch":
        return f"its bad cables: {shown}{more}{unknown}"
    if len(mine) == 1:
        return f"pull cable {shown}{unknown}" if ported else f"cable {shown}{unknown}"
    return f"one of {len(mine)} cables: {shown}{more}{unknown}"


def describe_links(name: str) -> str:
    """``a -- s1 | a -- s2 | b -- s1`` as ``a -- s[1-2], b -- s1`` (links grouped by end).

    >>> describe_links("leaf-0-2 -- spine-0 | leaf-0-2 -- spine-1 | leaf-1-2 -- spine-0")
    'leaf-0-2 -- spine-[0-1], leaf-1-2 -- spine-0'
    """
    from fabriccheck.inventory.static import compress_nodes

    name = name.split(" | ...")[0]
    ends: dict[str, list[str]] = {}
    for part in name.split(" | "):
        a, _, b = part.partition(" -- ")
        ends.setdefault(a, []).append(b)
    return ", ".join(f"{a} -- {compress_nodes(bs)}" for a, bs in ends.items())


def print_truth(result: RunResult, faults_path: str, console: Console) -> None:
    """Demo: compare the findings with the injected faults (the simulator's ground truth)."""
    from fabriccheck.faults import load_faults

    fs = load_faults(faults_path)
    rows = []
    for f in fs.faults:
        target = f.target
        if f.kind in ("nic_degraded", "nic_down"):
            ok = f.nic in result.bad_nics
        elif f.kind == "node_hang":
            ok = f.node in result.hung
        elif f.kind == "node_unreachable":
            ok = f.node in result.unreachable
        elif f.kind in ("node_slow", "gpu_link_degraded"):
            ok = f.node in result.bad_nodes
        else:
            key = tuple(sorted(f.link))  # type: ignore[arg-type]
            exact = any(tuple(sorted(lk)) == key for lk in result.bad_links)
            near = any(list(key) in [sorted(c) for c in s["candidates"]]
                       for s in result.link_suspects)
            ok = "exact" if exact else ("in a candidate set" if near else False)
        name = target if isinstance(target, str) else " -- ".join(target)
        mark = "[green]found[/]" if ok is True else (f"[green]{ok}[/]" if ok else "[red]missed[/]")
        rows.append((f.kind, name, mark))
    table = Table(title="injected faults (ground truth) vs found", header_style="bold")
    for col in ("fault", "where", "found"):
        table.add_column(col)
    for r in rows:
        table.add_row(*r)
    console.print(table)
