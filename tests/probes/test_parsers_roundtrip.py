"""Property tests: what the simulator prints in the real tools' formats parses back to the
numbers it printed, under every launcher prefix; any text gives a result or a ParseError."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fabriccheck.errors import ParseError
from fabriccheck.executors.sim import render
from fabriccheck.probes.detect import detect_tool, parse_text
from fabriccheck.probes.nccl_tests import parse_nccl_tests
from fabriccheck.probes.perftest import parse_perftest
from fabriccheck.probes.to_json import result_to_json
from fabriccheck.topology.discovery.ibnetdiscover import parse_ibnetdiscover
from fabriccheck.topology.discovery.lldp import parse_lldp

HOSTS = st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)
VALUE = st.floats(0, 2e6, allow_nan=False)
#: how launchers decorate each line (tool-formats.md §1.4)
PREFIXES = {
    "none": "{}",
    "mpirun --tag-output": "[1,0]<stdout>:{}",
    "ray/skypilot": "(head, rank=0, pid=3808) [1,0]<stdout>:{}",
    "srun -l": "0: {}",
    "pdsh": "node-a: {}",
    "ansi": "\x1b[0m{}\x1b[K",
}


@st.composite
def nccl_runs(draw):
    collective = draw(st.sampled_from(sorted(render.BUSBW_FACTOR)))
    hosts = draw(st.lists(HOSTS, min_size=1, max_size=3, unique=True))
    gpus = draw(st.integers(1, 3))
    ranks = [render.NcclRank(h, 1000 + i * 10 + g, g, f"{g:02x}", "NVIDIA H100 80GB HBM3")
             for i, h in enumerate(hosts) for g in range(gpus)]
    n = draw(st.integers(1, 6))
    sizes = [1 << (10 + 2 * i) for i in range(n)]
    rows = [render.NcclRow(s, max(1, s // 4), *draw(st.tuples(*[VALUE] * 6))) for s in sizes]
    return collective, ranks, rows


def _printed(value: float, width: int) -> float:
    return float(render.float_str(value, width))


@settings(max_examples=60, deadline=None)
@given(nccl_runs(), st.sampled_from(sorted(PREFIXES)))
def test_simulated_nccl_tests_round_trip(run, prefix):
    collective, ranks, rows = run
    lines = render.render_nccl_header(collective, ranks, n_gpus=1, min_bytes=rows[0].size_bytes,
                                      max_bytes=rows[-1].size_bytes, warmup=1, iters=20)
    lines += [render.render_nccl_row(collective, r) for r in rows]
    lines += render.render_nccl_footer(collective, rows)
    text = "\n".join(PREFIXES[prefix].format(x) for x in lines)
    assert detect_tool(text) == "nccl-tests"
    r = parse_nccl_tests(text)
    assert r.status == "ok", r.reason
    assert r.collective == collective and r.ranks == len(ranks)
    assert r.hosts == tuple(dict.fromkeys(k.host for k in ranks))
    assert (r.min_bytes, r.max_bytes) == (rows[0].size_bytes, rows[-1].size_bytes)
    assert len(r.rows) == len(rows)
    for got, want in zip(r.rows, rows, strict=True):
        assert got.size_bytes == want.size_bytes and got.count == want.count
        assert got.time_us == _printed(want.time_us, 7)
        assert got.busbw_gbps == _printed(want.busbw_gbps, 6)
        assert got.algbw_inplace_gbps == _printed(want.algbw_ip_gbps, 6)
        assert got.busbw_inplace_gbps == _printed(want.busbw_ip_gbps, 6)
        assert got.wrong == 0
    result_to_json(r)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 800), st.floats(0, 800), st.floats(0, 100)),
                min_size=1, max_size=5),
       st.sampled_from(["IB", "Ethernet"]), st.sampled_from(sorted(PREFIXES)))
def test_simulated_perftest_round_trip(values, link, prefix):
    lines = render.render_perftest_header(
        device="mlx5_3", link_type=link, qpn=0x4A, psn=0xBE352E, rqpn=0x49, rpsn=0x4601DA,
        vaddr=0x7E6F4ED11000, rvaddr=0x7778E64EB000, lid=1, rlid=2, local_ip="10.0.0.1",
        remote_ip="10.0.0.2", duration_mode=False)
    lines.append(render.render_perftest_table_header())
    sizes = [1 << (12 + i) for i in range(len(values))]
    lines += [render.render_perftest_row(s, 5000, p, a, m)
              for s, (p, a, m) in zip(sizes, values, strict=True)]
    lines.append(render.SEP87)
    r = parse_perftest("\n".join(PREFIXES[prefix].format(x) for x in lines))
    assert r.status == "ok", r.reason
    assert (r.device, r.link_type, r.test) == ("mlx5_3", link, "RDMA_Write BW Test")
    assert [x.size_bytes for x in r.rows] == sizes
    for got, (_peak, avg, _rate) in zip(r.rows, values, strict=True):
        decimals = 6 if avg < 0.1 else 2
        assert got.bw_avg_gbps == float(f"{avg:.{decimals}f}")


@settings(max_examples=40, deadline=None)
@given(HOSTS, st.integers(1, 99999), st.sampled_from(["Send", "Recv"]), st.integers(0, 17))
def test_simulated_ib_warn_names_host_hca_peer(host, pid, direction, hca):
    lines = render.render_ib_warn(host, pid, pid + 1, 0, peer_ip="10.1.2.3", port=4242,
                                  hca=f"mlx5_{hca}", local_ip="10.1.2.4", direction=direction)
    r = parse_text("\n".join(lines))
    e = next(x for x in r.errors if x.kind == "ib_completion")
    assert (e.host, e.hca, e.status, e.vendor_err, e.peer) == (host, f"mlx5_{hca}", "12", "129",
                                                                "10.1.2.3")


ANY_TEXT = st.one_of(
    st.text(max_size=600),
    st.binary(max_size=600).map(lambda b: b.decode("latin-1")),
    st.lists(st.sampled_from([
        "# nThread 1 nGpus 8", "#  Rank  0 Group  0 Pid 1 on h device 0 [0x00] x",
        "   1024  256  float  sum  -1  1.0  2.0  3.0  0  1.0  2.0  3.0  0", " #bytes #iterations",
        "[  5]   0.00-1.00   sec  1 GBytes  9 Gbits/sec", "Switch 36 \"S-01\" # \"a\"",
        "[1] \"H-02\"[1](02) # \"h mlx5_0\" lid 1 4xHDR", "{", "}", "\"lldp\": {", "(pid=1) ",
        "[1,0]<stdout>:", "h:1:2 [0] NCCL WARN x", "- - - - -", "Interface: eth0,",
    ]), max_size=30).map("\n".join),
)


@settings(max_examples=150, deadline=None)
@given(ANY_TEXT)
def test_any_text_gives_a_result_or_a_parse_error(text):
    try:
        result = parse_text(text)
    except ParseError:
        return
    assert result.status in ("ok", "failed", "incomplete", "unparseable")
    result_to_json(result)


@settings(max_examples=150, deadline=None)
@given(ANY_TEXT)
def test_importers_give_a_fabric_or_a_parse_error(text):
    for parse in (parse_ibnetdiscover, parse_lldp):
        try:
            parse(text)
        except ParseError:
            pass


JSON_KEYS = st.sampled_from([
    "start", "end", "test_start", "protocol", "num_streams", "sum_sent", "sum_received", "sum",
    "bits_per_second", "seconds", "retransmits", "lost_percent", "error", "connected",
    "connecting_to", "host", "intervals", "event", "data", "test_info", "results", "MsgSize",
    "n_iterations", "BW_peak", "BW_average", "t_avg", "t_min", "Device", "test", "version",
    "config", "devices", "hostname", "size", "out_of_place", "in_place", "bus_bw", "nwrong",
    "time", "out_of_bounds", "average_bus_bandwidth", "nccl_version", "args"])
JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6),
                      st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
JSON_DOC = st.dictionaries(JSON_KEYS, st.recursive(JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(JSON_KEYS, inner, max_size=4)),
    max_leaves=30), min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(JSON_DOC, st.sampled_from([None, "nccl-tests", "perftest", "iperf3"]))
def test_any_json_gives_a_result_or_a_parse_error(doc, tool):
    import json

    from fabriccheck.probes.iperf3 import parse_iperf3
    from fabriccheck.probes.nccl_tests_json import parse_nccl_tests_json
    from fabriccheck.probes.perftest_json import parse_perftest_json

    text = json.dumps(doc, allow_nan=True)
    try:
        results = [parse_text(text, tool)]
    except ParseError:
        results = []
    results += [parse_nccl_tests_json(text), parse_perftest_json(text), parse_iperf3(text),
                parse_perftest_json(text, unit="MiB/sec")]
    for result in results:
        assert result.status in ("ok", "failed", "incomplete", "unparseable")
        result_to_json(result)
