"""The faults file's NVLink-domain kinds (docs/nvl72.md): a GPU's NVLink port, an NVSwitch tray,
a tray's IMEX daemon, its fabric clique and its registration with the rack's fabric manager, a
GPU's NVLink bandwidth. Names are checked against
the topology's NVLink domains by :meth:`fabriccheck.faults.FaultSet.validate`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fabriccheck.schema.base import Name, StrictModel

#: a GPU index within its tray (checked against the domain's gpus_per_tray)
_GPU = Field(ge=0, le=63, description="GPU index in the tray, from 0")


class NvlinkPortDown(StrictModel):
    """One NVLink port of one GPU of a compute tray down (``<inactive>`` in ``nvidia-smi nvlink
    -s``): the cable from that GPU to switch chip ``port`` (the wiring rule) carries nothing."""

    kind: Literal["nvlink_port_down"]
    node: Name = Field(description="a compute tray of an NVLink domain")
    gpu: int = _GPU
    port: int = Field(ge=0, le=63, description="NVLink port of the GPU, from 0 (18 on GB200)")


class NvswitchDown(StrictModel):
    """An NVSwitch tray of a rack down: every GPU of the rack loses the ports wired to its
    chips (2 of 18 on NVL72)."""

    kind: Literal["nvswitch_down"]
    rack: Name = Field(description="an NVLink domain's name, e.g. rack-0")
    tray: int = Field(ge=0, le=63, description="NVSwitch tray index in the rack, from 0")


class ImexMissing(StrictModel):
    """The tray's IMEX daemon is not running (not installed or stopped): ``nvidia-imex-ctl``
    cannot answer there, and the rest of the domain sees the tray ``UNAVAILABLE``."""

    kind: Literal["imex_missing"]
    node: Name = Field(description="a compute tray of an NVLink domain")


class CliqueMismatch(StrictModel):
    """The tray's GPUs registered in a different fabric clique than the rest of the rack (the
    ``CliqueId`` in ``nvidia-smi -q``'s Fabric section differs): it shares no NVLink memory with
    them. Only a comparison across the rack's trays shows it."""

    kind: Literal["clique_mismatch"]
    node: Name = Field(description="a compute tray of an NVLink domain")


class NvlinkDegraded(StrictModel):
    """One GPU's NVLink bandwidth at a fraction (the domain-level model value; ``nvidia-smi -q``
    shows the fabric health's ``Bandwidth`` degraded)."""

    kind: Literal["nvlink_degraded"]
    node: Name = Field(description="a compute tray of an NVLink domain")
    gpu: int = _GPU
    factor: float = Field(gt=0, lt=1, description="share of healthy NVLink bandwidth left, (0, 1)")


class FabricUnregistered(StrictModel):
    """The rack's fabric manager never configured the tray's GPUs (a replaced tray it does not
    know, or it lost the tray): every GPU's fabric state is ``Not Started``, CUDA cannot start
    on them and the tray takes no part in the domain's NVLink."""

    kind: Literal["fabric_unregistered"]
    node: Name = Field(description="a compute tray of an NVLink domain")


NVL_MODELS = (NvlinkPortDown, NvswitchDown, ImexMissing, CliqueMismatch, NvlinkDegraded,
              FabricUnregistered)
