"""Command builders: a planned Test plus NIC addresses -> the host commands that run it (pure).

:func:`build_launch` is the one entry point; the SSH and Ray executors both call it and run the
returned :class:`~fabriccheck.probes.launch.ProbeLaunch` with
:func:`fabriccheck.executors.launch_runner.run_launch`. Launch patterns follow
reference/tool-formats.md §1.8, §2.6 and §4 (Azure NHC):

- ``iperf3``: server ``iperf3 -s -1 -B <ip> -p <port>`` (background, waited for), client
  ``iperf3 -J -c <server ip> -B <client ip> -p <port> -t <s>``; the client's JSON is the output.
- ``ib_write_bw``: server ``ib_write_bw -d <hca> -p <port> -F --report_gbits [-x gid]``, client the
  same plus the server's address; distinct ``-p`` per pair so pairs can share hosts.
- ``nccl``: ``mpirun -np N -H host:g,... -x NCCL_* all_reduce_perf -b .. -e .. -f 2 -g 1`` on the
  first node (or ``srun`` inside a Slurm allocation), ``NCCL_ALGO=Ring`` across nodes and
  ``NCCL_IB_HCA`` limited to the NICs of the rails under test; ``NCCL_DEBUG=INFO`` with
  ``NCCL_DEBUG_SUBSYS=INIT,NET`` unless the site's ``nccl_env`` sets ``NCCL_DEBUG``: the init and
  network lines only (a few per channel and rank), which say the network each rank used and
  whether GPUDirect RDMA was on (:mod:`fabriccheck.probes.nccl_transport`).
- ``allreduce-cpu``: ``python -m fabriccheck.probes.allreduce_cpu`` once per node (gloo over the
  rails' interfaces); rank 0 prints an nccl-tests table, so the nccl-tests parser reads it.
- ``signal``: ``sh -c <the signal's command>`` on the first node, placeholders filled and quoted
  (:mod:`fabriccheck.probes.signal_command`).
- ``traceroute``: ``traceroute -n -q 1 -T|-U --sport=<sport> -p <dport> -s <src ip> <dst ip>`` on
  the source host: the path of that exact 5-tuple (see :mod:`fabriccheck.probes.traceroute`).

Pinned 5-tuples (``params.sport`` / ``params.dport``, ECMP fabrics): iperf3 gets ``--cport
<sport>`` and ``-p <dport>``; ib_write_bw gets ``--flow_label=<sport & 0x3fff>`` for a sport in
49152-65535, because a RoCEv2 NIC that honours the flow label derives the UDP source port from it
(Linux ``rdma_flow_label_to_udp_sport``: ``(fl & 0x3fff) ^ (fl >> 14 & 0x3f) | 0xc000``), and
RoCEv2's destination port is always 4791; NICs that ignore the flow label hash their own sport,
and such a flow's path cannot be pinned (it keeps its candidate set).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fabriccheck.errors import ConfigError
from fabriccheck.models import Purpose, Test, nic_node
from fabriccheck.probes.launch import HostCommand, ProbeLaunch
from fabriccheck.probes.nccl_mnnvl import mnnvl_env

#: nccl-tests binary per collective (params["collective"])
NCCL_BINARIES = {
    "all_reduce": "all_reduce_perf",
    "all_gather": "all_gather_perf",
    "alltoall": "alltoall_perf",
    "sendrecv": "sendrecv_perf",
    "reduce_scatter": "reduce_scatter_perf",
}

#: what nccl-tests run with unless the site's ``nccl_env`` sets ``NCCL_DEBUG``: NCCL's INFO lines
#: of its init and network subsystems (which network, which HCAs, GPUDirect RDMA per channel),
#: not the whole debug stream (graph search, tuning, allocations)
NCCL_TRANSPORT_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}

DEFAULT_PORT = 18515  # perftest's default TCP port; executors add the test's index in its round
ROCE_UDP_PORT = 4791  # RoCEv2's destination UDP port
ROCE_SPORT_MIN = 0xC000  # RoCEv2 source ports derived from a flow label lie in 49152-65535


@dataclass(frozen=True)
class CommandOptions:
    """Site settings for the command builders (binaries, launcher, RoCE/GPU options).

    ``nccl_tests_dir`` is where ``all_reduce_perf`` & co. live ("" = on PATH); ``launcher`` is
    ``mpirun`` or ``srun``; ``nccl_env`` NCCL variables for nccl-tests (without ``NCCL_DEBUG``
    in it, :data:`NCCL_TRANSPORT_ENV` is added); ``gid_index`` is perftest's ``-x`` (RoCE v2:
    usually 3, None on IB); ``use_cuda`` a GPU index for ``ib_write_bw --use_cuda``
    (GPUDirect), None for host memory.
    """

    launcher: str = "mpirun"
    mpirun: str = "mpirun"
    srun: str = "srun"
    nccl_tests_dir: str = ""
    nccl_env: Mapping[str, str] = field(default_factory=lambda: dict(NCCL_TRANSPORT_ENV))
    iperf3: str = "iperf3"
    ib_write_bw: str = "ib_write_bw"
    gid_index: int | None = None
    use_cuda: int | None = None
    python: str = "python3"
    env: Mapping[str, str] = field(default_factory=dict)
    iperf3_duration_s: float = 5.0
    traceroute: str = "traceroute"
    traceroute_max_hops: int = 8


def _ip(nic_ips: Mapping[str, str], endpoint: str, test: Test) -> str:
    try:
        return nic_ips[endpoint]
    except KeyError:
        raise ConfigError(
            f"test {test.test_id}: no address for NIC {endpoint}",
            hint="add the NIC under hosts.<node>.nics in the inventory",
        ) from None


def _nic_name(endpoint: str) -> str:
    return endpoint.split("/", 1)[1]


def _pair(test: Test, nic_ips: Mapping[str, str]) -> tuple[str, str]:
    """(client NIC, server NIC) of a pair test: its flow, else the first NIC of each node."""
    if test.flows:
        return test.flows[0].src, test.flows[0].dst
    if len(test.nodes) != 2:
        raise ConfigError(f"test {test.test_id}: {test.probe} needs 2 nodes, got {len(test.nodes)}")
    ends = []
    for node in test.nodes:
        nics = sorted(e for e in nic_ips if nic_node(e) == node)
        if not nics:
            raise ConfigError(f"test {test.test_id}: no NIC address known for {node}")
        ends.append(nics[0])
    return ends[0], ends[1]


def _node_nics(test: Test) -> dict[str, list[str]]:
    """node -> NIC endpoints the test's flows use on it (rail order)."""
    out: dict[str, list[str]] = {n: [] for n in test.nodes}
    for f in test.flows:
        for e in (f.src, f.dst):
            lst = out.setdefault(nic_node(e), [])
            if e not in lst:
                lst.append(e)
    for lst in out.values():
        lst.sort()
    return out


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def iperf3_launch(
    test: Test, nic_ips: Mapping[str, str], port: int, opts: CommandOptions
) -> ProbeLaunch:
    """Server on the flow's destination NIC, client on its source NIC; output = client's JSON."""
    src, dst = _pair(test, nic_ips)
    src_ip, dst_ip = _ip(nic_ips, src, test), _ip(nic_ips, dst, test)
    duration = float(test.params.get("duration_s", opts.iperf3_duration_s))
    port = int(test.params.get("dport", port))
    server = HostCommand(
        host=nic_node(dst),
        argv=(opts.iperf3, "-s", "-1", "-B", dst_ip, "-p", str(port)),
        env=dict(opts.env),
        background=True,
        wait_port=port,
        role="server",
    )
    client_argv = [opts.iperf3, "-J", "-c", dst_ip, "-B", src_ip, "-p", str(port),
                   "-t", _fmt(duration)]
    if int(test.params.get("streams", 1)) > 1:
        client_argv += ["-P", str(int(test.params["streams"]))]
    if "sport" in test.params:
        client_argv += ["--cport", str(int(test.params["sport"]))]
    client = HostCommand(host=nic_node(src), argv=tuple(client_argv), env=dict(opts.env))
    return ProbeLaunch(steps=(server, client), output_step=1)


def ib_write_bw_launch(
    test: Test, nic_ips: Mapping[str, str], port: int, opts: CommandOptions
) -> ProbeLaunch:
    """perftest server on the destination HCA, client on the source HCA (``-d`` per side)."""
    src, dst = _pair(test, nic_ips)
    dst_ip = _ip(nic_ips, dst, test)
    common = ["-p", str(port), "-F", "--report_gbits"]
    if opts.gid_index is not None:
        common += ["-x", str(opts.gid_index)]
    if "size_bytes" in test.params:
        common += ["-s", str(int(test.params["size_bytes"]))]
    if "duration_s" in test.params:
        common += ["-D", _fmt(float(test.params["duration_s"]))]
    elif "iters" in test.params:
        common += ["-n", str(int(test.params["iters"]))]
    if opts.use_cuda is not None:
        common += [f"--use_cuda={opts.use_cuda}"]
    if "sport" in test.params:
        common += [f"--flow_label={flow_label_for_sport(int(test.params['sport']))}"]
    server = HostCommand(
        host=nic_node(dst),
        argv=(opts.ib_write_bw, "-d", _nic_name(dst), *common),
        env=dict(opts.env),
        background=True,
        wait_port=port,
        role="server",
    )
    client = HostCommand(
        host=nic_node(src),
        argv=(opts.ib_write_bw, "-d", _nic_name(src), *common, dst_ip),
        env=dict(opts.env),
    )
    return ProbeLaunch(steps=(server, client), output_step=1)


def roce_udp_sport(flow_label: int) -> int:
    """The RoCEv2 UDP source port a flow label gives (Linux ``rdma_flow_label_to_udp_sport``).

    >>> roce_udp_sport(0), roce_udp_sport(0x1234), roce_udp_sport(0x4001)
    (49152, 53812, 49152)
    """
    low, high = flow_label & 0x3FFF, flow_label & 0xFC000
    return (low ^ (high >> 14)) | ROCE_SPORT_MIN


def flow_label_for_sport(sport: int) -> int:
    """A flow label whose RoCEv2 source port is ``sport`` (49152-65535).

    >>> roce_udp_sport(flow_label_for_sport(53812))
    53812
    """
    if not ROCE_SPORT_MIN <= sport <= 0xFFFF:
        raise ConfigError(f"RoCEv2 source port {sport} is not in 49152-65535",
                          field="params.sport", hint="pin RoCE flows to ports 49152-65535")
    return sport & 0x3FFF


def traceroute_launch(test: Test, nic_ips: Mapping[str, str], opts: CommandOptions
                      ) -> ProbeLaunch:
    """A traceroute on the 5-tuple of the test's flow (``params.sport``/``dport`` required).

    TCP probes (``-T``) for an iperf3 flow, UDP (``-U``) to 4791 for RoCEv2 (``params.collective``
    is not used; ``dport == 4791`` selects UDP). ``-q 1``: one probe per hop, so every hop is
    hashed exactly like the flow.
    """
    src, dst = _pair(test, nic_ips)
    if "sport" not in test.params or "dport" not in test.params:
        raise ConfigError(f"test {test.test_id}: a traceroute needs params sport and dport",
                          hint="pin the flow's 5-tuple first")
    dport = int(test.params["dport"])
    argv = (opts.traceroute, "-n", "-q", "1", "-w", "1", "-m", str(opts.traceroute_max_hops),
            "-U" if dport == ROCE_UDP_PORT else "-T", f"--sport={int(test.params['sport'])}",
            "-p", str(dport), "-s", _ip(nic_ips, src, test), _ip(nic_ips, dst, test))
    return ProbeLaunch(steps=(HostCommand(host=nic_node(src), argv=argv, env=dict(opts.env)),),
                       output_step=0)


def _sizes(test: Test) -> tuple[int, int]:
    max_b = int(test.params.get("size_bytes", 1 << 30))
    min_b = int(test.params.get("min_bytes", max_b))
    return min(min_b, max_b), max_b


def nccl_launch(test: Test, nic_ips: Mapping[str, str], opts: CommandOptions) -> ProbeLaunch:
    """One launcher command on the first node: mpirun (or srun) over every node's GPUs."""
    collective = str(test.params.get("collective", "all_reduce"))
    if collective not in NCCL_BINARIES:
        raise ConfigError(f"test {test.test_id}: unknown collective {collective!r}",
                          hint=f"use one of {', '.join(NCCL_BINARIES)}")
    # 0: GPU count unknown (a topology imported without --gpus-per-node): one rank per node
    gpus = int(test.params.get("gpus_per_node", 8)) or 1
    binary = NCCL_BINARIES[collective]
    if opts.nccl_tests_dir:
        binary = f"{opts.nccl_tests_dir.rstrip('/')}/{binary}"
    min_b, max_b = _sizes(test)
    tool = [binary, "-b", str(min_b), "-e", str(max_b), "-f", "2", "-g", "1", "-c", "1"]
    if "iters" in test.params:
        tool += ["-n", str(int(test.params["iters"]))]
    env = dict(opts.nccl_env)
    if "NCCL_DEBUG" not in env:
        env.update(NCCL_TRANSPORT_ENV)
    env.update(opts.env)
    if len(test.nodes) > 1:
        env["NCCL_ALGO"] = "Ring"  # measure the network, not NVLS/Tree (tool-formats §3.7)
    hcas = sorted({_nic_name(e) for e in test.nics})
    if hcas:
        env["NCCL_IB_HCA"] = "=" + ",".join(f"{h}:1" for h in hcas)  # exact names, port 1
    if opts.gid_index is not None:
        env["NCCL_IB_GID_INDEX"] = str(opts.gid_index)
    if test.purpose == Purpose.DOMAIN:  # multi-node NVLink, the network off (docs/nvl72.md)
        env = mnnvl_env(env, test.params.gpu)
    k = len(test.nodes)
    if opts.launcher == "srun":
        argv = [opts.srun, "-N", str(k), "-w", ",".join(test.nodes),
                f"--ntasks-per-node={gpus}", "--export=ALL", *tool]
    elif opts.launcher == "mpirun":
        argv = [opts.mpirun, "--allow-run-as-root", "-np", str(k * gpus),
                "-H", ",".join(f"{n}:{gpus}" for n in test.nodes),
                "--map-by", f"ppr:{gpus}:node", "--bind-to", "numa"]
        for name in sorted(env):
            argv += ["-x", name]
        argv += tool
    else:
        raise ConfigError(f"unknown launcher {opts.launcher!r}", hint="use mpirun or srun")
    step = HostCommand(host=test.nodes[0], argv=tuple(argv), env=env, role="rank")
    return ProbeLaunch(steps=(step,), output_step=0)


def allreduce_cpu_launch(
    test: Test, nic_ips: Mapping[str, str], port: int, opts: CommandOptions
) -> ProbeLaunch:
    """One rank per node; rank 0 listens on its first used NIC; gloo uses the rails' interfaces."""
    node_nics = _node_nics(test)
    k = len(test.nodes)
    first = node_nics.get(test.nodes[0]) or []
    master = _ip(nic_ips, first[0], test) if (k > 1 and first) else "127.0.0.1"
    min_b, max_b = _sizes(test)
    collective = str(test.params.get("collective", "all_reduce"))
    steps = []
    for rank, node in enumerate(test.nodes):
        argv = [opts.python, "-m", "fabriccheck.probes.allreduce_cpu",
                "--rank", str(rank), "--world-size", str(k),
                "--master-addr", master, "--master-port", str(port),
                "--min-bytes", str(min_b), "--max-bytes", str(max_b),
                "--collective", collective]
        if "iters" in test.params:
            argv += ["--iters", str(int(test.params["iters"]))]
        env = dict(opts.env)
        ifaces = [_nic_name(e) for e in node_nics.get(node, [])]
        if k > 1 and ifaces:
            env["GLOO_SOCKET_IFNAME"] = ",".join(ifaces)
        steps.append(HostCommand(host=node, argv=tuple(argv), env=env, role="rank"))
    return ProbeLaunch(steps=tuple(steps), output_step=0)


def build_launch(
    test: Test,
    nic_ips: Mapping[str, str],
    *,
    port: int = DEFAULT_PORT,
    options: CommandOptions | None = None,
) -> ProbeLaunch:
    """The host commands that run ``test``.

    Parameters
    ----------
    test : Test
        The planned test (probe, nodes, flows, params).
    nic_ips : Mapping[str, str]
        ``node/nic`` endpoint -> IP address (``Inventory.nic_ips()``).
    port : int
        TCP port for this test's server / rendezvous; give concurrent tests distinct ports.
    options : CommandOptions, optional
        Binaries, launcher and RoCE/GPU settings.

    Returns
    -------
    ProbeLaunch
        Ordered steps; ``output_step`` names the one whose stdout the parser reads.

    Raises
    ------
    ConfigError
        Unknown probe or collective, or a NIC without an address.
    """
    opts = options or CommandOptions()
    if test.probe == "iperf3":
        return iperf3_launch(test, nic_ips, port, opts)
    if test.probe == "ib_write_bw":
        return ib_write_bw_launch(test, nic_ips, port, opts)
    if test.probe == "nccl":
        return nccl_launch(test, nic_ips, opts)
    if test.probe == "allreduce-cpu":
        return allreduce_cpu_launch(test, nic_ips, port, opts)
    if test.probe == "signal":
        from fabriccheck.probes.signal_command import signal_launch

        return signal_launch(test, nic_ips)
    if test.probe == "traceroute":
        return traceroute_launch(test, nic_ips, opts)
    raise ConfigError(f"test {test.test_id}: unknown probe {test.probe!r}",
                      hint="use nccl, ib_write_bw, iperf3, allreduce-cpu or traceroute")
