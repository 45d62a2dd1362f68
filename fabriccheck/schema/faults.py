"""The faults file's model (docs/design.md "Faults file"): noise plus a list of faults by
``kind``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from fabriccheck.schema.base import Name, StrictModel, fail
from fabriccheck.schema.faults_nvl import (
    NVL_MODELS,
    CliqueMismatch,
    FabricUnregistered,
    ImexMissing,
    NvlinkDegraded,
    NvlinkPortDown,
    NvswitchDown,
)
from fabriccheck.schema.fields import type_name


def _nic_endpoint(value: str) -> str:
    if value.count("/") != 1 or not all(value.split("/")):
        raise fail(f"a NIC is written node/nic, got {value!r}", hint="e.g. node-017/mlx5_3")
    return value


def _two_ends(value: list[str]) -> list[str]:
    if len(value) != 2 or value[0] == value[1]:
        raise fail(f"a link is two different endpoints [a, b], got {value!r}",
                   hint="e.g. [leaf-1-2, spine-3] or [node-001/mlx5_0, leaf-0-0]")  # fmt: skip
    return value


NicEndpoint = Annotated[str, AfterValidator(_nic_endpoint)]
LinkEnds = Annotated[list[Name], AfterValidator(_two_ends)]
#: a slow-down factor: the share of healthy bandwidth left
Factor = Annotated[float, Field(gt=0, lt=1, description="share of healthy bandwidth left, (0, 1)")]


class NoiseModel(StrictModel):
    """Measurement noise of the simulator."""

    jitter: float = Field(0.0, ge=0, le=0.5, description="relative std-dev of every measurement")
    glitch_rate: float = Field(0.0, ge=0, le=1, description="chance a test is spuriously low")
    background: Literal["default", "none"] = Field(
        "default", description="real-world background on healthy nodes' preflight outputs "
        "(harmless driver lines, application Xids, idle GPU link speeds, slow counters); "
        "none: spotless outputs")


class NicDegraded(StrictModel):
    """A NIC at a fraction of its speed."""

    kind: Literal["nic_degraded"]
    nic: NicEndpoint = Field(description="node/nic")
    factor: Factor


class NicDown(StrictModel):
    """A NIC that carries nothing."""

    kind: Literal["nic_down"]
    nic: NicEndpoint = Field(description="node/nic")


class NodeSlow(StrictModel):
    """A node whose intra-node path is slow: every test with it is slow."""

    kind: Literal["node_slow"]
    node: Name
    factor: Factor


class GpuLinkDegraded(StrictModel):
    """A node whose GPU interconnect (NVLink/PCIe inside the node) runs at a fraction of its
    speed: its 1x collective is slow; network tests of its NICs are not."""

    kind: Literal["gpu_link_degraded"]
    node: Name
    factor: Factor


class NodeHang(StrictModel):
    """A node whose tests never finish."""

    kind: Literal["node_hang"]
    node: Name


class NodeUnreachable(StrictModel):
    """A node that cannot be reached at all."""

    kind: Literal["node_unreachable"]
    node: Name


class LinkDegraded(StrictModel):
    """A switch link at a fraction of its speed."""

    kind: Literal["link_degraded"]
    link: LinkEnds = Field(description="[a, b], its two endpoints")
    factor: Factor


class LinkDown(StrictModel):
    """A switch link that carries nothing."""

    kind: Literal["link_down"]
    link: LinkEnds = Field(description="[a, b], its two endpoints")


class LinkFlapping(StrictModel):
    """A link that drops each test with some probability."""

    kind: Literal["link_flapping"]
    link: LinkEnds = Field(description="[a, b], its two endpoints")
    probability: float = Field(gt=0, le=1, description="chance a test over it fails, (0, 1]")


class GpuMissing(StrictModel):
    """A node that lists one GPU fewer than its spec (fell off the bus)."""

    kind: Literal["gpu_missing"]
    node: Name


class PcieDowntrained(StrictModel):
    """A NIC whose PCIe link trained at fewer lanes than its maximum (x16): its bandwidth is
    capped to ``width / 16`` of line rate."""

    kind: Literal["pcie_downtrained"]
    nic: NicEndpoint = Field(description="node/nic")
    width: Literal[1, 2, 4, 8] = Field(description="lanes it trained at (of 16)")


class PortErrors(StrictModel):
    """A NIC port whose error counters grow (symbol and link errors) and whose tests now and
    then come out low."""

    kind: Literal["port_errors"]
    nic: NicEndpoint = Field(description="node/nic")
    rate: float = Field(gt=0, le=1e6, description="error counts per second")


class Xid(StrictModel):
    """A GPU Xid event in the node's kernel log, logged just before the preflight reads it.
    Any number: whether it drains the node is the catalogue's call, not the fault's."""

    kind: Literal["xid"]
    node: Name
    xid: int = Field(ge=1, le=999, description="the Xid number, e.g. 79 (fallen off the bus)")

    @model_validator(mode="before")
    @classmethod
    def _check_number(cls, data: Any) -> Any:
        # checked here, not by the field: pydantic places a field error under the union tag
        # ``xid`` and then the field ``xid`` (faults[0].xid.xid); a model error is faults[0].xid
        if isinstance(data, dict) and "xid" in data:
            value = data["xid"]
            hint = "an Xid number of NVIDIA's Xid catalogue, e.g. 79"
            if isinstance(value, bool) or not isinstance(value, int):
                raise fail(f"expected an integer, got {type_name(value)}", hint=hint)
            if not 1 <= value <= 999:
                raise fail(f"must be between 1 and 999, got {value!r}", hint=hint)
        return data


class GpuThrottle(StrictModel):
    """One GPU of the node held back by hardware: ``nvidia-smi -q`` shows that clock-event
    reason ``Active`` (thermal: ``HW Thermal Slowdown``)."""

    kind: Literal["gpu_throttle"]
    node: Name
    reason: Literal["hw_power_brake", "hw_slowdown", "thermal"] = Field(
        description="the active reason")


class RowRemapPending(StrictModel):
    """One GPU of the node with a row remap pending (``Pending : Yes``) while every ECC counter
    reads 0: calm-looking, but the GPU needs a reset."""

    kind: Literal["row_remap_pending"]
    node: Name


class NvlinkDown(StrictModel):
    """One GPU of the node with ``links`` NVLinks ``<inactive>`` in ``nvidia-smi nvlink -s``."""

    kind: Literal["nvlink_down"]
    node: Name
    links: int = Field(ge=1, le=18, description="links down (of 18 on H100/H200, 12 on A100)")


class PortFlap(StrictModel):
    """A NIC port that goes down and up ``per_hour`` times an hour: its link-down counter grows
    at that rate over the node's uptime (and RoCE ports log ``Link down`` / ``Link up``)."""

    kind: Literal["port_flap"]
    nic: NicEndpoint = Field(description="node/nic")
    per_hour: float = Field(gt=0, le=3600, description="link-down events per hour")


class TransportFallback(StrictModel):
    """NCCL on the node silently leaves the fast path: ``socket`` (TCP instead of InfiniBand /
    RoCE: an IB device unusable, ``NCCL_IB_HCA`` wrong) or ``host_memory`` (GPUDirect RDMA off:
    ``nvidia_peermem`` not loaded, traffic staged through host memory). Jobs run, slowly."""

    kind: Literal["transport_fallback"]
    node: Name
    to: Literal["socket", "host_memory"] = Field(description="what NCCL falls back to")


class AcsEnabled(StrictModel):
    """PCIe ACS enabled on the switches between the node's GPUs and NICs: GPUDirect traffic
    detours through the root complex (GPU-memory RDMA halves; host memory is fine)."""

    kind: Literal["acs_enabled"]
    node: Name


class NumaMisaligned(StrictModel):
    """The node's GPU-NIC pairing crosses NUMA sockets (``nvidia-smi topo -m`` shows SYS where
    its peers show PIX/PXB)."""

    kind: Literal["numa_misaligned"]
    node: Name


class PfcDisabled(StrictModel):
    """RoCE: PFC (and ECN) off on the NIC's traffic class: pairs pass, incast collapses."""

    kind: Literal["pfc_disabled"]
    nic: NicEndpoint = Field(description="node/nic")


class GidMismatch(StrictModel):
    """RoCE: the NIC's GID index points at a RoCE v1 GID instead of v2."""

    kind: Literal["gid_mismatch"]
    nic: NicEndpoint = Field(description="node/nic")


class MtuMismatch(StrictModel):
    """The NIC's MTU differs from the fabric's (its peers')."""

    kind: Literal["mtu_mismatch"]
    nic: NicEndpoint = Field(description="node/nic")
    mtu: int = Field(ge=576, le=9216, description="the MTU it is set to")


class FirmwareDrift(StrictModel):
    """The NIC runs firmware unlike its peers' (a warning: it does not hurt yet)."""

    kind: Literal["firmware_drift"]
    nic: NicEndpoint = Field(description="node/nic")
    version: str = Field(min_length=1, description="the firmware it runs, e.g. 28.39.1002")


FAULT_MODELS = (NicDegraded, NicDown, NodeSlow, GpuLinkDegraded, NodeHang, NodeUnreachable,
                LinkDegraded, LinkDown, LinkFlapping, GpuMissing, PcieDowntrained,
                PortErrors, Xid, GpuThrottle, RowRemapPending, NvlinkDown,
                PortFlap, TransportFallback, AcsEnabled, NumaMisaligned, PfcDisabled,
                GidMismatch, MtuMismatch, FirmwareDrift, *NVL_MODELS)  # fmt: skip
AnyFault = Annotated[
    NicDegraded | NicDown | NodeSlow | GpuLinkDegraded | NodeHang | NodeUnreachable
    | LinkDegraded | LinkDown | LinkFlapping | GpuMissing | PcieDowntrained | PortErrors
    | Xid | GpuThrottle | RowRemapPending | NvlinkDown | PortFlap | TransportFallback
    | AcsEnabled | NumaMisaligned | PfcDisabled | GidMismatch | MtuMismatch | FirmwareDrift
    | NvlinkPortDown | NvswitchDown | ImexMissing | CliqueMismatch | NvlinkDegraded
    | FabricUnregistered,
    Field(discriminator="kind"),
]


class FaultsFile(StrictModel):
    """A faults file (simulator and lab only)."""

    noise: NoiseModel = Field(default_factory=NoiseModel)
    faults: list[AnyFault] = Field(default_factory=list, description="injected faults by kind")
