"""``fabriccheck parse``: read one tool output file, print its numbers and errors (or JSON)."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fabriccheck.cli.app import app, exit_on_error, fail, out, write_json
from fabriccheck.errors import ParseError
from fabriccheck.probes import TOOLS
from fabriccheck.probes.node import NODE_TOOLS
from fabriccheck.probes.node.judge import NodeContext

_STATUS_STYLE = {"ok": "green", "failed": "red", "incomplete": "yellow", "unparseable": "red"}


_HELP = (
    "Parse nccl-tests, perftest or iperf3 output, scan a NCCL job log, or judge a node-local "
    "tool's output (nvidia-smi, dmesg/journalctl, ibstat, perfquery, ethtool, lspci, rocm-smi, "
    "a sysfs port folder) as the preflight does: node_verdict healthy | warn | fault and its "
    "findings.\n\n"
    "Exit 0 when the text was read, even when it reports a tool FAILURE or a faulty node (the "
    "parse worked and found it). Exit 2 when the file is missing or is not the output of a known "
    "tool. FILE '-' reads standard input; a folder is read file by file (a sysfs port folder, "
    "one with 'state' and 'rate', is one port)."
)


@app.command("parse", help=_HELP)
def parse(
    file: Annotated[Path, typer.Argument(
        help="Tool output file, or - for standard input (a leading '# source:' line is "
             "ignored).")],
    tool: Annotated[str | None, typer.Option(
        "--tool", "-t", help="One of: " + ", ".join((*TOOLS, *NODE_TOOLS))
        + " (detected when omitted).")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print only the parse contract JSON on stdout.")] = False,
    max_mb: Annotated[int, typer.Option(
        "--max-mb", min=1, help="Refuse inputs larger than this (MiB); streams (pipes, '-' "
        "for stdin) must also end within 30 s.")] = 64,
    since: Annotated[str | None, typer.Option(
        "--since", help="Kernel logs: judge only events from this time on (ISO 8601, e.g. "
        "2026-11-28T06:00:00Z), as the preflight does with the node's last check.")] = None,
) -> None:
    """Parse one tool output file; see ``_HELP`` for the exit codes."""
    known = (*TOOLS, *NODE_TOOLS)
    if tool is not None and tool not in known:
        raise fail(f"--tool: unknown tool {tool!r}; use one of {', '.join(known)}")
    context = NodeContext(since=_since(since))
    if str(file) != "-" and file.is_dir():
        results = _parse_dir(file, tool, context, max_mb * 2**20)
        if as_json:
            write_json(results[0] if len(results) == 1 else results)
            return
        for name, data in zip(_dir_names(file, results), results, strict=True):
            _print_summary(Path(name), data)
        return
    text = _read(file, max_mb * 2**20)
    if str(file) == "-":
        file = Path("<stdin>")
    data = _parse_one(file, text, tool, context)
    if as_json:
        write_json(data)
        return
    _print_summary(file, data)


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise fail(f"--since: {value!r} is not an ISO 8601 time; "
                   "write e.g. 2026-11-28T06:00:00Z") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _parse_one(file: Path, text: str, tool: str | None, context: NodeContext) -> dict:
    """The ``--json`` contract dict of one tool output (node-local tools judged first: their
    formats are strict, and a kernel log's Xid lines would otherwise read as a job log)."""
    from fabriccheck.probes.detect import detect_tool, parse_text
    from fabriccheck.probes.node.judge import detect_node_tool, judge_node_text
    from fabriccheck.probes.results import UNPARSEABLE
    from fabriccheck.probes.to_json import result_to_json

    node_tool = tool if tool in NODE_TOOLS else (None if tool else detect_node_tool(text))
    if node_tool is not None:
        try:
            return judge_node_text(text, node_tool, context=context).to_json()
        except ParseError as exc:
            raise fail(f"{file}: {exc.message}") from None
    try:
        name = tool or detect_tool(text)
        result = parse_text(text, name)
    except ParseError as exc:
        raise fail(f"{file}: {exc.message} ({exc.hint})" if exc.hint else
                   f"{file}: {exc.message}") from None
    if result.status == UNPARSEABLE:
        raise fail(f"{file}: not {name} output: {result.reason}")
    return result_to_json(result)


def _is_port_folder(folder: Path) -> bool:
    return (folder / "state").is_file() and (folder / "rate").is_file()


def _parse_dir(folder: Path, tool: str | None, context: NodeContext, max_bytes: int
               ) -> list[dict]:
    """A sysfs port folder as one port; any other folder file by file (sorted)."""
    if _is_port_folder(folder) and tool in (None, "ib-sysfs"):
        from fabriccheck.probes.node.catalogue import builtin_catalogue
        from fabriccheck.probes.node.ports import judge_sysfs_files

        files = {p.name: p.read_text(encoding="utf-8", errors="replace")
                 for p in sorted(folder.iterdir()) if p.is_file()}
        return [judge_sysfs_files(files, builtin_catalogue(), context).to_json()]
    paths = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    if not paths:
        raise fail(f"{folder}: an empty folder; give a tool output file or a sysfs port folder")
    out = []
    for p in paths:
        data = _parse_one(p, _read(p, max_bytes), tool, context)
        out.append({"file": p.name, **data})
    return out


def _dir_names(folder: Path, results: list[dict]) -> list[str]:
    return [r.get("file", folder.name) for r in results]


def _read(file: Path, max_bytes: int) -> str:
    """The text of ``file``, bounded (:func:`fabriccheck.probes._input.read_tool_output`);
    ``-`` is standard input (a terminal or an empty stdin is an error)."""
    from fabriccheck.probes._input import read_tool_output

    stdin = str(file) == "-"
    if stdin and (sys.stdin is None or sys.stdin.isatty()):
        raise fail("-: standard input is a terminal; pipe the tool output in "
                   "(all_reduce_perf ... | fabriccheck parse -)")
    with exit_on_error(one_line=True):
        text = read_tool_output(str(file), max_bytes=max_bytes)
    if stdin and not text.strip():
        raise fail("-: standard input was empty; pipe the tool output in")
    return text


def _print_summary(file: Path, d: dict) -> None:
    style = _STATUS_STYLE.get(d["status"], "white")
    head = f"[bold]{file.name}[/]  {d['tool']}  [{style}]{d['status']}[/]"
    out.print(head + (f"  ({d['reason']})" if d["reason"] else ""), highlight=False)
    tool = d["tool"]
    if "node_verdict" in d:
        _node_summary(d)
        return
    if tool == "nccl-tests":
        _nccl_summary(d)
    elif tool == "perftest":
        _perftest_summary(d)
    elif tool == "iperf3":
        fields = ("sent_gbps", "received_gbps", "retransmits", "duration_s", "streams")
        out.print("  ".join(f"{k}={_fmt(d[k])}" for k in fields), highlight=False)
    else:
        if d.get("job_log"):
            out.print(f"job log: {d['job_log']['why']}", highlight=False, markup=False)
        out.print(f"hosts: {', '.join(d['hosts']) or '-'}", highlight=False)
        out.print(f"suspects: {', '.join(d['suspects']) or '-'}", highlight=False)
        if d["hcas"]:
            out.print("hcas: " + ", ".join("/".join(p) for p in d["hcas"]), highlight=False)
        if d["peers"]:
            out.print(f"peers: {', '.join(d['peers'])}", highlight=False)
    _errors_table(d["errors"])


_VERDICT_STYLE = {"healthy": "green", "warn": "yellow", "fault": "red"}


def _node_summary(d: dict) -> None:
    v = d["node_verdict"]
    out.print(f"node verdict: [{_VERDICT_STYLE[v]}]{v}[/]", highlight=False)
    if d["findings"]:
        t = Table("severity", "part", "what", "fix", "line")
        for f in d["findings"]:
            t.add_row(f["severity"], f["part"], f["what"], f.get("fix", ""), f["line"][:80])
        out.print(t)


def _nccl_summary(d: dict) -> None:
    out.print(f"collective={d['collective'] or '?'}  ranks={d['ranks']}  hosts="
              f"{','.join(d['hosts']) or '-'}  max_busbw={_fmt(d['max_busbw_gbps'])} GB/s  "
              f"avg_busbw={_fmt(d['avg_busbw_gbps'])} GB/s", highlight=False)
    if d["rows"]:
        t = Table("size (B)", "busbw GB/s", "in-place GB/s", "#wrong", "time us", title=None)
        for r in d["rows"]:
            t.add_row(str(r["size_bytes"]), _fmt(r["busbw_gbps"]), _fmt(r["busbw_inplace_gbps"]),
                      _fmt(r["wrong"]), _fmt(r["time_us"]))
        out.print(t)


def _perftest_summary(d: dict) -> None:
    out.print(f"test={d['test'] or d['program'] or '?'}  device={d['device'] or '?'}  "
              f"link={d['link_type'] or '?'}  side={d['side'] or '?'}"
              + ("  loopback (same port: the cable was not tested)" if d["loopback"] else ""),
              highlight=False)
    if d["rows"]:
        t = Table("size (B)", "iterations", "BW avg Gb/s", "BW peak Gb/s", "Mpps")
        for r in d["rows"]:
            t.add_row(str(r["size_bytes"]), _fmt(r["iterations"]), _fmt(r["bw_avg_gbps"]),
                      _fmt(r["bw_peak_gbps"]), _fmt(r["msg_rate_mpps"]))
        out.print(t)
    if d["latency_rows"]:
        t = Table("size (B)", "t_min us", "t_typical us", "t_avg us", "p99 us", "p99.9 us")
        for r in d["latency_rows"]:
            t.add_row(str(r["size_bytes"]), _fmt(r["t_min_us"]), _fmt(r["t_typical_us"]),
                      _fmt(r["t_avg_us"]), _fmt(r["t_p99_us"]), _fmt(r["t_p999_us"]))
        out.print(t)


def _errors_table(errors: list[dict]) -> None:
    if not errors:
        return
    t = Table("kind", "host", "hca", "status", "message", title="errors")
    for e in errors:
        t.add_row(e["kind"], e.get("host", ""), e.get("hca", ""), e.get("status", ""),
                  e["message"] + (f" (x{e['count']})" if e.get("count") else ""))
    out.print(t)


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}" if abs(v) >= 0.01 or v == 0 else f"{v:.6f}"
    return str(v)

