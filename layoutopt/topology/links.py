"""KV-transfer links a cluster offers: per scope, and for a plan's pools.

``kv_link(cluster, scope)`` is the slowest path a prefill->decode KV transfer of that scope can
get: ``same_domain`` over NVLink (or the host PCIe root on PCIe-only servers), ``same_rack``
through the NICs and the leaf, ``cross_rack`` through the spine at the uplink's fair share
(NIC bandwidth / oversubscription). ``kv_link_for_pools`` picks the scope the pools can be
kept in, so the optimizer counts on the bandwidth the placement can deliver. Bandwidths are
per GPU, per direction, GB/s (the convention of :class:`layoutopt.perf_model.links.Link`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from layoutopt.errors import InputError
from layoutopt.perf_model.links import Link
from layoutopt.topology.constants import (
    GPU_NIC_HOP_LATENCY_US,
    NVSWITCH_HOP_LATENCY_US,
    PCIE_HOP_LATENCY_US,
)

if TYPE_CHECKING:
    from layoutopt.plan import Plan
    from layoutopt.topology.cluster import Cluster

KvScope = Literal["same_domain", "same_rack", "cross_rack"]
KV_SCOPES: tuple[KvScope, ...] = ("same_domain", "same_rack", "cross_rack")


def kv_link(cluster: Cluster, scope: KvScope, gpu_type: str | None = None) -> Link:
    """The slowest link of ``scope`` between GPUs of ``gpu_type`` (every type when None)."""
    if scope not in KV_SCOPES:
        raise InputError("scope", scope, f"one of {', '.join(KV_SCOPES)}")
    types = [gpu_type] if gpu_type is not None else sorted(cluster.gpu_counts_by_type() or cluster.gpu_specs)
    links = [_link_for_type(cluster, scope, name) for name in types]
    if not links:
        raise InputError("cluster", cluster.name, "at least one GPU")
    return min(links, key=lambda link: (link.bandwidth_gb_per_s, -link.latency_us))


def _link_for_type(cluster: Cluster, scope: KvScope, gpu_type: str) -> Link:
    nodes = [n for n in cluster.nodes.values() if n.gpu == gpu_type]
    if not nodes:
        raise InputError("gpu_type", gpu_type, f"a GPU type of cluster {cluster.name}: {sorted(cluster.gpu_specs)}")
    spec = cluster.gpu_specs[gpu_type]
    if scope == "same_domain":
        shared = [d for d in cluster.domains.values() if d.gpu == gpu_type and d.num_gpus > 1 and d.scaleup_gb_per_s > 0]
        if shared:
            bandwidth = min(d.scaleup_gb_per_s for d in shared)
            return Link(kind="nvlink", bandwidth_gb_per_s=bandwidth, latency_us=2 * NVSWITCH_HOP_LATENCY_US)
        # No NVLink: GPUs of one server talk through its host PCIe root.
        return Link(kind="pcie", bandwidth_gb_per_s=spec.pcie_gb_per_s, latency_us=2 * PCIE_HOP_LATENCY_US)
    nic_gb_per_s = min(n.nic_gb_per_s_per_gpu for n in nodes)
    latency_us = 2 * GPU_NIC_HOP_LATENCY_US + 2 * cluster.leaf_latency_us
    if scope == "cross_rack":
        racks = {n.rack for n in nodes}
        nic_gb_per_s = min(nic_gb_per_s, *(cluster.racks[r].uplink_gb_per_s_per_gpu for r in racks))
        latency_us += 2 * cluster.spine_latency_us
    if nic_gb_per_s <= 0:
        raise InputError("cluster", cluster.name, f"NICs on the {gpu_type} nodes for a {scope} transfer")
    return Link(kind="network", bandwidth_gb_per_s=nic_gb_per_s, latency_us=latency_us)


def kv_scope_for_pools(
    cluster: Cluster, prefill_gpus: dict[str, int], decode_gpus: dict[str, int]
) -> KvScope:
    """The tightest scope that can hold both pools: one NVLink domain, one rack, or several racks.

    ``prefill_gpus`` and ``decode_gpus`` map GPU type -> GPUs of that pool. A scope fits when one
    domain (or rack) has enough free GPUs of every type for both pools together.
    """
    need: dict[str, int] = {}
    for counts in (prefill_gpus, decode_gpus):
        for gpu_type, count in counts.items():
            need[gpu_type] = need.get(gpu_type, 0) + count
    if len(need) == 1:
        (gpu_type, count), = need.items()
        for domain in cluster.domains.values():
            if domain.gpu == gpu_type and domain.scaleup_gb_per_s > 0 and len(cluster.free_in_domain(domain.name)) >= count:
                return "same_domain"
    for rack in cluster.racks.values():
        free: dict[str, int] = {}
        for node_name in rack.nodes:
            node = cluster.nodes[node_name]
            free[node.gpu] = free.get(node.gpu, 0) + len(node.free_indices())
        if all(free.get(t, 0) >= c for t, c in need.items()):
            return "same_rack"
    return "cross_rack"


def kv_link_for_pools(
    cluster: Cluster, prefill_gpus: dict[str, int] | int, decode_gpus: dict[str, int] | int,
    gpu_type: str | None = None,
) -> Link:
    """KV bandwidth per GPU the optimizer can count on for pools of these sizes.

    Same domain (NVLink) or same rack (NIC) when both pools fit there, else the cross-rack
    fair share of the oversubscribed uplink. Plain integers are GPU counts of ``gpu_type``.
    """
    prefill = _as_counts(prefill_gpus, gpu_type, cluster)
    decode = _as_counts(decode_gpus, gpu_type, cluster)
    scope = kv_scope_for_pools(cluster, prefill, decode)
    links = [kv_link(cluster, scope, t) for t in sorted(set(prefill) | set(decode))]
    return min(links, key=lambda link: (link.bandwidth_gb_per_s, -link.latency_us))


def kv_link_for_plan(cluster: Cluster, plan: Plan) -> Link | None:
    """``kv_link_for_pools`` for a plan's prefill and decode pools; None when it has no KV transfer."""
    prefill: dict[str, int] = {}
    decode: dict[str, int] = {}
    for pool in plan.pools:
        target = prefill if pool.role == "prefill" else decode if pool.role == "decode" else None
        if target is not None:
            target[pool.gpu] = target.get(pool.gpu, 0) + pool.num_gpus
    if not prefill or not decode:
        return None
    return kv_link_for_pools(cluster, prefill, decode)


def _as_counts(gpus: dict[str, int] | int, gpu_type: str | None, cluster: Cluster) -> dict[str, int]:
    if isinstance(gpus, dict):
        return dict(gpus)
    if gpu_type is None:
        types = sorted(cluster.gpu_counts_by_type())
        if len(types) != 1:
            raise InputError("gpu_type", gpu_type, f"a GPU type when the cluster has several: {types}")
        gpu_type = types[0]
    if gpus < 0 or not math.isfinite(gpus):
        raise InputError("gpus", gpus, "a non-negative GPU count")
    return {gpu_type: int(gpus)}
