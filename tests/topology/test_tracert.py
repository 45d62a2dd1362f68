"""Routes from ibtracert: the parser on the repo's fixtures (full and -n formats), traces resolved
into the same forwarding model the LFT dumps give, round trips on generated fabrics, bad files
(one line naming file and line, exit 2) and any ibtracert output under ../shared."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabriccheck.cli.main import app
from fabriccheck.errors import ConfigError
from fabriccheck.models import link_key
from fabriccheck.topology import generate, load_topology
from fabriccheck.topology.routes import read_routes, resolve_routes
from fabriccheck.topology.tracert import looks_like_ibtracert, parse_ibtracert, trace_entries
from fabriccheck.topology.view import FabricView

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "routes"
IBNET = FIX / "ibnetdiscover_fattree_2x2.txt"
DUMP = FIX / "dump_lfts_fattree_2x2.txt"
TRACES = FIX / "ibtracert_fattree_2x2.txt"
SIMPLE = FIX / "ibtracert_n_fattree_2x2.txt"
SHARED = Path(__file__).resolve().parents[3] / "shared"
NICS = [f"gpu-0{i}/mlx5_0" for i in range(1, 5)]


def imported(tmp_path: Path, *routes: Path) -> Path:
    out = tmp_path / "fabric.yaml"
    args = ["topology", "import", "--ibnetdiscover", str(IBNET), "-o", str(out)]
    for r in routes:
        args += ["--routes", str(r)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    return out


def test_parser_reads_every_trace_hop_port_and_name():
    traces = parse_ibtracert(TRACES.read_text(), source="t")
    assert len(traces) == 5
    first = traces[0]
    assert (first.src.kind, first.src.desc, first.src.lid) == ("ca", "gpu-01 mlx5_0", 11)
    assert [(h.out_port, h.kind, h.port) for h in first.hops] == [
        (1, "switch", 1), (31, "switch", 1), (2, "switch", 31), (2, "ca", 1)]
    assert first.hops[1].desc == "MF0;ib-spine-1:MQM9700/U1"
    assert first.hops[1].guid == "0xb83fd20300aa0003"
    assert first.dst is not None and first.dst.desc == "gpu-04 mlx5_0"
    assert traces[-1].hops[-1].desc == "gpu-02 mlx5_0" and len(traces[-1].hops) == 2


def test_simple_format_parses_guids_and_ports_without_names():
    traces = parse_ibtracert(SIMPLE.read_text())
    full = parse_ibtracert(TRACES.read_text())
    assert [[(h.guid, h.out_port, h.port) for h in t.hops] for t in traces] == [
        [(h.guid, h.out_port, h.port) for h in t.hops] for t in full]
    assert all(h.desc == "" and h.kind == "" for t in traces for h in t.hops)


def test_format_detection():
    assert looks_like_ibtracert(TRACES.read_text())
    assert looks_like_ibtracert(SIMPLE.read_text())
    assert not looks_like_ibtracert(DUMP.read_text())


def test_traces_give_the_routes_the_forwarding_tables_give(tmp_path):
    by_trace = load_topology(imported(tmp_path, TRACES))
    by_lft = load_topology(imported(tmp_path, DUMP))
    model = load_topology(imported(tmp_path))
    assert by_trace.routing == "lft"
    pairs = [(a, b) for a in NICS for b in NICS if a != b]
    for a, b in pairs:
        assert by_trace.route(a, b) == by_lft.route(a, b), (a, b)
    # leaf-1 sends everything up spine-1 (not the model's choice for every destination)
    assert any(by_trace.route(a, b) != model.route(a, b) for a, b in pairs)
    up = FabricView(by_trace).directed_hops("gpu-01/mlx5_0", "gpu-04/mlx5_0")
    assert ("ib-leaf-1", "ib-spine-1") in up and ("ib-spine-1", "ib-leaf-2") in up


def test_simple_traces_resolve_through_a_dump_given_with_them(tmp_path):
    a = load_topology(imported(tmp_path, SIMPLE, DUMP))
    b = load_topology(imported(tmp_path, TRACES))
    for x in NICS:
        for y in NICS:
            assert a.route(x, y) == b.route(x, y)


def test_traces_and_tables_together_must_agree(tmp_path):
    both = load_topology(imported(tmp_path, DUMP, TRACES))
    assert both.lft == load_topology(imported(tmp_path, DUMP)).lft
    wrong = tmp_path / "wrong.txt"
    wrong.write_text(TRACES.read_text().replace(
        '[31] -> switch port {0xb83fd20300aa0003}[1] lid 3-3 "MF0;ib-spine-1:MQM9700/U1"\n'
        '[2] -> switch port {0xb83fd20300aa0002}[31]',
        '[32] -> switch port {0xb83fd20300aa0004}[1] lid 4-4 "MF0;ib-spine-2:MQM9700/U1"\n'
        '[2] -> switch port {0xb83fd20300aa0002}[32]', 1))
    dump, source = read_routes([DUMP, wrong])
    topo = load_topology(imported(tmp_path))
    with pytest.raises(ConfigError, match="sends gpu-04/mlx5_0 to 'ib-spine-2' here but to "
                       "'ib-spine-1' at the forwarding tables"):
        resolve_routes(dump, topo, source=source)


def _lft_from_model(topo, rng: random.Random) -> dict[str, dict[str, str]]:
    """Destination-based tables that are not D-mod-K: every switch picks a random next hop
    among its shortest-path choices, once per destination."""
    out: dict[str, dict[str, str]] = {}
    for dst, d_sw in topo.attachment.items():
        for sw in topo.switches:
            if sw == d_sw:
                out.setdefault(sw, {})[dst] = dst
                continue
            options = topo._next_hops(sw, d_sw)
            if options:
                out.setdefault(sw, {})[dst] = rng.choice(options)
    return out


def _ibtracert_text(topo, lft, pairs) -> str:
    """What ibtracert would print for ``pairs`` on a fabric routed by ``lft`` (full format)."""
    guid = {name: f"0x{i + 1:016x}" for i, name in enumerate(sorted(topo.switches)
                                                            + sorted(topo.nics))}

    def desc(x: str) -> str:
        return x.replace("/", " ") if x in topo.nics else f"MF0;{x}:MQM9700/U1"

    lines = []
    for src, dst in pairs:
        lines.append(f'From ca {{{guid[src]}}} portnum 1 lid 1-1 "{desc(src)}"')
        hops: list[str] = []
        nxt = topo.attachment[src]
        while True:
            kind = "ca" if nxt in topo.nics else "switch"
            hops.append(f'[1] -> {kind} port {{{guid[nxt]}}}[1] lid 2-2 "{desc(nxt)}"')
            if nxt == dst:
                break
            nxt = lft[nxt][dst]
        lines += hops
        lines.append(f'To ca {{{guid[dst]}}} portnum 1 lid 3-3 "{desc(dst)}"')
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("gen", [
    {"kind": "fat-tree", "nodes": 16, "rails": 2, "nodes_per_leaf": 4, "spines": 3},
    {"kind": "fat-tree", "tiers": 3, "nodes": 32, "rails": 1, "pods": 2, "leaves_per_pod": 2,
     "nodes_per_leaf": 8, "spines_per_pod": 2, "cores": 4},
])
def test_traced_routes_round_trip_on_generated_fabrics(seed, gen):
    """Every flow of a traced fabric routes as its (non-D-mod-K) tables say: traces need no
    port numbers (they name every hop), and one trace per destination and source leaf is
    enough for every flow to that destination."""
    topo = generate(gen, name="t", fabric="infiniband")
    rng = random.Random(seed)
    lft = _lft_from_model(topo, rng)
    nics = sorted(topo.nics)
    by_leaf: dict[str, str] = {}
    for n in nics:
        by_leaf.setdefault(topo.attachment[n], n)
    pairs = [(s, d) for d in nics for s in by_leaf.values() if s != d]
    text = _ibtracert_text(topo, lft, pairs)
    tables: dict[str, dict[str, str]] = {}
    assert trace_entries(parse_ibtracert(text), topo, tables) == len(pairs)
    topo.set_lft(tables, "traces")
    truth = generate(gen, name="t", fabric="infiniband")
    truth.set_lft(lft, "tables")
    for _ in range(60):
        a, b = rng.sample(nics, 2)
        got = topo.route(a, b)
        assert got == truth.route(a, b)
        assert link_key(a, topo.attachment[a]) == got[0]


BAD = [
    ("hello\n", "line 1: not a forwarding-table line: 'hello' (give ibroute, dump_lfts.sh, "
     "ibdiagnet .fdbs or ibtracert output)"),
    (TRACES.read_text().replace("From ca {0xa088c20300bb0014}", "gpu-04 gpu-01\nFrom ca "
                                "{0xa088c20300bb0014}", 1),
     "line 8: not an ibtracert line: 'gpu-04 gpu-01'"),
    ('From ca {0x1} portnum 1 lid 11-11 "gpu-01 mlx5_0"\n'
     '[1] -> switch port {0x2}[1] lid 1-1 "MF0;ib-leaf-1:MQM9700/U1"\n'
     "ibwarn: [123] find_route: Bad forwarding table entry found\n",
     "line 1: the trace has no 'To' line"),
    ('[1] -> switch port {0x2}[1] lid 1-1 "MF0;ib-leaf-1:MQM9700/U1"\n',
     "line 1: a hop outside any trace"),
    ('From ca {0x1} portnum 1 lid 11-11 "gpu-01 mlx5_0"\n'
     '[1] -> switch port {0x2}[1] lid 1-1 "MF0;ib-leaf-9:MQM9700/U1"\n'
     '[2] -> ca port {0x3}[1] lid 12-12 "gpu-02 mlx5_0"\n'
     'To ca {0x3} portnum 1 lid 12-12 "gpu-02 mlx5_0"\n',
     "line 2: switch 'ib-leaf-9' is not in topology"),
    ('From ca {0x1} portnum 1 lid 11-11 "gpu-01 mlx5_0"\n'
     '[1] -> switch port {0x2}[1] lid 1-1 "MF0;ib-leaf-1:MQM9700/U1"\n'
     '[7] -> ca port {0x3}[1] lid 12-12 "gpu-02 mlx5_0"\n'
     'To ca {0x3} portnum 1 lid 12-12 "gpu-02 mlx5_0"\n',
     "line 3: switch 'ib-leaf-1' leaves by port 7 toward 'gpu-02/mlx5_0'"),
    ('From ca {0x1} portnum 1 lid 11-11 "gpu-01 mlx5_0"\n'
     '[1] -> switch port {0x2}[1] lid 1-1 "MF0;ib-leaf-1:MQM9700/U1"\n'
     '[1] -> ca port {0x3}[1] lid 13-13 "gpu-03 mlx5_0"\n'
     'To ca {0x3} portnum 1 lid 13-13 "gpu-03 mlx5_0"\n',
     "line 3: ib-leaf-1 -> gpu-03/mlx5_0 is not a link"),
    ('From {0x1}[1]\n[1] -> {0x2}[1]\n[2] -> {0x3}[1]\nTo {0x3}[1]\n',
     "line 3: node 0x3 has no name (ibtracert -n?)"),
    ('From switch 0xb83fd20300aa0001 port 0 lid 1-1 "MF0;ib-leaf-1:MQM9700/U1"\n'
     '[31] -> switch 0xb83fd20300aa0003[1] lid 3 "MF0;ib-spine-1:MQM9700/U1"\n',
     "line 1: a multicast trace"),
]


@pytest.mark.parametrize(("text", "expect"), BAD)
def test_bad_trace_files_are_one_line_naming_file_and_line_exit_2(tmp_path, text, expect):
    bad = tmp_path / "traces.txt"
    bad.write_text(text)
    res = subprocess.run(
        [sys.executable, "-m", "fabriccheck", "topology", "import", "--ibnetdiscover",
         str(IBNET), "--routes", str(bad)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and expect in lines[0], res.stderr
    assert "Traceback" not in res.stderr


def _shared_traces() -> list[Path]:
    out = []
    for sub in ("fixtures", "corpus"):
        root = SHARED / sub
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*")):
            if p.is_file() and p.suffix in ("", ".txt", ".log", ".out"):
                text = p.read_text(encoding="utf-8", errors="replace")
                if "ibtracert" in p.name.lower() or looks_like_ibtracert(text):
                    out.append(p)
    return out


def test_published_ibtracert_outputs_under_shared_parse():
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent (third-party outputs are read where they are)")
    found = _shared_traces()
    if not found:
        pytest.skip(f"no ibtracert output under {SHARED}/fixtures or /corpus yet")
    for p in found:
        lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
        text = "\n".join(lines[1:] if lines and lines[0].startswith("# source:") else lines)
        traces = parse_ibtracert(text, source=str(p))
        assert traces and all(t.dst is not None and t.hops for t in traces), p
