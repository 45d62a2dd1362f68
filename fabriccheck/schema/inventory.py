"""The inventory file's model: SSH defaults, probe settings and hosts with their NICs' addresses."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from fabriccheck.schema.base import Name, Port, Positive, StrictModel, fail
from fabriccheck.schema.fields import type_name


def _env_value(value: Any) -> Any:
    """Numbers are written unquoted in YAML (``NCCL_IB_GID_INDEX: 3``): take them as text."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise fail(f"expected a text or a number, got {type_name(value)}",
                   hint="quote it: 'true', '1'")  # fmt: skip
    return value


def _env_mapping(value: Any) -> Any:
    if isinstance(value, str) and "=" in value:
        name, _, val = value.partition("=")
        raise fail(f"expected a mapping NAME: value, got {type_name(value)}",
                   hint=f"write {{{name.strip()}: {val.strip()}}}")  # fmt: skip
    return value


def _ip(value: str) -> str:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise fail(f"not an IP address: {value!r}", hint="e.g. 192.168.100.1") from None
    return value


EnvValue = Annotated[str, BeforeValidator(_env_value)]
Env = Annotated[dict[Name, EnvValue], BeforeValidator(_env_mapping)]


class SshSettings(StrictModel):
    """How to reach every host over SSH (per-host ``port``/``user`` override these)."""

    user: Name = Field("root", description="key auth only")
    port: Port = 22
    key: Name | None = Field(None, description="private key; relative to the inventory file")
    known_hosts: Name | None = Field(None, description="strict host-key checking reads this")
    connect_timeout_s: Positive = Field(5.0, description="per connection attempt")


class ProbeSettings(StrictModel):
    """Probe command settings (``fabriccheck.probes.commands.CommandOptions``)."""

    launcher: Literal["mpirun", "srun"] = Field("mpirun", description="how nccl-tests start")
    mpirun: Name = Field("mpirun", description="the mpirun to call")
    srun: Name = Field("srun", description="the srun to call")
    nccl_tests_dir: str = Field("", description="where all_reduce_perf lives; '' = on PATH")
    nccl_env: Env = Field(default_factory=lambda: {"NCCL_DEBUG": "INFO",
                                                   "NCCL_DEBUG_SUBSYS": "INIT,NET"},
                          description="NCCL_* variables for nccl-tests")  # fmt: skip
    iperf3: Name = Field("iperf3", description="the iperf3 binary")
    ib_write_bw: Name = Field("ib_write_bw", description="the perftest binary")
    gid_index: int | None = Field(None, ge=0, description="perftest -x (RoCE v2); none on IB")
    use_cuda: int | None = Field(None, ge=0, description="GPU for ib_write_bw --use_cuda")
    iperf3_duration_s: Positive = Field(5.0, description="iperf3 -t")
    traceroute: Name = Field("traceroute", description="the traceroute binary (RoCE paths)")
    traceroute_max_hops: int = Field(8, ge=1, le=64, description="traceroute -m")


class NicAddressModel(StrictModel):
    """A data-plane NIC: its IP and rail (shorthand ``eth0: 192.168.100.1``)."""

    ip: Annotated[str, AfterValidator(_ip)] = Field(description="an IPv4 or IPv6 address")
    rail: int = Field(ge=0, description="default: position in the host's nics")


class HostModel(StrictModel):
    """One host (shorthand ``node-000: 10.220.0.1``)."""

    address: Name = Field(description="where SSH connects (management network)")
    port: Port | None = Field(None, description="default: ssh.port")
    user: Name | None = Field(None, description="default: ssh.user")
    nics: dict[Name, NicAddressModel] = Field(default_factory=dict,
                                              description="NIC name -> {ip, rail}")  # fmt: skip
    netns: Name | None = Field(None, description="the lab host's namespace (lab up writes it)")

    @field_validator("nics", mode="before")
    @classmethod
    def _shorthand_nics(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return {} if raw is None else raw
        out = {}
        for i, (name, spec) in enumerate(raw.items()):
            if isinstance(spec, str):
                spec = {"ip": spec}
            if isinstance(spec, dict) and "rail" not in spec:
                spec = {**spec, "rail": i}
            out[name] = spec
        return out

    @model_validator(mode="after")
    def _one_nic_per_rail(self) -> HostModel:
        seen: dict[int, str] = {}
        for name, nic in self.nics.items():
            if nic.rail in seen:
                raise fail(f"two NICs on rail {nic.rail} ({seen[nic.rail]} and {name})",
                           hint="a host has one NIC per rail", at=("nics", name, "rail"))
            seen[nic.rail] = name
        return self


class LabInfo(StrictModel):
    """What ``fabriccheck lab up`` notes about the lab that wrote the inventory."""

    name: Name = Field(description="the lab's name")
    gateway: Name = Field(description="the lab's management gateway")
    ray_address: Name | None = Field(None, description="the GCS host:port of the lab's Ray "
                                      "cluster (`lab up --ray`); the ray executor's default")


class InventoryFile(StrictModel):
    """An inventory file (``--inventory``): which hosts exist and how to reach them."""

    name: str = Field("", description="free text")
    ssh: SshSettings = Field(default_factory=SshSettings, description="defaults for every host")
    python: Name = Field("python3", description="interpreter on the hosts (allreduce-cpu)")
    env: Env = Field(default_factory=dict, description="extra environment for every probe")
    probes: ProbeSettings = Field(default_factory=ProbeSettings, description="probe commands")
    hosts: dict[Name, HostModel] = Field(min_length=1, description="host name -> host")
    lab: LabInfo | None = Field(None, description="written by `fabriccheck lab up`")
    hops: dict[Name, Name] = Field(
        default_factory=dict,
        description="router interface address -> switch name: maps traceroute hops to the "
        "topology's switches, so RoCE flows' paths can be learned (a routed lab writes it)",
    )

    @field_validator("hosts", mode="before")
    @classmethod
    def _shorthand_hosts(cls, raw: Any) -> Any:
        if isinstance(raw, dict):
            return {k: {"address": v} if isinstance(v, str) else v for k, v in raw.items()}
        return raw
