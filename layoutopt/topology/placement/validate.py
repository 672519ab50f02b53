"""Check a placed plan against its cluster, independently of the solver (no CP-SAT here).

``validate_placement(plan, cluster)`` reads only ``plan.pools``, ``plan.placement`` and the
cluster, and lists every rule broken (empty when the placement is valid):

- every instance id is unique and belongs to a pool (``pool_index``, ``<role>-<pool index>-<k>``, or
  the only pool of its role and size), and each pool has exactly ``instances`` placed instances;
- the fields of each ``PlacedInstance`` agree (node, gpus, nodes, cuda_visible_devices, gpus_by_node);
- every GPU exists, is free (not in use, not down) and is of the pool's GPU type;
- no GPU serves two instances, or appears twice in one;
- an instance has tp x pp x pcp x dp GPUs, and the GPUs of each pipeline stage share one local
  domain (NVLink domain, or PCIe-only node), or a stage spread over domains holds whole groups
  of one domain's GPUs in each (``perf_model.spans``);
- with ``kv_bytes_per_request``, the KV traffic each rack's uplink must carry fits it.
"""

from __future__ import annotations

from collections import Counter

from layoutopt.errors import InputError
from layoutopt.plan import PlacedInstance, Plan, Pool
from layoutopt.topology.cluster import Cluster, GpuId
from layoutopt.topology.placement.data import free_counts, stage_units
from layoutopt.topology.placement.encoding import instance_gpus, pool_index_of
from layoutopt.topology.placement.traffic import rack_kv_traffic


def validate_placement(plan: Plan, cluster: Cluster, kv_bytes_per_request: float | None = None) -> list[str]:
    """Every violation of ``plan.placement`` on ``cluster``, as readable lines; [] when valid."""
    violations: list[str] = []
    ids = Counter(p.instance_id for p in plan.placement)
    violations += [f"instance id {name!r} is used {n} times" for name, n in sorted(ids.items()) if n > 1]
    owners: dict[GpuId, str] = {}
    placed_per_pool: Counter[int] = Counter()
    stages_for_traffic = []
    free = free_counts(cluster)
    for placed in plan.placement:
        pool_index, problem = _pool_of(placed, plan.pools)
        if problem:
            violations.append(problem)
            continue
        placed_per_pool[pool_index] += 1
        try:
            gpus = instance_gpus(placed)
        except ValueError as error:
            violations.append(f"{placed.instance_id}: {error}")
            continue
        problems = _gpu_problems(placed.instance_id, gpus, plan.pools[pool_index], cluster, owners, free)
        violations += problems
        if not problems:
            stages_for_traffic.append((pool_index, _stages(gpus, plan.pools[pool_index])))
    for index, pool in enumerate(plan.pools):
        if placed_per_pool[index] != pool.instances:
            violations.append(f"pool {index} ({pool.role}): {placed_per_pool[index]} of {pool.instances} instances placed")
    if kv_bytes_per_request is not None and not violations:
        for rack in rack_kv_traffic(cluster, plan.pools, stages_for_traffic, kv_bytes_per_request):
            if not rack.fits:
                violations.append(
                    f"rack {rack.rack}: KV traffic out {rack.egress_gb_per_s:.2f} GB/s, in {rack.ingress_gb_per_s:.2f} "
                    f"GB/s exceeds its uplink {rack.uplink_gb_per_s:.2f} GB/s")
    return violations


def _pool_of(placed: PlacedInstance, pools: list[Pool]) -> tuple[int, str | None]:
    index = pool_index_of(placed.instance_id)
    if placed.pool_index is not None:
        if index is not None and index != placed.pool_index:
            return -1, f"{placed.instance_id}: pool_index {placed.pool_index} but its id names pool {index}"
        index = placed.pool_index
    if index is not None:
        if index >= len(pools):
            return -1, f"{placed.instance_id}: pool index {index} but the plan has {len(pools)} pools"
        if pools[index].role != placed.role:
            return -1, f"{placed.instance_id}: role {placed.role} but pool {index} is {pools[index].role}"
        return index, None
    size = len(placed.gpus) if len(placed.nodes) <= 1 else None
    matches = [i for i, p in enumerate(pools) if p.role == placed.role and (size is None or p.gpus_per_instance == size)]
    if len(matches) != 1:
        return -1, (f"{placed.instance_id}: cannot tell its pool ({len(matches)} {placed.role} pools match); "
                    "use ids '<role>-<pool index>-<k>'")
    return matches[0], None


def _stages(gpus: list[GpuId], pool: Pool) -> list[list[GpuId]]:
    per_stage = pool.layout.gpus_per_stage
    return [gpus[k:k + per_stage] for k in range(0, len(gpus), per_stage)]


def _gpu_problems(name: str, gpus: list[GpuId], pool: Pool, cluster: Cluster, owners: dict[GpuId, str],
                  free: dict[str, int]) -> list[str]:
    layout = pool.layout
    problems = []
    if len(gpus) != layout.gpus_per_instance:
        problems.append(f"{name}: {len(gpus)} GPUs but {layout.short_name()} needs {layout.gpus_per_instance}")
    for gpu in gpus:
        try:
            state = cluster.gpu_state(gpu)
        except InputError:
            problems.append(f"{name}: GPU {gpu} does not exist in the cluster")
            continue
        if state != "free":
            problems.append(f"{name}: GPU {gpu} is {state.replace('_', ' ')}")
        node_gpu = cluster.node(gpu.node).gpu
        if node_gpu != pool.gpu:
            problems.append(f"{name}: GPU {gpu} is a {node_gpu}, the pool needs {pool.gpu}")
        if gpu in owners:
            other = owners[gpu]
            problems.append(f"{name}: GPU {gpu} is also used by {other}" if other != name
                            else f"{name}: GPU {gpu} listed twice")
        owners[gpu] = name
    if problems:
        return problems
    unit, per_stage = stage_units(cluster, pool.gpu, layout.gpus_per_stage, free)
    for k, stage in enumerate(_stages(gpus, pool)):
        held = Counter(cluster.local_domain_of(g).name for g in stage)
        if len(held) > 1 and (per_stage == 1 or any(n % unit for n in held.values())):
            spread = ", ".join(f"{d} {n}" for d, n in sorted(held.items()))
            want = ("one local domain" if per_stage == 1
                    else f"{per_stage} whole groups of {unit} GPUs, each in one local domain")
            problems.append(f"{name}: pipeline stage {k} ({len(stage)} GPUs) spans local domains ({spread}); "
                            f"the performance model assumed {want}")
    return problems
