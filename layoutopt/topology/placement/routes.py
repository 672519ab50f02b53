"""Bandwidth and latency of the route between two GPUs, read from the cluster's fields alone.

``layoutopt.topology.graph`` defines the route (NVLink inside a domain, the host PCIe root
inside a node, NIC-leaf-NIC inside a rack, leaf-spine-leaf between racks) and the edges' fair
shares; this computes the same bottleneck and latency sum without building the networkx graph,
which at 65,536 GPUs takes longer than the whole placement. ``tests/test_placement_routes.py``
checks it against the graph on every example cluster.
"""

from __future__ import annotations

import math

from layoutopt.topology.cluster import Cluster, GpuId
from layoutopt.topology.constants import (
    GPU_NIC_HOP_LATENCY_US,
    NVSWITCH_HOP_LATENCY_US,
    PCIE_HOP_LATENCY_US,
)

# (kind, bandwidth GB/s per GPU per direction, latency us); kind is nvlink | pcie | network.
Route = tuple[str, float, float]


def route(cluster: Cluster, gpu_a: GpuId, gpu_b: GpuId) -> Route | None:
    """The route from ``gpu_a`` to ``gpu_b`` as graph.py's edges give it (bottleneck fair share,
    latency sum); None when there is none or both are one GPU."""
    if gpu_a == gpu_b:
        return None
    node_a, node_b = cluster.nodes[gpu_a.node], cluster.nodes[gpu_b.node]
    domain_a = cluster.domains[node_a.gpu_domains[gpu_a.index]]
    domain_b = cluster.domains[node_b.gpu_domains[gpu_b.index]]
    if domain_a.name == domain_b.name and domain_a.num_gpus > 1 and domain_a.scaleup_gb_per_s > 0:
        return _checked("nvlink", [domain_a.scaleup_gb_per_s] * 2, [NVSWITCH_HOP_LATENCY_US] * 2)
    pcie_a = cluster.gpu_specs[node_a.gpu].pcie_gb_per_s
    pcie_b = cluster.gpu_specs[node_b.gpu].pcie_gb_per_s
    if node_a.name == node_b.name:
        return _checked("pcie", [pcie_a, pcie_b], [PCIE_HOP_LATENCY_US] * 2)
    if not node_a.num_nics or not node_b.num_nics:
        return None
    nic_a, nic_b = _nic_share(node_a), _nic_share(node_b)
    leaf = cluster.leaf_latency_us
    if node_a.rack == node_b.rack:
        return _checked("network", [pcie_a, nic_a, nic_b, pcie_b], [GPU_NIC_HOP_LATENCY_US, leaf, leaf,
                                                                    GPU_NIC_HOP_LATENCY_US])
    rack_a, rack_b = cluster.racks[node_a.rack], cluster.racks[node_b.rack]
    spine = cluster.spine_latency_us
    uplinks = [rack.uplink_gb_per_s / max(1, rack.num_gpus) for rack in (rack_a, rack_b)]
    return _checked("network", [pcie_a, nic_a, *uplinks, nic_b, pcie_b],
                    [GPU_NIC_HOP_LATENCY_US, leaf, spine, spine, leaf, GPU_NIC_HOP_LATENCY_US])


def _nic_share(node) -> float:
    """A GPU's fair share of its NIC edge: the edge carries nic_gb_per_s_per_gpu x GPUs per NIC."""
    gpus_per_nic = math.ceil(node.num_gpus / node.num_nics)
    return node.nic_gb_per_s_per_gpu * gpus_per_nic / gpus_per_nic


def _checked(kind: str, shares: list[float], latencies_us: list[float]) -> Route:
    return kind, min(shares), sum(latencies_us)
