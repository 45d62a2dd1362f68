"""The NVLink-domain nccl-tests run and what its NCCL lines prove (probes/nccl_mnnvl.py): env,
launch, and the transport read from outputs in NCCL 2.21's format (tests/fixtures/nvl72)."""

from __future__ import annotations

from pathlib import Path

from fabriccheck.models import Purpose, RawResult, Test
from fabriccheck.probes.commands import build_launch
from fabriccheck.probes.detect import parse_raw
from fabriccheck.probes.nccl_mnnvl import mnnvl_env, read_mnnvl

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nvl72"


def text(name: str) -> str:
    return (FIX / name).read_text()


def test_healthy_domain_is_proven_nvlink_only():
    r = read_mnnvl(text("nccl_mnnvl_2tray_ok.txt"))
    assert r.proven and not r.network and r.nvls
    assert r.channels == {"P2P/MNNVL": 2, "P2P/CUMEM": 6}
    assert r.cliques == {"node-001": {"32766"}, "node-002": {"32766"}}
    assert not r.odd_clique_hosts() and not r.imex_hosts


def test_clique_split_rides_the_network_and_names_the_odd_tray():
    r = read_mnnvl(text("nccl_mnnvl_clique_split_net_socket.txt"))
    assert r.network and not r.proven
    assert r.channels["NET/Socket"] == 2
    assert r.net_hosts == {"node-001", "node-002"}  # both ends of the hops between cliques
    # the majority is by host count: one host each, the lower clique id sorts first...
    assert len(r.odd_clique_hosts()) == 1


def test_odd_clique_is_the_minority():
    lines = [f"n{i}:1:2 [0] NCCL INFO MNNVL busId 0x18000 fabric UUID 1.2 cliqueId "
             f"{'0x7ffd' if i == 2 else '0x7ffe'} state 3 healthMask 0x0" for i in range(4)]
    assert read_mnnvl("\n".join(lines)).odd_clique_hosts() == {"n2"}


def test_imex_warn_names_the_tray_and_the_run_fails():
    t = text("nccl_mnnvl_imex_not_working.txt")
    r = read_mnnvl(t)
    assert r.imex_hosts == {"node-002"}
    test = Test("t", "nccl", ("node-001", "node-002"), purpose=Purpose.DOMAIN)
    parsed = parse_raw(test, RawResult("t", stdout=t, exit_code=3))
    assert parsed.status == "failed" and not parsed.rows


def test_no_info_lines_prove_nothing():
    assert not read_mnnvl("# nccl-tests table only\n").proven


def test_env_forces_mnnvl_and_drops_the_network_settings():
    env = mnnvl_env({"NCCL_ALGO": "Ring", "NCCL_IB_HCA": "=mlx5_0:1", "NCCL_SOCKET_IFNAME": "eth0"})
    assert env["NCCL_MNNVL_ENABLE"] == "1" and env["NCCL_IB_DISABLE"] == "1"
    assert env["NCCL_NVLS_ENABLE"] == "1" and env["NCCL_P2P_LEVEL"] == "NVL"
    assert "NCCL_ALGO" not in env and "NCCL_IB_HCA" not in env
    assert env["NCCL_SOCKET_IFNAME"] == "eth0" and "CUDA_VISIBLE_DEVICES" not in env


def test_launch_of_a_domain_test_and_of_a_scale_out_test():
    kw = {"size_bytes": 1 << 30, "gpus_per_node": 4}
    dom = Test("d", "nccl", ("a", "b"), purpose=Purpose.DOMAIN, params={**kw, "domain": "r"})
    cmd = build_launch(dom, {}).rendered[0]
    assert "NCCL_MNNVL_ENABLE=1" in cmd and "NCCL_ALGO" not in cmd and "-np 8" in cmd
    per_gpu = Test("g", "nccl", ("a", "b", "c"), purpose=Purpose.DOMAIN,
                   params={**kw, "gpus_per_node": 1, "gpu": 3})
    assert "CUDA_VISIBLE_DEVICES=3" in build_launch(per_gpu, {}).rendered[0]
    scale = Test("s", "nccl", ("a", "b"), params=kw)
    out = build_launch(scale, {}).rendered[0]
    assert "NCCL_ALGO=Ring" in out and "MNNVL" not in out
