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

    @model_validator(mode="after")
    def _unique(self) -> SpecFile:
        unique_names(self.signals)
        return self
