"""The test spec's model (``test_specs/*.yaml``): per-probe bars by group size, plus signals."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Discriminator, Field, Tag, model_validator

from fabriccheck.schema.base import Name, Positive, StrictModel, fail
from fabriccheck.schema.signals import SignalModel, unique_names
from fabriccheck.schema.values import COLLECTIVES, SPEC_FABRICS, parse_size_bytes


def _size(value: Any) -> Any:
    size = parse_size_bytes(value)
    if size is None or size < 1:
        raise fail("expected a positive size such as 65536 or '8M'")
    return size


def _group_size(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail(f"a group size must be a positive integer, got {value!r}", hint="1, 2, 4 or 8")
    return value


def _levels(value: Any) -> Any:
    if not isinstance(value, list) or not value:
        raise fail(f"levels is a non-empty list of nodes per test, got {value!r}",
                   hint="e.g. levels: [1, 2, 4, 8]")
    for v in value:
        if isinstance(v, bool) or v not in (1, 2, 4, 8):
            raise fail(f"unknown level {v!r}", hint="levels are nodes per test: 1, 2, 4 or 8")
    return value


class GroupBar(StrictModel):
    """The bar at one group size (bandwidth: floor <= warn <= expected; latency reversed)."""

    size_bytes: Annotated[int, BeforeValidator(_size)] = Field(
        description="message size judged: 65536, or with a suffix '8M', '16G'"
    )
    floor: Positive = Field(description="below it (above, for latency) the test fails")
    warn: Positive = Field(description="below it (above, for latency) the test is suspect")
    expected: Positive = Field(description="the healthy value on this SKU")


class ProbeBlock(StrictModel):
    """One probe's bars; ``groups`` maps a group size (nodes) to its bar."""

    unit: Name | None = Field(None, description="fixed per probe: GB/s (nccl, allreduce-cpu), "
                              "Gb/s (ib_write_bw, iperf3), us (ib_write_lat)")  # fmt: skip
    collective: Literal[COLLECTIVES] | None = Field(None, description="nccl only")  # type: ignore[valid-type]
    groups: dict[Annotated[int, BeforeValidator(_group_size)], GroupBar] = Field(
        min_length=1, description="nodes per test -> bar; larger tests use the largest below"
    )


ProbeBlocks = Annotated[
    Annotated[ProbeBlock, Tag("<one>")] | Annotated[list[ProbeBlock], Tag("<many>")],
    Discriminator(lambda v: "<many>" if isinstance(v, list) else "<one>"),
]


class Probes(StrictModel):
    """The probes a spec judges (a block, or a list of blocks, e.g. one per collective)."""

    nccl: ProbeBlocks | None = None
    ib_write_bw: ProbeBlocks | None = None
    ib_write_lat: ProbeBlocks | None = None
    iperf3: ProbeBlocks | None = None
    allreduce_cpu: ProbeBlocks | None = Field(None, alias="allreduce-cpu")


#: ``nvidia-smi topo -m`` distances, nearest first (a GPU's nearest NIC may be at most ``gpu_nic``)
GPU_NIC_DISTANCES = ("PIX", "PXB", "PHB", "NODE", "SYS")
#: settings that exist only on RoCE NICs
ROCE_SETTINGS = ("pfc_priority", "trust", "ecn", "gid_index", "roce_version")


class ConfigBlock(StrictModel):
    """The configuration a healthy node and NIC of this SKU has (docs/config-checks.md); a setting
    left out is judged against the node's peers only."""

    gpudirect: Literal["required", "optional"] | None = Field(
        None, description="required: GPUDirect RDMA on (nvidia_peermem loaded, or DMA-BUF)")
    gpu_nic: Literal[GPU_NIC_DISTANCES] | None = Field(  # type: ignore[valid-type]
        None, description="the farthest nvidia-smi topo -m distance from a GPU to its nearest "
        "NIC (PIX, PXB, PHB, NODE, SYS)")
    gpu_driver: Name | None = Field(None, description="NVIDIA driver version, e.g. '550.90.07'")
    firmware: Name | None = Field(None, description="NIC firmware version, e.g. '28.41.1000'")
    mtu: int | None = Field(None, ge=256, le=9216, description="RoCE: the netdev MTU (9000); "
                            "InfiniBand: the port's active MTU (4096)")
    pfc_priority: int | None = Field(None, ge=0, le=7, description="RoCE: the priority with "
                                     "PFC on (lossless)")
    trust: Literal["pcp", "dscp"] | None = Field(None, description="RoCE: the priority trust "
                                                 "state")
    ecn: bool | None = Field(None, description="RoCE: true: ECN (DCQCN) on the RoCE priority")
    gid_index: int | None = Field(None, ge=0, le=255, description="RoCE: the GID index jobs use "
                                  "(NCCL_IB_GID_INDEX)")
    roce_version: Literal[1, 2] | None = Field(None, description="RoCE: the GID type wanted at "
                                               "gid_index")

    @model_validator(mode="after")
    def _consistent(self) -> ConfigBlock:
        if self.gid_index is not None and self.roce_version is None:
            raise fail("gid_index needs roce_version", at=("gid_index",),
                       hint="e.g. config: {gid_index: 3, roce_version: 2}")
        return self


class SpecFile(StrictModel):
    """A test spec: what "healthy" means for one SKU and fabric."""

    name: Name = Field(description="shown in output")
    sku: Name = Field(description="history learns baselines per sku")
    fabric: Literal[SPEC_FABRICS]  # type: ignore[valid-type]
    description: str | None = Field(None, description="free text")
    gpus_per_node: int = Field(ge=0)
    nic_gbps: Positive = Field(description="line rate of one NIC")
    intra_node_busbw_gbps: float = Field(0.0, ge=0, description="1x NCCL busbw, GB/s")
    timeout_s: Positive = Field(120.0, description="every test is killed after it (a hang)")
    levels: Annotated[list[int], BeforeValidator(_levels)] | None = Field(
        None, description="the ladder: nodes per test, of 1, 2, 4, 8 (default all four)")
    probes: Probes = Field(description="the bars per probe (at least one)")
    signals: list[SignalModel] = Field(default_factory=list, description="user signals")
    node_checks: dict[str, dict[str, Any]] | None = Field(
        None, description="node-local catalogue overrides by check id, e.g. "
        "{xid-63: {severity: fault}} (docs/node-checks.md)")
    config: ConfigBlock | None = Field(
        None, description="the configuration a healthy node and NIC has, e.g. {gpudirect: "
        "required, mtu: 9000, pfc_priority: 3} (docs/config-checks.md)")

    @model_validator(mode="after")
    def _unique(self) -> SpecFile:
        unique_names(self.signals)
        return self

    @model_validator(mode="after")
    def _config_fits_fabric(self) -> SpecFile:
        if self.config is not None and self.fabric == "infiniband":
            given = [k for k in ROCE_SETTINGS if getattr(self.config, k) is not None]
            if given:
                raise fail(f"{given[0]} is a RoCE setting, but the spec is for {self.fabric}",
                           at=("config", given[0]), hint="remove it or set fabric: roce")
        return self
