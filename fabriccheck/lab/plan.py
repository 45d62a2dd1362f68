"""The lab plan: a tree topology plus faults -> namespaces, interfaces, addresses, tc (pure).

Layout of a lab named ``N`` (everything carries the prefix, so only our own things are touched):

- one network namespace per host, ``fclab-N-<host>``, with one interface per NIC named as in
  the topology (``eth0`` ...) on rail subnet ``192.168.<100+rail>.<i+1>/24``, and ``mgmt0``
  on the management subnet ``10.220.<m>.<i+2>/24`` where its sshd listens;
- one namespace ``fclab-N.switches`` holding a Linux bridge per switch (``s<k>``), a port per
  host NIC (``h<i>r<rail>``) and both ends of every switch-to-switch link (``t<k>a``/``t<k>b``);
- in the root namespace a management bridge ``flN-br`` (``10.220.<m>.1``) with a veth per
  host (``flN-<i>``), so the executor (and Ray) reach every host's sshd.

Every link gets ``tc tbf`` at its ``gbps`` × ``rate_scale`` in both directions. Faults become
real: ``*_degraded``/``node_slow`` lower a rate, ``*_down`` sets an interface down,
``link_flapping`` runs a loop in the switch namespace that, each second, takes the link's port
down for a second with the fault's probability, ``node_unreachable`` starts no sshd,
``node_hang`` shadows the probe binaries with a hanging script on that host's PATH.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from fabriccheck.errors import ConfigError
from fabriccheck.faults import FaultSet
from fabriccheck.lab import routed
from fabriccheck.lab.routed import RouterPlan
from fabriccheck.models import LinkKey, nic_node
from fabriccheck.topology.model import Topology

NAME_RE = re.compile(r"^[a-z0-9]{1,6}$")
IFNAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")
MAX_HOSTS = 250
#: commands a hung host's PATH shadows with a script that never returns
HANG_COMMANDS = ("iperf3", "ib_write_bw", "mpirun", "srun", "all_reduce_perf", "python", "python3")


def ns_prefix(name: str) -> str:
    """Prefix of every namespace of lab ``name`` (hosts ``<p>-host``, switches ``<p>.switches``)."""
    return f"fclab-{name}"


def root_prefix(name: str) -> str:
    """Prefix of every interface lab ``name`` creates in the root namespace."""
    return f"fl{name}-"


@dataclass(frozen=True)
class NicPlan:
    endpoint: str
    name: str
    rail: int
    ip: str
    switch: str
    port: str  # the bridge port in the switch namespace
    rate_mbit: float  # host -> switch (tbf on the host interface)
    port_rate_mbit: float  # switch -> host (tbf on the switch port)
    down: bool = False  # the NIC itself is down (nic_down)
    link_down: bool = False  # the cable is down (link_down on the NIC's link)
    prefix: int = 24  # routed labs: 31
    gateway: str = ""  # routed labs: the leaf's address on this link


@dataclass(frozen=True)
class HostPlan:
    name: str
    index: int
    netns: str
    mgmt_ip: str
    mgmt_root_if: str
    nics: tuple[NicPlan, ...]
    sshd: bool = True
    hang: bool = False


@dataclass(frozen=True)
class TrunkPlan:
    link: LinkKey
    a: str
    b: str
    port_a: str
    port_b: str
    rate_mbit: float
    down: bool = False
    ip_a: str = ""  # routed labs: the addresses of the two ends (/31)
    ip_b: str = ""


@dataclass(frozen=True)
class LabPlan:
    name: str
    topology: str
    mgmt_net: str  # "10.220.<m>"
    switch_ns: str
    mgmt_bridge: str
    bridges: dict[str, str]  # switch -> bridge name
    hosts: tuple[HostPlan, ...]
    trunks: tuple[TrunkPlan, ...]
    faults: tuple[str, ...] = ()  # human lines: what was injected and how
    rate_scale: float = 1.0
    #: (switch-namespace port, probability per second of a 1 s outage) per flapping link
    flapping: tuple[tuple[str, float], ...] = ()
    mode: str = "bridged"  # or "routed" (see fabriccheck.lab.routed)
    routers: tuple[RouterPlan, ...] = ()  # routed labs: one namespace per switch
    #: routed labs: switch port -> the namespace it lives in (bridged: all in switch_ns)
    port_netns: dict[str, str] = field(default_factory=dict)

    @property
    def gateway_ip(self) -> str:
        return f"{self.mgmt_net}.1"

    def port_ns(self, port: str) -> str:
        """The namespace of switch port ``port``."""
        return self.port_netns.get(port, self.switch_ns)

    def switch_namespaces(self) -> tuple[str, ...]:
        """Every namespace holding switch ports."""
        return tuple(r.netns for r in self.routers) or (self.switch_ns,)

    def hop_names(self) -> dict[str, str]:
        """Routed labs: every router interface address -> its switch (what traceroute shows)."""
        return {addr.split("/")[0]: r.name for r in self.routers for _, addr in r.addresses}

    def host(self, name: str) -> HostPlan:
        return next(h for h in self.hosts if h.name == name)


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise ConfigError(f"bad lab name {name!r}", field="--name",
                          hint="use 1-6 lowercase letters or digits")
    return name


def _mbit(gbps: float, scale: float, factor: float = 1.0) -> float:
    return round(gbps * 1000.0 * scale * factor, 3)


@dataclass
class _FaultEffects:
    """What the faults do to the lab: rate factors, interfaces down, flapping links, notes."""

    nic_factor: dict[str, float] = field(default_factory=dict)
    link_factor: dict[LinkKey, float] = field(default_factory=dict)
    nic_down: set[str] = field(default_factory=set)
    link_down: set[LinkKey] = field(default_factory=set)
    flaps: dict[LinkKey, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def plan_lab(
    topo: Topology,
    faults: FaultSet | None = None,
    *,
    name: str = "lab",
    mgmt_octet: int = 0,
    rate_scale: float = 1.0,
) -> LabPlan:
    """Plan a lab for ``topo`` (see the module docstring).

    Parameters
    ----------
    topo : Topology
        A tree-shaped topology (``load_topology(path, require_tree=True)``).
    faults : FaultSet, optional
        Faults to make real; validated against ``topo``.
    name : str
        Lab name (1-6 of ``[a-z0-9]``); every namespace and root interface carries it.
    mgmt_octet : int
        Third octet of the management subnet ``10.220.<octet>.0/24``.
    rate_scale : float
        Multiplies every link rate (``gbps`` × 1000 × scale Mbit/s).

    Raises
    ------
    ConfigError
        Bad name, too many hosts, or a NIC name that is not a valid interface name.
    """
    check_name(name)
    if len(topo.nodes) > MAX_HOSTS:
        raise ConfigError(f"the lab supports at most {MAX_HOSTS} hosts, topology has "
                          f"{len(topo.nodes)}", source=topo.source or topo.name)
    faults = (faults or FaultSet()).validate(topo)
    fx = _fault_effects(topo, faults)
    unreachable = set(faults.unreachable_nodes())
    hung = set(faults.hung_nodes())
    bridges = {sw: f"s{k}" for k, sw in enumerate(sorted(topo.switches))}
    hosts = [
        HostPlan(
            name=node_name, index=i, netns=f"{ns_prefix(name)}-{node_name}",
            mgmt_ip=f"10.220.{mgmt_octet}.{i + 2}", mgmt_root_if=f"{root_prefix(name)}{i}",
            nics=_plan_nics(topo, node_name, i, fx, rate_scale),
            sshd=node_name not in unreachable, hang=node_name in hung,
        )
        for i, node_name in enumerate(sorted(topo.nodes))
    ]  # fmt: skip
    trunks = _plan_trunks(topo, fx, rate_scale)
    plan = LabPlan(
        name=name, topology=topo.name, mgmt_net=f"10.220.{mgmt_octet}",
        switch_ns=f"{ns_prefix(name)}.switches", mgmt_bridge=f"{root_prefix(name)}br",
        bridges=bridges, hosts=tuple(hosts), trunks=tuple(trunks), faults=tuple(fx.notes),
        rate_scale=rate_scale, flapping=_flapping_ports(hosts, trunks, fx.flaps),
    )
    return _routed(plan, topo) if topo.lab_mode == "routed" else plan


def _routed(plan: LabPlan, topo: Topology) -> LabPlan:
    """The bridged plan made routed: a namespace per switch, /31 addresses, ECMP routes."""
    routed.check_routable(topo)
    if plan.flapping:
        raise ConfigError("the routed lab cannot make link_flapping real (a downed port takes "
                          "its routes with it)", field="faults",
                          hint="use link_down or link_degraded, or a bridged lab")
    leaves = routed.leaf_numbers(topo)
    sw_ns = {sw: f"{ns_prefix(plan.name)}.sw{k}" for k, sw in enumerate(sorted(topo.switches))}
    addrs: dict[str, list[tuple[str, str]]] = {sw: [] for sw in topo.switches}
    port_netns: dict[str, str] = {}
    ports_used: dict[str, int] = {}
    hosts = []
    for h in plan.hosts:
        nics = []
        for nic in h.nics:
            k = ports_used.get(nic.switch, 0)
            if k >= routed.MAX_PORTS:
                raise ConfigError(f"{nic.switch} has more than {routed.MAX_PORTS} host ports",
                                  source=topo.source or topo.name)
            ports_used[nic.switch] = k + 1
            gw, ip = routed.host_link_ips(leaves[nic.switch], k)
            addrs[nic.switch].append((nic.port, f"{gw}/31"))
            port_netns[nic.port] = sw_ns[nic.switch]
            nics.append(replace(nic, ip=ip, prefix=31, gateway=gw))
        hosts.append(replace(h, nics=tuple(nics)))
    trunks = []
    for k, t in enumerate(plan.trunks):
        ip_a, ip_b = routed.trunk_ips(k)
        addrs[t.a].append((t.port_a, f"{ip_a}/31"))
        addrs[t.b].append((t.port_b, f"{ip_b}/31"))
        port_netns[t.port_a], port_netns[t.port_b] = sw_ns[t.a], sw_ns[t.b]
        trunks.append(replace(t, ip_a=ip_a, ip_b=ip_b))
    routes = routed.plan_routes(topo, {t.link: (t.ip_a, t.ip_b) for t in trunks},
                                frozenset(t.link for t in trunks if t.down))
    routers = tuple(
        routed.RouterPlan(name=sw, netns=sw_ns[sw], addresses=tuple(addrs[sw]),
                          routes=routes[sw])
        for sw in sorted(topo.switches))
    return replace(plan, mode="routed", hosts=tuple(hosts), trunks=tuple(trunks),
                   routers=routers, port_netns=port_netns, bridges={})


def _fault_effects(topo: Topology, faults: FaultSet) -> _FaultEffects:
    """Turn each fault into rate factors, downed interfaces or flaps, with a note on how."""
    fx = _FaultEffects()
    for f in faults.faults:
        if f.kind == "nic_degraded":
            fx.nic_factor[f.nic] = fx.nic_factor.get(f.nic, 1.0) * f.factor
            fx.notes.append(f"{f.nic}: tbf at {f.factor:g} x rate (both directions)")
        elif f.kind == "nic_down":
            fx.nic_down.add(f.nic)
            fx.notes.append(f"{f.nic}: ip link set down")
        elif f.kind == "node_slow":
            for nic in topo.nodes[f.node].nics:
                fx.nic_factor[nic.endpoint] = fx.nic_factor.get(nic.endpoint, 1.0) * f.factor
            fx.notes.append(f"{f.node}: every NIC at {f.factor:g} x rate")
        elif f.kind == "link_degraded":
            fx.link_factor[f.link] = fx.link_factor.get(f.link, 1.0) * f.factor
            fx.notes.append(f"{f.link[0]} -- {f.link[1]}: tbf at {f.factor:g} x rate")
        elif f.kind == "link_down":
            fx.link_down.add(f.link)
            fx.notes.append(f"{f.link[0]} -- {f.link[1]}: ip link set down")
        elif f.kind == "link_flapping":
            fx.flaps[f.link] = f.probability
            fx.notes.append(f"{f.link[0]} -- {f.link[1]}: down for 1 s with "
                            f"p={f.probability:g} each second")  # fmt: skip
        elif f.kind == "node_unreachable":
            fx.notes.append(f"{f.node}: sshd not running")
        elif f.kind == "node_hang":
            fx.notes.append(f"{f.node}: probe commands hang (PATH shadowed)")
        else:
            raise ConfigError(f"the lab cannot make {f.kind!r} real", source=faults.source,
                              field="faults", hint="use it with the simulator only")
    return fx


def _plan_nics(
    topo: Topology, node_name: str, i: int, fx: _FaultEffects, rate_scale: float
) -> tuple[NicPlan, ...]:
    """The NICs of host number ``i``, by rail: address, switch port, rate and down states."""
    nics = []
    for nic in sorted(topo.nodes[node_name].nics, key=lambda n: n.rail):
        if not IFNAME_RE.match(nic.name) or nic.name == "mgmt0":
            raise ConfigError(f"NIC name {nic.name!r} of {node_name} is not usable as a "
                              "Linux interface name", source=topo.source or topo.name,
                              hint="use names like eth0 (<= 15 characters)")
        ep = nic.endpoint
        sw = topo.attachment[ep]
        link = next(lk for lk in topo.links.values() if ep in (lk.a, lk.b))
        factor = fx.nic_factor.get(ep, 1.0) * fx.link_factor.get(link.key, 1.0)
        rate = _mbit(min(nic.gbps, link.gbps), rate_scale, factor)
        nics.append(NicPlan(
            endpoint=ep, name=nic.name, rail=nic.rail, ip=f"192.168.{100 + nic.rail}.{i + 1}",
            switch=sw, port=f"h{i}r{nic.rail}", rate_mbit=rate, port_rate_mbit=rate,
            down=ep in fx.nic_down, link_down=link.key in fx.link_down,
        ))
    return tuple(nics)


def _plan_trunks(topo: Topology, fx: _FaultEffects, rate_scale: float) -> list[TrunkPlan]:
    """One trunk per switch-to-switch link; every other link must end on a NIC."""
    trunks = []
    k = 0
    for key in sorted(topo.links):
        lk = topo.links[key]
        if lk.a in topo.switches and lk.b in topo.switches:
            trunks.append(TrunkPlan(
                link=key, a=key[0], b=key[1], port_a=f"t{k}a", port_b=f"t{k}b",
                rate_mbit=_mbit(lk.gbps, rate_scale, fx.link_factor.get(key, 1.0)),
                down=key in fx.link_down,
            ))
            k += 1
        elif not (nic_node(lk.a) in topo.nodes or nic_node(lk.b) in topo.nodes):
            raise ConfigError(f"link {lk.a} -- {lk.b} joins neither a NIC nor two switches",
                              source=topo.source or topo.name)
    return trunks


def _flapping_ports(
    hosts: list[HostPlan], trunks: list[TrunkPlan], flaps: dict[LinkKey, float]
) -> tuple[tuple[str, float], ...]:
    """The switch-namespace port of each flapping link (host ports, then trunks) and its odds."""
    flapping = [(n.port, flaps[lk]) for h in hosts for n in h.nics
                for lk in flaps if n.endpoint in lk]
    flapping += [(t.port_a, flaps[t.link]) for t in trunks if t.link in flaps]
    return tuple(flapping)
