"""Side effects of the lab on the kernel: namespaces, bridges, veths, tc, and their removal.

Every function acts only on names that carry the lab's prefix (see :mod:`fabriccheck.lab.plan`);
removal works from a prefix scan, so it also cleans up after a crashed run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence

from fabriccheck.errors import ExecutorError
from fabriccheck.lab.plan import HostPlan, LabPlan, ns_prefix, root_prefix
from fabriccheck.lab.routed import HOST_ROUTE, route_argv


def sh(argv: Sequence[str], *, check: bool = True, timeout_s: float = 30.0) -> str:
    """Run a local command; on failure raise ExecutorError naming the command and its stderr."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExecutorError(f"lab: {' '.join(argv)}: {exc}") from exc
    if check and proc.returncode != 0:
        raise ExecutorError(f"lab: `{' '.join(argv)}` failed: {proc.stderr.strip()[:300]}",
                            hint="is this run as root, with iproute2 installed?")
    return proc.stdout


def list_netns() -> list[str]:
    """Names of every network namespace (``ip netns list``)."""
    return [line.split()[0] for line in sh(["ip", "netns", "list"]).splitlines() if line.strip()]


def lab_netns(name: str) -> list[str]:
    """The namespaces of lab ``name``."""
    p = ns_prefix(name)
    return [n for n in list_netns() if n.startswith(p + "-") or n.startswith(p + ".")]


def root_links(name: str) -> list[str]:
    """Interfaces of lab ``name`` in the root namespace."""
    out = sh(["ip", "-o", "link", "show"])
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) > 1:
            ifname = parts[1].strip().split("@", 1)[0]
            if ifname.startswith(root_prefix(name)):
                names.append(ifname)
    return names


def netns_pids(ns: str) -> list[int]:
    out = sh(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in out.split() if x.isdigit()]


def kill_netns_processes(ns: str, *, grace_s: float = 1.0) -> int:
    """SIGTERM then SIGKILL every process in namespace ``ns``; returns how many there were."""
    pids = netns_pids(ns)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while pids and time.monotonic() < deadline:
            pids = netns_pids(ns)
            if pids:
                time.sleep(0.05)
        if not pids:
            break
    return len(pids)


def remove_lab(name: str) -> list[str]:
    """Remove everything of lab ``name`` (processes, namespaces, root interfaces)."""
    removed = []
    for ns in lab_netns(name):
        kill_netns_processes(ns)
        sh(["ip", "netns", "del", ns], check=False)
        removed.append(f"netns {ns}")
    for ifname in root_links(name):
        sh(["ip", "link", "del", ifname], check=False)
        removed.append(f"link {ifname}")
    return removed


def used_mgmt_octets() -> set[int]:
    """Third octets of 10.220.x.0/24 already routed in the root namespace."""
    used = set()
    for line in sh(["ip", "-4", "route", "show"]).splitlines():
        first = line.split()[0] if line.split() else ""
        if first.startswith("10.220."):
            parts = first.split("/")[0].split(".")
            if len(parts) == 4 and parts[2].isdigit():
                used.add(int(parts[2]))
    return used


def _tbf(ns: str, dev: str, rate_mbit: float) -> list[str]:
    burst = max(64_000, int(rate_mbit * 1e6 / 8 * 0.004))
    return ["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf",
            "rate", f"{rate_mbit:g}mbit", "burst", str(burst), "latency", "50ms"]


def _sysctls(ns: str) -> None:
    for key, val in (("net.ipv6.conf.all.disable_ipv6", "1"),
                     ("net.ipv6.conf.default.disable_ipv6", "1"),
                     ("net.ipv4.conf.all.arp_ignore", "1"),
                     ("net.ipv4.conf.all.arp_announce", "2")):
        sh(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"{key}={val}"], check=False)


def build_switches(plan: LabPlan) -> None:
    ns = plan.switch_ns
    sh(["ip", "netns", "add", ns])
    sh(["ip", "-n", ns, "link", "set", "lo", "up"])
    _sysctls(ns)
    for bridge in plan.bridges.values():
        sh(["ip", "-n", ns, "link", "add", bridge, "type", "bridge", "stp_state", "0",
            "forward_delay", "0"])
        sh(["ip", "-n", ns, "link", "set", bridge, "up"])
    for t in plan.trunks:
        sh(["ip", "-n", ns, "link", "add", t.port_a, "type", "veth", "peer", "name", t.port_b])
        for port, sw in ((t.port_a, t.a), (t.port_b, t.b)):
            sh(["ip", "-n", ns, "link", "set", port, "master", plan.bridges[sw]])
            sh(_tbf(ns, port, t.rate_mbit))
            sh(["ip", "-n", ns, "link", "set", port, "down" if t.down else "up"])


def build_mgmt(plan: LabPlan) -> None:
    br = plan.mgmt_bridge
    sh(["ip", "link", "add", br, "type", "bridge", "forward_delay", "0"])
    sh(["ip", "addr", "add", f"{plan.gateway_ip}/24", "dev", br])
    sh(["ip", "link", "set", br, "up"])


def build_host(plan: LabPlan, host: HostPlan) -> None:
    ns = host.netns
    sh(["ip", "netns", "add", ns])
    sh(["ip", "-n", ns, "link", "set", "lo", "up"])
    _sysctls(ns)
    # management: root bridge <-> mgmt0
    sh(["ip", "link", "add", host.mgmt_root_if, "type", "veth", "peer", "name", "mgmt0",
        "netns", ns])
    sh(["ip", "link", "set", host.mgmt_root_if, "master", plan.mgmt_bridge])
    sh(["ip", "link", "set", host.mgmt_root_if, "up"])
    sh(["ip", "-n", ns, "addr", "add", f"{host.mgmt_ip}/24", "dev", "mgmt0"])
    sh(["ip", "-n", ns, "link", "set", "mgmt0", "up"])
    # data NICs: <nic> in the host <-> h<i>r<rail> on the switch's bridge
    for nic in host.nics:
        sw = plan.port_ns(nic.port)
        sh(["ip", "-n", sw, "link", "add", nic.port, "type", "veth", "peer", "name", nic.name,
            "netns", ns])
        if plan.mode == "routed":
            sh(["ip", "-n", sw, "addr", "add", f"{nic.gateway}/{nic.prefix}", "dev", nic.port])
        else:
            sh(["ip", "-n", sw, "link", "set", nic.port, "master", plan.bridges[nic.switch]])
        sh(_tbf(sw, nic.port, nic.port_rate_mbit))
        sh(["ip", "-n", sw, "link", "set", nic.port, "down" if nic.link_down else "up"])
        sh(["ip", "-n", ns, "addr", "add", f"{nic.ip}/{nic.prefix}", "dev", nic.name])
        sh(_tbf(ns, nic.name, nic.rate_mbit))
        sh(["ip", "-n", ns, "link", "set", nic.name, "down" if nic.down else "up"])
    host_routes(host)


def host_routes(host: HostPlan) -> None:
    """Routed labs: the host reaches every leaf block through its leaf (skipped while down)."""
    for nic in host.nics:
        if nic.gateway and not (nic.down or nic.link_down):
            sh(["ip", "-n", host.netns, "route", "replace", HOST_ROUTE, "via", nic.gateway,
                "dev", nic.name])


#: a router forwards, answers traceroute from the inbound interface without rate limits, and
#: does not route over a link whose peer is down
ROUTER_SYSCTLS = (
    ("net.ipv4.ip_forward", "1"),
    ("net.ipv4.icmp_errors_use_inbound_ifaddr", "1"),
    ("net.ipv4.icmp_ratelimit", "0"),
    ("net.ipv4.conf.all.rp_filter", "0"),
    ("net.ipv4.conf.default.rp_filter", "0"),
    ("net.ipv4.conf.all.ignore_routes_with_linkdown", "1"),
    ("net.ipv4.conf.default.ignore_routes_with_linkdown", "1"),
)


#: source and destination address, protocol, source and destination port (policy 3 fields)
HASH_FIELDS_5TUPLE = "0x0037"


def multipath_hash_sysctls() -> tuple[tuple[str, str], ...]:
    """Layer-4 (5-tuple) ECMP hashing that holds on veths.

    Policy 1 (``fib_multipath_hash_policy=1``) is layer-4 hashing, but on a forwarded packet it
    reuses a hash the packet already carries: a TCP sender's random per-socket hash crosses a
    veth unchanged, so a flow's path would not follow its 5-tuple (a real wire carries no such
    hash). Policy 3 with the 5-tuple as its fields (Linux >= 5.18) always hashes the headers;
    older kernels get policy 1.
    """
    if os.path.exists("/proc/sys/net/ipv4/fib_multipath_hash_fields"):
        return (("net.ipv4.fib_multipath_hash_fields", HASH_FIELDS_5TUPLE),
                ("net.ipv4.fib_multipath_hash_policy", "3"))
    return (("net.ipv4.fib_multipath_hash_policy", "1"),)


def build_routers(plan: LabPlan) -> None:
    """Routed labs: one namespace per switch, its trunk veths with /31s and tbf (no routes yet)."""
    for r in plan.routers:
        sh(["ip", "netns", "add", r.netns])
        sh(["ip", "-n", r.netns, "link", "set", "lo", "up"])
        _sysctls(r.netns)
        for key, val in ROUTER_SYSCTLS + multipath_hash_sysctls():
            sh(["ip", "netns", "exec", r.netns, "sysctl", "-q", "-w", f"{key}={val}"])
    addr = {port: a for r in plan.routers for port, a in r.addresses}
    for t in plan.trunks:
        ns_a, ns_b = plan.port_ns(t.port_a), plan.port_ns(t.port_b)
        sh(["ip", "-n", ns_a, "link", "add", t.port_a, "type", "veth", "peer", "name", t.port_b,
            "netns", ns_b])
        for ns, port in ((ns_a, t.port_a), (ns_b, t.port_b)):
            sh(["ip", "-n", ns, "addr", "add", addr[port], "dev", port])
            sh(_tbf(ns, port, t.rate_mbit))
            sh(["ip", "-n", ns, "link", "set", port, "down" if t.down else "up"])


def router_routes(plan: LabPlan) -> None:
    """Routed labs: replace every switch's routes with the plan's (after links change state).

    Only the routes the lab added (``proto boot``) are flushed; connected ones stay. The plan's
    routes avoid down links, so every next hop is reachable.
    """
    for r in plan.routers:
        sh(["ip", "-n", r.netns, "route", "flush", "proto", "boot"], check=False)
        for route in r.routes:
            sh(route_argv(r.netns, route))


FLAP_TAG = "fclab-flap"
_FLAP = (
    'port=$1; permille=$2; while :; do sleep 1; '
    'r=$(od -An -N2 -tu2 /dev/urandom | tr -d " "); '
    'if [ $((r % 1000)) -lt "$permille" ]; then '
    'ip link set "$port" down; sleep 1; ip link set "$port" up; fi; done'
)


def start_flappers(plan: LabPlan) -> None:
    """One background loop per flapping link, in the switch namespace (``down`` kills them)."""
    for port, probability in plan.flapping:
        subprocess.Popen(
            ["ip", "netns", "exec", plan.port_ns(port), "sh", "-c", _FLAP, FLAP_TAG, port,
             str(int(round(probability * 1000)))],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )


def stop_flappers(plan: LabPlan) -> None:
    """Kill the flapping loops of the lab and bring their ports back up."""
    for pid in (p for ns in plan.switch_namespaces() for p in netns_pids(ns)):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if FLAP_TAG.encode() in cmd:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
