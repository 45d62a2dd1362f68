"""NIC port state and rate judged (``ibstat``, ``ibstatus``, sysfs port files, ``ethtool``).

A port counts when the topology uses it (``NodeContext.used_ports`` names its CA or netdev);
when that is unknown an InfiniBand port is taken as a fabric port and an Ethernet one is not
(management ports, unused second ports and VFs are Ethernet). A used port that is not
Active/LinkUp, or that trained below its peers (same link layer and NIC model), is a fault;
the same on a port nothing uses is info.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabriccheck.probes.node import counters as ctr
from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.probes.node.findings import Finding, NodeReport

IB, ETH = "InfiniBand", "Ethernet"


@dataclass(frozen=True)
class Port:
    """One port as a tool printed it; ``state``/``phys_state`` normalised (``ACTIVE``,
    ``LINKUP``), ``*_text`` as printed."""

    ca: str
    port: str
    state: str
    phys_state: str
    rate_gbps: float | None
    rate_text: str = ""
    link_layer: str = IB
    ca_type: str = ""
    fw: str = ""
    netdev: str = ""
    state_text: str = ""
    phys_text: str = ""
    line: str = ""

    @property
    def label(self) -> str:
        """``mlx5_0/1``, the netdev, or ``?`` when the tool did not say."""
        if self.ca:
            return f"{self.ca}/{self.port}" if self.port else self.ca
        return self.netdev or (f"port {self.port}" if self.port else "?")

    @property
    def part(self) -> str:
        """The finding's part: ``port mlx5_0/1`` or ``nic eth2``."""
        if not self.ca and self.netdev:
            return f"nic {self.netdev}"
        return f"port {self.label}" if self.label != "?" else "port"

    def to_fact(self) -> dict[str, Any]:
        out: dict[str, Any] = {"port": self.label, "state": self.state_text or self.state}
        if self.phys_text or self.phys_state:
            out["phys_state"] = self.phys_text or self.phys_state
        out.update({"rate_gbps": _num(self.rate_gbps), "link_layer": self.link_layer})
        if self.rate_text and self.rate_text != str(_num(self.rate_gbps)):
            out["rate"] = self.rate_text
        for key in ("ca_type", "fw", "netdev"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out


@dataclass
class _Scan:
    """What a port-listing parser read: ports, and why the listing is incomplete."""

    ports: list[Port] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)


def _num(x: float | None) -> float | int | None:
    if x is None:
        return None
    return int(x) if float(x).is_integer() else x


def norm_state(text: str) -> str:
    """``4: ACTIVE`` / ``Active`` -> ``ACTIVE``; ``Initializing`` -> ``INIT``.

    >>> norm_state("4: ACTIVE"), norm_state("Active"), norm_state("2: Initializing")
    ('ACTIVE', 'ACTIVE', 'INIT')
    """
    word = re.sub(r"^\s*\d+\s*:\s*", "", text).strip().upper().replace(" ", "")
    return "INIT" if word.startswith("INIT") else word


def state_text(text: str) -> str:
    """The state word as printed, without its number (``4: ACTIVE`` -> ``ACTIVE``).

    >>> state_text("5: LinkUp")
    'LinkUp'
    """
    return re.sub(r"^\s*\d+\s*:\s*", "", text).strip()


def rate_gbps(text: str) -> float | None:
    """``400``, ``400 Gb/sec (4X NDR)`` -> 400.0; None when there is no number.

    >>> rate_gbps("200 Gb/sec (4X HDR)"), rate_gbps("Unknown")
    (200.0, None)
    """
    m = re.match(r"^\s*(\d+(?:\.\d+)?)", text)
    return float(m[1]) if m else None


def _used(p: Port, context: Any) -> bool | None:
    used = getattr(context, "used_ports", None)
    if used is None:
        return None
    names = {p.ca, f"{p.ca}/{p.port}", p.netdev} - {"", "/"}
    return bool(names & set(used))


def _is_up(p: Port, catalogue: Catalogue) -> bool:
    m = catalogue.entry("port-ib-down" if p.link_layer == IB else "port-eth-down").match
    states = [s.upper() for s in m.get("up_states", ["ACTIVE"])]
    phys = [s.upper() for s in m.get("up_phys_states", ["LINKUP"])]
    return p.state in states and (not p.phys_state or p.phys_state in phys)


def _is_vf(p: Port, catalogue: Catalogue) -> bool:
    m = catalogue.entry("port-eth-vf-rate").match
    rate = " ".join(p.rate_text.split())
    return p.link_layer != IB and (rate in m.get("rate_texts", [])
                                   or p.ca_type in m.get("vf_ca_types", []))


def port_findings(ports: Sequence[Port], catalogue: Catalogue, context: Any) -> list[Finding]:
    """Findings of the ports' states and rates (the module doc's rules)."""
    out: list[Finding] = []
    peers: dict[tuple[str, str], list[Port]] = {}
    for p in ports:
        used = _used(p, context)
        fabric = used is True or (used is None and p.link_layer == IB)
        phys = p.phys_text or p.phys_state
        shown = f"{p.state_text or p.state}" + (f"/{phys}" if phys else "")
        if not _is_up(p, catalogue):
            check = ("port-ib-down" if p.link_layer == IB else "port-eth-down") if fabric \
                else "port-unused-down"
            why = "the topology uses it" if used else (
                "unused by the topology" if used is False else
                "InfiniBand, taken as a fabric port" if fabric else
                "Ethernet, not known to be a fabric port")
            out.append(catalogue.finding(
                check, part=p.part, line=p.line,
                what=f"{p.link_layer} port {p.label} is {shown} ({why})"))
            continue
        if _is_vf(p, catalogue):
            out.append(catalogue.finding(
                "port-eth-vf-rate", part=p.part, line=p.line,
                what=f"{p.label}: Ethernet virtual function reporting "
                     f"{p.rate_text or p.rate_gbps}; not a fabric port, rate not judged"))
            continue
        if p.rate_gbps is not None:
            peers.setdefault((p.link_layer, p.ca_type), []).append(p)
    for (layer, ca_type), group in peers.items():
        if len(group) < 2:
            continue
        top = max(p.rate_gbps or 0 for p in group)
        for p in group:
            if (p.rate_gbps or 0) >= top:
                continue
            used = _used(p, context)
            fabric = used is True or (used is None and layer == IB)
            model = f" {ca_type}" if ca_type else ""
            out.append(catalogue.finding(
                "port-rate-low" if fabric else "port-rate-low-unused", part=p.part, line=p.line,
                what=f"{p.label} trained at {p.rate_gbps:g} Gb/s, its {len(group) - 1} "
                     f"{layer}{model} peers reach {top:g} Gb/s"))
    return out


def _mode(values: Iterable[Any]) -> Any:
    counts = Counter(v for v in values if v not in (None, ""))
    return counts.most_common(1)[0][0] if counts else None


def _common(values: Sequence[Any]) -> Any:
    return values[0] if values and all(v == values[0] for v in values) else None


def port_facts(ports: Sequence[Port], catalogue: Catalogue) -> dict[str, Any]:
    """Per-port facts and the node's counts (``ib_ports``, ``ports_active``, ...)."""
    up = [p for p in ports if _is_up(p, catalogue)]
    ib = [p for p in ports if p.link_layer == IB]
    eth = [p for p in ports if p.link_layer != IB]
    facts: dict[str, Any] = {
        "ports": [p.to_fact() for p in ports], "ports_active": len(up),
        "ib_ports": len(ib), "ib_ports_active": sum(p in up for p in ib),
        "eth_ports": len(eth), "eth_ports_active": sum(p in up for p in eth),
        "eth_ports_down": sum(p not in up for p in eth),
    }
    optional = {
        "ib_port_state": _common([p.state_text or p.state for p in ib]),
        "ib_phys_state": _common([p.phys_text or p.phys_state for p in ib]),
        "ib_rate_gbps": _num(_mode(p.rate_gbps for p in ib if p in up)),
        "eth_rate_gbps": _num(_mode(p.rate_gbps for p in eth if p in up)),
        "eth_down_phys_state": _common([p.phys_text or p.phys_state for p in eth
                                        if p not in up]),
        "eth_reported_rate": eth[0].rate_text if len(eth) == 1 and eth[0].rate_text else None,
        "fw": _mode(p.fw for p in (ib or ports)),
    }
    facts.update({k: v for k, v in optional.items() if v is not None})
    return facts


def _report(tool: str, scan: _Scan, catalogue: Catalogue, context: Any) -> NodeReport:
    findings = [*scan.findings, *port_findings(scan.ports, catalogue, context)]
    facts = {**port_facts(scan.ports, catalogue), **scan.facts}
    if not scan.ports and not scan.problems:
        scan.problems.append("no ports listed")
    return NodeReport(tool, tuple(findings), facts, not scan.problems, "; ".join(scan.problems))


def _truncated(scan: _Scan, catalogue: Catalogue, part: str, what: str) -> None:
    scan.findings.append(catalogue.finding("port-incomplete", part=part, what=what))
    scan.problems.append(what)


# --- ibstat ------------------------------------------------------------------------------------

_CA = re.compile(r"^CA '(?P<ca>[^']+)'\s*$")
_PORT = re.compile(r"^\s+Port (?P<n>\d+):\s*$")
_KV = re.compile(r"^\s+(?P<k>[A-Za-z][A-Za-z _]*?):\s*(?P<v>.*?)\s*$")
_IBTOOL_ERR = re.compile(r"^(?P<tool>ibpanic|ibwarn|ibstat):\s*(?P<msg>.*)$")
_IBSTAT_ATTR = re.compile(r"^\s+(?:CA type|Number of ports|Firmware version|Port \d+):")
_PORT_KEYS = ("State", "Physical state", "Rate")


def looks_like_ibstat(text: str) -> bool:
    """True for ``ibstat`` output (``CA 'mlx5_0'`` then indented CA attributes), or the
    ``ibpanic:`` line ibstat prints when it fails.

    >>> looks_like_ibstat("CA 'mlx5_0'\\n\\tCA type: MT4129\\n")
    True
    >>> looks_like_ibstat("Infiniband device 'mlx5_0' port 1 status:\\n")
    False
    """
    lines = text[:200_000].splitlines()
    for i, line in enumerate(lines):
        if _CA.match(line):
            return any(_IBSTAT_ATTR.match(x) for x in lines[i + 1:i + 4])
    first = next((x for x in lines if x.strip()), "")
    return first.startswith("ibpanic:") and "IB device" in first


def _ibstat_blocks(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    cas: list[dict[str, Any]] = []
    errors: list[str] = []
    port: dict[str, Any] | None = None
    for line in text.splitlines():
        if m := _CA.match(line):
            cas.append({"ca": m["ca"], "attrs": {}, "ports": []})
            port = None
        elif m := _IBTOOL_ERR.match(line.strip()):
            errors.append(line.strip())
        elif (m := _PORT.match(line)) and cas:
            port = {"n": m["n"], "attrs": {}, "line": ""}
            cas[-1]["ports"].append(port)
        elif (m := _KV.match(line)) and cas:
            target = port["attrs"] if port is not None else cas[-1]["attrs"]
            target[m["k"]] = m["v"]
            if port is not None and m["k"] == "State":
                port["line"] = line.strip()
    return cas, errors


def judge_ibstat(text: str, catalogue: Catalogue, context: Any) -> NodeReport:
    """Judge ``ibstat`` output (all CAs, or one).

    >>> from fabriccheck.probes.node.catalogue import builtin_catalogue
    >>> from fabriccheck.probes.node.judge import NodeContext
    >>> t = ("CA 'mlx5_0'\\n\\tNumber of ports: 1\\n\\tPort 1:\\n\\t\\tState: Down\\n"
    ...      "\\t\\tPhysical state: Polling\\n\\t\\tRate: 10\\n\\t\\tLink layer: InfiniBand\\n")
    >>> judge_ibstat(t, builtin_catalogue(), NodeContext()).node_verdict
    'fault'
    """
    cas, errors = _ibstat_blocks(text)
    scan = _Scan()
    with_layer = any("Link layer" in p["attrs"] for c in cas for p in c["ports"])
    for c in cas:
        attrs = c["attrs"]
        want = attrs.get("Number of ports", "")
        if not c["ports"] or (want.isdigit() and len(c["ports"]) < int(want)):
            _truncated(scan, catalogue, f"nic {c['ca']}",
                       f"CA {c['ca']}: {len(c['ports'])} of {want or '?'} port sections listed")
        for p in c["ports"]:
            a = p["attrs"]
            missing = [k for k in (*_PORT_KEYS, *(("Link layer",) if with_layer else ()))
                       if k not in a]
            if missing:
                _truncated(scan, catalogue, f"port {c['ca']}/{p['n']}",
                           f"port {c['ca']}/{p['n']} stops before {', '.join(missing)}")
            if "State" not in a:
                continue
            scan.ports.append(Port(
                c["ca"], p["n"], norm_state(a["State"]), norm_state(a.get("Physical state", "")),
                rate_gbps(a.get("Rate", "")), a.get("Rate", ""), a.get("Link layer", IB),
                attrs.get("CA type", ""), attrs.get("Firmware version", ""),
                state_text=a["State"], phys_text=a.get("Physical state", ""), line=p["line"]))
    for err in errors:
        dev = re.search(r"device '([^']+)'", err)
        scan.findings.append(catalogue.finding(
            "port-tool-error", part=f"nic {dev[1]}" if dev else "nic", line=err,
            what=f"ibstat stopped: {err[:160]}"))
        scan.problems.append(f"ibstat error: {err[:120]}")
        scan.facts.setdefault("tool_error", f"{err.split(':')[0]} {dev[1] if dev else ''}".strip())
    return _report("ibstat", scan, catalogue, context)


# --- ibstatus ----------------------------------------------------------------------------------

_IBSTATUS_HEAD = re.compile(r"^Infiniband device '(?P<ca>[^']+)' port (?P<n>\d+) status:\s*$")
_IBSTATUS_KV = re.compile(r"^\s+(?P<k>[a-z_ ]+?):\s*(?P<v>.*?)\s*$")


def looks_like_ibstatus(text: str) -> bool:
    """True for ``ibstatus`` output (``Infiniband device 'mlx5_0' port 1 status:`` blocks).

    >>> looks_like_ibstatus("Infiniband device 'mlx5_0' port 1 status:\\n\\tstate: 4: ACTIVE\\n")
    True
    """
    return any(_IBSTATUS_HEAD.match(x) for x in text[:200_000].splitlines())


def judge_ibstatus(text: str, catalogue: Catalogue, context: Any) -> NodeReport:
    """Judge ``ibstatus`` output.

    >>> from fabriccheck.probes.node.catalogue import builtin_catalogue
    >>> from fabriccheck.probes.node.judge import NodeContext
    >>> t = ("Infiniband device 'mlx5_0' port 1 status:\\n\\tstate:\\t 4: ACTIVE\\n"
    ...      "\\tphys state:\\t 5: LinkUp\\n\\trate:\\t 400 Gb/sec (4X NDR)\\n"
    ...      "\\tlink_layer:\\t InfiniBand\\n")
    >>> judge_ibstatus(t, builtin_catalogue(), NodeContext()).node_verdict
    'healthy'
    """
    blocks: list[dict[str, Any]] = []
    for line in text.splitlines():
        if m := _IBSTATUS_HEAD.match(line):
            blocks.append({"ca": m["ca"], "n": m["n"], "attrs": {}, "line": ""})
        elif blocks and (m := _IBSTATUS_KV.match(line)):
            blocks[-1]["attrs"][m["k"]] = m["v"]
            if m["k"] == "state":
                blocks[-1]["line"] = line.strip()
    scan = _Scan()
    with_layer = any("link_layer" in b["attrs"] for b in blocks)
    for b in blocks:
        a = b["attrs"]
        missing = [k for k in ("state", "phys state", "rate",
                               *(("link_layer",) if with_layer else ())) if k not in a]
        if missing:
            _truncated(scan, catalogue, f"port {b['ca']}/{b['n']}",
                       f"port {b['ca']}/{b['n']} stops before {', '.join(missing)}")
        if "state" not in a:
            continue
        scan.ports.append(Port(
            b["ca"], b["n"], norm_state(a["state"]), norm_state(a.get("phys state", "")),
            rate_gbps(a.get("rate", "")), a.get("rate", ""), a.get("link_layer", IB),
            state_text=state_text(a["state"]), phys_text=state_text(a.get("phys state", "")),
            line=b["line"]))
    return _report("ibstatus", scan, catalogue, context)


# --- sysfs -------------------------------------------------------------------------------------

_SYSFS_PORT = re.compile(r"(?:^|/)(?:(?P<ca>[^/\s]+)/)?ports/(?P<n>\d+)/(?P<rest>[^\s]+)$")
_SYSFS_DEV = re.compile(r"(?:^|/)(?P<ca>[^/\s]+)/device/(?P<f>(?:current|max)_link_"
                        r"(?:width|speed))$")
_PORT_FILES = ("state", "phys_state", "rate", "link_layer")
_GREP = re.compile(r"^(?P<path>(?:[^\s:]*/)?(?:ports/\d+/[^\s:]+|[^\s:/]+/device/"
                   r"(?:current|max)_link_(?:width|speed))|state|phys_state|rate|link_layer)"
                   r":(?P<value>.*)$")
_STATE_VALUE = re.compile(r"^\d+: [A-Z_]+$")
_HEAD = re.compile(r"^==> (?P<path>\S+) <==\s*$")


def sysfs_files_from_text(text: str) -> tuple[dict[str, str], int, int]:
    """``{path: content}`` from ``grep . <files>`` (``path:value`` lines) or ``head <files>``
    (``==> path <==`` blocks), with how many non-blank lines were read and their total.

    >>> sysfs_files_from_text("/sys/class/infiniband/mlx5_0/ports/1/state:4: ACTIVE\\n")[0]
    {'/sys/class/infiniband/mlx5_0/ports/1/state': '4: ACTIVE'}
    """
    files: dict[str, str] = {}
    head: str | None = None
    read = total = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        total += 1
        if m := _HEAD.match(line):
            head = m["path"]
            files[head] = ""
            read += 1
        elif head is not None:
            files[head] = (files[head] + "\n" + line).strip("\n")
            read += 1
        elif m := _GREP.match(line.rstrip()):
            path = m["path"]
            files[path] = (files[path] + "\n" + m["value"]) if path in files else m["value"]
            read += 1
    return files, read, total


def looks_like_sysfs_text(text: str) -> bool:
    """True for InfiniBand sysfs port files printed by ``grep .`` or ``head``: nearly every
    line is one, and a port's ``state`` or ``rate`` is among them.

    >>> looks_like_sysfs_text("/sys/class/infiniband/mlx5_0/ports/1/state:4: ACTIVE\\n"
    ...                       "/sys/class/infiniband/mlx5_0/ports/1/rate:400 Gb/sec (4X NDR)\\n")
    True
    >>> looks_like_sysfs_text("state: 4: ACTIVE\\n")
    False
    """
    files, read, total = sysfs_files_from_text(text[:200_000])
    states = [v for p, v in files.items() if p.rsplit("/", 1)[-1] == "state"
              and (p == "state" or _SYSFS_PORT.search(p))]
    return bool(states) and all(_STATE_VALUE.match(v) for v in states) \
        and read >= 0.8 * total


def judge_sysfs_text(text: str, catalogue: Catalogue, context: Any) -> NodeReport:
    """Judge sysfs port files printed as ``grep . /sys/class/infiniband/*/ports/*/*`` or
    ``head`` (see :func:`judge_sysfs_files`)."""
    files, _, _ = sysfs_files_from_text(text)
    return judge_sysfs_files(files, catalogue, context)


def judge_sysfs_files(files: Mapping[str, str], catalogue: Catalogue, context: Any
                      ) -> NodeReport:
    """Judge InfiniBand sysfs port files given as ``{relative path: content}``: a port folder
    (``state``, ``phys_state``, ``rate``, ``link_layer``, ``counters/*``), or paths naming
    ``<ca>/ports/<n>/...`` and ``<ca>/device/{current,max}_link_{width,speed}``.

    >>> from fabriccheck.probes.node.catalogue import builtin_catalogue
    >>> from fabriccheck.probes.node.judge import NodeContext
    >>> f = {"state": "1: DOWN\\n", "phys_state": "2: Polling\\n", "rate": "10 Gb/sec (4X SDR)\\n"}
    >>> judge_sysfs_files(f, builtin_catalogue(), NodeContext()).node_verdict
    'fault'
    """
    ports: dict[tuple[str, str], dict[str, str]] = {}
    devices: dict[str, dict[str, str]] = {}
    for path, content in files.items():
        path = path.strip().removeprefix("./")
        value = content.strip()
        if m := _SYSFS_DEV.search(path):
            devices.setdefault(m["ca"], {})[m["f"]] = value
        elif m := _SYSFS_PORT.search(path):
            ports.setdefault((m["ca"] or "", m["n"]), {})[m["rest"]] = value
        else:
            ports.setdefault(("", ""), {})[path] = value
    scan = _Scan()
    extra: list[Finding] = []
    counters_read: dict[str, dict[str, int]] = {}
    for (ca, n), f in sorted(ports.items()):
        if not any(k in f for k in _PORT_FILES) and not any(k.startswith("counters/") for k in f):
            continue
        label = f"{ca}/{n}" if ca else (f"port {n}" if n else "?")
        part = f"port {ca}/{n}" if ca else "port"
        missing = [k for k in ("state", "rate") if k not in f]
        if missing:
            _truncated(scan, catalogue, part, f"{label}: no {' or '.join(missing)} file")
        if "state" in f:
            scan.ports.append(Port(
                ca, n, norm_state(f["state"]), norm_state(f.get("phys_state", "")),
                rate_gbps(f.get("rate", "")), f.get("rate", ""), f.get("link_layer") or IB,
                netdev=f.get("gid_attrs/ndevs/0", ""), state_text=state_text(f["state"]),
                phys_text=state_text(f.get("phys_state", "")), line=f"state: {f['state']}"))
        values = {k.removeprefix("counters/"): int(v) for k, v in f.items()
                  if k.startswith("counters/") and v.isdigit()}
        if values:
            counters_read[label] = values
            extra += ctr.judge_sysfs_counters(values, part, catalogue,
                                              {k: f"{k}: {v}" for k, v in values.items()},
                                              getattr(context, "uptime_s", None))
    extra += _sysfs_pcie(devices, catalogue)
    scan.findings += extra
    if counters_read:
        scan.facts["counters"] = counters_read
    if devices:
        scan.facts["pcie"] = devices
    if not scan.ports and (counters_read or devices):
        return NodeReport("ib-sysfs", tuple(scan.findings), scan.facts, not scan.problems,
                          "; ".join(scan.problems))
    return _report("ib-sysfs", scan, catalogue, context)


def _sysfs_pcie(devices: Mapping[str, Mapping[str, str]], catalogue: Catalogue
                ) -> list[Finding]:
    from fabriccheck.probes.node import pcie

    out: list[Finding] = []
    for ca, f in sorted(devices.items()):
        link = pcie.Link(
            cap_speed_gts=pcie.speed_gts(f.get("max_link_speed", "")),
            cap_width=pcie.width(f.get("max_link_width", "")),
            sta_speed_gts=pcie.speed_gts(f.get("current_link_speed", "")),
            sta_width=pcie.width(f.get("current_link_width", "")))
        line = ", ".join(f"{k}: {v}" for k, v in sorted(f.items()))
        out += pcie.link_findings("nic", f"pcie {ca} (sysfs)", link, catalogue, line)
    return out


# --- ethtool <if> and ethtool -i <if> ----------------------------------------------------------

_SETTINGS = re.compile(r"^Settings for (?P<dev>\S+?):\s*$")
_ETH_KV = re.compile(r"^\s+(?P<k>[A-Za-z][\w -]*?):\s*(?P<v>.*?)\s*$")
_INFO_KV = re.compile(r"^(?P<k>driver|version|firmware-version|expansion-rom-version|bus-info|"
                      r"supports-[\w-]+):\s*(?P<v>.*?)\s*$")


def looks_like_ethtool(text: str) -> bool:
    """True for ``ethtool <if>`` (``Settings for eth0:`` with ``Link detected:``/``Speed:``)
    or ``ethtool -i <if>`` (``driver:`` and ``bus-info:`` lines).

    >>> looks_like_ethtool("Settings for eth0:\\n\\tSpeed: 400000Mb/s\\n\\tLink detected: yes\\n")
    True
    >>> looks_like_ethtool("driver: mlx5_core\\nversion: 24.04\\nbus-info: 0000:1a:00.0\\n")
    True
    """
    head = text[:200_000]
    lines = head.splitlines()
    if any(_SETTINGS.match(x) for x in lines):
        return bool(re.search(r"^\s+(?:Link detected|Speed|Supported link modes):", head, re.M))
    keys = {m["k"] for x in lines if (m := _INFO_KV.match(x))}
    return "driver" in keys and bool(keys & {"bus-info", "firmware-version"})


def _link_modes_mbps(value: str) -> list[int]:
    return [int(x) for x in re.findall(r"\b(\d+)base", value)]


def _ethtool_blocks(text: str) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    settings: list[dict[str, Any]] = []
    infos: list[dict[str, str]] = []
    last_key = ""
    for line in text.splitlines():
        if m := _SETTINGS.match(line):
            settings.append({"dev": m["dev"], "attrs": {}, "lines": {}})
            last_key = ""
        elif m := _INFO_KV.match(line):
            if m["k"] == "driver" or not infos:
                infos.append({})
            infos[-1][m["k"]] = m["v"]
        elif settings and (m := _ETH_KV.match(line)):
            last_key = m["k"]
            settings[-1]["attrs"][last_key] = m["v"]
            settings[-1]["lines"][last_key] = line.strip()
        elif settings and last_key and line[:1].isspace() and line.strip():
            settings[-1]["attrs"][last_key] += " " + line.strip()
    return settings, infos


def judge_ethtool(text: str, catalogue: Catalogue, context: Any) -> NodeReport:
    """Judge ``ethtool <if>`` (link, speed, duplex) and read ``ethtool -i <if>`` (driver and
    firmware: facts only).

    >>> from fabriccheck.probes.node.catalogue import builtin_catalogue
    >>> from fabriccheck.probes.node.judge import NodeContext
    >>> t = "Settings for eth0:\\n\\tSpeed: Unknown!\\n\\tLink detected: no\\n"
    >>> judge_ethtool(t, builtin_catalogue(), NodeContext(used_ports=frozenset({"eth0"}))
    ...               ).node_verdict
    'fault'
    """
    settings, infos = _ethtool_blocks(text)
    scan = _Scan()
    facts_if: list[dict[str, Any]] = []
    for b in settings:
        a, dev = b["attrs"], b["dev"]
        link = a.get("Link detected", "").lower()
        if not link:
            _truncated(scan, catalogue, f"nic {dev}", f"{dev}: output stops before "
                                                      "'Link detected:'")
            continue
        speed = re.match(r"(\d+)\s*Mb/s", a.get("Speed", ""))
        mbps = int(speed[1]) if speed else None
        supported = max(_link_modes_mbps(a.get("Supported link modes", "")), default=None)
        up = link == "yes"
        layer = IB if re.match(r"ib[\w.]*\d", dev) else ETH  # ib0: IPoIB on an IB port
        p = Port("", "", "ACTIVE" if up else "DOWN", "", mbps / 1000 if mbps else None,
                 a.get("Speed", ""), layer, netdev=dev,
                 state_text="link up" if up else "down (Link detected: no)",
                 line=b["lines"].get("Link detected", ""))
        scan.ports.append(p)
        facts_if.append({"name": dev, "speed_mbps": mbps, "duplex": a.get("Duplex"),
                         "link_detected": up, "port": a.get("Port"),
                         "supported_max_mbps": supported})
        if up and a.get("Duplex", "").lower() == "half":
            scan.findings.append(catalogue.finding(
                "eth-duplex-half", part=f"nic {dev}", line=b["lines"].get("Duplex", ""),
                what=f"{dev} runs half duplex at {a.get('Speed', '?')}"))
        if up and mbps and supported and mbps < supported:
            e = catalogue.entry("eth-speed-below-supported")
            sev = e.severity if _used(p, context) else str(e.params.get("unused_severity",
                                                                         e.severity))
            scan.findings.append(catalogue.finding(
                e.id, part=f"nic {dev}", line=b["lines"].get("Speed", ""), severity=sev,
                what=f"{dev} runs at {mbps} Mb/s; the NIC supports {supported} Mb/s"))
    if facts_if:
        scan.facts["interfaces"] = facts_if
    for key in ("driver", "version", "firmware-version", "bus-info"):
        values = [i[key] for i in infos if key in i]
        if len(values) == 1 or (values and len(set(values)) == 1):
            scan.facts[key.replace("-", "_")] = values[0]
    if infos:
        scan.facts["drivers"] = [{k.replace("-", "_"): v for k, v in i.items()
                                  if not k.startswith("supports-")} for i in infos]
    if not settings:  # ethtool -i only: facts, nothing to judge
        return NodeReport("ethtool", tuple(scan.findings), scan.facts)
    return _report("ethtool", scan, catalogue, context)
