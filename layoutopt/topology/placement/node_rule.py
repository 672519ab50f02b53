"""The engine's rule on how one instance splits its GPUs over nodes (``uneven_nodes``), for placement.

``engines.rules.check_node_split`` is the one source of the rule (emit and simulate read it through
``engines.plan_rules``); placement only asks it, never restates it:

- ``broken_splits``: the placed instances whose per-node GPU counts the rule refuses (SGLang: not
  the same count on every node; vLLM with DP: not whole DP ranks on each node).
- ``part_sizes``: for a pool whose instances must split, the ways to place an instance in equal
  parts, one part of k stage groups per node, that the rule accepts (k = all groups: the whole
  instance in one domain); ``part_options`` the ways to place the pool (one part size for all
  its instances, or two sizes). ``solver.place`` then places such a pool in parts
  (``split_plan``: one pool per part size), the parts of one instance in different domains
  (``data.StageDemand.parts_apart``), and ``arrange_parts`` deals the placed parts to instances
  so that holds.
- ``legal_instances``: when no option fits, at most how many instances of the pool the free GPUs
  hold alone in parts the rule accepts, and ``legal_part_gpus`` the fewest GPUs a legal part
  puts in one domain, which placement reports with its refusal (``result.RuleRefusal``) so the
  optimizer can re-solve with at most that many, packed in such parts (``optimizer.rule_rounds``).
"""

from __future__ import annotations

from collections.abc import Sequence

from layoutopt.engines.rules import RuleViolation, check_node_split
from layoutopt.plan import Plan
from layoutopt.topology.cluster import GpuId
from layoutopt.topology.placement.data import PlacementData, StageDemand
from layoutopt.topology.placement.result import InstanceAssignment

# ((groups per part, instances), ...): one entry, or two when a pool mixes two part sizes.
PartOption = tuple[tuple[int, int], ...]
# Part options tried for one pool before placement says none fits.
MAX_PART_OPTIONS = 32


def node_counts(gpus: Sequence[GpuId]) -> list[int]:
    """GPUs on each node the instance uses, nodes in stage order (as ``PlacedInstance.gpus_by_node``)."""
    counts: dict[str, int] = {}
    for gpu in gpus:
        counts[gpu.node] = counts.get(gpu.node, 0) + 1
    return list(counts.values())


def broken_splits(plan: Plan, instances: Sequence[InstanceAssignment]) -> dict[int, tuple[str, RuleViolation]]:
    """Pool index -> (first instance id, violation) for each pool with an instance the engine refuses."""
    broken: dict[int, tuple[str, RuleViolation]] = {}
    seen: set[tuple[int, tuple[int, ...]]] = set()   # instances of one pool mostly split alike
    for instance in instances:
        if instance.pool_index in broken:
            continue
        counts = node_counts(instance.gpus)
        key = (instance.pool_index, tuple(counts))
        if len(counts) < 2 or key in seen:
            continue
        seen.add(key)
        found = check_node_split(plan.engine, plan.pools[instance.pool_index].layout, counts)
        if found:
            broken[instance.pool_index] = (instance.instance_id, found[0])
    return broken


def _pool_shape(data: PlacementData, pool_index: int) -> tuple[StageDemand, int, int, list[int]]:
    """(the pool's demand, stage groups per instance, GPUs per group, free GPUs of each domain of
    its GPU type)."""
    demand = next(d for d in data.demands if d.pool_index == pool_index)
    free = [d.num_free for d in data.domains if d.gpu == demand.gpu]
    return demand, demand.pp_size * demand.groups_per_part, demand.stage_gpus // demand.groups_per_part, free


def part_sizes(plan: Plan, data: PlacementData, pool_index: int, fitting_only: bool = True) -> list[int]:
    """Groups per part (k) with which the rule accepts an instance of the pool split into equal
    parts on different nodes, largest k (fewest nodes) first; ``fitting_only``: only those with
    which the pool alone fits the free GPUs."""
    demand, groups, group_gpus, free = _pool_shape(data, pool_index)
    layout = plan.pools[pool_index].layout
    sizes = []
    for k in range(groups, 0, -1):
        parts = groups // k
        if groups % k or (parts > 1 and check_node_split(plan.engine, layout, [k * group_gpus] * parts)):
            continue
        room = sum(min(f // (k * group_gpus), demand.num_instances) for f in free)
        if room >= demand.num_instances * parts or not fitting_only:
            sizes.append(k)
    return sizes


def legal_instances(plan: Plan, data: PlacementData, pool_index: int) -> int:
    """At most how many instances of the pool the free GPUs of its type hold on their own (no
    other pool placed), each in equal parts of one size the rule accepts (the parts of one
    instance in different domains; instances may differ in size, as ``part_options`` mixes two).
    With one legal size it is exact: the largest m with sum_d min(parts domain d holds, m) >=
    m x parts per instance, which is when ``part_sizes`` lets m fit. With several, an upper
    bound: the GPUs legal parts can fill in each domain, summed, over one instance's GPUs."""
    room = _legal_room(plan, data, pool_index)
    sizes = sorted(gpus for gpus, most in room.items() if most > 0)
    if len(sizes) < 2:
        return room[sizes[0]] if sizes else 0
    _, groups, group_gpus, free = _pool_shape(data, pool_index)
    filled = sum(_most_filled(f, sizes) for f in free)
    return max(max(room.values()), filled // (groups * group_gpus))


def legal_part_gpus(plan: Plan, data: PlacementData, pool_index: int) -> int:
    """The fewest GPUs one part of a legal split puts in one domain, over the part sizes with
    room for at least one instance (0 when none has): every legal placement of the pool, in parts
    of one size or two, keeps at least that many of an instance's GPUs in each domain it uses."""
    room = _legal_room(plan, data, pool_index)
    return min((gpus for gpus, most in room.items() if most > 0), default=0)


def _most_filled(free: int, sizes: Sequence[int]) -> int:
    """The most of ``free`` GPUs that parts of the given sizes (any number of each) fill."""
    reachable = [True] + [False] * free
    for total in range(1, free + 1):
        reachable[total] = any(size <= total and reachable[total - size] for size in sizes)
    return max(total for total in range(free + 1) if reachable[total])


def _legal_room(plan: Plan, data: PlacementData, pool_index: int) -> dict[int, int]:
    """GPUs per part -> most instances of the pool alone in parts of that size (``legal_instances``)."""
    _, groups, group_gpus, free = _pool_shape(data, pool_index)
    return {k * group_gpus: _most_instances([f // (k * group_gpus) for f in free], groups // k)
            for k in part_sizes(plan, data, pool_index, fitting_only=False)}


def _most_instances(holds: Sequence[int], parts: int) -> int:
    """The largest m with sum_d min(holds_d, m) >= m x parts (parts of one instance in different
    domains); the left side less the right is concave in m and 0 at m = 0, so a bisection finds it."""
    if parts == 1:
        return sum(holds)
    low, high = 0, sum(holds) // parts
    while low < high:
        middle = (low + high + 1) // 2
        if sum(min(h, middle) for h in holds) >= middle * parts:
            low = middle
        else:
            high = middle - 1
    return low


def part_options(plan: Plan, data: PlacementData, pool_index: int) -> list[PartOption]:
    """The ways ``solver.place`` tries to place a pool the rule refused, in order: every instance
    in parts of one size k (largest first, sizes with which the pool alone fits), then n_a
    instances in parts of k_a and the rest in parts of a smaller k_b (more instances at the
    larger size first); at most ``MAX_PART_OPTIONS``."""
    instances = plan.pools[pool_index].instances
    options: list[PartOption] = [((k, instances),) for k in part_sizes(plan, data, pool_index)]
    valid = part_sizes(plan, data, pool_index, fitting_only=False)
    for i, larger in enumerate(valid):
        for smaller in valid[i + 1:]:
            options += [((larger, n), (smaller, instances - n)) for n in range(instances - 1, 0, -1)]
    return options[:MAX_PART_OPTIONS]


def split_plan(plan: Plan, chosen: dict[int, PartOption]) -> tuple[Plan, dict[int, int], dict[int, int]]:
    """The plan the solver places for ``chosen`` part options: a pool with two part sizes becomes
    two pools (the second appended), each placed in its own parts. Returns (plan, groups per part
    by pool index, the original pool index of each appended pool)."""
    pools = list(plan.pools)
    part_groups: dict[int, int] = {}
    origin: dict[int, int] = {}
    for pool_index, ((k, n), *rest) in sorted(chosen.items()):
        pools[pool_index] = plan.pools[pool_index].model_copy(update={"instances": n})
        part_groups[pool_index] = k
        for k_more, n_more in rest:
            origin[len(pools)] = pool_index
            part_groups[len(pools)] = k_more
            pools.append(plan.pools[pool_index].model_copy(update={"instances": n_more}))
    return plan.model_copy(update={"pools": pools}), part_groups, origin


def arrange_parts(parts: Sequence[tuple[str, tuple[GpuId, ...]]], per_instance: int,
                  groups_per_part: int) -> list[tuple[GpuId, ...]]:
    """Parts (domain, GPUs) in domain order dealt to instances of ``per_instance`` parts from
    different domains, then cut back into stage groups, instance after instance.

    Possible whenever no domain holds more parts than there are instances: each instance takes
    one part of every domain holding as many parts as instances remain (so that stays true), then
    of the next domains in order (which keeps an instance's parts in nearby domains).
    """
    by_domain: dict[str, list[tuple[GpuId, ...]]] = {}
    for domain, gpus in parts:
        by_domain.setdefault(domain, []).append(gpus)
    order = list(by_domain)
    remaining = len(parts) // per_instance
    groups: list[tuple[GpuId, ...]] = []
    while remaining:
        tight = [d for d in order if len(by_domain[d]) == remaining]
        rest = [d for d in order if by_domain[d] and d not in tight]
        chosen = (tight + rest)[:per_instance]
        if len(chosen) < per_instance or len(tight) > per_instance:
            raise RuntimeError("a domain holds more parts of a pool than the pool has instances")
        chosen.sort(key=order.index)
        for domain in chosen:
            gpus = by_domain[domain].pop(0)
            size = len(gpus) // groups_per_part
            groups += [gpus[j * size:(j + 1) * size] for j in range(groups_per_part)]
        remaining -= 1
    return groups
