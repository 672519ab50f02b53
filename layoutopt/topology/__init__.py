"""Cluster topology and placement: which concrete GPUs every instance of a plan runs on.

    from layoutopt.topology import load_cluster, place, validate_placement
    cluster = load_cluster("examples/clusters/two-rack-h100-oversubscribed.yaml")
    cluster.gpu_counts_by_type()            # {'H100-SXM': 64}: free GPUs per type, for a Budget
    cluster.kv_link("cross_rack")           # Link(kind='network', bandwidth_gb_per_s=12.5, ...)
    result = place(plan, cluster, spread_racks=True)
    result.plan.placement                   # PlacedInstance rows; result.kv_pairings, .pipeline_links
    validate_placement(result.plan, cluster)   # [] when valid

The cluster file format is documented in :mod:`layoutopt.topology.spec`; the graph in
:mod:`layoutopt.topology.graph`; the placement model in :mod:`layoutopt.topology.placement.solver`.
Importing this package reads no files.
"""

from layoutopt.topology.build import (
    cluster_from_budget,
    cluster_from_spec,
    load_cluster,
)
from layoutopt.topology.cluster import (
    Cluster,
    ClusterNode,
    GpuId,
    GpuState,
    NvlinkDomain,
    Rack,
)
from layoutopt.topology.links import (
    KV_SCOPES,
    KvScope,
    kv_link,
    kv_link_for_plan,
    kv_link_for_pools,
    kv_scope_for_pools,
)
from layoutopt.topology.placement import (
    InstanceAssignment,
    KvPairing,
    PlacementResult,
    PlacementStatus,
    RackKvTraffic,
    place,
    validate_placement,
)
from layoutopt.topology.spec import ClusterSpec

__all__ = [
    "KV_SCOPES",
    "Cluster",
    "ClusterNode",
    "ClusterSpec",
    "GpuId",
    "GpuState",
    "InstanceAssignment",
    "KvPairing",
    "KvScope",
    "NvlinkDomain",
    "PlacementResult",
    "PlacementStatus",
    "Rack",
    "RackKvTraffic",
    "cluster_from_budget",
    "cluster_from_spec",
    "kv_link",
    "kv_link_for_plan",
    "kv_link_for_pools",
    "kv_scope_for_pools",
    "load_cluster",
    "place",
    "validate_placement",
]
