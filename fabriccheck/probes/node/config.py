"""Configuration facts read from sectioned outputs and judged against the spec's ``config:``
block and the settings' own rules (docs/config-checks.md): the node's here, a NIC's in
:mod:`.config_nic` (same sections, same rules).

The preflight's ``node-config`` command prints ``== driver`` (``/proc/driver/nvidia/version``),
``== peermem`` (``ls -d /sys/module/nvidia_peermem /sys/module/nv_peer_mem``), ``== mlx5_core``
(its module version), ``== topo`` (``nvidia-smi topo -m``) and ``== acs`` (the bridge, bus and
``ACSCtl`` lines of ``lspci -D -vvv``); ``nic-config`` prints ``== devinfo`` (``ibv_devinfo -d``)
and on RoCE ``== ethtool`` (``ethtool -i``), ``== mtu``, ``== qos`` (``mlnx_qos -i``), ``== ecn``
(the ``ecn/roce_np|roce_rp/enable/<prio>`` files) and ``== gids`` (``gid_attrs/types/<i>``); both
end with ``== end`` (without it the output was cut: incomplete).

Every setting goes into ``facts["config"]`` for the peers' judgement
(:mod:`fabriccheck.inference.config_peers`); a setting the spec names (the catalogue entry's
``params.expect``, set from the spec) or a setting with a rule of its own (ACS redirect on a
PCIe switch port above a GPU or NIC; a GPU whose nearest NIC is across the CPU sockets on a node
with a NIC per GPU) is judged here and listed in ``facts["config_judged"]`` so the peers leave
it alone. A setting that could not be read is ``cfg-unverified`` (warn) when the spec names it,
``cfg-unread`` (info) otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from fabriccheck.probes._text import ANSI_RE
from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.probes.node.findings import Finding, NodeReport
from fabriccheck.probes.node.pcie import GPU, NIC, OTHER, Device, classify
from fabriccheck.probes.node.smi_table import parse_topo

NODE_SECTIONS = ("driver", "peermem", "mlx5_core", "topo", "acs")
NIC_SECTIONS = ("devinfo", "ethtool", "mtu", "qos", "ecn", "gids")
END = "end"
#: setting -> the catalogue entry that judges it (its severity is a wrong value's)
SETTING_CHECKS: Mapping[str, str] = {
    "gpu_driver": "cfg-gpu-driver", "gpudirect": "cfg-gpudirect", "nic_driver": "cfg-nic-driver",
    "gpu_nic": "cfg-gpu-nic", "acs": "cfg-acs", "firmware": "cfg-nic-firmware",
    "mtu": "cfg-mtu", "trust": "cfg-trust", "pfc": "cfg-pfc", "ecn": "cfg-ecn", "gid": "cfg-gid",
    # nvidia-smi -q Fabric (smi_fabric.py): a tray's cluster/clique against its rack's trays
    "nvlink_clique": "gpu-fabric-clique-peers",
}
#: ``nvidia-smi topo -m`` distances, nearest first
DISTANCES = ("PIX", "PXB", "PHB", "NODE", "SYS")

#: ``^== name``, with ``==`` first (``(?<![^\n]==)``: at a line start) to be searched quickly
_MARK = re.compile(r"==(?<![^\n]==) (\S[^\n]*?)\s*$", re.M)
_NVRM = re.compile(r"NVRM version:.*?Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)")
_LEGEND = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$", re.M)
_DEV = re.compile(r"^(?P<addr>(?:[0-9a-fA-F]{4,}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
                  r"(?P<cls>\w[^:]*?):\s+(?P<desc>.*?)\s*$")
_BUS = re.compile(r"Bus: primary=([0-9a-fA-F]+), secondary=([0-9a-fA-F]+), "
                  r"subordinate=([0-9a-fA-F]+)")
_PORT_TYPE = re.compile(r"Express \(v\d\) (Root Port|Downstream Port|Upstream Port|Endpoint"
                        r"|Legacy Endpoint|Root Complex Integrated Endpoint)")
_ACSCTL = re.compile(r"ACSCtl:\s*(.*)$")
_REV = re.compile(r"\s*\((?:rev|prog-if) [^)]*\)")
_HEX = frozenset("0123456789abcdefABCDEF")  # how a device header starts
_CLASS_ID = re.compile(r"\s*\[[0-9a-fA-F]{4}\]$")
_REDIRECT = re.compile(r"\b(?:ReqRedir|CmpltRedir)\+")
_MISSING = re.compile(r"No such file|not found|cannot access|Permission denied|command not"
                      r"|Operation not permitted|No such device", re.I)


# ---- the sections ------------------------------------------------------------------------------
def split_sections(text: str) -> tuple[dict[str, str], bool]:
    """The ``== name`` sections of ``text`` (name -> body) and whether ``== end`` closed them;
    without ``== end`` the last section may be cut, and it is left out.

    >>> split_sections("== mtu\\n9000\\n== end\\n")
    ({'mtu': '9000\\n'}, True)
    >>> split_sections("== mtu\\n9000\\n== qos\\nPriority trust")
    ({'mtu': '9000\\n'}, False)
    """
    marks = list(_MARK.finditer(text))
    out: dict[str, str] = {}
    for m, nxt in zip(marks, [*marks[1:], None], strict=True):
        name = m[1].split()[0]
        if name == END:
            return out, True
        if nxt is None:  # no ``== end``: this section may be cut
            return out, False
        out[name] = text[m.end() + 1:nxt.start()]
    return out, False


def _looks_like(text: str, names: Sequence[str]) -> bool:
    found = [m[1].split()[0] for m in _MARK.finditer(text[:400_000])]
    known = [n for n in found if n in names]
    return bool(found) and found[0] in names and (len(set(known)) >= 2 or END in found)


def looks_like_node_config(text: str) -> bool:
    """True for the ``node-config`` output (``== driver``, ``== topo``, ... sections).

    >>> looks_like_node_config("== driver\\nNVRM version: ...\\n== peermem\\n== end\\n")
    True
    """
    return _looks_like(text, NODE_SECTIONS)


def looks_like_nic_config(text: str) -> bool:
    """True for the ``nic-config`` output (``== devinfo``, ``== mtu``, ... sections).

    >>> looks_like_nic_config("== devinfo\\nhca_id:\\tmlx5_0\\n== end\\n")
    True
    """
    return _looks_like(text, NIC_SECTIONS)


def unreadable(body: str | None) -> bool:
    """True when a section is absent, empty or starts with a missing-file/tool error.

    >>> unreadable("sh: 1: mlnx_qos: not found"), unreadable("9000")
    (True, False)
    """
    return body is None or not body.strip() or bool(_MISSING.search(body.strip().splitlines()[0]))


@dataclass
class Judged:
    """What one output's judgement collects: findings, the settings read (``config``), the
    settings judged here (``judged``) and other facts."""

    catalogue: Catalogue
    findings: list[Finding] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    judged: set[str] = field(default_factory=set)
    facts: dict[str, Any] = field(default_factory=dict)

    def expect(self, setting: str, name: str = "expect") -> Any:
        """What the spec wants for ``setting`` (its entry's ``params[name]``; None: nothing)."""
        return self.catalogue.param(SETTING_CHECKS[setting], name)

    def wrong(self, setting: str, what: str, part: str | None = None, line: str = "") -> None:
        """A finding of ``setting``'s entry (its severity: a wrong value's)."""
        self.findings.append(self.catalogue.finding(SETTING_CHECKS[setting], part=part,
                                                    what=what, line=line))

    def unread(self, setting: str, why: str, part: str = "node") -> None:
        """``setting`` could not be read: a warn when the spec names it, else an info."""
        named = self.expect(setting) is not None
        self.findings.append(self.catalogue.finding(
            "cfg-unverified" if named else "cfg-unread", part=part,
            what=f"{setting}: {why}" + (" (the spec names it)" if named else "")))
        if named:
            self.judged.add(setting)

    def report(self, tool: str, complete: bool, reason: str) -> NodeReport:
        """The report, its facts with ``config``, ``config_judged`` and ``config_severity``."""
        facts = {**self.facts, "config": dict(self.config),
                 "config_judged": sorted(self.judged),
                 "config_severity": {s: self.catalogue.entry(SETTING_CHECKS[s]).severity
                                     for s in self.config}}
        return NodeReport(tool, tuple(self.findings), facts, complete=complete, reason=reason)


def cut_reason(text: str, closed: bool) -> str:
    """Why an output is incomplete when ``== end`` is missing ("" when it is there).

    >>> cut_reason("== mtu\\n9000\\n== qos\\nPriority", False)
    "the output stops before '== end' (in section qos, left out)"
    """
    if closed:
        return ""
    marks = _MARK.findall(text)
    where = f" (in section {marks[-1].split()[0]}, left out)" if marks else ""
    return f"the output stops before '== end'{where}"


# ---- node: driver, GPUDirect, mlx5_core --------------------------------------------------------
def nvidia_driver(text: str) -> tuple[str | None, bool]:
    """The driver version in ``/proc/driver/nvidia/version`` and whether it is the open module.

    >>> nvidia_driver("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  "
    ...               "Release Build  (dvs-builder@U16)  Fri May 31 09:44:19 UTC 2024")
    ('550.90.07', True)
    """
    m = _NVRM.search(text)
    return (m[1] if m else None), bool(m and "Open Kernel Module" in m[0])


def peer_module(text: str) -> str | None:
    """The GPUDirect peer-memory module ``ls -d`` found (``nvidia_peermem`` / ``nv_peer_mem``).

    >>> peer_module("ls: cannot access '/sys/module/nvidia_peermem': No such file or directory\\n"
    ...             "/sys/module/nv_peer_mem\\n")
    'nv_peer_mem'
    """
    for line in text.splitlines():
        m = re.fullmatch(r"\s*/sys/module/(nvidia_peermem|nv_peer_mem)/?\s*", line)
        if m:
            return m[1]
    return None


def _node_basics(j: Judged, sec: Mapping[str, str]) -> None:
    version, open_module = nvidia_driver(sec.get("driver", ""))
    if version:
        j.config["gpu_driver"] = version
        j.facts["gpu_driver_open"] = open_module
        want = j.expect("gpu_driver")
        if want is not None:
            j.judged.add("gpu_driver")
            if version != str(want):
                j.wrong("gpu_driver", f"NVIDIA driver {version}, the spec wants {want}")
    elif "driver" in sec:
        j.unread("gpu_driver", "no NVRM version line (is the NVIDIA driver loaded?)")
    if "peermem" in sec:
        module = peer_module(sec["peermem"])
        via = module or ("dmabuf" if open_module else None)
        j.config["gpudirect"] = "on" if via else "off"
        j.facts["gpudirect_via"] = via
        if j.expect("gpudirect") == "required":
            j.judged.add("gpudirect")
            if via is None:
                j.wrong("gpudirect", "GPUDirect RDMA is off: nvidia_peermem is not loaded "
                        "(the spec requires GPUDirect)", line=sec["peermem"].strip()[:200])
        if via == "dmabuf":
            j.findings.append(j.catalogue.finding("cfg-gpudirect-dmabuf"))
    body = sec.get("mlx5_core")
    if body is not None and body.strip():
        word = body.strip().splitlines()[0].strip()
        j.config["nic_driver"] = "inbox" if _MISSING.search(word) else word


# ---- node: GPU-NIC locality (nvidia-smi topo -m) ----------------------------------------------
def nearest(text: str, side: str = "GPU") -> dict[str, tuple[str, str]]:
    """Per GPU (``side="GPU"``) or per NIC (``"NIC"``) of ``nvidia-smi topo -m``: the nearest
    device of the other kind and the distance (``PIX`` ... ``SYS``); NICs by the NIC legend's
    names.

    >>> t = ("\\tGPU0\\tGPU1\\tNIC0\\tNIC1\\tCPU Affinity\\tNUMA Affinity\\n"
    ...      "GPU0\\t X \\tNV18\\tPIX\\tSYS\\t0-55\\t0\\n"
    ...      "GPU1\\tNV18\\t X \\tSYS\\tPXB\\t56-111\\t1\\n"
    ...      "NIC0\\tPIX\\tSYS\\t X \\tSYS\\nNIC1\\tSYS\\tPXB\\tSYS\\t X \\n\\n"
    ...      "NIC Legend:\\n\\n  NIC0: mlx5_0\\n  NIC1: mlx5_1\\n")
    >>> nearest(t)
    {'GPU0': ('mlx5_0', 'PIX'), 'GPU1': ('mlx5_1', 'PXB')}
    >>> nearest(t, "NIC")["mlx5_1"]
    ('GPU1', 'PXB')
    """
    return _nearest(_topo(text), side)


def _topo(text: str) -> tuple[dict[str, str], list[str], dict[str, list[str]]]:
    """The NIC legend, the devices and the rows of ``nvidia-smi topo -m``."""
    text = ANSI_RE.sub("", text)
    devices, rows, _tails = parse_topo(text.lstrip("\n"))
    return dict(_LEGEND.findall(text)), devices, rows


def _nearest(topo: tuple[dict[str, str], list[str], dict[str, list[str]]], side: str
             ) -> dict[str, tuple[str, str]]:
    legend, devices, rows = topo
    idx = {d: i for i, d in enumerate(devices)}
    other = [d for d in devices if d.startswith("NIC" if side == "GPU" else "GPU")]
    out: dict[str, tuple[str, str]] = {}
    for dev in (d for d in devices if d.startswith(side) and d in rows):
        cells = [(DISTANCES.index(rows[dev][idx[o]]), o) for o in other
                 if idx[o] < len(rows[dev]) and rows[dev][idx[o]] in DISTANCES]
        if cells:
            rank, near = min(cells)
            out[legend.get(dev, dev)] = (legend.get(near, near), DISTANCES[rank])
    return out


def _locality(j: Judged, body: str | None) -> None:
    """Each GPU's nearest NIC on a node with a NIC per GPU; each NIC's nearest GPU when the
    NICs are fewer (then a GPU without a NIC of its own is the design, not a fault)."""
    if unreadable(body) or "GPU0" not in (body or ""):
        j.unread("gpu_nic", "nvidia-smi topo -m printed no matrix")
        return
    topo = _topo(body or "")
    devices = topo[1]
    gpus = sum(d.startswith("GPU") for d in devices)
    nics = sum(d.startswith("NIC") for d in devices)
    j.facts["topo"] = {"gpus": gpus, "nics": nics}
    j.facts["config_class"] = f"{gpus} GPUs, {nics} NICs"
    per_gpu = nics >= gpus  # a NIC per GPU: a GPU without one on its socket is miswired
    near = _nearest(topo, "GPU" if per_gpu else "NIC")
    if not near:
        return  # no NIC columns: nothing to pair
    # all at SYS is the platform (a VM hiding its PCIe tree), not one misseated card
    per_gpu = per_gpu and any(d != "SYS" for _b, d in near.values())
    j.facts["gpu_nic_pairs" if per_gpu else "nic_gpu_pairs"] = {
        a: f"{b} {d}" for a, (b, d) in near.items()}
    j.config["gpu_nic"] = max((d for _b, d in near.values()), key=DISTANCES.index)
    want = j.expect("gpu_nic")
    limit = DISTANCES.index(want) if want in DISTANCES else None
    if limit is not None:
        j.judged.add("gpu_nic")
    for dev, (other, dist) in near.items():
        part = f"gpu {dev[3:]}" if per_gpu else f"nic {dev}"
        name = f"{dev}'s nearest {'NIC' if per_gpu else 'GPU'} {other}"
        if limit is not None and DISTANCES.index(dist) > limit:
            j.wrong("gpu_nic", f"{name} is {dist}, the spec allows {want} or nearer", part=part)
        elif limit is None and per_gpu and dist == "SYS":
            j.judged.add("gpu_nic")  # its own rule: the peers need not say it again
            j.wrong("gpu_nic", f"{name} is across the CPU sockets (SYS) on a node with a NIC "
                    "per GPU", part=part)


# ---- node: PCIe ACS (lspci -vvv) --------------------------------------------------------------
@dataclass
class PciNode:
    """One device of ``lspci -D -vvv`` with what ACS judging needs."""

    address: str
    cls: str
    desc: str
    port: str = ""
    buses: tuple[int, int] | None = None  # secondary, subordinate
    acsctl: str = ""
    denied: bool = False

    @property
    def redirects(self) -> bool:
        """ACS P2P request or completion redirect is on."""
        return bool(_REDIRECT.search(self.acsctl))

    def domain_bus(self) -> tuple[str, int]:
        return _domain_bus(self.address)


@lru_cache(maxsize=8192)
def _domain_bus(address: str) -> tuple[str, int]:
    """The PCI domain (``0000`` when the address has none) and bus number of an address."""
    parts = address.split(":")
    return (parts[0] if len(parts) == 3 else "0000"), int(parts[-2], 16)


def parse_pci(text: str) -> list[PciNode]:
    """The devices of ``lspci -vvv`` (whole, or filtered to headers, ``Bus:``, ``Express`` and
    ``ACSCtl`` lines).

    >>> n = parse_pci("0000:17:00.0 PCI bridge: PLX Switch\\n"
    ...               "\\tBus: primary=17, secondary=18, subordinate=18, sec-latency=0\\n"
    ...               "\\tCapabilities: [68] Express (v2) Downstream Port (Slot+), MSI 00\\n"
    ...               "\\t\\tACSCtl:\\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+\\n")
    >>> n[0].port, n[0].buses, n[0].redirects
    ('Downstream Port', (24, 24), True)
    """
    out: list[PciNode] = []
    for line in text.splitlines():
        if line[:1] in _HEX and (m := _DEV.match(line)):
            out.append(PciNode(m["addr"], _CLASS_ID.sub("", m["cls"]), m["desc"]))
            continue
        if not out:
            continue
        d = out[-1]
        if "<access denied>" in line:
            d.denied = True
        # each pattern's literal first: most lines hold none of them
        if "Bus:" in line and (m := _BUS.search(line)):
            d.buses = (int(m[2], 16), int(m[3], 16))
        elif "Express" in line and (m := _PORT_TYPE.search(line)):
            d.port = m[1]
        elif "ACSCtl:" in line and (m := _ACSCTL.search(line)):
            d.acsctl = " ".join(m[1].split())
    return out


def _kind(d: PciNode, catalogue: Catalogue) -> str:
    """``GPU``, ``NIC`` or ``other`` by the PCIe catalogue's device classes."""
    kind = classify(Device(d.address, d.cls, d.desc), catalogue)
    return kind.upper() if kind in (GPU, NIC) else OTHER


#: a device with its (domain, bus)
Placed = tuple[tuple[str, int], PciNode]


def _below(bridge: PciNode, ends: Sequence[Placed]) -> list[PciNode]:
    """The devices of ``ends`` on a bus the bridge forwards to."""
    if bridge.buses is None:
        return []
    dom, lo, hi = bridge.domain_bus()[0], *bridge.buses
    return [e for (d, bus), e in ends if d == dom and lo <= bus <= hi]


def _part(d: PciNode) -> str:
    return Device(d.address, d.cls, d.desc).part()


def _ends(nodes: Sequence[PciNode], catalogue: Catalogue) -> list[Placed]:
    """The GPUs and NICs of ``nodes``, each with its domain and bus."""
    return [(d.domain_bus(), d) for d in nodes if _kind(d, catalogue) != OTHER]


def _acs(j: Judged, nodes: Sequence[PciNode], ends: Sequence[Placed]) -> None:
    if not nodes or (not any(d.acsctl for d in nodes) and any(d.denied for d in nodes)):
        why = ("lspci could not read the capabilities (run as root)" if nodes
               else "lspci printed no devices")
        j.unread("acs", why)
        return
    j.judged.add("acs")
    bad, host = [], []
    for b in (d for d in nodes if d.buses and d.redirects):
        below = _below(b, ends)
        (bad if below and b.port != "Root Port" else host).append((b, below))
    j.config["acs"] = "redirect" if bad else "off"
    j.facts["acs_redirect_ports"] = [b.address for b, _ in bad]
    for b, below in bad:
        names = ", ".join(f"{_kind(e, j.catalogue)} {e.address}" for e in below[:4])
        j.wrong("acs", f"ACS redirects peer-to-peer traffic at {b.port or 'bridge'} {b.address} "
                f"above {names}", part=_part(b), line=f"ACSCtl: {b.acsctl}")
    for b, below in host[:8]:
        j.findings.append(j.catalogue.finding(
            "cfg-acs-host", part=_part(b), line=f"ACSCtl: {b.acsctl}",
            what=f"ACS redirect on {b.port or 'bridge'} {b.address}"
                 + (" (a root port)" if below else " (no GPU or NIC below it)")))


def _sku(j: Judged, nodes: Sequence[PciNode], ends: Sequence[Placed]) -> None:
    """The node's class for its peers: GPU and NIC counts, and the GPU, NIC and PCIe switch
    models lspci names (a server of another make is not a peer)."""
    switches = [b for b in nodes if b.port == "Downstream Port" and _below(b, ends)]
    models = sorted({_REV.sub("", d.desc) for d in (*(e for _, e in ends), *switches)})
    base = j.facts.get("config_class", "")
    if models:
        j.facts["config_class"] = "; ".join(x for x in (base, ", ".join(models)) if x)


def judge_node_config(text: str, catalogue: Catalogue, context: Any) -> NodeReport:
    """Judge the ``node-config`` output (the module doc's rules)."""
    sec, closed = split_sections(text)
    j = Judged(catalogue)
    _node_basics(j, sec)
    if "topo" in sec:
        _locality(j, sec["topo"])
    if "acs" in sec:
        nodes = parse_pci(sec["acs"])
        ends = _ends(nodes, catalogue)
        _acs(j, nodes, ends)
        _sku(j, nodes, ends)
    missing = [s for s in NODE_SECTIONS if s not in sec]
    reason = cut_reason(text, closed) or (f"no section(s) {', '.join(missing)}" if missing else "")
    return j.report("node-config", not reason, reason)
