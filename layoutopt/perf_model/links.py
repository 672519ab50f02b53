"""Links between GPUs: which fabric a group of GPUs talks over, its bandwidth and latency.

A ``Link`` carries the raw per-direction line rate; collectives apply the achievable fraction
(``calibration.LINK_EFFICIENCY``) and the message-size curve.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.perf_model.calibration import LINK_LATENCY_US, PCIE_SERVER_GPUS

LinkKind = Literal["nvlink", "pcie", "network"]


class Link(BaseModel):
    """One path between GPUs: its fabric, per-direction line rate per GPU and one-hop latency."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: LinkKind
    bandwidth_gb_per_s: float = Field(gt=0, description="per GPU, per direction, line rate")
    latency_us: float = Field(ge=0, description="one hop")


def nvlink(gpu: GpuSpec) -> Link:
    """The scale-up fabric of ``gpu`` (NVLink/NVSwitch, xGMI)."""
    return Link(kind="nvlink", bandwidth_gb_per_s=gpu.scaleup_gb_per_s, latency_us=LINK_LATENCY_US["nvlink"])


def pcie_link(gpu: GpuSpec) -> Link:
    """GPU-to-GPU over the host PCIe switches of one server."""
    return Link(kind="pcie", bandwidth_gb_per_s=gpu.pcie_gb_per_s, latency_us=LINK_LATENCY_US["pcie"])


def inter_node_link(gpu: GpuSpec) -> Link:
    """Scale-out network between nodes: the GPU's NIC (Gb/s converted to GB/s)."""
    return Link(kind="network", bandwidth_gb_per_s=gpu.nic_gbit_per_s / 8.0, latency_us=LINK_LATENCY_US["network"])


def intra_instance_link(gpu: GpuSpec, group_gpus: int) -> Link:
    """The fabric a group of ``group_gpus`` GPUs of one instance communicates over.

    NVLink when the group fits in one scale-up domain; for GPUs without a scale-up fabric (PCIe
    cards) PCIe while the group fits in one server; the NIC otherwise.
    """
    if gpu.scaleup_gb_per_s > 0 and group_gpus <= gpu.scaleup_domain_gpus:
        return nvlink(gpu)
    if group_gpus <= PCIE_SERVER_GPUS and gpu.scaleup_domain_gpus < PCIE_SERVER_GPUS:
        return pcie_link(gpu)
    return inter_node_link(gpu)


def pipeline_link(gpu: GpuSpec, instance_gpus: int) -> Link:
    """The link between consecutive pipeline stages: NVLink when the whole instance is in one domain."""
    return intra_instance_link(gpu, instance_gpus)


def kv_transfer_link(gpu: GpuSpec, prefill_layout, decode_layout, decode_gpu: GpuSpec | None = None) -> Link:
    """The path a prompt's KV takes from a prefill to a decode instance on other nodes.

    Every GPU holds its own KV shard and sends it over its own NIC (NIXL/Mooncake-style
    transfers, one NIC per GPU on HGX nodes), so the path carries the NICs of the smaller side:
    min over both ends of tp x pp GPUs, each at the slower NIC.
    """
    decode_gpu = decode_gpu or gpu
    nic = min(inter_node_link(gpu).bandwidth_gb_per_s, inter_node_link(decode_gpu).bandwidth_gb_per_s)
    lanes = min(prefill_layout.tp_size * prefill_layout.pp_size, decode_layout.tp_size * decode_layout.pp_size)
    base = inter_node_link(decode_gpu)
    return Link(kind=base.kind, bandwidth_gb_per_s=nic * lanes, latency_us=base.latency_us)
