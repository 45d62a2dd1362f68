"""`fabriccheck lab up|down|status|faults`: the namespace lab (an emulated cluster, root only).

``lab up --ray`` also starts a Ray cluster over the lab (fabriccheck.lab.raylets).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fabriccheck.cli.app import app, err, exit_on_error, out, write_json

lab_app = typer.Typer(
    help="Emulated cluster on this machine: hosts in network namespaces with sshd, switches as "
    "bridges, tc-shaped links, real faults. Needs root.",
    no_args_is_help=True,
)
app.add_typer(lab_app, name="lab")

_NAME = typer.Option("lab", "--name", help="Lab name (1-6 of a-z0-9); prefixes all it makes.")


@lab_app.command("up")
def up_cmd(
    topology: str = typer.Argument(..., help="Tree-shaped topology file or bundled name (lab-4)."),
    faults: Annotated[Path | None, typer.Option("--faults", help="Faults to make real.")] = None,
    name: str = _NAME,
    directory: Annotated[Path | None, typer.Option("--dir", help="Where client files go.")] = None,
    rate_scale: float = typer.Option(1.0, "--rate-scale", help="Multiply every link rate."),
    ray: bool = typer.Option(False, "--ray", help="Also start a Ray cluster over the lab: a "
                             "head on the gateway, a raylet inside each host (docs/lab.md)."),
    ray_port: int = typer.Option(0, "--ray-port", help="The Ray head's GCS port (0: a free one)."),
    json_out: bool = typer.Option(False, "--json", help='Print {"dir", "inventory", ...}.'),
) -> None:
    """Build the lab (removing a stale one of the same name first)."""
    from fabriccheck import lab

    with exit_on_error():
        info = lab.up(topology, faults=faults, name=name, directory=directory,
                      rate_scale=rate_scale, ray=ray, ray_port=ray_port)
    if json_out:
        write_json(info.to_json())
        return
    out.print(f"lab {info.name!r} up: {len(info.hosts)} hosts from {info.topology}")
    for host, addr in info.hosts.items():
        state = "sshd" if host in info.sshd_pids else "no sshd (unreachable)"
        if info.ray is not None:
            state += ", raylet" if host in info.ray["raylets"] else ", no raylet"
        out.print(f"  {host:<12} {addr:<15} netns {info.netns[host]}  {state}")
    for line in info.faults:
        out.print(f"  fault: {line}")
    out.print(f"inventory: {info.inventory}")
    out.print(f"try:       ssh -F {info.dir}/ssh_config {next(iter(info.hosts))} hostname")
    if info.ray is not None:
        out.print(f"ray:       head {info.ray['address']} + {len(info.ray['raylets'])} raylet(s), "
                  f"up in {info.ray['start_s']:.1f} s; files in {info.ray['root']}")
        out.print(f"sweep:     fabriccheck sweep --executor ray --inventory {info.inventory} "
                  "--topology TOPOLOGY --probe iperf3")


@lab_app.command("down")
def down_cmd(
    name: str = _NAME,
    json_out: bool = typer.Option(False, "--json", help="Print what was removed as JSON."),
) -> None:
    """Remove the lab: processes, namespaces, bridges, veths (also after a crash)."""
    from fabriccheck import lab

    with exit_on_error():
        removed = lab.down(name)
    if json_out:
        write_json({"name": name, "removed": removed})
    else:
        out.print(f"lab {name!r}: removed {len(removed)} item(s)" if removed
                  else f"lab {name!r}: nothing to remove")


@lab_app.command("status")
def status_cmd(
    name: str = _NAME,
    json_out: bool = typer.Option(False, "--json", help="Print the status as JSON."),
) -> None:
    """Show what of the lab exists: namespaces, sshd per host, inventory."""
    from fabriccheck import lab

    with exit_on_error():
        st = lab.status(name)
    if json_out:
        write_json(st)
        return
    if not st["up"]:
        out.print(f"lab {name!r} is not up")
        return
    out.print(f"lab {name!r} up: {len(st['netns'])} namespaces, dir {st['dir']}")
    ray = st.get("ray") or {}
    raylets = ray.get("raylets") or {}
    for host, alive in (st.get("sshd") or {}).items():
        line = f"  {host:<12} sshd {'running' if alive else 'DEAD'}"
        if ray:
            line += ("" if host not in raylets else
                     f", raylet {'running' if raylets[host] else 'DEAD'}")
        out.print(line)
    if ray:
        out.print(f"ray head {ray['address']}: {'running' if ray['head'] else 'DEAD'}")
    for f in st.get("faults") or []:
        rest = " ".join(f"{k}={v}" for k, v in f.items() if k != "kind")
        out.print(f"  fault: {f['kind']} {rest}", highlight=False)
    if st.get("inventory"):
        out.print(f"inventory: {st['inventory']}")


@lab_app.command("faults")
def faults_cmd(
    faults: Annotated[Path | None, typer.Argument(help="Faults file; omit with --clear.")] = None,
    name: str = _NAME,
    clear: bool = typer.Option(False, "--clear", help="Remove every fault (heal the lab)."),
) -> None:
    """Replace the faults of a running lab without rebuilding it."""
    from fabriccheck import lab
    from fabriccheck.errors import ConfigError

    with exit_on_error():
        if (faults is None) != clear:
            raise ConfigError("give a faults file or --clear (not both)", field="faults")
        info = lab.apply_faults(name, None if clear else faults)
    err.print(f"lab {name!r}: {len(info.faults)} fault(s) active")
    for line in info.faults:
        out.print(f"  fault: {line}")
