"""Why a plan cannot be placed, in words a user can act on (no solver involved).

``precheck_reasons`` finds the common causes before any model is built: a stage larger than any
NVLink domain of its GPU type, too few domains with enough free GPUs for one pool, too few free
GPUs of a type for all pools together. The solver falls back on ``packing_reason`` and
``kv_reason`` when only the combination fails.
"""

from __future__ import annotations

from collections import Counter

from layoutopt.topology.cluster import Cluster
from layoutopt.topology.placement.data import PlacementData, StageDemand, free_counts

MAX_LISTED = 8


def _free_by_domain(cluster: Cluster, gpu_type: str, free: dict[str, int] | None = None) -> list[tuple[str, int, bool]]:
    """(domain, free GPUs, domain is one whole node) for every domain of ``gpu_type``."""
    free = free_counts(cluster) if free is None else free
    rows = []
    for domain in cluster.local_domains.values():
        if domain.gpu == gpu_type:
            whole_node = len(domain.nodes) == 1 and domain.num_gpus == cluster.nodes[domain.nodes[0]].num_gpus
            rows.append((domain.name, free[domain.name], whole_node))
    return rows


def _unit(rows: list[tuple[str, int, bool]]) -> tuple[str, str]:
    """('node', 'nodes') when every domain is a whole node, else NVLink-domain wording."""
    return ("node", "nodes") if rows and all(whole for _, _, whole in rows) else ("NVLink domain", "NVLink domains")


def describe_free(cluster: Cluster, gpu_type: str) -> str:
    """'free per node: a-n0 3, a-n1 3' (each listed), or '16 nodes with 3, 2 with 8' when many."""
    rows = _free_by_domain(cluster, gpu_type)
    singular, plural = _unit(rows)
    if len(rows) <= MAX_LISTED:
        return f"free per {singular}: " + ", ".join(f"{name} {free}" for name, free, _ in rows)
    histogram = sorted(Counter(free for _, free, _ in rows).items(), key=lambda kv: -kv[0])
    return f"free per {singular}: " + ", ".join(f"{count} {plural if count > 1 else singular} with {free}"
                                                for free, count in histogram)


def precheck_reasons(data: PlacementData, cluster: Cluster) -> list[str]:
    """Reasons no placement can exist that need no solver; empty when none is found."""
    reasons: list[str] = []
    free_by_domain = free_counts(cluster)
    rows = {gpu: _free_by_domain(cluster, gpu, free_by_domain) for gpu in {d.gpu for d in data.demands}}
    for demand in data.demands:
        reasons += _demand_reasons(demand, cluster, rows[demand.gpu])
    for gpu_type in sorted({d.gpu for d in data.demands}):
        needed = sum(d.num_stages * d.stage_gpus for d in data.demands if d.gpu == gpu_type)
        free = sum(n for _, n, _ in rows[gpu_type])
        if needed > free:
            pools = ", ".join(f"{d.label} {d.num_stages * d.stage_gpus}" for d in data.demands if d.gpu == gpu_type)
            reasons.append(f"the pools on {gpu_type} need {needed} GPUs ({pools}); only {free} are free "
                           f"({describe_free(cluster, gpu_type)})")
    return reasons


def _demand_reasons(demand: StageDemand, cluster: Cluster, rows: list[tuple[str, int, bool]]) -> list[str]:
    name = f"pool {demand.label} ({demand.gpu} {demand.layout_name})"
    if not rows:
        present = ", ".join(sorted(cluster.gpu_specs)) or "none"
        return [f"{name} needs {demand.gpu} GPUs; the cluster has none (GPU types: {present})"]
    largest = max(cluster.local_domains[n].num_gpus for n, _, _ in rows)
    if demand.stage_gpus > largest:
        return [(f"{name} needs {demand.stage_gpus} GPUs of a pipeline stage in one local domain; the largest "
                 f"{demand.gpu} local domain of this cluster has {largest} GPUs (lower the degrees or split "
                 "the model with PP)")]
    singular, plural = _unit(rows)
    slots = sum(free // demand.stage_gpus for _, free, _ in rows)
    if slots >= demand.num_stages:
        return []
    fitting = sum(1 for _, free, _ in rows if free >= demand.stage_gpus)
    groups = "group" if demand.num_stages == 1 else "groups"
    if slots == fitting:
        # Every domain with room holds exactly one group: count domains.
        have = (f"no {singular} has" if fitting == 0
                else f"only {fitting} {singular} has" if fitting == 1 else f"only {fitting} {plural} have")
        have += f" {demand.stage_gpus} free GPUs"
    else:
        have = f"the {plural} with {demand.stage_gpus} or more free GPUs hold only {slots}"
    return [(f"{name} needs {demand.num_stages} {groups} of {demand.stage_gpus} GPUs in one NVLink domain; "
             f"{have} ({describe_free(cluster, demand.gpu)})")]


def packing_reason(data: PlacementData, cluster: Cluster) -> str:
    """The pools fit one by one but not together."""
    parts = []
    for gpu_type in sorted({d.gpu for d in data.demands}):
        pools = ", ".join(f"{d.label} {d.num_stages} x {d.stage_gpus} GPUs" for d in data.demands if d.gpu == gpu_type)
        parts.append(f"{gpu_type}: {pools} ({describe_free(cluster, gpu_type)})")
    return ("each pool fits on its own, but the stage groups of all pools do not pack into the free GPUs of the "
            "NVLink domains together; " + "; ".join(parts))


def kv_reason(data: PlacementData, min_crossing_units: dict[str, int] | None) -> str:
    """The GPUs suffice, but KV traffic between prefill and decode overflows a rack's uplink."""
    text = ("the GPUs suffice, but every packing sends more prefill->decode KV traffic across a rack uplink than "
            "it carries")
    if data.uplink_kv_units and data.kv_units_per_gb_per_s:
        scale = data.kv_units_per_gb_per_s
        caps = ", ".join(f"{r} {u / scale:.1f}" for r, u in data.uplink_kv_units.items())
        text += f" (uplink GB/s per rack: {caps}"
        if min_crossing_units:
            worst = max(min_crossing_units.values()) / scale
            text += f"; the best packing still needs {worst:.1f} GB/s on one uplink"
        text += "); keep prefill and decode in one rack with fewer instances, or use colocated serving"
    return text
