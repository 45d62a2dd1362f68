"""Every Ray exception is mapped to a fabriccheck error at the boundary (map_ray_error)."""

from __future__ import annotations

import socket

import pytest

rex = pytest.importorskip("ray.exceptions")

from fabriccheck.errors import (  # noqa: E402
    AuthError,
    ConnectError,
    ExecutorError,
    RemoteCommandError,
    TaskTimeout,
)
from fabriccheck.inventory.ray_session import check_reachable, connect, map_ray_error  # noqa: E402

CASES = [
    (lambda: rex.GetTimeoutError("Get timed out: some object(s) not ready."), TaskTimeout),
    (lambda: rex.ActorDiedError(), ConnectError),
    (lambda: rex.RayActorError(), ConnectError),
    (lambda: rex.ActorUnavailableError("actor unavailable", None), ConnectError),
    (lambda: rex.ActorUnschedulableError("node gone"), ConnectError),
    (lambda: rex.TaskUnschedulableError("node gone"), ConnectError),
    (lambda: rex.WorkerCrashedError(), ConnectError),
    (lambda: rex.NodeDiedError("node died"), ConnectError),
    (lambda: rex.LocalRayletDiedError(), ConnectError),
    (lambda: rex.OwnerDiedError("ab" * 14, None, ""), ConnectError),
    (lambda: rex.RayTaskError("start", "Traceback...", FileNotFoundError(2, "No such file")),
     RemoteCommandError),
    (lambda: rex.RayTaskError("start", "tb", KeyError(3)).as_instanceof_cause(),
     RemoteCommandError),
    (lambda: rex.RuntimeEnvSetupError("pip failed"), RemoteCommandError),
    (lambda: rex.AuthenticationError("token rejected"), AuthError),
    (lambda: rex.RaySystemError("gcs broke"), ExecutorError),
    (lambda: rex.ObjectStoreFullError("full"), ExecutorError),
    (lambda: ConnectionError("Could not find any running Ray instance."), ConnectError),
    (lambda: RuntimeError("something else"), ExecutorError),
]


@pytest.mark.parametrize(("make", "expected"), CASES,
                         ids=[f"{i}-{e.__name__}" for i, (_, e) in enumerate(CASES)])
def test_each_ray_error_maps_to_the_right_fabriccheck_error(make, expected):
    exc = make()
    mapped = map_ray_error(exc, host="node-007", what="start iperf3")
    assert type(mapped) is expected
    assert mapped.host == "node-007"
    assert "node-007" in str(mapped) and "start iperf3" in str(mapped)
    assert "\n" not in mapped.message  # one line


def test_the_remote_cause_is_named_not_the_ray_wrapper():
    mapped = map_ray_error(rex.RayTaskError("f", "tb", FileNotFoundError(2, "nope: 'iperf3'")))
    assert "FileNotFoundError" in mapped.message and "iperf3" in mapped.message


def _instance(cls: type) -> BaseException:
    for args in ((), ("msg",), ("msg", None), ("ab" * 14, None, "")):
        try:
            return cls(*args)
        except Exception:  # try the next constructor shape
            continue
    return cls.__new__(cls)


@pytest.mark.parametrize("cls", rex.RAY_EXCEPTION_TYPES, ids=lambda c: c.__name__)
def test_every_ray_exception_type_becomes_an_executor_error(cls):
    mapped = map_ray_error(_instance(cls), host="h")
    assert isinstance(mapped, ExecutorError)
    assert mapped.message  # never empty, even when the Ray error cannot format itself


def test_an_executor_error_passes_through_unchanged():
    err = TaskTimeout("x", host="h")
    assert map_ray_error(err) is err


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_connect_to_a_dead_address_fails_fast_with_connect_error():
    address = f"127.0.0.1:{_closed_port()}"
    with pytest.raises(ConnectError, match="no Ray cluster at"):
        check_reachable(address, 2.0)
    import ray

    if ray.is_initialized():
        pytest.skip("this process is already connected to a Ray cluster")
    with pytest.raises(ConnectError) as info:
        connect(address, timeout_s=5.0)
    assert "--ray-address" in (info.value.hint or "")
    assert not ray.is_initialized()


def test_no_address_is_a_config_error_not_a_guess(monkeypatch):
    """Ray's ``auto`` would pick whatever cluster runs on the machine; it must be asked for."""
    import ray

    from fabriccheck.errors import ConfigError

    if ray.is_initialized():
        pytest.skip("this process is already connected to a Ray cluster")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ConfigError, match="--ray-address"):
        connect(None, timeout_s=5.0)
    assert not ray.is_initialized()
