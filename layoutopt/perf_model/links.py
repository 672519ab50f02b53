"""Links between GPUs: which fabric a group of GPUs talks over, its bandwidth and latency.

A ``Link`` carries the raw per-direction line rate; collectives apply the achievable fraction
(``calibration.LINK_EFFICIENCY``) and the message-size curve. A collective group larger than one
local domain (an NVLink domain, or a PCIe server for GPUs without one) is a ``SpanningGroup``:
its GPUs talk over the local fabric inside each domain and over their own NICs between domains,
and the collectives cost it hierarchically (``collectives``).
"""

from __future__ import annotations

import math
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.hardware_catalog.schemas import PCIE_SERVER_GPUS, GpuSpec
from layoutopt.perf_model.calibration import LINK_LATENCY_US
from layoutopt.perf_model.generations import generation_spec
from layoutopt.perf_model.memo import KeepAliveMemo, identity_memo

LinkKind = Literal["nvlink", "pcie", "network"]


class Link(BaseModel):
    """One path between GPUs: its fabric, per-direction line rate per GPU and one-hop latency."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: LinkKind
    bandwidth_gb_per_s: float = Field(gt=0, description="per GPU, per direction, line rate")
    latency_us: float = Field(ge=0, description="one hop")
    efficiency: float | None = Field(default=None, gt=0, description="large-collective bandwidth / line rate; "
                                     "None: calibration.LINK_EFFICIENCY of the kind")
    allreduce_efficiency: float | None = Field(
        default=None, gt=0, description="the same for all-reduce (above 1 with in-switch reduction, NVLS); None: "
        "calibration.ALLREDUCE_LINK_EFFICIENCY of the kind")
    mesh_peers: int | None = Field(
        default=None, ge=1, description="switchless full mesh (xGMI): one link to each of this many peers, the "
        "bandwidth their aggregate, so g GPUs talking use (g - 1) / mesh_peers of it; None: a switch")


class SpanningGroup(BaseModel):
    """A collective group spread evenly over ``num_domains`` local domains (nodes).

    Inside a domain its GPUs talk over ``local``; between domains every GPU uses its own NIC
    (``network``, one NIC per GPU as on HGX nodes), so ``d`` GPUs of a domain drive ``d`` NICs at once.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    local: Link
    network: Link
    num_domains: int = Field(ge=2, description="local domains the group's GPUs are spread over")


# The fabric of one collective group: a single link when the group sits inside one domain (or all
# of it runs over one kind of link), a SpanningGroup when it crosses domains.
GroupLink: TypeAlias = Link | SpanningGroup


@identity_memo
def nvlink(gpu: GpuSpec) -> Link:
    """The scale-up fabric of ``gpu`` (NVLink/NVSwitch, xGMI), with its generation's collective
    efficiencies: in-switch all-reduce (NVLS) only on Hopper and Blackwell NVSwitch; rings on
    A100's NVSwitch and on AMD's switchless xGMI mesh (data/generations.yaml). One Link per GPU
    object (memoized by identity: every layout of a GPU asks for it several times)."""
    spec = generation_spec(gpu)
    mesh = gpu.scaleup_domain_gpus - 1 if spec.scaleup_mesh and gpu.scaleup_domain_gpus > 1 else None
    return Link(kind="nvlink", bandwidth_gb_per_s=gpu.scaleup_gb_per_s, latency_us=LINK_LATENCY_US["nvlink"],
                efficiency=spec.link_efficiency, allreduce_efficiency=spec.allreduce_link_efficiency,
                mesh_peers=mesh)


@identity_memo
def pcie_link(gpu: GpuSpec) -> Link:
    """GPU-to-GPU over the host PCIe switches of one server (one Link per GPU object, memoized by
    identity: the identity memos downstream then find it)."""
    return Link(kind="pcie", bandwidth_gb_per_s=gpu.pcie_gb_per_s, latency_us=LINK_LATENCY_US["pcie"])


@identity_memo
def inter_node_link(gpu: GpuSpec) -> Link:
    """Scale-out network between nodes: the GPU's NIC (Gb/s converted to GB/s). One Link per GPU
    object (memoized by identity): every prefill proposal of a GPU counts on it as its KV link, and
    one object is pickled, dumped and looked up once instead of once per proposal."""
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


def local_domain(gpu: GpuSpec) -> tuple[Link, int]:
    """(fabric, GPUs) of the local domain of ``gpu``: its scale-up domain, else a PCIe server."""
    if gpu.scaleup_gb_per_s > 0 and gpu.scaleup_domain_gpus > 1:
        return nvlink(gpu), gpu.local_domain_gpus
    return pcie_link(gpu), gpu.local_domain_gpus


# Group fabrics by (GPU identity, ranks, stride): every layout of a GPU asks for a few group shapes
# (six per ``forward_coefficients``); one object per shape is built once and lets the collectives'
# identity memos find it.
_group_links = KeepAliveMemo(1 << 12)


def collective_group_link(gpu: GpuSpec, group_gpus: int, stride_gpus: int = 1) -> GroupLink:
    """The fabric of a collective group of ``group_gpus`` ranks of one instance whose members sit
    ``stride_gpus`` apart in rank order (TP groups are contiguous; an EP group strides over the
    expert-TP ranks). Ranks fill local domains in order, so the group spans
    ``ceil(group x stride / domain)`` domains (at most one per member); inside one domain it is
    the flat link of ``intra_instance_link``. Remembered per GPU object and group shape.
    """
    return _group_links.get((id(gpu), group_gpus, stride_gpus), gpu,
                            lambda: _collective_group_link(gpu, group_gpus, stride_gpus))


def _collective_group_link(gpu: GpuSpec, group_gpus: int, stride_gpus: int) -> GroupLink:
    extent_gpus = group_gpus * stride_gpus
    flat = intra_instance_link(gpu, extent_gpus)
    if group_gpus <= 1 or flat.kind != "network":
        return flat
    local, domain_gpus = local_domain(gpu)
    num_domains = min(group_gpus, math.ceil(extent_gpus / domain_gpus))
    if num_domains < 2:
        return flat
    # GPUDirect RDMA reaches the NIC through the GPU's own PCIe link, which caps its rate (L40S: Gen4).
    nic = flat.model_copy(update={"bandwidth_gb_per_s": min(flat.bandwidth_gb_per_s, gpu.pcie_gb_per_s)})
    return SpanningGroup(local=local, network=nic, num_domains=num_domains)


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


def cross_domain_groups(gpu: GpuSpec, layout) -> dict[str, SpanningGroup]:
    """The collective groups of ``layout`` that span local domains, each with its fabric.

    Keys: ``tp`` (TP all-reduces), ``moe_tp`` (expert-TP all-reduce), ``ep`` (expert dispatch and
    combine, DEP across nodes), ``cp`` (DCP/PCP all-gather). Empty when every group stays inside
    one scale-up domain. A search that admits cross-node layouts (TP16 over two HGX nodes, EP32+
    across nodes) passes ``allow_cross_domain=True`` to ``memory.check_layout`` and ``estimate``;
    the step costs then run these groups hierarchically over the NICs (see ``collectives``), so
    whether the layout pays is the performance model's answer, not a rule.
    """
    groups = {
        "tp": collective_group_link(gpu, layout.tp_size),
        "moe_tp": collective_group_link(gpu, layout.moe_tp_size),
        "ep": collective_group_link(gpu, layout.ep_size, layout.moe_tp_size),
        "cp": collective_group_link(gpu, layout.dcp_size * layout.pcp_size, layout.tp_size // layout.dcp_size),
    }
    return {name: link for name, link in groups.items() if isinstance(link, SpanningGroup)}
