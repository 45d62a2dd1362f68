"""SSH executor against paramiko's in-process server (fast; real SSH protocol, real processes).

The "hosts" are :mod:`tests.executors.sshserver` servers on 127.0.0.1, each with its own host
key; commands run as local processes, so the tests can check with ``pgrep`` that a killed
command's whole process tree is gone. The namespace-lab tests (tests/lab) use the real sshd.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import paramiko
import pytest

from fabriccheck.errors import AuthError, ConnectError, RemoteCommandError, TaskTimeout
from fabriccheck.executors.launch_runner import run_launch, run_tests
from fabriccheck.executors.ssh import PGID_MARKER, SSHExecutor, SSHHostRunner, map_ssh_error
from fabriccheck.inventory.file import load_inventory
from fabriccheck.models import Flow, Test
from fabriccheck.probes.launch import HostCommand, ProbeLaunch
from tests.executors.sshserver import FakeCluster, free_port_pair, make_cluster, new_key


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> FakeCluster:
    c = make_cluster(tmp_path_factory.mktemp("ssh"), ["a", "b", "c"])
    yield c
    c.stop()


@pytest.fixture
def runner(cluster: FakeCluster) -> SSHHostRunner:
    r = SSHHostRunner(load_inventory(cluster.inventory_path))
    yield r
    r.close()


def alive(pattern: str) -> list[str]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return out.split()


def one_step(host: str, *argv: str, **kw) -> ProbeLaunch:
    return ProbeLaunch(steps=(HostCommand(host=host, argv=argv, **kw),), output_step=0)


def test_output_exit_code_env_and_no_marker_in_stderr(runner: SSHHostRunner) -> None:
    out = runner.run("a", ["sh", "-c", 'echo "hi $FC_X"; echo err >&2; exit 3'])
    assert out.finished and out.exit_code == 3
    assert out.stdout == "hi \n" and out.stderr == "err\n"
    step = HostCommand(host="a", argv=("sh", "-c", "echo $FC_X"), env={"FC_X": "a b'c"})
    raw = run_launch(runner, "t", ProbeLaunch((step,), 0), timeout_s=10)
    assert raw.stdout == "a b'c\n" and raw.exit_code == 0 and PGID_MARKER not in raw.stderr


def test_connection_is_reused(cluster: FakeCluster, runner: SSHHostRunner) -> None:
    before = cluster.hosts["b"].connections
    for _ in range(4):
        assert runner.run("b", ["true"]).exit_code == 0
    assert cluster.hosts["b"].connections - before == 1


def test_timeout_kills_the_whole_remote_process_tree(runner: SSHHostRunner) -> None:
    launch = one_step("a", "sh", "-c", "sleep 31337.25 & sleep 31337.5 & wait")
    t0 = time.monotonic()
    raw = run_launch(runner, "hang", launch, timeout_s=1.0)
    elapsed = time.monotonic() - t0
    assert raw.timed_out and raw.exit_code is None and "timed out" in raw.error
    assert elapsed < 1.0 + 5.0
    assert alive("sleep 31337") == []  # both children of the killed command are gone


def test_background_steps_are_always_killed(runner: SSHHostRunner) -> None:
    launch = ProbeLaunch(steps=(
        HostCommand(host="b", argv=("sleep", "31338.5"), background=True, role="server"),
        HostCommand(host="a", argv=("echo", "done")),
    ), output_step=1)
    raw = run_launch(runner, "bg", launch, timeout_s=10)
    assert raw.stdout == "done\n" and raw.exit_code == 0 and not raw.timed_out
    assert alive("sleep 31338.5") == []


def test_server_that_exits_before_listening_is_an_error_not_a_hang(runner: SSHHostRunner) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    launch = ProbeLaunch(steps=(
        HostCommand(host="b", argv=("sh", "-c", "echo cannot bind >&2; exit 1"),
                    background=True, wait_port=port, role="server"),
        HostCommand(host="a", argv=("echo", "client")),
    ), output_step=1)
    t0 = time.monotonic()
    raw = run_launch(runner, "srv", launch, timeout_s=20)
    assert time.monotonic() - t0 < 10
    assert not raw.timed_out and raw.exit_code is None
    assert "exited before listening" in raw.error and "cannot bind" in raw.stderr


def test_concurrency_is_bounded(cluster: FakeCluster, runner: SSHHostRunner) -> None:
    host = cluster.hosts["c"]
    host.max_active = 0
    tests = [Test(f"t{i}", "iperf3", ("c",), timeout_s=10) for i in range(5)]
    results = run_tests(runner, tests, lambda t, i: one_step("c", "sleep", "0.3"),
                        max_parallel=2)
    assert [r.test_id for r in results] == [t.test_id for t in tests]
    assert all(r.exit_code == 0 for r in results)
    assert host.max_active == 2  # in parallel, but never more than max_parallel


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed (make apt)")
def test_executor_runs_a_real_iperf3_pair_on_loopback(cluster: FakeCluster) -> None:
    from fabriccheck.probes.iperf3 import parse_iperf3

    t = Test("p", "iperf3", ("a", "b"), (Flow("a/eth0", "b/eth0"),),
             params={"duration_s": 1}, timeout_s=20)
    port = free_port_pair()
    with SSHExecutor(cluster.inventory_path, port_base=port) as ex:
        (raw,) = ex.run_round([t])
    assert raw.exit_code == 0, raw.error
    result = parse_iperf3(raw.stdout)
    assert result.status == "ok" and result.received_gbps > 0
    assert raw.commands[0].startswith(f"b: iperf3 -s -1 -B 127.0.0.1 -p {port}")
    assert alive(f"iperf3 -s -1 -B 127.0.0.1 -p {port}") == []


def _inventory_variant(cluster: FakeCluster, tmp_path: Path, **changes: str) -> Path:
    import yaml

    data = yaml.safe_load(cluster.inventory_path.read_text())
    for key, value in changes.items():
        data["ssh"][key] = value
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_wrong_client_key_is_an_auth_failure_reported_as_unreachable(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    new_key(tmp_path / "other_key")
    inv = _inventory_variant(cluster, tmp_path, key=str(tmp_path / "other_key"),
                             known_hosts=str(cluster.known_hosts_path))
    runner = SSHHostRunner(load_inventory(inv))
    with pytest.raises(AuthError, match="authentication failed"):
        runner.client("a")
    raw = run_launch(runner, "t", one_step("a", "true"), timeout_s=5)
    assert raw.unreachable == ("a",) and raw.exit_code is None and "a:" in raw.error


@pytest.mark.parametrize("case", ["unknown", "mismatch"])
def test_host_keys_are_checked_strictly(cluster: FakeCluster, tmp_path: Path, case: str) -> None:
    host = cluster.hosts["a"]
    if case == "unknown":
        kh = ""
    else:
        other = new_key(tmp_path / "impostor")
        kh = f"[127.0.0.1]:{host.port} {other.get_name()} {other.get_base64()}\n"
    (tmp_path / "kh").write_text(kh)
    inv = _inventory_variant(cluster, tmp_path, key=str(cluster.client_key_path),
                             known_hosts=str(tmp_path / "kh"))
    n_commands = len(host.commands)
    runner = SSHHostRunner(load_inventory(inv))
    with pytest.raises(AuthError, match="known_hosts"):
        runner.run("a", ["touch", str(tmp_path / "ran")])
    assert len(host.commands) == n_commands and not (tmp_path / "ran").exists()
    kh_text = (tmp_path / "kh").read_text()
    assert kh_text == kh  # never auto-added


def test_unreachable_host_is_a_result_and_the_round_goes_on(tmp_path: Path) -> None:
    c = make_cluster(tmp_path / "c", ["x", "y", "z"], connect_timeout_s=2)
    c.hosts["z"].stop()
    tests = [Test("ok", "iperf3", ("x", "y"), timeout_s=10),
             Test("down", "iperf3", ("z", "y"), timeout_s=10)]
    with SSHExecutor(c.inventory_path) as ex:
        ok, down = run_tests(ex.runner, tests, lambda t, i: one_step(t.nodes[0], "echo", t.test_id))
    assert ok.stdout == "ok\n" and ok.exit_code == 0 and not ok.unreachable
    assert down.unreachable == ("z",) and down.exit_code is None, down
    assert "refused" in down.error or "unreachable" in down.error
    c.stop()


# ---- the one mapping point: every paramiko / socket exception -> fabriccheck -------------------
def _instances() -> dict[type, BaseException]:
    from types import SimpleNamespace

    e = paramiko.ssh_exception
    key = SimpleNamespace(get_base64=lambda: "AAAAC3Nza")  # all BadHostKeyException reads
    return {
        e.AuthenticationException: e.AuthenticationException("no"),
        e.BadAuthenticationType: e.BadAuthenticationType("no", ["password"]),
        e.PartialAuthentication: e.PartialAuthentication(["publickey"]),
        e.PasswordRequiredException: e.PasswordRequiredException("pw"),
        e.UnableToAuthenticate: e.UnableToAuthenticate("no"),
        e.BadHostKeyException: e.BadHostKeyException("h1", key, key),
        e.ChannelException: e.ChannelException(2, "Connect failed"),
        e.NoValidConnectionsError: e.NoValidConnectionsError({("1.2.3.4", 22): OSError("x")}),
        e.ProxyCommandFailure: e.ProxyCommandFailure("nc h 22", "broken"),
        e.SSHException: e.SSHException("Error reading SSH protocol banner"),
        e.ConfigParseError: e.ConfigParseError("bad"),
        e.CouldNotCanonicalize: e.CouldNotCanonicalize("h"),
        e.IncompatiblePeer: e.IncompatiblePeer("no kex"),
        e.MessageOrderError: e.MessageOrderError("order"),
    }


EXPECTED = {
    "AuthenticationException": AuthError, "BadAuthenticationType": AuthError,
    "PartialAuthentication": AuthError, "PasswordRequiredException": AuthError,
    "UnableToAuthenticate": AuthError, "BadHostKeyException": AuthError,
    "ChannelException": RemoteCommandError, "NoValidConnectionsError": ConnectError,
    "ProxyCommandFailure": ConnectError, "SSHException": ConnectError,
    "ConfigParseError": ConnectError, "CouldNotCanonicalize": ConnectError,
    "IncompatiblePeer": ConnectError, "MessageOrderError": ConnectError,
}


def test_every_paramiko_exception_is_mapped() -> None:
    import inspect

    classes = {n for n, c in inspect.getmembers(paramiko.ssh_exception, inspect.isclass)
               if issubclass(c, BaseException) and c.__module__ == "paramiko.ssh_exception"}
    assert classes == set(EXPECTED), "a paramiko exception is not in the mapping table"
    for cls, exc in _instances().items():
        mapped = map_ssh_error(exc, "h1")
        assert type(mapped) is EXPECTED[cls.__name__], cls.__name__
        assert mapped.host == "h1" and str(mapped).startswith("h1: ")


@pytest.mark.parametrize(
    ("exc", "stage", "expected"),
    [
        (TimeoutError("timed out"), "connect", ConnectError),
        (TimeoutError("timed out"), "command", TaskTimeout),
        (TimeoutError(), "connect", ConnectError),
        (socket.gaierror(-2, "Name or service not known"), "connect", ConnectError),
        (ConnectionRefusedError(111, "refused"), "connect", ConnectError),
        (ConnectionResetError(104, "reset"), "command", ConnectError),
        (OSError(113, "No route to host"), "connect", ConnectError),
        (EOFError(), "command", ConnectError),
        (paramiko.SSHException("not found in known_hosts"), "connect", AuthError),
        (paramiko.SSHException("channel closed"), "command", RemoteCommandError),
        (ValueError("odd"), "command", RemoteCommandError),
    ],
)
def test_socket_and_stage_mappings(exc: BaseException, stage: str, expected: type) -> None:
    assert type(map_ssh_error(exc, "h", stage=stage)) is expected


def test_a_wedged_host_cannot_block_a_test_past_its_limits(tmp_path: Path) -> None:
    c = make_cluster(tmp_path / "w", ["w"], connect_timeout_s=1)
    runner = SSHHostRunner(load_inventory(c.inventory_path))
    assert runner.run("w", ["true"]).exit_code == 0  # connected
    c.hosts["w"].freeze = True  # the connection is up, but commands get no answer
    t0 = time.monotonic()
    raw = run_launch(runner, "t", one_step("w", "true"), timeout_s=30)
    assert time.monotonic() - t0 < 5
    assert raw.unreachable == ("w",) and "no answer" in raw.error
    c.hosts["w"].freeze = False
    assert runner.run("w", ["true"]).exit_code == 0  # reconnects once the host answers again
    runner.close()
    c.stop()


def test_factory_builds_the_ssh_executor_and_refuses_what_it_cannot_do(
    cluster: FakeCluster,
) -> None:
    from fabriccheck.errors import ConfigError
    from fabriccheck.executors.factory import make_executor
    from fabriccheck.faults import FaultSet
    from fabriccheck.topology.load import load_topology

    topo = load_topology("lab-4")
    ex = make_executor("ssh", topology=topo, inventory=load_inventory(cluster.inventory_path))
    assert isinstance(ex, SSHExecutor) and ex.name == "ssh"
    ex.close()
    ex = make_executor("ssh", topology=topo, inventory=str(cluster.inventory_path))
    assert set(ex.inventory.hosts) == {"a", "b", "c"}
    ex.close()
    with pytest.raises(ConfigError, match="needs an inventory"):
        make_executor("ssh", topology=topo)
    hang = FaultSet.from_dict({"faults": [{"kind": "node_hang", "node": "host1"}]})
    with pytest.raises(ConfigError, match="cannot inject faults"):
        make_executor("ssh", topology=topo, faults=hang, inventory=str(cluster.inventory_path))
