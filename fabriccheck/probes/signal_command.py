"""A signal's command line: its template with the placeholders filled, every value quoted (pure).

Placeholders (docs/design.md "Signals"): ``{host}`` the test's first node, ``{hosts}`` every node,
comma-separated, ``{peer}`` the second node, ``{peer_addr}`` the address of the peer's NIC
(``{peer_nic}``'s, else the peer's first NIC's), ``{nic}`` the NIC a ``per: nic`` test reads
(``mlx5_0``), ``{peer_nic}`` the same rail's NIC on the peer, ``{gpus}`` GPUs per node and
``{np}`` the ranks of the group (nodes x GPUs, at least one per node).

Every value is passed through :func:`shlex.quote`, so a host or NIC name can never add a
command: ``{host}`` of ``a;rm -rf /`` is the single word ``'a;rm -rf /'``. A template must
therefore not quote placeholders itself (``cat '/x/{nic}'`` would re-open the quote).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from fabriccheck.errors import ConfigError
from fabriccheck.models import Test
from fabriccheck.probes.launch import HostCommand, ProbeLaunch


def signal_values(test: Test, nic_ips: Mapping[str, str], gpus_per_node: int = 0
                  ) -> dict[str, str]:
    """The placeholder values of a signal test, unquoted.

    Parameters
    ----------
    test
        A ``signal`` test (``params.command``, ``params.nic`` for per-NIC signals).
    nic_ips
        ``node/nic`` -> address, for ``{peer_addr}``.
    gpus_per_node
        GPUs per node (``{gpus}``, ``{np}``).

    >>> from fabriccheck.models import Test
    >>> t = Test("s1", "signal", ("n1", "n2"), params={"command": "x", "nic": "mlx5_1"})
    >>> v = signal_values(t, {"n2/mlx5_1": "10.0.0.2"}, 8)
    >>> v["hosts"], v["peer_addr"], v["np"]
    ('n1,n2', '10.0.0.2', '16')
    """
    nodes = test.nodes
    nic = test.params.get("nic", "")
    peer = nodes[1] if len(nodes) > 1 else ""
    values = {"host": nodes[0], "hosts": ",".join(nodes), "peer": peer, "nic": nic,
              "peer_nic": nic if peer else "", "gpus": str(gpus_per_node),
              "np": str(len(nodes) * max(1, gpus_per_node)), "peer_addr": ""}
    if peer:
        key = f"{peer}/{nic}" if nic else next(
            (k for k in sorted(nic_ips) if k.startswith(peer + "/")), "")
        values["peer_addr"] = nic_ips.get(key, peer)
    return values


def render_signal(template: str, values: Mapping[str, str]) -> str:
    """``template`` with every placeholder replaced by its shell-quoted value.

    >>> render_signal("cat /sys/class/infiniband/{nic}/ports/1/rate", {"nic": "mlx5_0"})
    'cat /sys/class/infiniband/mlx5_0/ports/1/rate'
    >>> render_signal("ping -c1 {host}", {"host": "a; reboot"})
    "ping -c1 'a; reboot'"

    Raises
    ------
    ConfigError
        A placeholder without a value (the signal file was not validated).
    """
    quoted = {k: shlex.quote(v) for k, v in values.items()}
    try:
        return template.format_map(quoted)
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(f"signal command {template!r}: no value for placeholder {exc}",
                          hint="use {host} {hosts} {peer} {peer_addr} {nic} {peer_nic} "
                               "{gpus} {np}") from None


def signal_launch(test: Test, nic_ips: Mapping[str, str]) -> ProbeLaunch:
    """One ``sh -c <command>`` on the test's first node; its stdout is the signal's text."""
    if not test.params.get("command"):
        raise ConfigError(f"test {test.test_id}: a signal test needs params.command")
    values = signal_values(test, nic_ips, int(test.params.get("gpus_per_node", 0)))
    line = render_signal(str(test.params["command"]), values)
    return ProbeLaunch(steps=(HostCommand(host=test.nodes[0], argv=("sh", "-c", line)),),
                       output_step=0)
