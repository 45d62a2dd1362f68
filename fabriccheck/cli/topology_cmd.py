"""``fabriccheck topology``: show, validate, list and import fabric topologies."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fabriccheck.cli.app import app, err, exit_on_error, out, write_json

topology_app = typer.Typer(
    help="Show, validate, list and import fabric topologies.", no_args_is_help=True
)
app.add_typer(topology_app, name="topology")


@topology_app.command("show")
def show(
    file: str = typer.Argument(..., help="Topology file or bundled name (e.g. roce-rail-64)."),
    json_: bool = typer.Option(False, "--json", help="Print the topology contract JSON."),
) -> None:
    """Print a topology: a summary, or the docs/design.md contract JSON with --json."""
    from fabriccheck.topology import load_topology
    from fabriccheck.topology.dump import summary

    with exit_on_error(one_line=True):
        topo = load_topology(file)
    if json_:
        write_json(topo.to_contract())
        return
    s = summary(topo)
    tiers = ", ".join(f"{n} {t}" for t, n in s["switches"].items())
    speeds = ", ".join(f"{n} x {g} Gb/s" for g, n in s["nic_gbps"].items())
    rows = [
        ("topology", f"{s['name']} ({topo.source})"),
        ("fabric", s["fabric"]),
        ("spec", s["spec"] or "(by fabric)"),
        ("nodes", f"{s['nodes']} x {s['gpus_per_node']} GPUs"),
        ("NICs", f"{s['nics']} on {s['rails']} rails; {speeds}"),
        ("switches", f"{sum(s['switches'].values())}: {tiers}"),
        ("links", f"{s['links']} ({s['host_links']} NIC, {s['switch_links']} switch-switch)"),
        ("ECMP width", f"{s['ecmp_width']} paths between same-rail NICs on different leaves"),
    ]
    if topo.domains:
        trays = sum(len(d.trays) for d in topo.domains.values())
        rows.append(("NVLink", f"{len(topo.domains)} domains over {trays} trays "
                     "(topology show --json: nvlink_domains)"))
    for key, value in rows:
        out.print(f"{key:<11} {value}", highlight=False, markup=False)


@topology_app.command("validate")
def validate(
    file: str = typer.Argument(..., help="Topology file or bundled name."),
    tree: bool = typer.Option(False, "--tree", help="Also require a tree (lab topologies)."),
) -> None:
    """Check a topology file; exit 0 when valid, 2 with one line naming file and field when not."""
    from fabriccheck.topology import load_topology

    with exit_on_error(one_line=True):
        topo = load_topology(file, require_tree=tree)
    out.print(
        f"{topo.source}: ok ({len(topo.nodes)} nodes, {len(topo.switches)} switches, "
        f"{len(topo.links)} links, {topo.fabric})",
        highlight=False,
        markup=False,
    )


@topology_app.command("list")
def list_() -> None:
    """List the bundled topologies with their sizes."""
    from fabriccheck.topology import bundled_topologies, load_topology

    for name in bundled_topologies():
        with exit_on_error(one_line=True):
            t = load_topology(name)
        out.print(
            f"{name:<18} {t.fabric:<10} {len(t.nodes):>6} nodes {t.rails:>2} rails "
            f"{len(t.switches):>5} switches  spec {t.spec or '-'}",
            highlight=False,
            markup=False,
        )


@topology_app.command("import")
def import_(
    ibnetdiscover: Annotated[Path | None, typer.Option(
        "--ibnetdiscover", help="ibnetdiscover output (plain or -p ports format).")] = None,
    lldp: Annotated[list[Path] | None, typer.Option(
        "--lldp", help="Per-host lldpcli -f json0 / lldpctl -f json files, or a dir.")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Topology name.")] = None,
    spines: Annotated[int, typer.Option(
        "--spines", help="LLDP: add N spines cabled to every leaf.")] = 0,
    uplinks: Annotated[Path | None, typer.Option(
        "--uplinks", help="LLDP: YAML list of switch-switch links {a, b, gbps}.")] = None,
    uplink_gbps: Annotated[float, typer.Option(
        "--uplink-gbps", help="LLDP: speed of the --spines uplinks.")] = 400.0,
    nic_gbps: Annotated[float, typer.Option("--nic-gbps", help="LLDP: host NIC speed.")] = 400.0,
    spec: Annotated[str | None, typer.Option("--spec", help="Default test spec to write.")] = None,
    gpus_per_node: Annotated[int | None, typer.Option(
        "--gpus-per-node", min=0,
        help="GPUs of every imported node (unknown, written 0, when left out).")] = None,
    largest_component: Annotated[bool, typer.Option(
        "--largest-component", help="Keep only the largest connected part.")] = False,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Write here, not stdout.")] = None,
    routes: Annotated[list[Path] | None, typer.Option(
        "--routes", help="IB forwarding tables (dump_lfts.sh / ibroute / ibdiagnet .fdbs "
        "output) or ibtracert traces: checked now, referenced as 'routes:' in the YAML.")]
    = None,
    nvlink_smi: Annotated[list[Path] | None, typer.Option(
        "--nvlink-smi", help="Per-tray `nvidia-smi -q` outputs, files named by host "
        "(node-001.txt) or a dir: the NVLink domains (trays of one fabric cluster and "
        "clique), written as 'nvlink_domains:'.")] = None,
    topology: Annotated[str | None, typer.Option(
        "--topology", help="With --nvlink-smi: add the domains to this topology file (or "
        "bundled name) instead of importing the fabric.")] = None,
) -> None:
    """Build an explicit-form topology YAML from ibnetdiscover or LLDP neighbour data; with
    --nvlink-smi, add the NVLink domains read from every tray's nvidia-smi -q."""
    with exit_on_error(one_line=True):
        _check_import_flags(ibnetdiscover, lldp, topology, routes)
        smi = _read_smi(nvlink_smi, topology)
        if smi is not None and gpus_per_node is None:
            gpus_per_node = smi.gpus_per_tray
        source, text, warnings = _fabric_text(
            ibnetdiscover, lldp, topology, name=name, spec=spec, spines=spines, uplinks=uplinks,
            uplink_gbps=uplink_gbps, nic_gbps=nic_gbps, largest_component=largest_component,
            gpus_per_node=gpus_per_node,
        )
        text, warnings = _with_additions(text, warnings, smi, source, routes, output)
    _write_import(text, warnings, output)


def _check_import_flags(ibnetdiscover: Path | None, lldp: list[Path] | None,
                        topology: str | None, routes: list[Path] | None) -> None:
    """Raise :class:`ConfigError` unless exactly one source is given (``--ibnetdiscover``,
    ``--lldp`` or ``--topology``) and ``--routes`` comes without ``--topology``; returns
    None."""
    from fabriccheck.errors import ConfigError

    if sum(map(bool, (ibnetdiscover, lldp, topology))) != 1:
        raise ConfigError(
            "give exactly one of --ibnetdiscover FILE, --lldp FILES or --topology FILE "
            "(with --nvlink-smi)", source="topology import",
        )
    if topology and routes:
        raise ConfigError("--routes goes with --ibnetdiscover; write routes: into the "
                          "topology file itself", source="topology import")


def _fabric_text(
    ibnetdiscover: Path | None, lldp: list[Path] | None, topology: str | None, *,
    name: str | None, spec: str | None, spines: int, uplinks: Path | None, uplink_gbps: float,
    nic_gbps: float, largest_component: bool, gpus_per_node: int | None,
) -> tuple[str | None, str, list[str]]:
    """The topology YAML to start from: the ``--topology`` file's own text, else the fabric
    imported from ibnetdiscover or from LLDP (the other options are theirs). Returns the file
    ``--topology`` named (None on an import), the YAML text and the import's warnings."""
    if topology:
        path, text = _topology_text(topology)
        return path, text, []
    if ibnetdiscover:
        from fabriccheck.topology.discovery.ibnetdiscover import import_ibnetdiscover

        text, warnings = import_ibnetdiscover(
            ibnetdiscover, name=name, spec=spec, largest_component=largest_component,
            gpus_per_node=gpus_per_node,
        )
        return None, text, warnings
    from fabriccheck.topology.discovery.lldp import import_lldp

    text, warnings = import_lldp(
        lldp or [],
        name=name,
        spec=spec,
        spines=spines,
        uplinks=uplinks,
        uplink_gbps=uplink_gbps,
        nic_gbps=nic_gbps,
        largest_component=largest_component,
        gpus_per_node=gpus_per_node,
    )
    return None, text, warnings


def _with_additions(text: str, warnings: list[str], smi, source: str | None,
                    routes: list[Path] | None, output: Path | None) -> tuple[str, list[str]]:
    """``text`` with the NVLink domains of ``smi`` (when read; ``source``: the ``--topology``
    file, None on an import) and the checked ``routes`` (when given). Returns the text and
    ``warnings`` followed by the domains' own."""
    if smi is not None:
        text, more = _with_domains(text, smi, source)
        warnings = [*warnings, *more]
    if routes:
        text = _with_routes(text, routes, output)
    return text, warnings


def _write_import(text: str, warnings: list[str], output: Path | None) -> None:
    """Print the warnings on stderr and write ``text`` to ``output`` (saying so on stderr), or
    to stdout without one; returns None."""
    import sys

    for warning in warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if output:
        output.write_text(text, encoding="utf-8")
        err.print(f"wrote {output}", highlight=False, markup=False)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _read_smi(paths: list[Path] | None, topology: str | None):
    """The trays of ``--nvlink-smi`` (None without it; ``--topology`` needs it)."""
    from fabriccheck.errors import ConfigError
    from fabriccheck.topology.discovery.nvlink_smi import read_nvlink_smi

    if not paths:
        if topology:
            raise ConfigError("--topology adds NVLink domains to a topology: give --nvlink-smi "
                              "DIR too", source="topology import")
        return None
    return read_nvlink_smi(paths)


def _topology_text(name: str) -> tuple[str, str]:
    """The file of a topology file or bundled topology (checked to load) and its text."""
    from fabriccheck.topology import load_topology

    path = load_topology(name).source
    return path, Path(path).read_text(encoding="utf-8")


def _with_domains(text: str, smi, topology: str | None) -> tuple[str, list[str]]:
    """``text`` with the NVLink domains of ``smi`` (``nvlink_domains:``) and the warnings."""
    from fabriccheck.topology.discovery.nvlink_smi import with_nvlink_domains

    return with_nvlink_domains(text, smi, source=topology or "<import>")


def _with_routes(text: str, routes: list[Path], output: Path | None) -> str:
    """Check ``routes`` against the imported topology (a bad file: one line, exit 2) and add
    ``routes:`` to the YAML (paths relative to ``output`` when written to a file)."""
    import os

    from fabriccheck.errors import ConfigError
    from fabriccheck.schema.yamlio import parse_yaml
    from fabriccheck.topology.load import topology_from_dict
    from fabriccheck.topology.routes import attach_routes

    topo = topology_from_dict(parse_yaml(text, "<import>"), source="<import>")
    if topo.fabric != "infiniband":
        raise ConfigError("forwarding tables are for infiniband", source="--routes")
    attach_routes(topo, routes)
    base = output.resolve().parent if output else None
    names = [os.path.relpath(p.resolve(), base) if base else str(p.resolve()) for p in routes]
    line = "routes: " + (f'"{names[0]}"' if len(names) == 1 else
                         "[" + ", ".join(f'"{n}"' for n in names) + "]")
    return text.replace("\nnodes:", f"\n{line}\nnodes:", 1)
