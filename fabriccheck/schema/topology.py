"""The topology file's model (docs/design.md "Topology file"): explicit lists or a generator."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Discriminator, Field, Tag

from fabriccheck.schema.base import Name, Positive, StrictModel
from fabriccheck.schema.values import FABRICS, TIERS

Count = Annotated[int, Field(ge=1)]


class RailOptimized(StrictModel):
    """``generator: {kind: rail-optimized}``: a leaf per rail per group of nodes, spines above."""

    kind: Literal["rail-optimized"]
    nodes: Count = Field(description="named node-001 … (zero-padded, at least 3 digits)")
    gpus_per_node: int = Field(8, ge=0)
    rails: Count | None = Field(None, description="default: gpus_per_node (at least 1)")
    nodes_per_leaf: Count | None = Field(None, description="default: min(nodes, 32)")
    spines: int | None = Field(None, ge=0, description="needed when there are several leaves")
    nic_gbps: Positive = Field(400.0, description="host link speed")
    uplink_gbps: Positive | None = Field(None, description="leaf-spine speed; default nic_gbps")


class FatTree(StrictModel):
    """``generator: {kind: fat-tree}``: 2 tiers (leaves, spines) or 3 (pods, cores)."""

    kind: Literal["fat-tree"]
    tiers: Literal[2, 3] = 2
    nodes: Count = Field(description="named node-001 … (zero-padded, at least 3 digits)")
    gpus_per_node: int = Field(8, ge=0)
    rails: Count | None = Field(None, description="default: gpus_per_node (at least 1)")
    nodes_per_leaf: Count | None = Field(
        None, description="default: min(nodes, 16); required for 3 tiers"
    )
    spines: int | None = Field(None, ge=0, description="2 tiers only")
    leaves_per_pod: Count | None = Field(None, description="3 tiers only, required")
    spines_per_pod: Count | None = Field(None, description="3 tiers only, required")
    pods: Count | None = Field(None, description="3 tiers only; default: enough for the nodes")
    cores: Count | None = Field(None, description="3 tiers, required: k x spines_per_pod")
    nic_gbps: Positive = Field(400.0, description="host link speed")
    uplink_gbps: Positive | None = Field(None, description="leaf-spine speed; default nic_gbps")
    core_gbps: Positive | None = Field(None, description="3 tiers only; default: uplink_gbps")


class Nvl72(StrictModel):
    """``generator: {kind: nvl72}``: GB200/GB300 NVL72 racks (NVLink domains of compute trays
    and NVSwitch trays) joined by a rail-optimized scale-out fabric, one NIC per rail per tray."""

    kind: Literal["nvl72"]
    racks: Count = Field(description="NVLink domains, named rack-0 …; trays node-001 … in order")
    trays_per_rack: Count = Field(18, description="compute trays (nodes) per rack")
    gpus_per_tray: Count = Field(4, description="GPUs per compute tray")
    switch_trays: Count = Field(9, description="NVSwitch trays per rack")
    chips_per_switch_tray: Count = Field(2, description="NVSwitch chips per switch tray")
    nvlink_ports: Count = Field(18, description="NVLink ports per GPU; port p goes to chip p")
    nics_per_tray: Count = Field(4, description="scale-out NICs (rails) per tray")
    trays_per_leaf: Count | None = Field(None, description="default: trays_per_rack")
    spines: int | None = Field(None, ge=0, description="default: trays_per_leaf (non-blocking)")
    nic_gbps: Positive = Field(400.0, description="scale-out NIC speed")
    uplink_gbps: Positive | None = Field(None, description="leaf-spine speed; default nic_gbps")


Generator = Annotated[RailOptimized | FatTree | Nvl72, Field(discriminator="kind")]


class NvlDomainModel(StrictModel):
    """An NVLink domain (rack): its compute trays and its NVSwitch fabric's shape; the GPU port
    to switch chip wiring follows by rule (port p to chip p mod chips)."""

    name: Name = Field(description="unique, e.g. rack-0")
    trays: list[Name] = Field(min_length=1, description="its compute trays: node names")
    gpus_per_tray: Count = Field(4, description="GPUs per tray (each tray node has this many)")
    switch_trays: Count = Field(9, description="NVSwitch trays")
    chips_per_switch_tray: Count = Field(2, description="switch chips per NVSwitch tray")
    ports_per_gpu: Count = Field(18, description="NVLink ports per GPU")


class NicModel(StrictModel):
    """A node's NIC (shorthand: just its name; rail = position, gbps = its link's)."""

    name: Name = Field(description="mlx5_0, eth0 …; unique in its node")
    rail: int | None = Field(None, ge=0, description="default: position; one NIC per rail")
    gbps: Positive | None = Field(None, description="default: its link's gbps")


NicEntry = Annotated[
    Annotated[Name, Tag("<name>")] | Annotated[NicModel, Tag("<nic>")],
    Discriminator(lambda v: "<name>" if isinstance(v, str) else "<nic>"),
]


class NodeModel(StrictModel):
    """A host with its NICs (one per rail)."""

    name: Name = Field(description="unique; no '/'")
    gpus: int | None = Field(None, ge=0, description="default: gpus_per_node")
    nics: list[NicEntry] = Field(min_length=1, description="a name, or {name, rail, gbps}")


class SwitchModel(StrictModel):
    """A switch and its tier."""

    name: Name = Field(description="unique; no '/'")
    tier: Literal[TIERS]  # type: ignore[valid-type]


class LinkModel(StrictModel):
    """A cable (``count`` parallel ones merged) from a NIC ``node/nic`` or a switch to a switch."""

    a: Name = Field(description="a NIC as node/nic, or a switch name")
    b: Name = Field(description="a switch name (or a NIC when a is a switch)")
    gbps: Positive = Field(description="capacity of the link (all its cables)")
    count: Count = Field(1, description="parallel cables merged into this link")
    a_port: Count | list[Count] | None = Field(
        None, description="port number(s) at end a (ibnetdiscover import; which cable to pull)")
    b_port: Count | list[Count] | None = Field(None, description="port number(s) at end b")


class LabOptions(StrictModel):
    """How ``fabriccheck lab up`` builds this topology (ignored by everything else)."""

    mode: Literal["bridged", "routed"] = Field(
        "bridged",
        description="bridged: switches are Linux bridges (a tree); routed: switches are routing "
        "namespaces with ECMP and layer-4 hashing",
    )


class TopologyFile(StrictModel):
    """A topology file: explicit ``nodes``/``switches``/``links``, or a ``generator``."""

    name: Name = Field(description="shown in output and reports")
    fabric: Literal[FABRICS] = Field(  # type: ignore[valid-type]
        description="infiniband: deterministic routes; roce: ECMP"
    )
    spec: Name | None = Field(None, description="default test spec (file or bundled name)")
    gpus_per_node: int = Field(8, ge=0)
    description: str | None = Field(None, description="free text")
    generator: Generator | None = Field(None, description="either this …")
    nodes: list[NodeModel] | None = Field(None, description="… or nodes, switches and links")
    switches: list[SwitchModel] | None = None
    links: list[LinkModel] | None = None
    routes: str | list[str] | None = Field(
        None, description="InfiniBand forwarding tables (dump_lfts.sh / ibroute / ibdiagnet "
        ".fdbs output) or ibtracert traces, relative to this file; without it routes follow "
        "the D-mod-K model")
    lab: LabOptions | None = Field(None, description="how the namespace lab builds it")
    nvlink_domains: list[NvlDomainModel] | None = Field(
        None, description="NVLink domains (GB200/GB300 NVL72 racks; the nvl72 generator makes "
        "them); docs/nvl72.md")
