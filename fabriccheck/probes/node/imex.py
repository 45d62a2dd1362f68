"""The NVLink domain check judged: a tray's own IMEX daemon, its IMEX domain's connectivity and
the fabric manager's state as the tray sees it.

The preflight's ``imex`` check runs one sectioned command (:data:`IMEX_COMMAND`): ``== imex_status``
holds ``nvidia-imex-ctl -q`` (the local daemon's state: ``READY``), ``== imex_domain`` holds
``nvidia-imex-ctl -N`` (every node of the IMEX domain: ``Node #k - <ip> - READY``, the
``Nodes From\\To`` matrix of ``C`` connected / ``N`` never connected / ``I`` invalid / ``D``
disconnected / ``R`` recovering / ``A`` authenticating / ``!V!`` / ``!M!``, and ``Domain State:
UP``). NVIDIA's validation asks that "the IMEX domain must be fully, mutually connected".

The tray is judged on what is its own: its daemon not ``READY`` (or the tool missing) is a fault
(``imex-not-ready``); another tray ``UNAVAILABLE`` or a pair not connected is that tray's
problem, listed as a warning here (``imex-domain-degraded``) -- the other tray's own check
faults it -- so one missing daemon never drains the whole rack.

The command's ``== fabric_manager`` and ``== fabric_state`` sections are
:mod:`.fabric_manager`'s (the rack's fabric manager has configured the tray's GPUs or not).
"""

from __future__ import annotations

import re

from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.probes.node.config import split_sections, unreadable
from fabriccheck.probes.node.fabric_manager import FM_SECTIONS, judge_fabric_manager
from fabriccheck.probes.node.findings import Finding, NodeReport

#: the preflight's command (docs/nvl72.md): the local IMEX state, the whole IMEX domain, then
#: the fabric manager's state as the tray sees it
IMEX_COMMAND = ("echo '== imex_status'; nvidia-imex-ctl -q 2>&1; "
                "echo '== imex_domain'; nvidia-imex-ctl -N 2>&1; " + FM_SECTIONS
                + "echo '== end'")
SECTIONS = ("imex_status", "imex_domain")
_NODE = re.compile(r"^Node #(\d+)\s+-\s+(\S+)\s+-\s+(\S+)", re.M)
_ROW = re.compile(r"^\s*(\d+)\s{2,}((?:(?:C|N|I|D|R|A|!V!|!M!)\s*)+)$", re.M)
_DOMAIN = re.compile(r"^Domain State:\s*(\S+)", re.M)
_STATUS = re.compile(r"^== imex_status\s*$", re.M)


def looks_like_imex(text: str) -> bool:
    """True for the ``imex`` check's output (``== imex_status`` first).

    >>> looks_like_imex("== imex_status\\nREADY\\n== imex_domain\\n== end\\n")
    True
    """
    return _STATUS.search(text[:4000]) is not None


def parse_domain(text: str) -> dict:
    """``nvidia-imex-ctl -N`` read: ``nodes`` ``[{index, address, state}]``, ``matrix`` (row
    index -> its cells), ``domain_state`` (None when not printed).

    >>> parse_domain("Nodes:\\nNode #0   - 10.0.0.1   - READY\\n\\n Nodes From\\\\To  0\\n"
    ...              "       0        C\\nDomain State: UP\\n")["domain_state"]
    'UP'
    """
    nodes = [{"index": int(m[1]), "address": m[2], "state": m[3]} for m in _NODE.finditer(text)]
    matrix = {int(m[1]): m[2].split() for m in _ROW.finditer(text)}
    state = _DOMAIN.search(text)
    return {"nodes": nodes, "matrix": matrix, "domain_state": state[1] if state else None}


def _own(status: str | None, cat: Catalogue) -> list[Finding]:
    line = (status or "").strip().splitlines()[0] if (status or "").strip() else ""
    if line == "READY":
        return []
    what = ("nvidia-imex-ctl not found: IMEX is not installed on this tray"
            if unreadable(status) and line else f"IMEX daemon is {line or 'silent'}, not READY")
    return [cat.finding("imex-not-ready", part="node", what=what, line=line)]


def _domain(d: dict, cat: Catalogue) -> list[Finding]:
    out = []
    down = [n for n in d["nodes"] if n["state"] != "READY"]
    for n in down:
        out.append(cat.finding("imex-domain-degraded", part=f"imex node #{n['index']}",
                               what=f"IMEX node #{n['index']} ({n['address']}) is {n['state']}",
                               line=f"Node #{n['index']} - {n['address']} - {n['state']}"))
    bad_rows = {a for a, cells in d["matrix"].items() if any(c != "C" for c in cells)}
    gone = {n["index"] for n in down}
    pairs = sorted(bad_rows - gone)
    if pairs and not down:
        out.append(cat.finding("imex-domain-degraded", part="imex domain",
                               what=f"IMEX nodes {', '.join(map(str, pairs))} not connected "
                               "to every other node"))
    if d["domain_state"] not in (None, "UP") and not out:
        out.append(cat.finding("imex-domain-degraded", part="imex domain",
                               what=f"Domain State: {d['domain_state']}",
                               line=f"Domain State: {d['domain_state']}"))
    return out


def judge_imex(text: str, catalogue: Catalogue, context) -> NodeReport:
    """Judge the ``imex`` check's sectioned output (the module doc's rules)."""
    sections, ended = split_sections(text)
    status, domain = sections.get("imex_status"), sections.get("imex_domain")
    findings = _own(status, catalogue)
    d = parse_domain(domain or "")
    if not findings:  # the domain's table matters only when the tray's own daemon answers
        findings += _domain(d, catalogue)
    facts = {"imex_status": (status or "").strip()[:40], "imex_nodes": len(d["nodes"]),
             "imex_ready": sum(1 for n in d["nodes"] if n["state"] == "READY"),
             "domain_state": d["domain_state"]}
    reason = "" if ended else "no '== end': the output was cut"
    if ended and not findings and not d["nodes"]:
        reason = "nvidia-imex-ctl -N listed no IMEX node"
    fm, fm_facts = judge_fabric_manager(sections, catalogue)
    facts.update(fm_facts)
    return NodeReport("imex", tuple(findings + fm), {k: v for k, v in facts.items()
                                                     if v is not None},
                      complete=not reason, reason=reason)
