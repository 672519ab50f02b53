"""What a cluster file tells the optimizer, prepared before any candidate is evaluated.

A cluster changes the problem in four places, all computed here from the cluster's free GPUs:

- GPU limits: free GPUs per type (``Cluster.budget``), cut further by a ``--budget`` given with it;
- the scale-up domain: each GPU type with a scale-up fabric has its ``GpuSpec`` copied with the
  most free GPUs one NVLink domain of the cluster offers (72 on an empty NVL72, 8 on HGX, 3 on a
  server with 5 GPUs in use), and every type its slowest NIC per GPU, so the candidate space, the
  filters, ``check_layout`` and the perf model's links (NVLink inside a group that fits, the
  network beyond) all see the cluster, not the catalog's usual node;
- packing: stage groups (tp x dp x pcp GPUs, powers of two; one whole domain per unit of a stage
  spread over domains, ``perf_model.spans``) must fit the free GPUs of single local domains (an
  NVLink domain, or a PCIe-only node: ``Cluster.local_domains``). With power-of-two sizes, groups
  of size >= s fill at most ``s * floor(free_d / s)`` GPUs of domain d, which gives one linear
  limit per (GPU type, s): ``domain_capacity_gpus``;
- KV links: the same-rack link (NIC) and the cross-rack link (the uplink's fair share per GPU),
  and the most GPUs of each type one rack holds (pools that must stay in one rack).

Bandwidths are GB/s per GPU per direction, as in ``layoutopt.perf_model.links.Link``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.errors import InputError
from layoutopt.hardware_catalog.budget import Budget
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.perf_model.links import Link
from layoutopt.topology.cluster import Cluster
from layoutopt.optimizer.space import powers_of_two

GBIT_PER_GB = 8.0


class ClusterLimits(BaseModel):
    """The cluster's numbers the candidate table and the CP-SAT model read (GPU type -> value)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    name: str
    gpu_limits: dict[str, int] = Field(description="free GPUs per type, after any --budget restriction")
    scaleup_domain_gpus: dict[str, int] = Field(description="GPUs in the largest NVLink domain")
    max_stage_gpus: dict[str, int] = Field(description="most free GPUs in one local domain: the largest stage group")
    domain_capacity_gpus: dict[str, dict[int, int]] = Field(
        description="s -> GPUs that groups of s or more GPUs can fill, sum_d s * floor(free_d / s)")
    rack_gpus: dict[str, int] = Field(description="most free GPUs of the type in one rack")
    nic_gb_per_s_per_gpu: dict[str, float] = Field(description="slowest NIC share per GPU over the type's nodes")
    same_rack_links: dict[str, Link]
    cross_rack_links: dict[str, Link]
    num_racks: int = Field(ge=1)

    def gpu_spec(self, gpu: GpuSpec) -> GpuSpec:
        """``gpu`` as this cluster has it: the free GPUs of its best NVLink domain, its NIC bandwidth."""
        update: dict = {}
        domain = self.max_stage_gpus.get(gpu.name)
        if domain and gpu.scaleup_gb_per_s > 0 and gpu.scaleup_domain_gpus > 1:
            # PCIe cards keep their 1-GPU domain: their local domain is the server (links.local_domain).
            update["scaleup_domain_gpus"] = domain
        nic = self.nic_gb_per_s_per_gpu.get(gpu.name)
        if nic:
            update["nic_gbit_per_s"] = nic * GBIT_PER_GB
        return gpu.model_copy(update=update)

    def notes(self) -> list[str]:
        """Where the cluster's free GPUs limit the layouts considered (fragmented domains)."""
        return [f"cluster {self.name}: at most {free} free {gpu} GPUs in one NVLink domain (domains of "
                f"{self.scaleup_domain_gpus[gpu]}), so a larger stage spreads over several domains and their NICs"
                for gpu, free in sorted(self.max_stage_gpus.items()) if free < self.scaleup_domain_gpus.get(gpu, 0)]

    @property
    def kv_crosses_racks_slower(self) -> bool:
        """True when a cross-rack KV transfer gets less bandwidth than one inside a rack."""
        return self.num_racks > 1 and any(
            self.cross_rack_links[t].bandwidth_gb_per_s < self.same_rack_links[t].bandwidth_gb_per_s * (1 - 1e-9)
            for t in self.cross_rack_links)


def cluster_budget(cluster: Cluster, budget: Budget | None) -> Budget:
    """Free GPUs of the cluster, cut to ``budget``'s counts and $ cap when one is given too."""
    cap = budget.max_usd_per_hour if budget is not None else None
    free = cluster.budget(cap)
    if budget is None or not budget.gpu_counts:
        return free
    missing = [g for g in budget.gpu_counts if g not in free.gpu_counts]
    if missing:
        raise InputError("--budget", budget.text or budget.describe(),
                         f"GPU types the cluster has free: {', '.join(sorted(free.gpu_counts))} "
                         f"(no free {', '.join(missing)} in cluster {cluster.name})")
    counts = {g: min(n, free.gpu_counts[g]) for g, n in budget.gpu_counts.items()}
    return Budget(gpu_counts=counts, max_usd_per_hour=cap,
                  text=f"cluster {cluster.name}, at most {budget.text or budget.describe()}")


def cluster_limits(cluster: Cluster, budget: Budget) -> ClusterLimits:
    """Everything the optimizer needs from ``cluster`` for the GPU types of ``budget``."""
    types = sorted(budget.gpu_counts)
    domain_free: dict[str, list[int]] = {t: [] for t in types}
    for domain in cluster.local_domains.values():
        if domain.gpu in domain_free:
            domain_free[domain.gpu].append(len(cluster.free_in_local_domain(domain.name)))
    rack_gpus: dict[str, int] = {}
    for rack in cluster.racks.values():
        for t in types:
            free = sum(len(cluster.nodes[n].free_indices()) for n in rack.nodes if cluster.nodes[n].gpu == t)
            rack_gpus[t] = max(rack_gpus.get(t, 0), free)
    capacity = {t: {s: sum(s * (f // s) for f in frees) for s in powers_of_two(max(frees, default=0))}
                for t, frees in domain_free.items()}
    nic = {t: min(n.nic_gb_per_s_per_gpu for n in cluster.nodes.values() if n.gpu == t) for t in types}
    return ClusterLimits(
        name=cluster.name, gpu_limits=dict(budget.gpu_counts),
        scaleup_domain_gpus={t: cluster.max_scaleup_domain(t) for t in types},
        max_stage_gpus={t: max(frees, default=0) for t, frees in domain_free.items()},
        domain_capacity_gpus=capacity, rack_gpus=rack_gpus, nic_gb_per_s_per_gpu=nic,
        same_rack_links={t: cluster.kv_link("same_rack", t) for t in types},
        cross_rack_links={t: cluster.kv_link("cross_rack", t) for t in types},
        num_racks=len(cluster.racks),
    )


def cluster_gpus(limits: ClusterLimits, gpus: Sequence[GpuSpec]) -> list[GpuSpec]:
    """The catalog rows of ``gpus`` as the cluster has them (domain size, NICs)."""
    return [limits.gpu_spec(g) for g in gpus]
