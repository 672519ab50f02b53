"""A resolved cluster: nodes, NVLink domains and racks, with GPU states and a networkx graph.

Build one with :func:`layoutopt.topology.load_cluster` (a cluster file) or
:func:`layoutopt.topology.cluster_from_budget` (``32xH100``); the constructor does no I/O.
A GPU is named by :class:`GpuId` ``(node, index)``, written ``node/index``. Bandwidths are
decimal GB/s (1e9 bytes/s) per direction; latencies microseconds.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.errors import InputError, unknown_name_error
from layoutopt.hardware_catalog.budget import Budget
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.perf_model.links import Link
from layoutopt.topology import graph as graph_paths
from layoutopt.topology import links as kv_links

if TYPE_CHECKING:
    import networkx as nx

GpuState = Literal["free", "in_use", "down"]


class GpuId(NamedTuple):
    """One GPU: the node it sits in and its index there (its CUDA device number)."""

    node: str
    index: int

    def __str__(self) -> str:
        return f"{self.node}/{self.index}"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ClusterNode(_Frozen):
    """One server (or NVL72 compute tray) with the state of each of its GPUs."""

    name: str
    rack: str
    node_type: str
    gpu: str = Field(description="canonical GPU name")
    gpu_states: tuple[GpuState, ...] = Field(description="state of GPU 0, 1, ...")
    gpu_domains: tuple[str, ...] = Field(description="NVLink domain of GPU 0, 1, ...")
    num_nics: int = Field(ge=0, description="NIC vertices in the graph (a NIC may serve several GPUs)")
    nic_gb_per_s_per_gpu: float = Field(ge=0, description="scale-out bandwidth of each GPU, GB/s")

    @property
    def num_gpus(self) -> int:
        return len(self.gpu_states)

    def free_indices(self) -> list[int]:
        return [i for i, state in enumerate(self.gpu_states) if state == "free"]

    def nic_of(self, index: int) -> int:
        """NIC vertex number that GPU ``index`` sends through."""
        return index * self.num_nics // self.num_gpus


class NvlinkDomain(_Frozen):
    """GPUs joined all-to-all by NVLink/NVSwitch (or xGMI): one node on HGX, 18 trays on NVL72."""

    name: str
    rack: str
    gpu: str
    gpus: tuple[GpuId, ...] = Field(description="every GPU of the domain, in node order")
    nodes: tuple[str, ...]
    scaleup_gb_per_s: float = Field(ge=0, description="per GPU per direction; 0 when joined by PCIe only")

    @property
    def num_gpus(self) -> int:
        return len(self.gpus)


class Rack(_Frozen):
    """A rack: its nodes under one leaf switch and the leaf's uplink to the spine."""

    name: str
    nodes: tuple[str, ...]
    num_gpus: int = Field(ge=0)
    uplink_gb_per_s: float = Field(gt=0, description="leaf -> spine capacity, each direction")
    oversubscription: float = Field(gt=0, description="rack NIC total / uplink capacity")

    @property
    def uplink_gb_per_s_per_gpu(self) -> float:
        """Fair share of the uplink when every GPU of the rack sends across racks at once."""
        return self.uplink_gb_per_s / max(1, self.num_gpus)


class Cluster:
    """Nodes, NVLink domains and racks of one cluster, and the graph joining them.

    ``gpu_specs`` holds the catalog row of every GPU type present; ``leaf_latency_us`` and
    ``spine_latency_us`` are the network hop latencies. Read-only after construction.
    """

    def __init__(
        self,
        name: str,
        nodes: list[ClusterNode],
        domains: list[NvlinkDomain],
        racks: list[Rack],
        gpu_specs: dict[str, GpuSpec],
        leaf_latency_us: float,
        spine_latency_us: float,
    ):
        self.name = name
        self.nodes: dict[str, ClusterNode] = {n.name: n for n in nodes}
        self.domains: dict[str, NvlinkDomain] = {d.name: d for d in domains}
        self.racks: dict[str, Rack] = {r.name: r for r in racks}
        self.gpu_specs = dict(gpu_specs)
        self.leaf_latency_us = leaf_latency_us
        self.spine_latency_us = spine_latency_us

    def __repr__(self) -> str:
        return (f"Cluster({self.name!r}: {len(self.racks)} racks, {len(self.nodes)} nodes, "
                f"{self.num_gpus} GPUs, {len(self.free_gpus())} free)")

    # ----- GPUs and their states

    @property
    def num_gpus(self) -> int:
        return sum(n.num_gpus for n in self.nodes.values())

    def node(self, name: str) -> ClusterNode:
        if name not in self.nodes:
            raise unknown_name_error("node", name, self.nodes)
        return self.nodes[name]

    def gpu_state(self, gpu: GpuId) -> GpuState:
        node = self.node(gpu.node)
        if not 0 <= gpu.index < node.num_gpus:
            raise InputError("gpu", str(gpu), f"an index 0..{node.num_gpus - 1} on node {node.name}")
        return node.gpu_states[gpu.index]

    def free_gpus(self, gpu_type: str | None = None) -> list[GpuId]:
        """Every free GPU (of ``gpu_type`` when given), in node order."""
        return [GpuId(n.name, i) for n in self.nodes.values()
                if gpu_type is None or n.gpu == gpu_type for i in n.free_indices()]

    def gpu_counts_by_type(self) -> dict[str, int]:
        """Free GPUs per canonical GPU type: what a Budget built from this cluster may use."""
        counts: dict[str, int] = {}
        for node in self.nodes.values():
            free = len(node.free_indices())
            if free:
                counts[node.gpu] = counts.get(node.gpu, 0) + free
        return counts

    def budget(self, max_usd_per_hour: float | None = None) -> Budget:
        """A Budget of the free GPUs per type (and an optional $ cap), for the optimizer."""
        counts = self.gpu_counts_by_type()
        if not counts:
            raise InputError("cluster", self.name, "at least one free GPU (every GPU is in use or down)")
        return Budget(gpu_counts=counts, max_usd_per_hour=max_usd_per_hour, text=f"cluster {self.name}")

    # ----- NVLink domains

    def domain_of(self, gpu: GpuId) -> NvlinkDomain:
        return self.domains[self.node(gpu.node).gpu_domains[gpu.index]]

    def free_in_domain(self, domain: str) -> list[GpuId]:
        return [g for g in self.domains[domain].gpus if self.nodes[g.node].gpu_states[g.index] == "free"]

    # ----- Local domains: what one pipeline stage (or one unit of a stage spread over domains) sits in

    @cached_property
    def local_domains(self) -> dict[str, NvlinkDomain]:
        """Every NVLink domain with a scale-up fabric, and for GPUs joined by PCIe only their node
        (its host PCIe switches join them), as ``perf_model.links.local_domain`` models them."""
        local: dict[str, NvlinkDomain] = {}
        for domain in self.domains.values():
            if domain.num_gpus > 1 and domain.scaleup_gb_per_s > 0:
                local[domain.name] = domain
                continue
            (node,) = domain.nodes
            held = local.get(node)
            gpus = (held.gpus if held is not None else ()) + domain.gpus
            local[node] = NvlinkDomain(name=node, rack=domain.rack, gpu=domain.gpu,
                                       gpus=tuple(sorted(gpus, key=lambda g: g.index)), nodes=(node,),
                                       scaleup_gb_per_s=0.0)
        return local

    @cached_property
    def _local_domain_names(self) -> dict[str, str]:
        return {d: local.name for local in self.local_domains.values()
                for d in {self.nodes[g.node].gpu_domains[g.index] for g in local.gpus}}

    def local_domain_of(self, gpu: GpuId) -> NvlinkDomain:
        return self.local_domains[self._local_domain_names[self.node(gpu.node).gpu_domains[gpu.index]]]

    def free_in_local_domain(self, name: str) -> list[GpuId]:
        return [g for g in self.local_domains[name].gpus if self.nodes[g.node].gpu_states[g.index] == "free"]

    def max_scaleup_domain(self, gpu_type: str, free_only: bool = False) -> int:
        """GPUs in the largest NVLink domain of ``gpu_type`` (counting free GPUs only if asked).

        A TP/EP/DCP group (one pipeline stage) larger than this cannot be placed; 0 when the
        cluster has no GPU of that type.
        """
        sizes = [len(self.free_in_domain(d.name)) if free_only else d.num_gpus
                 for d in self.domains.values() if d.gpu == gpu_type]
        return max(sizes, default=0)

    def stage_group_capacity(self, gpu_type: str, group_gpus: int) -> int:
        """How many disjoint groups of ``group_gpus`` free GPUs, each in one domain, fit at once."""
        return sum(len(self.free_in_domain(d.name)) // group_gpus
                   for d in self.domains.values() if d.gpu == gpu_type)

    # ----- Racks

    def rack_of(self, gpu_or_node: GpuId | str) -> Rack:
        name = gpu_or_node.node if isinstance(gpu_or_node, GpuId) else gpu_or_node
        return self.racks[self.node(name).rack]

    # ----- The graph and paths (see layoutopt.topology.graph)

    @cached_property
    def graph(self) -> nx.Graph:
        """Vertices gpu/node/nvswitch/nic/rack/spine; edges carry bandwidth_gb_per_s, latency_us."""
        return graph_paths.build_graph(self)

    def path(self, gpu_a: GpuId, gpu_b: GpuId) -> list[str]:
        """Graph vertices a transfer from ``gpu_a`` to ``gpu_b`` crosses, both ends included."""
        return graph_paths.gpu_path(self, gpu_a, gpu_b)

    def path_bandwidth_gb_per_s(self, gpu_a: GpuId, gpu_b: GpuId) -> float:
        """Bottleneck bandwidth from ``gpu_a`` to ``gpu_b``, GB/s per direction.

        Shared edges (a NIC serving several GPUs, a rack's uplink) count at their fair share
        when every GPU behind them sends at once, so a cross-rack path gets at most the
        rack's ``uplink_gb_per_s_per_gpu`` (NIC bandwidth / oversubscription).
        """
        return graph_paths.path_bandwidth_gb_per_s(self.graph, self.path(gpu_a, gpu_b))

    def path_latency_us(self, gpu_a: GpuId, gpu_b: GpuId) -> float:
        """Sum of the edge latencies from ``gpu_a`` to ``gpu_b``, microseconds."""
        return graph_paths.path_latency_us(self.graph, self.path(gpu_a, gpu_b))

    def kv_link(self, scope: kv_links.KvScope, gpu_type: str | None = None) -> Link:
        """Slowest KV-transfer link of ``scope`` ('same_domain' | 'same_rack' | 'cross_rack')."""
        return kv_links.kv_link(self, scope, gpu_type)
