"""From stage-group counts per domain to concrete GPUs, instances, and the links between them.

Inside a domain any free GPUs serve (NVLink is all-to-all there), so GPU indices are chosen
for tidiness only: larger groups first, each on the node with the fewest free GPUs that still
holds it (best fit), spanning nodes only when no single node can (NVL72 stages beyond one tray):
the nodes with the most free GPUs, or for a pool under the engine's node-split rule the same GPUs
on each of as few nodes as can hold them.
Stage groups are then cut into instances in domain order, which keeps a PP instance's stages
in one domain or rack whenever the counts allow; a pool placed in parts (``node_rule``) has its
parts dealt to instances so that no instance holds two parts of one domain.
"""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import pairwise

from layoutopt.plan import Plan
from layoutopt.perf_model.links import Link
from layoutopt.topology.cluster import Cluster, GpuId
from layoutopt.topology.links import KvScope
from layoutopt.topology.placement.data import PlacementData
from layoutopt.topology.placement.encoding import instance_id
from layoutopt.topology.placement.node_rule import arrange_parts
from layoutopt.topology.placement.result import InstanceAssignment, KvPairing
from layoutopt.topology.placement.routes import Route, route


def stage_gpus_by_pool(
    data: PlacementData, cluster: Cluster, counts: dict[tuple[int, str], int]
) -> dict[int, list[tuple[GpuId, ...]]]:
    """Pool index -> its stage groups' GPUs, in domain order."""
    stages: dict[int, list[tuple[GpuId, ...]]] = defaultdict(list)
    # Pools placed in parts (node_rule): (domain, GPUs) of each part, dealt to instances at the end.
    parts: dict[int, list[tuple[str, tuple[GpuId, ...]]]] = defaultdict(list)
    by_index = {d.pool_index: d for d in data.demands}
    # Counts grouped by domain once: scanning every count for every domain is quadratic.
    by_domain: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (pool_index, name), n in counts.items():
        if n > 0:
            by_domain[name].append((pool_index, n))
    for domain in data.domains:
        groups = [(by_index[p], n) for p, n in by_domain.get(domain.name, ())]
        if not groups:
            continue
        groups.sort(key=lambda item: (-item[0].stage_gpus, item[0].pool_index))
        remaining: dict[str, list[GpuId]] = {node: [] for node in domain.nodes}
        for gpu in cluster.free_in_local_domain(domain.name):
            remaining[gpu.node].append(gpu)
        for demand, count in groups:
            for _ in range(count):
                taken = _take(remaining, demand.stage_gpus, demand.even_split)
                if demand.groups_per_part > 1 or demand.parts_apart:
                    parts[demand.pool_index].append((domain.name, taken))
                else:
                    stages[demand.pool_index].append(taken)
    for pool_index, placed in parts.items():
        demand = by_index[pool_index]
        stages[pool_index] = arrange_parts(placed, demand.pp_size, demand.groups_per_part)
    return stages


def _take(remaining: dict[str, list[GpuId]], size: int, even: bool = False) -> tuple[GpuId, ...]:
    fitting = [node for node, free in remaining.items() if len(free) >= size]
    if fitting:
        node = min(fitting, key=lambda n: len(remaining[n]))
        taken, remaining[node] = remaining[node][:size], remaining[node][size:]
        return tuple(taken)
    if even:
        # The same GPUs on each node, as few nodes as can hold it, each the one with the least room.
        for parts in range(2, size + 1):
            share = size // parts
            roomy = sorted((n for n, free in remaining.items() if len(free) >= share), key=lambda n: len(remaining[n]))
            if size % parts or len(roomy) < parts:
                continue
            gpus: list[GpuId] = []
            for node in roomy[:parts]:
                gpus += remaining[node][:share]
                remaining[node] = remaining[node][share:]
            return tuple(gpus)
    gpus: list[GpuId] = []
    for node in sorted(remaining, key=lambda n: -len(remaining[n])):
        need = size - len(gpus)
        gpus += remaining[node][:need]
        remaining[node] = remaining[node][need:]
        if len(gpus) == size:
            break
    if len(gpus) != size:
        raise RuntimeError(f"domain holds fewer free GPUs than its stage groups need ({size} wanted)")
    return tuple(gpus)


def build_instances(
    plan: Plan, cluster: Cluster, stages: dict[int, list[tuple[GpuId, ...]]],
    units_per_stage: dict[int, int] | None = None,
) -> list[InstanceAssignment]:
    """Cut each pool's stage groups into instances of pp consecutive groups (pp x u when a stage
    spreads over u domains: u consecutive groups, in different domains, make one stage), with their PP link."""
    instances = []
    for pool_index, pool in enumerate(plan.pools):
        groups = stages.get(pool_index, [])
        pp_size = pool.layout.pp_size
        per_stage = (units_per_stage or {}).get(pool_index, 1)
        size = pp_size * per_stage
        for k in range(pool.instances):
            mine = groups[k * size:(k + 1) * size]
            own = tuple(tuple(g for unit in mine[j * per_stage:(j + 1) * per_stage] for g in unit)
                        for j in range(pp_size))
            # Built from the solver's own counts: no validation to pay for at 10^4 instances.
            instances.append(InstanceAssignment.model_construct(
                instance_id=instance_id(pool.role, pool_index, k), role=pool.role, pool_index=pool_index,
                stages=own, pipeline_link=pipeline_link(cluster, own),
            ))
    return instances


def _usable(found: Route | None) -> Route | None:
    return None if found is None or found[1] <= 0 or math.isinf(found[1]) else found


def slowest(links: list[Link | None]) -> Link | None:
    present = [link for link in links if link is not None]
    return min(present, key=lambda link: (link.bandwidth_gb_per_s, -link.latency_us), default=None)


def slowest_route(cluster: Cluster, pairs: list[tuple[GpuId, GpuId]]) -> Link | None:
    """The slowest usable route over ``pairs`` of GPUs as a Link (lowest bandwidth, then highest latency)."""
    found = [r for a, b in pairs if (r := _usable(route(cluster, a, b))) is not None]
    if not found:
        return None
    kind, bandwidth, latency_us = min(found, key=lambda r: (r[1], -r[2]))
    return Link(kind=kind, bandwidth_gb_per_s=bandwidth, latency_us=latency_us)


def pipeline_link(cluster: Cluster, stages: tuple[tuple[GpuId, ...], ...]) -> Link | None:
    """Slowest rank-to-rank link between consecutive stages (rank j of stage i to rank j of i+1)."""
    return slowest_route(cluster, [(a, b) for first, second in pairwise(stages) for a, b in zip(first, second)])


def kv_scope(cluster: Cluster, gpu_a: GpuId, gpu_b: GpuId) -> KvScope:
    if cluster.domain_of(gpu_a).name == cluster.domain_of(gpu_b).name:
        return "same_domain"
    return "same_rack" if cluster.rack_of(gpu_a).name == cluster.rack_of(gpu_b).name else "cross_rack"


def kv_pairings(cluster: Cluster, instances: list[InstanceAssignment]) -> list[KvPairing]:
    """Each prefill instance paired with decode instances of its rack (round robin), others across racks.

    Every prefill and every decode instance appears in at least one pairing; the path is taken
    between the first GPUs of the two instances.
    """
    prefill = [i for i in instances if i.role == "prefill"]
    decode = [i for i in instances if i.role == "decode"]
    if not prefill or not decode:
        return []
    by_rack: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for instance in prefill + decode:
        by_rack[cluster.rack_of(instance.stages[0][0]).name][instance.role == "decode"].append(instance)
    pairs, lone_prefill, lone_decode = [], [], []
    for rack_prefill, rack_decode in by_rack.values():
        if rack_prefill and rack_decode:
            size = max(len(rack_prefill), len(rack_decode))
            pairs += [(rack_prefill[k % len(rack_prefill)], rack_decode[k % len(rack_decode)]) for k in range(size)]
        else:
            lone_prefill += rack_prefill
            lone_decode += rack_decode
    pairs += [(p, decode[k % len(decode)]) for k, p in enumerate(lone_prefill)]
    pairs += [(prefill[k % len(prefill)], d) for k, d in enumerate(lone_decode)]
    result = []
    for p, d in pairs:
        a, b = p.stages[0][0], d.stages[0][0]
        found = route(cluster, a, b)
        result.append(KvPairing.model_construct(
            prefill_instance=p.instance_id, decode_instance=d.instance_id, scope=kv_scope(cluster, a, b),
            bandwidth_gb_per_s=found[1] if found else 0.0, latency_us=found[2] if found else math.inf,
        ))
    return result
