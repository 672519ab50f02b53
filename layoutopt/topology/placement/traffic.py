"""KV traffic of a placement, rack by rack, in plain floats (no solver).

Each prefill instance ships ``capacity_rps x kv_bytes_per_request`` bytes/s of KV cache (its pool's
capacity, so the plan's headroom is kept). Decode instances take the total in proportion to their
capacity. A router that sends KV to the nearest decode instance first leaves only the imbalance
of each rack on its uplink: egress = max(0, produced - consumed), ingress = max(0, consumed -
produced). A pipeline-parallel instance's KV is split evenly over its stages, each counted in
the rack it sits in.
"""

from __future__ import annotations

from collections.abc import Sequence

from layoutopt.plan import Pool
from layoutopt.topology.cluster import Cluster, GpuId
from layoutopt.topology.placement.result import RackKvTraffic

BYTES_PER_GB = 1e9


def kv_shares(pools: Sequence[Pool]) -> tuple[dict[int, float], dict[int, float]]:
    """Fraction of all KV traffic one instance of each prefill pool sends and each decode pool takes.

    Keys are pool indices. Shares follow capacity_rps; pools with zero capacity everywhere count
    one share per instance.
    """
    shares = []
    for role in ("prefill", "decode"):
        rows = {i: p for i, p in enumerate(pools) if p.role == role}
        total = sum(p.capacity_rps * p.instances for p in rows.values())
        if total > 0:
            shares.append({i: p.capacity_rps / total for i, p in rows.items()})
        else:
            count = sum(p.instances for p in rows.values())
            shares.append({i: 1.0 / count for i in rows} if count else {})
    return shares[0], shares[1]


def total_kv_bytes_per_s(pools: Sequence[Pool], kv_bytes_per_request: float) -> float:
    """KV bytes/s all prefill instances ship at their capacity; 0 when there is no decode pool."""
    if not any(p.role == "decode" for p in pools):
        return 0.0
    return sum(p.capacity_rps * p.instances for p in pools if p.role == "prefill") * kv_bytes_per_request


def rack_kv_traffic(
    cluster: Cluster,
    pools: Sequence[Pool],
    instances: Sequence[tuple[int, Sequence[Sequence[GpuId]]]],
    kv_bytes_per_request: float,
) -> list[RackKvTraffic]:
    """Egress and ingress KV GB/s of every rack, for ``instances`` given as (pool index, stages)."""
    prefill_share, decode_share = kv_shares(pools)
    total_gb_per_s = total_kv_bytes_per_s(pools, kv_bytes_per_request) / BYTES_PER_GB
    balance_gb_per_s = {name: 0.0 for name in cluster.racks}
    for pool_index, stages in instances:
        share = prefill_share.get(pool_index, 0.0) - decode_share.get(pool_index, 0.0)
        for stage in stages:
            rack = cluster.rack_of(stage[0]).name
            balance_gb_per_s[rack] += total_gb_per_s * share / len(stages)
    # Shares add up to one per role; drop the float residue of a balanced rack.
    tolerance_gb_per_s = 1e-9 * max(total_gb_per_s, 1.0)
    balance_gb_per_s = {r: 0.0 if abs(b) < tolerance_gb_per_s else b for r, b in balance_gb_per_s.items()}
    return [
        RackKvTraffic(rack=name, egress_gb_per_s=max(0.0, balance), ingress_gb_per_s=max(0.0, -balance),
                      uplink_gb_per_s=cluster.racks[name].uplink_gb_per_s)
        for name, balance in balance_gb_per_s.items()
    ]
