"""Slurm actions: drain a node with a reason naming what was found, resume it when it recovers.

Only nodes fabriccheck drained are resumed: before ``State=RESUME`` the node's current reason
must still start with ``fabriccheck:`` (an operator who re-drained it for something else wins).
"""

from __future__ import annotations

from fabriccheck.inventory.command import Runner, run_command
from fabriccheck.inventory.slurm import parse_scontrol_show_node, parse_state

#: every reason fabriccheck writes starts with this
REASON_PREFIX = "fabriccheck:"


class SlurmActions:
    """Drain / resume through ``scontrol`` (run by ``runner``)."""

    backend = "slurm"

    def __init__(self, runner: Runner | None = None, *, timeout_s: float = 30.0) -> None:
        self.runner = runner or run_command
        self.timeout_s = timeout_s

    def node_info(self, node: str) -> dict[str, str]:
        """``scontrol show node NODE`` as a dict (``State``, ``Reason``, ...)."""
        out = self.runner(["scontrol", "show", "node", node], self.timeout_s)
        return parse_scontrol_show_node(out).get(node, {})

    def take_out(self, node: str, reason: str) -> str:
        """Drain ``node``: running jobs finish, no new job starts there. Returns what was done."""
        if not reason.startswith(REASON_PREFIX):
            reason = f"{REASON_PREFIX} {reason}"
        self.runner(
            ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"],
            self.timeout_s,
        )
        return "drained"

    def give_back(self, node: str) -> str:
        """Resume ``node`` if it is still drained by fabriccheck; returns what was done
        (``resumed``, ``not drained``, or ``drained by someone else``)."""
        info = self.node_info(node)
        state = parse_state(node, info.get("State", "unknown"))
        if "drain" not in state.flags and state.base not in ("drained", "draining"):
            return "not drained"
        if not info.get("Reason", "").startswith(REASON_PREFIX):
            return "drained by someone else"
        self.runner(["scontrol", "update", f"NodeName={node}", "State=RESUME"], self.timeout_s)
        return "resumed"
