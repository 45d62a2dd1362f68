"""The ``Fabric`` sections of ``nvidia-smi -q`` judged (pure): each GPU's registration with the
NVLink fabric of a multi-node NVLink domain (GB200/GB300 NVL72).

Per GPU the driver prints::

    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 32766
        ClusterUUID                       : 6a130f54-faaa-4b8f-847f-be44ab70f917
        Health
            Summary                       : Healthy
            Bandwidth                     : Full

``State`` ``Not Supported`` (or ``N/A``) is a GPU outside any NVLink fabric, and a GPU that
prints no ``ClusterUUID`` (H100 HGX with its fabric manager: ``Completed`` / ``Success`` only)
is in a single-node one, as is one with an all-zero cluster UUID unless it is a GB200/GB300
(H100/H200 HGX print zeros: meta-pytorch/torchcomms#1385): nothing to judge here. State,
status and the health summary are :mod:`.smi_query`'s (``gpu-fabric-not-ready``,
``gpu-fabric-health``); this module adds what needs the cluster and the tray as a whole: a
GB200/GB300 registration completed with an all-zero cluster UUID is a fault
(``gpu-fabric-no-cluster``), degraded bandwidth under a healthy summary warns
(``gpu-fabric-bandwidth``), GPUs of one tray in different cliques is a fault
(``gpu-fabric-split``). The tray's ``ClusterUUID/CliqueId`` is reported as the configuration
setting ``nvlink_clique`` (``facts.config``) so the run compares it across the rack's trays
(a tray in another clique than its rack is a fault there: ``gpu-fabric-clique-peers``).
"""

from __future__ import annotations

import re
from dataclasses import replace

from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.probes.node.findings import Finding, NodeReport

_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$")
_FIELD = re.compile(r"^( +)([A-Za-z][\w ]*?)\s*:\s*(.*?)\s*$")
_ZERO_UUID = re.compile(r"^[0-]+$")
NOT_IN_FABRIC = ("Not Supported", "N/A", "")


def parse_fabric(text: str) -> list[dict]:
    """One record per GPU that prints a Fabric section: ``gpu`` (its bus id), ``state``,
    ``status``, ``clique``, ``cluster``, ``summary``, ``bandwidth`` (as printed; absent: None).

    >>> parse_fabric("GPU 00000000:18:00.0\\n    Fabric\\n        State   : Completed\\n"
    ...              "        CliqueId   : 7\\n")[0]["clique"]
    '7'
    """
    out: list[dict] = []
    gpu, product, inside = "", "", False
    keys = {"State": "state", "Status": "status", "CliqueId": "clique",
            "ClusterUUID": "cluster", "Summary": "summary", "Bandwidth": "bandwidth"}
    for line in text.splitlines():
        if m := _GPU.match(line):
            gpu, product, inside = m[1], "", False
            continue
        if line.startswith("    Product Name"):
            product = line.split(":", 1)[-1].strip()
        if line.rstrip() == "    Fabric":
            inside = True
            out.append({"gpu": gpu, "product": product, **dict.fromkeys(keys.values())})
            continue
        if inside:
            m = _FIELD.match(line)
            if not line.startswith("        ") or (m is None and line.strip() not in ("Health",)):
                inside = False
                continue
            if m and m[2] in keys:
                out[-1][keys[m[2]]] = m[3]
    return out


def multi_node(g: dict, cat: Catalogue) -> bool:
    """True for a GPU model whose NVLink goes to the rack's switch trays (GB200, GB300)."""
    products = cat.param("gpu-nvlink-switch-side", "products", []) or []
    return any(p in g["product"] for p in products)


def _judge_gpu(g: dict, cat: Catalogue) -> list[Finding]:
    if g["state"] != "Completed" or g["status"] != "Success":
        return []  # smi_query's gpu-fabric-not-ready
    part = f"gpu {g['gpu']}"
    if _ZERO_UUID.match(g["cluster"] or "0"):  # normal on H100/H200 HGX, not on NVL72 trays
        return [cat.finding("gpu-fabric-no-cluster", part=part,
                            what=f"ClusterUUID {g['cluster'] or 'missing'}, CliqueId {g['clique']}",
                            line=f"ClusterUUID : {g['cluster']}")]
    if g["summary"] in (None, "Healthy") and g["bandwidth"] not in (None, "Full",
                                                                     "Not Supported", "N/A"):
        return [cat.finding("gpu-fabric-bandwidth", part=part,
                            what=f"fabric bandwidth {g['bandwidth']}",
                            line=f"Bandwidth : {g['bandwidth']}")]
    return []


def with_fabric(report: NodeReport, text: str, cat: Catalogue) -> NodeReport:
    """``report`` (of ``nvidia-smi -q``) with the Fabric sections' findings and facts; the same
    report when the text has none (every GPU before GB200)."""
    if "\n    Fabric" not in text:
        return report
    # a single-node NVSwitch system (H100/H200 HGX) prints no cluster or an all-zero one:
    # nothing here; on a GB200/GB300 tray a zero cluster is a fault
    gpus = [g for g in parse_fabric(text) if (g["state"] or "") not in NOT_IN_FABRIC
            and g["cluster"] is not None
            and (multi_node(g, cat) or not _ZERO_UUID.match(g["cluster"]))]
    if not gpus:
        return report
    findings = [f for g in gpus for f in _judge_gpu(g, cat)]
    ok = [g for g in gpus if g["state"] == "Completed" and g["status"] == "Success"
          and not _ZERO_UUID.match(g["cluster"] or "0")]
    cliques = sorted({f"{g['cluster']}/{g['clique']}" for g in ok})
    if len(cliques) > 1:
        findings.append(cat.finding("gpu-fabric-split", part="node",
                                    what="the tray's GPUs are in different cliques: "
                                    + ", ".join(cliques)))
    facts = dict(report.facts)
    facts["fabric"] = {"gpus": len(gpus), "registered": len(ok), "cliques": cliques}
    if len(cliques) == 1 and len(ok) == len(gpus):
        facts["config"] = {**facts.get("config", {}), "nvlink_clique": cliques[0]}
        facts["config_severity"] = {**facts.get("config_severity", {}),
                                    "nvlink_clique": cat.entry("gpu-fabric-clique-peers").severity}
    return replace(report, findings=report.findings + tuple(findings), facts=facts)
