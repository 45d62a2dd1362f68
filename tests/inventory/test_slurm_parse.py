"""Slurm inventory parsers on real published sinfo/scontrol outputs (exact values asserted)."""

from __future__ import annotations

import hostlist
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.errors import ConfigError
from fabriccheck.inventory.slurm import (
    gate_nodes,
    idle_from_sinfo,
    parse_scontrol_show_node,
    parse_sinfo,
    parse_state,
)
from tests.conftest import read_fixture

SLURM = "slurm/"


def test_700_nodes_csv_states_counts_and_idle_set():
    text = read_fixture(SLURM + "sinfo_h_o_n_T_700nodes_drained_down_star_states.txt")
    states = parse_sinfo(text)
    assert len(states) == 709
    bases = {}
    for s in states:
        bases[s.base] = bases.get(s.base, 0) + 1
    assert bases == {
        "idle": 319, "allocated": 250, "mixed": 44, "down": 67, "drained": 18,
        "draining": 10, "fail": 1,
    }  # fmt: skip
    by_node = {s.node: s for s in states}
    assert by_node["lxfoo0026"].flags == frozenset({"not_responding"})
    assert by_node["lxfoo0166"].base == "fail" and not by_node["lxfoo0166"].is_idle()
    assert not by_node["lxfoo0200"].is_idle()
    idle = idle_from_sinfo(states)
    assert len(idle) == 319
    assert idle[:3] == ["lxfoo0001", "lxfoo0002", "lxfoo0003"]
    assert "lxbar0153" in idle and "lxbar0155" not in idle and "lxfoo0064" not in idle


def test_fixed_width_per_partition_listing_takes_most_cautious_state():
    text = read_fixture(SLURM + "sinfo_N_O_nodelist_allocmem_memory_cpusstate_statelong.txt")
    states = parse_sinfo(text)
    assert len(states) == 21
    assert states[0].node == "a048" and states[0].base == "mixed"
    # a048 is listed mixed and idle, b002/b003 down and idle: none of them is idle
    assert idle_from_sinfo(states) == ["a049", "a050", "a051", "a052"]


def test_default_view_with_hostlist_ranges_and_down_star():
    text = read_fixture(SLURM + "sinfo_default_down_star_hostlist_ranges_quickstart.txt")
    states = parse_sinfo(text)
    assert len(states) == 15
    by = {s.node: s for s in states}
    assert by["adev13"].base == "down" and by["adev13"].flags == frozenset({"not_responding"})
    assert by["adev14"].base == "allocated"
    assert idle_from_sinfo(states) == [
        "adev3", "adev4", "adev5", "adev9", "adev10", "adev11", "adev12",
    ]  # fmt: skip


def test_partition_view_and_node_long_view():
    part = parse_sinfo(read_fixture(SLURM + "sinfo_default_partition_view_manpage_example.txt"))
    assert idle_from_sinfo(part) == [f"adev{i}" for i in (*range(10, 16), *range(0, 8))]
    nel = parse_sinfo(read_fixture(SLURM + "sinfo_Nel_node_long_manpage_example.txt"))
    assert [s.node for s in nel][:6] == ["adev0", "adev1", "adev2", "adev4", "adev5", "adev6"]
    assert {s.node for s in nel if s.base == "allocated"} == {"adev8", "adev9"}
    assert len(idle_from_sinfo(nel)) == 14


def test_states_drained_short_name():
    states = parse_sinfo(read_fixture(SLURM + "sinfo_states_drained_manpage_example.txt"))
    assert [(s.node, s.base) for s in states] == [("adev6", "drained"), ("adev7", "drained")]
    assert idle_from_sinfo(states) == []


def test_scontrol_show_node_unindented_two_records():
    name = "scontrol_show_node_2gpu_nodes_idle_drain_health_reason_unindented.txt"
    text = read_fixture(SLURM + name)
    recs = parse_scontrol_show_node(text)
    assert list(recs) == ["gpu010", "gpu009"]
    assert recs["gpu010"]["State"] == "IDLE+DRAIN"
    assert recs["gpu010"]["Reason"] == "health_ps___blocked [root@2026-04-29T03:06:18]"
    assert recs["gpu009"]["Reason"] == "health_ps___blocked [root@2026-04-29T03:00:18]"
    gres = "gpu:nvidia_geforce_rtx_5090:4(S:0-3),VramPerGpu:no_consume:32G"
    assert recs["gpu009"]["Gres"] == gres
    assert not parse_state("gpu010", recs["gpu010"]["State"]).is_idle()


def test_scontrol_show_node_indented_down_not_responding():
    recs = parse_scontrol_show_node(
        read_fixture(SLURM + "scontrol_show_node_down_not_responding_quickstart.txt")
    )
    assert recs["adev1"]["State"] == "DOWN*"
    assert recs["adev1"]["Reason"] == "Not responding [slurm@06/02-14:01:24]"
    st_ = parse_state("adev1", "DOWN*")
    assert st_.base == "down" and st_.flags == frozenset({"not_responding"})


@pytest.mark.parametrize(
    ("state", "idle"),
    [
        ("idle", True), ("IDLE", True), ("idle*", False), ("idle~", False), ("idle#", False),
        ("idle-", False), ("idle$", False), ("idle@", False), ("IDLE+DRAIN", False),
        ("IDLE+PLANNED", False), ("IDLE+CLOUD", True), ("mixed", False), ("mix", False),
        ("IDLE+COMPLETING", False), ("reserved", False), ("down*", False),
    ],
)  # fmt: skip
def test_idle_means_exactly_idle(state, idle):
    assert parse_state("n", state).is_idle() is idle


def test_reserved_counts_only_when_ours():
    assert parse_state("n", "reserved").is_idle(reserved_ok=True)
    assert parse_state("n", "IDLE+RESERVED").is_idle(reserved_ok=True)
    assert not parse_state("n", "reserved*").is_idle(reserved_ok=True)


def test_gate_nodes_from_job_nodelist():
    assert gate_nodes({"SLURM_JOB_NODELIST": "gpu[001-003,010],login1"}) == [
        "gpu001", "gpu002", "gpu003", "gpu010", "login1",
    ]  # fmt: skip
    assert gate_nodes({"SLURM_NODELIST": "a[1-2]"}) == ["a1", "a2"]
    with pytest.raises(ConfigError, match="SLURM_JOB_NODELIST"):
        gate_nodes({})
    with pytest.raises(ConfigError, match="bad hostlist"):
        gate_nodes({"SLURM_JOB_NODELIST": "gpu[3-1"})


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"n[a-z]{0,3}[0-9]{1,3}", fullmatch=True),
        st.sampled_from(["idle", "idle*", "allocated", "mixed", "drained", "down*", "IDLE+DRAIN"]),
        min_size=1,
        max_size=30,
    )
)
def test_property_idle_is_exactly_the_idle_lines(nodes):
    text = "\n".join(f"{n} {s}" for n, s in nodes.items())
    assert set(idle_from_sinfo(parse_sinfo(text))) == {n for n, s in nodes.items() if s == "idle"}
    # a default-view table listing the same nodes as hostlists says the same
    rows = ["PARTITION AVAIL TIMELIMIT NODES STATE NODELIST"]
    for state in sorted(set(nodes.values())):
        members = [n for n, s in nodes.items() if s == state]
        rows.append(f"p up infinite {len(members)} {state} {hostlist.collect_hostlist(members)}")
    assert set(idle_from_sinfo(parse_sinfo("\n".join(rows)))) == {
        n for n, s in nodes.items() if s == "idle"
    }
