"""The cluster as a networkx graph, and the path a transfer between two GPUs takes.

Vertices (attribute ``kind``), named so their kind reads from the name:

    gpu:<node>/<i>      one GPU (attributes node, index, gpu, state, rack, domain)
    node:<node>         the server's host PCIe root (PCIe-only GPUs talk through it)
    nvswitch:<domain>   the NVLink/NVSwitch fabric of one domain (absent for 1-GPU domains)
    nic:<node>/<k>      one NIC vertex (the NIC bandwidth of the GPUs it serves)
    rack:<rack>         the rack's leaf (top-of-rack) switch
    spine               the spine joining the leaves

Edges carry ``bandwidth_gb_per_s`` (per direction) and ``latency_us``; an edge several GPUs
share (a NIC, a rack uplink) also carries ``shared_by_gpus``, the GPUs that may send over it at
once. Paths follow the fabric's routing rather than a graph search: NVLink inside a domain, the
host PCIe root inside a node without NVLink, NIC-leaf-NIC inside a rack, and leaf-spine-leaf
between racks.
"""

from __future__ import annotations

import math
from itertools import pairwise
from typing import TYPE_CHECKING

from layoutopt.topology.constants import (
    GPU_NIC_HOP_LATENCY_US,
    NVSWITCH_HOP_LATENCY_US,
    PCIE_HOP_LATENCY_US,
    SPINE_VERTEX,
)

if TYPE_CHECKING:
    import networkx as nx

    from layoutopt.topology.cluster import Cluster, ClusterNode, GpuId


def gpu_vertex(node: str, index: int) -> str:
    return f"gpu:{node}/{index}"


def nic_vertex(node: ClusterNode, index: int) -> str:
    return f"nic:{node.name}/{node.nic_of(index)}"


def build_graph(cluster: Cluster) -> nx.Graph:
    """The whole cluster as an undirected graph (vertices and edges in the module docstring)."""
    import networkx as nx  # here, not at the top: solving and placing never build the graph (0.1 s import)

    graph = nx.Graph(name=cluster.name)
    graph.add_node(SPINE_VERTEX, kind="spine")
    for rack in cluster.racks.values():
        graph.add_node(f"rack:{rack.name}", kind="rack", rack=rack.name)
        # The uplink is shared by every GPU of the rack; its capacity already includes the ratio.
        graph.add_edge(f"rack:{rack.name}", SPINE_VERTEX, bandwidth_gb_per_s=rack.uplink_gb_per_s,
                       latency_us=cluster.spine_latency_us, shared_by_gpus=max(1, rack.num_gpus))
    for domain in cluster.domains.values():
        if domain.num_gpus > 1 and domain.scaleup_gb_per_s > 0:
            graph.add_node(f"nvswitch:{domain.name}", kind="nvswitch", domain=domain.name, rack=domain.rack)
    for node in cluster.nodes.values():
        _add_node(graph, cluster, node)
    return graph


def _add_node(graph: nx.Graph, cluster: Cluster, node: ClusterNode) -> None:
    spec = cluster.gpu_specs[node.gpu]
    host = f"node:{node.name}"
    graph.add_node(host, kind="node", rack=node.rack, node_type=node.node_type, gpu=node.gpu)
    gpus_per_nic = math.ceil(node.num_gpus / node.num_nics) if node.num_nics else 0
    for k in range(node.num_nics):
        nic = f"nic:{node.name}/{k}"
        graph.add_node(nic, kind="nic", node=node.name, rack=node.rack)
        graph.add_edge(nic, f"rack:{node.rack}", bandwidth_gb_per_s=node.nic_gb_per_s_per_gpu * gpus_per_nic,
                       latency_us=cluster.leaf_latency_us, shared_by_gpus=gpus_per_nic)
    for index, state in enumerate(node.gpu_states):
        vertex = gpu_vertex(node.name, index)
        domain = cluster.domains[node.gpu_domains[index]]
        graph.add_node(vertex, kind="gpu", node=node.name, index=index, gpu=node.gpu, state=state,
                       rack=node.rack, domain=domain.name)
        graph.add_edge(vertex, host, bandwidth_gb_per_s=spec.pcie_gb_per_s, latency_us=PCIE_HOP_LATENCY_US)
        if graph.has_node(f"nvswitch:{domain.name}"):
            graph.add_edge(vertex, f"nvswitch:{domain.name}", bandwidth_gb_per_s=domain.scaleup_gb_per_s,
                           latency_us=NVSWITCH_HOP_LATENCY_US)
        if node.num_nics:
            # GPUDirect RDMA: the GPU reaches its NIC through the PCIe switch.
            graph.add_edge(vertex, nic_vertex(node, index), bandwidth_gb_per_s=spec.pcie_gb_per_s,
                           latency_us=GPU_NIC_HOP_LATENCY_US)


def gpu_path(cluster: Cluster, gpu_a: GpuId, gpu_b: GpuId) -> list[str]:
    """Vertices from ``gpu_a`` to ``gpu_b`` along the fabric's route; [] when none exists."""
    vertex_a, vertex_b = gpu_vertex(*gpu_a), gpu_vertex(*gpu_b)
    if gpu_a == gpu_b:
        return [vertex_a]
    node_a, node_b = cluster.node(gpu_a.node), cluster.node(gpu_b.node)
    domain_a, domain_b = cluster.domain_of(gpu_a), cluster.domain_of(gpu_b)
    if domain_a.name == domain_b.name and f"nvswitch:{domain_a.name}" in cluster.graph:
        return [vertex_a, f"nvswitch:{domain_a.name}", vertex_b]
    if node_a.name == node_b.name:
        return [vertex_a, f"node:{node_a.name}", vertex_b]
    if not node_a.num_nics or not node_b.num_nics:
        return []
    nic_a, nic_b = nic_vertex(node_a, gpu_a.index), nic_vertex(node_b, gpu_b.index)
    if node_a.rack == node_b.rack:
        return [vertex_a, nic_a, f"rack:{node_a.rack}", nic_b, vertex_b]
    return [vertex_a, nic_a, f"rack:{node_a.rack}", SPINE_VERTEX, f"rack:{node_b.rack}", nic_b, vertex_b]


def edge_share_gb_per_s(graph: nx.Graph, u: str, v: str) -> float:
    """Bandwidth one GPU can count on over edge (u, v): its capacity over the GPUs sharing it."""
    data = graph.edges[u, v]
    return data["bandwidth_gb_per_s"] / data.get("shared_by_gpus", 1)


def path_bandwidth_gb_per_s(graph: nx.Graph, path: list[str]) -> float:
    """Bottleneck fair-share bandwidth along ``path``; inf for a one-vertex path, 0 for none."""
    if not path:
        return 0.0
    return min((edge_share_gb_per_s(graph, u, v) for u, v in pairwise(path)), default=math.inf)


def path_latency_us(graph: nx.Graph, path: list[str]) -> float:
    """Sum of edge latencies along ``path``; inf when there is no path."""
    if not path:
        return math.inf
    return sum(graph.edges[u, v]["latency_us"] for u, v in pairwise(path))
