"""Assemble a ``PlacementResult`` from the solver's counts (or from the reasons it failed)."""

from __future__ import annotations

import time

from layoutopt.plan import Plan
from layoutopt.perf_model.links import Link
from layoutopt.topology.cluster import Cluster
from layoutopt.topology.placement.assign import (
    build_instances,
    kv_pairings,
    slowest,
    slowest_route,
    stage_gpus_by_pool,
)
from layoutopt.topology.placement.data import PlacementData
from layoutopt.topology.placement.encoding import placed_instance
from layoutopt.topology.placement.result import ObjectiveProof, PlacementResult, PlacementStatus, RuleRefusal
from layoutopt.topology.placement.traffic import (
    BYTES_PER_GB,
    kv_shares,
    rack_kv_traffic,
    total_kv_bytes_per_s,
)


def unplaced_result(plan: Plan, status: PlacementStatus, reasons: list[str], start_s: float,
                    rule_refusals: list[RuleRefusal] | None = None) -> PlacementResult:
    return PlacementResult(status=status, plan=plan, reasons=reasons, rule_refusals=rule_refusals or [],
                           wall_time_s=time.perf_counter() - start_s)


def placed_result(
    plan: Plan, cluster: Cluster, data: PlacementData, status: PlacementStatus,
    counts: dict[tuple[int, str], int], kv_bytes_per_request: float | None, start_s: float,
    objectives: list[ObjectiveProof] | None = None, origin: dict[int, int] | None = None,
) -> PlacementResult:
    """The plan with ``placement`` filled, KV pairings, PP links and rack traffic. ``origin``: the
    pool of ``plan`` each extra pool of ``data`` places instances of (``node_rule.split_plan``)."""
    stages = stage_gpus_by_pool(data, cluster, counts)
    for extra, pool_index in sorted((origin or {}).items()):
        stages[pool_index] = list(stages.get(pool_index, [])) + list(stages.pop(extra, []))
    instances = build_instances(plan, cluster, stages, {d.pool_index: d.units_per_stage for d in data.demands})
    placement = [placed_instance(i.instance_id, i.role, i.gpus, i.pool_index) for i in instances]
    pairings = kv_pairings(cluster, instances)
    first_gpu = {i.instance_id: i.stages[0][0] for i in instances}
    kv_link = slowest_route(cluster, [(first_gpu[p.prefill_instance], first_gpu[p.decode_instance]) for p in pairings])
    pipeline_links: dict[int, Link] = {}
    for pool_index in range(len(plan.pools)):
        link = slowest([i.pipeline_link for i in instances if i.pool_index == pool_index])
        if link is not None:
            pipeline_links[pool_index] = link
    traffic = []
    if kv_bytes_per_request is not None:
        traffic = rack_kv_traffic(cluster, plan.pools, [(i.pool_index, i.stages) for i in instances],
                                  kv_bytes_per_request)
    return PlacementResult(
        status=status, plan=plan.model_copy(update={"placement": placement}), instances=instances,
        kv_pairings=pairings, kv_link=kv_link, pipeline_links=pipeline_links, rack_kv_traffic=traffic,
        objectives=list(objectives or []),
        notes=_notes(plan, cluster, instances, kv_bytes_per_request), wall_time_s=time.perf_counter() - start_s,
    )


def _notes(plan: Plan, cluster: Cluster, instances, kv_bytes_per_request: float | None) -> list[str]:
    """Per-instance NIC limits the placement cannot change (the optimizer's KV constraint owns them)."""
    if kv_bytes_per_request is None:
        return []
    prefill_share, _ = kv_shares(plan.pools)
    total_gb_per_s = total_kv_bytes_per_s(plan.pools, kv_bytes_per_request) / BYTES_PER_GB
    notes = []
    for pool_index, share in prefill_share.items():
        pool = plan.pools[pool_index]
        first = next((i for i in instances if i.pool_index == pool_index), None)
        if first is None:
            continue
        nic_gb_per_s = sum(cluster.node(g.node).nic_gb_per_s_per_gpu for g in first.gpus)
        sent_gb_per_s = total_gb_per_s * share
        if sent_gb_per_s > nic_gb_per_s:
            notes.append(f"a {pool.role} instance of pool {pool_index} ships {sent_gb_per_s:.1f} GB/s of KV but its "
                         f"NICs carry {nic_gb_per_s:.1f} GB/s; only decode instances in its NVLink domain avoid them")
    return notes
