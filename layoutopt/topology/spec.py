"""Schemas of a cluster file: racks of nodes, the network between them, and what is unavailable.

File shape (YAML; ``examples/clusters/*.yaml`` holds one file per common shape)::

    name: two-rack-h100                 # free text, shown in reports
    node_types:                         # optional inline node types (NodeType rows); a catalog
      - name: my-h100-box               #   name used under racks[].nodes[].type needs no row here
        gpu: H100-SXM                   #   any catalog GPU name or alias
        gpus_per_node: 8
        nvlink_domain_gpus: 8           #   8 on HGX, 72 on NVL72 (18 trays of 4), 1 on PCIe boxes
        nics_per_node: 8
        nic_gbit_per_s: 400             #   one NIC, Gb/s
        source: "our lab inventory"
    network:
      oversubscription: 4.0             # leaf downlink : uplink ratio, >= 1 (1 = non-blocking)
      leaf_latency_us: 2.0              # NIC -> leaf switch, one hop
      spine_latency_us: 1.0             # leaf -> spine, one hop
    racks:
      - name: rack-a
        oversubscription: 2.0           # optional, overrides network.oversubscription
        uplink_gbit_per_s: 12800        # optional, overrides the ratio: leaf -> spine capacity
        nodes:
          - type: hgx-h100-8            # node type: catalog name or one of node_types above
            count: 4
            names: [a0, a1, a2, a3]     # optional; default '<rack>-n<i>' numbered per rack
            nics_per_gpu: 1             # optional overrides of the node type's NICs
            nic_gbit_per_s: 400
    unavailable:
      nodes_down: [a3]                  # whole nodes out of service
      gpus_in_use: {a0: [0, 1]}         # GPU indices already taken by other jobs
      gpus_down: {a1: [7]}              # failed GPUs

An NVLink domain of ``nvlink_domain_gpus`` larger than a node (NVL72: 18 trays of 4 GPUs) is
made of consecutive nodes of one ``racks[].nodes[]`` entry, so its ``count`` must be a multiple of
the nodes per domain. Bandwidths are per direction. Every model is frozen and rejects unknown keys.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from layoutopt.hardware_catalog.schemas import MAX_GBIT_PER_S, MAX_GPUS_PER_NODE, NodeType

# Names become graph vertices and CUDA_VISIBLE_DEVICES prefixes ("node:0,1"), so keep them plain.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
DEFAULT_LEAF_LATENCY_US = 2.0
DEFAULT_SPINE_LATENCY_US = 1.0
# Upper bounds far above real fabrics, so a typo is an error rather than an overflow.
MAX_OVERSUBSCRIPTION = 1e4
MAX_CLUSTER_NODES = 100_000
MAX_LATENCY_US = 1e7
GpuIndex = Annotated[int, Field(ge=0, lt=MAX_GPUS_PER_NODE)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


def _check_name(value: str) -> str:
    if not NAME_PATTERN.match(value):
        raise ValueError(f"name {value!r} must start with a letter or digit and use only letters, digits, '.', '_', '-'")
    return value


class NodeGroupSpec(_Frozen):
    """``count`` nodes of one type in one rack, with optional names and NIC overrides."""

    type: str = Field(description="node type: a catalog name (hgx-h100-8) or an inline node_types row")
    count: int = Field(ge=1, le=MAX_CLUSTER_NODES)
    names: list[str] | None = Field(default=None, description="node names, one per node")
    nics_per_gpu: float | None = Field(default=None, gt=0, le=MAX_GPUS_PER_NODE, description="overrides nics_per_node / gpus_per_node")
    nic_gbit_per_s: float | None = Field(default=None, gt=0, le=MAX_GBIT_PER_S, description="overrides the speed of one NIC")

    @field_validator("names")
    @classmethod
    def _check_names(cls, names: list[str] | None) -> list[str] | None:
        for name in names or ():
            _check_name(name)
        return names

    @model_validator(mode="after")
    def _check_count(self) -> NodeGroupSpec:
        if self.names is not None and len(self.names) != self.count:
            raise ValueError(f"names lists {len(self.names)} nodes but count is {self.count}")
        return self


class RackSpec(_Frozen):
    """One rack: its leaf (top-of-rack) switch, the nodes under it and its uplink to the spine."""

    name: str
    nodes: list[NodeGroupSpec] = Field(min_length=1)
    oversubscription: float | None = Field(default=None, ge=1, le=MAX_OVERSUBSCRIPTION, description="overrides network.oversubscription")
    uplink_gbit_per_s: float | None = Field(
        default=None, gt=0, le=MAX_GBIT_PER_S, description="leaf -> spine capacity per direction; default: rack NIC total / ratio"
    )

    _name = field_validator("name")(_check_name)


class NetworkSpec(_Frozen):
    """The scale-out fabric: a leaf per rack and a spine joining the leaves."""

    oversubscription: float = Field(default=1.0, ge=1, le=MAX_OVERSUBSCRIPTION, description="leaf downlink : uplink bandwidth ratio")
    leaf_latency_us: float = Field(default=DEFAULT_LEAF_LATENCY_US, ge=0, le=MAX_LATENCY_US, description="NIC -> leaf, one hop")
    spine_latency_us: float = Field(default=DEFAULT_SPINE_LATENCY_US, ge=0, le=MAX_LATENCY_US, description="leaf -> spine, one hop")


class UnavailableSpec(_Frozen):
    """GPUs the placement must not use: whole nodes down, GPUs in use by others, failed GPUs."""

    nodes_down: list[str] = Field(default_factory=list)
    gpus_in_use: dict[str, list[GpuIndex]] = Field(default_factory=dict, description="node -> GPU indices")
    gpus_down: dict[str, list[GpuIndex]] = Field(default_factory=dict, description="node -> GPU indices")


class ClusterSpec(_Frozen):
    """A whole cluster file, as written; :mod:`layoutopt.topology.build` resolves it."""

    name: str = "cluster"
    node_types: list[NodeType] = Field(default_factory=list, description="inline node types")
    network: NetworkSpec = NetworkSpec()
    racks: list[RackSpec] = Field(min_length=1)
    unavailable: UnavailableSpec = UnavailableSpec()

    @model_validator(mode="after")
    def _check_size(self) -> ClusterSpec:
        nodes = sum(group.count for rack in self.racks for group in rack.nodes)
        if nodes > MAX_CLUSTER_NODES:
            raise ValueError(f"a cluster may hold at most {MAX_CLUSTER_NODES:,} nodes; this one lists {nodes:,}")
        return self

    @model_validator(mode="after")
    def _check_unique_racks(self) -> ClusterSpec:
        names = [rack.name for rack in self.racks]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"rack names must be unique; repeated: {repeated}")
        return self
