"""A NIC's configuration judged (``nic-config``: ``ibv_devinfo``, and on RoCE ``ethtool -i``, the
netdev MTU, ``mlnx_qos``, the ECN enable files and the GID types): firmware, MTU, trust state,
PFC, ECN and the GID type at the index jobs use, against the spec's ``config:`` block; every
setting also goes to the peers (:mod:`fabriccheck.inference.config_peers`). The sections and the
rules are :mod:`.config`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from fabriccheck.probes.node.catalogue import Catalogue
from fabriccheck.probes.node.config import Judged, cut_reason, split_sections, unreadable
from fabriccheck.probes.node.findings import NodeReport
from fabriccheck.probes.node.lines import H, newline_breaks_only

#: GIDs every configured RoCE port has: link-local and IPv4, each as v1 and v2
GID_SLOTS = 4

_KV = re.compile(r"^\s*([\w-]+):\s*(.*?)\s*$")
#: the same over a whole text whose only line break is ``\n``, in one scan
_KV_LINES = re.compile(rf"^{H}*([\w-]+):{H}*((?:\S(?:[^\n]*\S)?)?){H}*$", re.M)
_TRUST = re.compile(r"Priority trust (?:state|mode):\s*(\w+)")
_PRIOS = re.compile(r"^\s*priority((?:\s+\d)+)\s*$", re.M)
_ENABLED = re.compile(r"^\s*enabled((?:\s+[01])+)\s*$", re.M)
_VERSION = re.compile(r"v(\d)")
_NUMBER = re.compile(r"(\d+)")
_GID = re.compile(r"/gid_attrs/types/(\d+):\s*(.+?)\s*$", re.M)
_ECN = re.compile(r"/ecn/(roce_np|roce_rp)/enable/(\d):\s*([01])\s*$", re.M)


def parse_devinfo(text: str) -> dict[str, str]:
    """The ``key: value`` lines of ``ibv_devinfo -d <dev>`` (first port only).

    >>> parse_devinfo("hca_id:\\tmlx5_0\\n\\tfw_ver:\\t\\t\\t\\t28.41.1000\\n"
    ...               "\\t\\t\\tactive_mtu:\\t\\t4096 (5)\\n")["active_mtu"]
    '4096 (5)'
    """
    out: dict[str, str] = {}
    if newline_breaks_only(text):
        for key, value in _KV_LINES.findall(text):
            out.setdefault(key, value)
        return out
    for line in text.splitlines():
        m = _KV.match(line)
        if m and m[1] not in out:
            out[m[1]] = m[2]
    return out


def parse_qos(text: str) -> dict[str, Any]:
    """``mlnx_qos -i``: the trust state and the priorities with PFC enabled.

    >>> parse_qos("Priority trust state: dscp\\nPFC configuration:\\n"
    ...           "\\tpriority    0   1   2   3   4   5   6   7\\n"
    ...           "\\tenabled     0   0   0   1   0   0   0   0   \\n")
    {'trust': 'dscp', 'pfc': [3]}
    """
    out: dict[str, Any] = {}
    if m := _TRUST.search(text):
        out["trust"] = m[1]
    prios = _PRIOS.search(text)
    enabled = _ENABLED.search(text)
    if prios and enabled:
        out["pfc"] = [int(p) for p, e in zip(prios[1].split(), enabled[1].split(), strict=False)
                      if e == "1"]
    return out


def prio_text(prios: Sequence[int]) -> str:
    """``[0..7]`` -> ``0-7``, ``[3]`` -> ``3``, ``[]`` -> ``none``.

    >>> prio_text(range(8)), prio_text([3, 4]), prio_text([])
    ('0-7', '3,4', 'none')
    """
    p = sorted(set(prios))
    if not p:
        return "none"
    if len(p) > 2 and p == list(range(p[0], p[-1] + 1)):
        return f"{p[0]}-{p[-1]}"
    return ",".join(map(str, p))


def gid_type(text: str) -> str:
    """``IB/RoCE v1`` -> ``v1``, ``RoCE v2`` -> ``v2``.

    >>> gid_type("IB/RoCE v1"), gid_type("RoCE v2")
    ('v1', 'v2')
    """
    m = _VERSION.search(text)
    return f"v{m[1]}" if m else text.strip()


def _nic_id(j: Judged, info: Mapping[str, str], eth: Mapping[str, str]) -> str:
    nic = info.get("hca_id", "")
    fw = (eth.get("firmware-version") or info.get("fw_ver") or "").split(" ")[0]
    if fw:
        j.config["firmware"] = fw
        want = j.expect("firmware")
        if want is not None:
            j.judged.add("firmware")
            if fw != str(want):
                j.wrong("firmware", f"{nic} runs firmware {fw}, the spec wants {want}",
                        part=f"nic {nic}")
    j.facts.update({k: v for k, v in (("nic", nic), ("link_layer", info.get("link_layer")),
                                      ("nic_driver", eth.get("version"))) if v})
    model = info.get("board_id") or info.get("vendor_part_id")
    if model:
        j.facts["config_class"] = f"{model} {info.get('link_layer', '')}".strip()
    return nic


def _mtu(j: Judged, nic: str, sec: Mapping[str, str], info: Mapping[str, str]) -> None:
    roce = info.get("link_layer") == "Ethernet" or "mtu" in sec
    raw = (sec.get("mtu") or "").strip() if roce else info.get("active_mtu", "")
    m = _NUMBER.match(raw)
    if not m:
        j.unread("mtu", f"{nic}: no {'netdev MTU' if roce else 'active_mtu'}", f"nic {nic}")
        return
    mtu = int(m[1])
    j.config["mtu"] = mtu
    want = j.expect("mtu")
    if want is not None:
        j.judged.add("mtu")
        if mtu != int(want):
            j.wrong("mtu", f"{nic} has MTU {mtu}, the fabric's (spec) is {want}",
                    part=f"nic {nic}", line=raw)


def _roce_qos(j: Judged, nic: str, sec: Mapping[str, str]) -> list[int]:
    part = f"nic {nic}"
    qos = {} if unreadable(sec.get("qos")) else parse_qos(sec["qos"])
    for setting, key in (("trust", "trust"), ("pfc", "pfc")):
        if key not in qos:
            j.unread(setting, f"{nic}: mlnx_qos printed no {key} (is mlnx-tools installed?)",
                     part)
    if "trust" in qos:
        j.config["trust"] = qos["trust"]
        want = j.expect("trust")
        if want is not None:
            j.judged.add("trust")
            if qos["trust"] != want:
                j.wrong("trust", f"{nic} trusts {qos['trust']}, the spec wants {want}", part)
    pfc = qos.get("pfc")
    if pfc is not None:
        j.config["pfc"] = prio_text(pfc)
        want = j.expect("pfc")
        if want is not None:
            j.judged.add("pfc")
            if int(want) not in pfc:
                j.wrong("pfc", f"{nic}: PFC is off on priority {want} (enabled on "
                        f"{prio_text(pfc)})", part)
    return list(pfc or [])


def _roce_ecn(j: Judged, nic: str, sec: Mapping[str, str], pfc: Sequence[int]) -> None:
    on: dict[str, set[int]] = {"roce_np": set(), "roce_rp": set()}
    seen = False
    for side, prio, val in _ECN.findall(sec.get("ecn") or ""):
        seen = True
        if val == "1":
            on[side].add(int(prio))
    if not seen:
        j.unread("ecn", f"{nic}: no ecn/roce_np|roce_rp/enable files", f"nic {nic}")
        return
    both = on["roce_np"] & on["roce_rp"]
    j.config["ecn"] = prio_text(both)
    if j.expect("ecn") is True:
        j.judged.add("ecn")
        want = j.expect("pfc")
        need = {int(want)} if want is not None else set(pfc)
        if (need and not need <= both) or not both:
            where = prio_text(sorted(need)) if need else "any priority"
            j.wrong("ecn", f"{nic}: ECN is off on priority {where} (notification point "
                    f"{prio_text(on['roce_np'])}, reaction point {prio_text(on['roce_rp'])})",
                    f"nic {nic}")


def _roce_gid(j: Judged, nic: str, sec: Mapping[str, str]) -> None:
    types = {int(i): gid_type(t) for i, t in _GID.findall(sec.get("gids") or "")}
    if not types:
        j.unread("gid", f"{nic}: no gid_attrs/types entries", f"nic {nic}")
        return
    j.facts["gid_types"] = {str(i): t for i, t in sorted(types.items())}
    j.config["gid"] = " ".join(f"{i}:{types[i]}" for i in sorted(types) if i < GID_SLOTS)
    version, index = j.expect("gid"), j.expect("gid", "index")
    if version is None:
        return
    j.judged.add("gid")
    want = f"v{int(version)}"
    if index is not None and types.get(int(index)) != want:
        have = types.get(int(index), "no GID")
        j.wrong("gid", f"{nic}: GID index {index} is {have if have == 'no GID' else 'RoCE ' + have}"
                f", the spec wants RoCE {want}", f"nic {nic}")
    elif index is None and want not in types.values():
        j.wrong("gid", f"{nic}: no RoCE {want} GID", f"nic {nic}")


def judge_nic_config(text: str, catalogue: Catalogue, context: Any) -> NodeReport:
    """Judge the ``nic-config`` output of one NIC (the module doc's rules)."""
    sec, closed = split_sections(text)
    j = Judged(catalogue)
    info = parse_devinfo(sec.get("devinfo") or "")
    eth = parse_devinfo(sec.get("ethtool") or "") if "ethtool" in sec else {}
    nic = _nic_id(j, info, eth) or "?"
    if not info.get("hca_id"):
        j.unread("firmware", "ibv_devinfo printed no device", "nic")
    _mtu(j, nic, sec, info)
    roce = info.get("link_layer") == "Ethernet" or any(s in sec for s in ("qos", "ecn", "gids"))
    if roce:
        pfc = _roce_qos(j, nic, sec)
        _roce_ecn(j, nic, sec, pfc)
        _roce_gid(j, nic, sec)
    expected = ("devinfo",) + (("ethtool", "mtu", "qos", "ecn", "gids") if roce else ())
    missing = [s for s in expected if s not in sec]
    reason = cut_reason(text, closed) or (f"no section(s) {', '.join(missing)}" if missing else "")
    return j.report("nic-config", not reason, reason)
