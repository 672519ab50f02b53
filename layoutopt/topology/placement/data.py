"""The placement problem, fully prepared for the solver: stage groups to place and domains to hold them.

A pool of ``n`` instances with ``pp`` stages of ``s = tp x dp x pcp`` GPUs needs ``n x pp`` stage
groups, each of ``s`` free GPUs inside one local domain (an NVLink domain, or a PCIe-only node:
``Cluster.local_domains``). A stage larger than one domain is spread over ``u`` whole domains
(``perf_model.spans``): its ``u`` units of ``s / u`` GPUs are the groups then, ``n x pp x u`` of
them, and the demand counts ``pp x u`` groups per instance. Inside a domain every GPU reaches
every other over its local fabric, so a domain with ``f`` free GPUs holds any set of groups whose
sizes add up to at most ``f``: the solver only decides how many groups of each pool go to each
domain, and :mod:`.assign` picks the GPU indices. Domains that cannot hold a single group are
dropped here. KV traffic is in integer units, ``KV_UNITS_TOTAL`` of them for all KV traffic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.perf_model.spans import stage_unit_gpus
from layoutopt.plan import Plan
from layoutopt.plan import Role
from layoutopt.topology.cluster import Cluster
from layoutopt.topology.placement.traffic import (
    BYTES_PER_GB,
    kv_shares,
    total_kv_bytes_per_s,
)

# KV traffic of the whole plan, in integer solver units; a prefill stage sends roughly
# KV_UNITS_TOTAL / (stages of all prefill pools) units, so rounding stays below 1%.
KV_UNITS_TOTAL = 100_000
# Fill patterns enumerated per class of identical domains before falling back to one set of
# count variables per domain (an NVL72 domain with many small pools has thousands of patterns).
MAX_PATTERNS_PER_CLASS = 1000


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StageDemand(_Frozen):
    """The stage groups of one pool."""

    pool_index: int
    label: str = Field(description="'decode', or 'decode[1]' when several pools share the role")
    role: Role
    gpu: str
    stage_gpus: int = Field(ge=1, description="GPUs one group needs in one domain: tp x dp x pcp, or one whole "
                            "domain of a stage spread over several")
    pp_size: int = Field(ge=1, description="groups per instance: pp, times the domains one stage spreads over")
    units_per_stage: int = Field(default=1, ge=1, description="groups of one pipeline stage (domains it spans)")
    num_instances: int = Field(ge=1)
    layout_name: str
    kv_units_per_stage: int = Field(description="KV units a stage sends (> 0, prefill) or takes (< 0, decode)")
    groups_per_part: int = Field(default=1, ge=1, description="stage groups one placed group holds: > 1 where the "
                                 "engine's node-split rule places the instance in equal parts (``node_rule``)")
    even_split: bool = Field(default=False, description="a group wider than any node of its domain takes the same "
                             "GPUs on each node it spans where the domain allows (the node-split rule's pools)")
    parts_apart: bool = Field(default=False, description="the instance's groups go to different domains (nodes), "
                              "so at most num_instances of the pool's groups share one domain")

    @property
    def num_stages(self) -> int:
        return self.num_instances * self.pp_size

    @property
    def per_domain_limit(self) -> int:
        """The most groups of this pool one domain may hold."""
        return self.num_instances if self.parts_apart else self.num_stages


class DomainSlot(_Frozen):
    """An NVLink domain with free GPUs, as the solver sees it."""

    name: str
    rack: str
    gpu: str
    num_free: int = Field(ge=1)
    nodes: tuple[str, ...]


class DomainClass(_Frozen):
    """Interchangeable domains (same rack, GPU type and free count) and the ways to fill one.

    ``patterns`` lists every non-empty vector of stage-group counts, one entry per pool in
    ``pool_indices``, that fits the free GPUs; the solver only decides how many domains of the
    class take each pattern. Empty when there are too many patterns: the solver then gives each
    member domain its own count variables.
    """

    rack: str
    gpu: str
    num_free: int
    members: tuple[str, ...]
    pool_indices: tuple[int, ...]
    patterns: tuple[tuple[int, ...], ...]

    @property
    def label(self) -> str:
        return f"{self.rack}/{self.gpu}/free{self.num_free}"


def fill_patterns(sizes: Sequence[int], limits: Sequence[int], num_free: int, max_patterns: int) -> list[tuple[int, ...]]:
    """Non-empty count vectors a with sum a_i sizes_i <= num_free and a_i <= limits_i, or [] past max_patterns."""
    patterns: list[tuple[int, ...]] = []

    def extend(prefix: tuple[int, ...], room: int) -> bool:
        if len(prefix) == len(sizes):
            if any(prefix):
                patterns.append(prefix)
            return len(patterns) <= max_patterns
        k = len(prefix)
        return all(extend(prefix + (count,), room - count * sizes[k])
                   for count in range(min(room // sizes[k], limits[k]) + 1))

    return patterns if extend((), num_free) else []


class PlacementData(_Frozen):
    """Everything the CP-SAT model reads; built by :func:`prepare`."""

    demands: tuple[StageDemand, ...]
    domains: tuple[DomainSlot, ...]
    classes: tuple[DomainClass, ...]
    racks: tuple[str, ...]
    uplink_kv_units: dict[str, int] | None = Field(
        description="rack -> uplink capacity in KV units; None when KV bytes per request are unknown"
    )
    kv_units_per_gb_per_s: float | None = None
    spread_racks: bool = False

    def domains_for(self, demand: StageDemand) -> list[DomainSlot]:
        """Domains of the demand's GPU type with room for at least one of its stage groups."""
        return [d for d in self.domains if d.gpu == demand.gpu and d.num_free >= demand.stage_gpus]

    @property
    def has_kv(self) -> bool:
        return any(d.kv_units_per_stage for d in self.demands)


def pool_labels(roles: Sequence[Role]) -> list[str]:
    """'decode' for a role held by one pool, 'decode[i]' (i = pool index) when shared."""
    return [role if roles.count(role) == 1 else f"{role}[{i}]" for i, role in enumerate(roles)]


def free_counts(cluster: Cluster) -> dict[str, int]:
    """Local domain name -> its free GPUs, every local domain listed (one pass over the nodes)."""
    counts = dict.fromkeys(cluster.local_domains, 0)
    names = {d: cluster.local_domain_of(cluster.domains[d].gpus[0]).name for d in cluster.domains}
    for node in cluster.nodes.values():
        for state, domain in zip(node.gpu_states, node.gpu_domains):
            if state == "free":
                counts[names[domain]] += 1
    return counts


def stage_units(cluster: Cluster, gpu_type: str, gpus_per_stage: int, free: dict[str, int]) -> tuple[int, int]:
    """(GPUs per group, groups per stage) of a stage of ``gpus_per_stage`` GPUs of ``gpu_type``: as
    the optimizer cut it, over the GPU type as this cluster has it (the most free GPUs in one
    NVLink domain, ``optimizer.cluster_fit``)."""
    gpu = cluster.gpu_specs.get(gpu_type)
    if gpu is None:
        return gpus_per_stage, 1
    if gpu.scaleup_gb_per_s > 0 and gpu.scaleup_domain_gpus > 1:
        most = max((n for name, n in free.items() if cluster.local_domains[name].gpu == gpu_type), default=0)
        if most > 1:
            gpu = gpu.model_copy(update={"scaleup_domain_gpus": most})
    unit = stage_unit_gpus(gpu, gpus_per_stage)
    if gpus_per_stage % unit:
        unit = gpus_per_stage  # no whole number of domains: the optimizer never spreads such a stage
    return unit, gpus_per_stage // unit


def prepare(plan: Plan, cluster: Cluster, kv_bytes_per_request: float | None, spread_racks: bool,
            part_groups: dict[int, int] | None = None) -> PlacementData:
    """The solver's input for placing ``plan`` on ``cluster``'s free GPUs.

    ``part_groups`` (pool index -> k): that pool's instances are placed as parts of k stage groups,
    each part in one domain and the parts of one instance in different domains (``node_rule``)."""
    prefill_share, decode_share = kv_shares(plan.pools)
    has_both = bool(prefill_share) and bool(decode_share)
    labels = pool_labels([p.role for p in plan.pools])
    free = free_counts(cluster)
    demands = []
    for index, pool in enumerate(plan.pools):
        layout = pool.layout
        share = prefill_share.get(index, 0.0) if has_both else 0.0
        take = decode_share.get(index, 0.0) if has_both else 0.0
        unit_gpus, per_stage = stage_units(cluster, pool.gpu, layout.gpus_per_stage, free)
        k = (part_groups or {}).get(index, 1)
        groups = layout.pp_size * per_stage // k
        # Rounded up for senders and down for receivers, so the solver never under-counts egress.
        units = math.ceil(KV_UNITS_TOTAL * share / groups) - math.floor(KV_UNITS_TOTAL * take / groups)
        demands.append(StageDemand(
            pool_index=index, label=labels[index], role=pool.role, gpu=pool.gpu, stage_gpus=unit_gpus * k,
            pp_size=groups, units_per_stage=per_stage, num_instances=pool.instances,
            layout_name=layout.short_name(), kv_units_per_stage=units, groups_per_part=k,
            parts_apart=index in (part_groups or {}) and groups > 1, even_split=index in (part_groups or {}),
        ))
    smallest = {}
    for demand in demands:
        smallest[demand.gpu] = min(smallest.get(demand.gpu, demand.stage_gpus), demand.stage_gpus)
    domains = []
    for domain in cluster.local_domains.values():
        num_free = free[domain.name]
        if domain.gpu in smallest and num_free >= smallest[domain.gpu]:
            domains.append(DomainSlot(name=domain.name, rack=domain.rack, gpu=domain.gpu, num_free=num_free,
                                      nodes=domain.nodes))
    uplink_units, units_per_gb_per_s = None, None
    total_gb_per_s = total_kv_bytes_per_s(plan.pools, kv_bytes_per_request or 0.0) / BYTES_PER_GB
    if kv_bytes_per_request is not None and total_gb_per_s > 0:
        units_per_gb_per_s = KV_UNITS_TOTAL / total_gb_per_s
        uplink_units = {r.name: math.floor(min(r.uplink_gb_per_s * units_per_gb_per_s, 4 * KV_UNITS_TOTAL))
                        for r in cluster.racks.values()}
    return PlacementData(demands=tuple(demands), domains=tuple(domains), classes=domain_classes(demands, domains),
                         racks=tuple(cluster.racks),
                         uplink_kv_units=uplink_units, kv_units_per_gb_per_s=units_per_gb_per_s,
                         spread_racks=spread_racks)


def domain_classes(demands: Sequence[StageDemand], domains: Sequence[DomainSlot]) -> tuple[DomainClass, ...]:
    """Domains grouped by (rack, GPU type, free GPUs), each class with its fill patterns."""
    members: dict[tuple[str, str, int], list[str]] = {}
    for domain in domains:
        members.setdefault((domain.rack, domain.gpu, domain.num_free), []).append(domain.name)
    classes = []
    for (rack, gpu, num_free), names in members.items():
        fitting = [d for d in demands if d.gpu == gpu and d.stage_gpus <= num_free]
        patterns = fill_patterns([d.stage_gpus for d in fitting], [d.per_domain_limit for d in fitting], num_free,
                                 MAX_PATTERNS_PER_CLASS)
        classes.append(DomainClass(rack=rack, gpu=gpu, num_free=num_free, members=tuple(names),
                                   pool_indices=tuple(d.pool_index for d in fitting), patterns=tuple(patterns)))
    return tuple(classes)
