"""The Ray boundary: connect to a cluster under a hard timeout and map Ray's errors to ours.

Ray is imported lazily (inside functions) so importing fabriccheck stays fast. Every Ray call of
the executor and the Ray inventory goes through :func:`ray_get` / :func:`connect` here, and every
Ray exception becomes a :mod:`fabriccheck.errors` error in one place, :func:`map_ray_error`::

    GetTimeoutError                        -> TaskTimeout        (a call outlived its timeout)
    ActorUnschedulableError, TaskUnschedulableError,
    ActorDiedError / RayActorError, ActorUnavailableError,
    WorkerCrashedError, NodeDiedError, LocalRayletDiedError,
    OwnerDiedError                         -> ConnectError       (the host's node/worker is gone)
    RayTaskError (the agent raised, e.g. the command's binary is missing),
    RuntimeEnvSetupError                   -> RemoteCommandError (command could not start)
    AuthenticationError                    -> AuthError
    ConnectionError, TimeoutError (init)   -> ConnectError       (no cluster at that address)
    RaySystemError, any other RayError     -> ExecutorError
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any

from fabriccheck.errors import (
    AuthError,
    ConfigError,
    ConnectError,
    ExecutorError,
    RemoteCommandError,
    TaskTimeout,
)

#: Ray namespace fabriccheck's actors and placement groups live in
RAY_NAMESPACE = "fabriccheck"
_DRIVER_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}


def _first_line(exc: BaseException) -> str:
    try:
        text = str(exc).strip()
    except Exception:  # some Ray errors format attributes that may be missing
        text = ""
    text = text or type(exc).__name__
    return text.splitlines()[0][:300]


def map_ray_error(exc: BaseException, *, host: str | None = None, what: str = "") -> ExecutorError:
    """The fabriccheck error for a Ray exception (see the module docstring for the table).

    Parameters
    ----------
    exc : BaseException
        What Ray raised (an :class:`ExecutorError` is returned unchanged).
    host : str, optional
        The fabriccheck host the call was about, named in the message.
    what : str
        What we were doing ("start iperf3", "reserve nodes"), named in the message.

    Returns
    -------
    ExecutorError
        Raise it ``from exc``.
    """
    if isinstance(exc, ExecutorError):
        return exc
    import ray.exceptions as rex

    doing = f"{what}: " if what else ""
    msg = f"{doing}{type(exc).__name__}: {_first_line(exc)}"
    gone = (
        rex.ActorUnschedulableError,
        rex.TaskUnschedulableError,
        rex.RayActorError,  # ActorDiedError, ActorUnavailableError
        rex.WorkerCrashedError,
        rex.NodeDiedError,
        rex.LocalRayletDiedError,
        rex.OwnerDiedError,
    )
    if isinstance(exc, rex.GetTimeoutError):
        return TaskTimeout(msg, host=host, hint="the Ray node is overloaded or hung; retry later")
    if isinstance(exc, rex.RayTaskError):
        cause = exc.cause if getattr(exc, "cause", None) is not None else exc
        return RemoteCommandError(f"{doing}{type(cause).__name__}: {_first_line(cause)}",
                                  host=host, hint="check the command exists on that host")
    if isinstance(exc, gone):
        return ConnectError(msg, host=host, hint="the host's Ray node or worker died; "
                            "check `ray status` on the cluster")
    if isinstance(exc, rex.RuntimeEnvSetupError):
        return RemoteCommandError(msg, host=host, hint="fix the runtime environment")
    if isinstance(exc, rex.AuthenticationError):
        return AuthError(msg, host=host, hint="set the cluster's Ray auth token (RAY_AUTH_TOKEN)")
    if isinstance(exc, rex.RaySystemError):
        return ExecutorError(msg, host=host, hint="Ray itself failed; see the Ray logs")
    if isinstance(exc, (ConnectionError, TimeoutError, socket.gaierror)):
        return ConnectError(msg, host=host, hint="check --ray-address and that the cluster runs")
    if isinstance(exc, rex.RayError):
        return ExecutorError(msg, host=host, hint="see the Ray logs")
    return ExecutorError(msg, host=host)


def ray_get(ref: Any, timeout_s: float, *, host: str | None = None, what: str = "") -> Any:
    """``ray.get(ref, timeout=timeout_s)`` with every Ray error mapped by :func:`map_ray_error`."""
    import ray

    try:
        return ray.get(ref, timeout=max(0.0, timeout_s))
    except Exception as exc:  # mapped at the boundary; re-raised as ours
        raise map_ray_error(exc, host=host, what=what) from exc


def _split_address(address: str) -> tuple[str, int] | None:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)


def check_reachable(address: str, timeout_s: float) -> None:
    """Fail fast with :class:`ConnectError` when nothing listens at ``host:port``.

    ``ray.init`` to a dead address retries for a long time and ignores SIGTERM meanwhile, so the
    GCS port is probed with a plain TCP connect first.
    """
    parts = _split_address(address)
    if parts is None:
        return  # "auto", "ray://..." or similar: let Ray resolve it
    try:
        with socket.create_connection(parts, timeout=timeout_s):
            pass
    except OSError as exc:
        raise ConnectError(
            f"no Ray cluster at {address}: {exc.strerror or exc}",
            hint="check --ray-address (the head's GCS host:port) and that `ray start --head` runs",
        ) from exc


def _default_node_ip(address: str) -> str | None:
    """The driver's node IP for a cluster on a non-default loopback address (``127.x.y.z``).

    Ray rewrites only ``127.0.0.1``/``localhost``; a head on another loopback address needs the
    driver to say it shares that node (``ray.init(_node_ip_address=...)``).
    """
    parts = _split_address(address)
    if parts and parts[0].startswith("127.") and parts[0] != "127.0.0.1":
        return parts[0]
    return None


class _DropMessage(logging.Filter):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


def connect(
    address: str | None,
    *,
    timeout_s: float = 30.0,
    node_ip_address: str | None = None,
) -> bool:
    """Connect this process to the Ray cluster at ``address`` (``host:port`` or ``auto``).

    Returns True if this call made the connection (the caller then owns it and shuts it down),
    False if Ray was already initialised (e.g. fabriccheck runs inside a Ray job).
    ``address`` None means ``RAY_ADDRESS``; ``auto`` (Ray's discovery of a local cluster) must be
    asked for explicitly: on a shared machine it finds whatever cluster happens to run there.

    Raises
    ------
    ConfigError
        No address given and ``RAY_ADDRESS`` unset.
    ConnectError
        Nothing listens at the address, or ``ray.init`` failed or hung for ``timeout_s``.
    """
    import ray

    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        raise ConfigError("the ray executor needs the cluster's address", field="--ray-address",
                          hint="pass --ray-address HEAD_IP:6379 (or auto), or set RAY_ADDRESS")
    check_reachable(address, min(timeout_s, 5.0))
    for key, value in _DRIVER_ENV.items():
        os.environ.setdefault(key, value)
    node_ip = node_ip_address or _default_node_ip(address)
    _init_within(address, node_ip, timeout_s)
    return True


def _init_within(address: str, node_ip: str | None, timeout_s: float) -> None:
    """``ray.init`` (in fabriccheck's namespace, quiet, on ``node_ip`` if known) in a daemon
    thread, waited on for ``timeout_s``; a hang or a failure is raised as ``ConnectError``
    (or the error :func:`map_ray_error` maps it to)."""
    import ray

    kwargs: dict[str, Any] = {
        "address": address,
        "namespace": RAY_NAMESPACE,
        "log_to_driver": False,
        "logging_level": "warning",
        "configure_logging": False,
    }
    if node_ip:
        kwargs["_node_ip_address"] = node_ip
    box: dict[str, Any] = {}

    def _init() -> None:
        quiet = _DropMessage("SIGTERM handler is not set")  # the CLI keeps its own SIGTERM
        log = logging.getLogger("ray._private.worker")
        log.addFilter(quiet)
        try:
            ray.init(**kwargs)
            box["ok"] = True
        except BaseException as exc:  # handed to the waiting thread below
            box["exc"] = exc
        finally:
            log.removeFilter(quiet)

    thread = threading.Thread(target=_init, name="fabriccheck-ray-init", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise ConnectError(
            f"ray.init({address}) did not finish in {timeout_s:g} s",
            hint="the cluster may be unhealthy, or this host has no raylet on "
            f"{node_ip or 'its address'} (pass --ray-node-ip / run on a cluster node)",
        )
    if "exc" in box:
        err = map_ray_error(box["exc"], what=f"connect to Ray at {address}")
        if type(err) is ExecutorError:  # e.g. RuntimeError "cannot find the matched Raylet"
            err = ConnectError(err.message, hint="run fabriccheck on a node of the Ray cluster "
                               "(a raylet must run on this host), or pass its node IP")
        raise err from box["exc"]


def disconnect() -> None:
    """``ray.shutdown()`` (for a connection :func:`connect` made)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
