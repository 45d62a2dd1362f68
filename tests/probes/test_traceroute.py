"""traceroute / tracepath parsing and path learning on the repo's own fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabriccheck.errors import ParseError
from fabriccheck.probes.traceroute import parse_traceroute, path_links, path_switches

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "traceroute"
LAB_HOPS = {"10.1.0.0": "leaf-1", "10.200.0.1": "spine-1", "10.200.0.3": "spine-2",
            "10.200.0.4": "leaf-2", "10.200.0.6": "leaf-2"}


def read(name: str) -> str:
    return (FIX / name).read_text()


def test_tcp_sport_trace_gives_the_spine_of_the_flow() -> None:
    t = parse_traceroute(read("tcp-sport-ecmp.txt"))
    assert (t.tool, t.destination, t.reached) == ("traceroute", "10.2.0.1", True)
    assert t.answered == ("10.1.0.0", "10.200.0.3", "10.200.0.6", "10.2.0.1")
    assert path_switches(t, LAB_HOPS) == ("leaf-1", "spine-2", "leaf-2")
    assert path_links(t, LAB_HOPS) == (("leaf-1", "spine-2"), ("leaf-2", "spine-2"))


def test_names_stars_and_two_answers_on_one_hop() -> None:
    t = parse_traceroute(read("udp-names-stars.txt"))
    assert t.destination == "10.4.2.1" and t.reached  # !X annotations do not hide the answer
    assert [h.addresses for h in t.hops] == [
        ("10.1.0.0",), (), ("10.200.1.6", "10.200.1.8"), ("10.4.2.1",)]
    names = {"10.1.0.0": "a", "10.200.1.6": "b", "10.200.1.8": "c"}
    assert path_links(t, names) is None  # a silent hop: the path is not known


def test_two_answers_on_one_hop_are_not_one_path() -> None:
    text = ("traceroute to 10.2.0.1 (10.2.0.1), 30 hops max\n 1  10.1.0.0  0.1 ms\n"
            " 2  10.200.0.1  0.1 ms 10.200.0.3  0.2 ms\n 3  10.2.0.1  0.1 ms\n")
    assert path_links(parse_traceroute(text), LAB_HOPS) is None


def test_unreached_destination_learns_nothing() -> None:
    t = parse_traceroute(read("tcp-unreached.txt"))
    assert not t.reached and t.answered == ("10.1.0.0", "10.200.0.1", None, None, None)
    assert path_links(t, LAB_HOPS) is None


def test_unknown_hop_address_learns_nothing() -> None:
    t = parse_traceroute(read("tcp-sport-ecmp.txt"))
    assert path_links(t, {k: v for k, v in LAB_HOPS.items() if k != "10.200.0.3"}) is None


def test_tracepath_reached_and_first_hop_once() -> None:
    t = parse_traceroute(read("tracepath.txt"))
    assert (t.tool, t.destination, t.reached) == ("tracepath", "10.2.0.1", True)
    assert t.answered == ("10.1.0.0", "10.200.0.1", "10.200.0.4", "10.2.0.1")
    assert path_links(t, LAB_HOPS) == (("leaf-1", "spine-1"), ("leaf-2", "spine-1"))


def test_tracepath_no_reply() -> None:
    t = parse_traceroute(read("tracepath-noreply.txt"))
    assert not t.reached and t.answered == ("10.1.0.0", None, "10.200.0.4", None)
    assert path_switches(t, LAB_HOPS) is None


@pytest.mark.parametrize("text", ["", "hello\n", "PING 10.0.0.1 56(84) bytes of data.\n"])
def test_other_text_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="traceroute"):
        parse_traceroute(text)
