"""Placing a solved plan on concrete GPUs, and what the placement says back to the optimizer.

``place_on_cluster`` runs :func:`layoutopt.topology.place` (the second CP-SAT stage) and turns its
result into the plan's ``placement[]`` and notes, or into an infeasible plan carrying the
placement's reasons. ``kv_link_too_slow`` tells ``solve`` whether the placed prefill->decode path
is slower than the KV link the candidates were evaluated with; ``solve`` then re-solves once.
A plain budget is placed on :func:`layoutopt.topology.cluster_from_budget` (standard nodes in
one rack), so every plan names its GPUs. Bandwidths are GB/s per GPU per direction.
"""

from __future__ import annotations

from collections.abc import Mapping

from layoutopt.hardware_catalog.budget import Budget
from layoutopt.hardware_catalog.catalog import HardwareCatalog
from layoutopt.optimizer.assemble import used_candidates
from layoutopt.optimizer.candidates import CandidateTable
from layoutopt.plan import Explanation, Plan
from layoutopt.optimizer.solver import SolveOutcome
from layoutopt.perf_model.links import Link, pipeline_link
from layoutopt.topology import Cluster, PlacementResult, cluster_from_budget, place

# A placed link counts as slower than the assumed one below this fraction of its bandwidth.
LINK_SLACK_FRACTION = 1e-6
# Placement gets this share of what is left of the time limit (it usually needs milliseconds).
PLACEMENT_TIME_FRACTION = 0.5
MIN_PLACEMENT_TIME_S = 1.0


def kv_bytes_per_request(table: CandidateTable, outcome: SolveOutcome) -> float | None:
    """KV bytes the plan's prefill instances ship per request (the largest); None without prefill."""
    sizes = [c.kv_bytes_per_request for c, _ in used_candidates(table, outcome) if c.role == "prefill"]
    return max(sizes) if sizes else None


def budget_cluster(budget: Budget, plan: Plan, catalog: HardwareCatalog) -> Cluster:
    """Standard nodes in one rack for a plain budget ($-only budgets: the GPUs the plan uses)."""
    if not budget.gpu_counts:
        budget = Budget(gpu_counts=dict(plan.totals.gpus_by_type), text=budget.text)
    return cluster_from_budget(budget, catalog)


def place_on_cluster(plan: Plan, cluster: Cluster, *, kv_bytes: float | None, spread_racks: bool,
                     time_limit_s: float) -> PlacementResult:
    """The placement of ``plan`` on the free GPUs of ``cluster`` (KV uplinks checked when bytes are known)."""
    limit_s = max(MIN_PLACEMENT_TIME_S, time_limit_s * PLACEMENT_TIME_FRACTION)
    return place(plan, cluster, spread_racks=spread_racks, kv_bytes_per_request=kv_bytes, time_limit_s=limit_s)


def slowest_link(links: Mapping[str, Link], gpu_types) -> Link | None:
    present = [links[t] for t in gpu_types if t in links]
    return min(present, key=lambda link: (link.bandwidth_gb_per_s, -link.latency_us), default=None)


def kv_link_too_slow(result: PlacementResult, assumed: Link | None) -> bool:
    """True when the placed prefill->decode path gives less bandwidth than the candidates assumed."""
    if assumed is None or result.kv_link is None:
        return False
    return result.kv_link.bandwidth_gb_per_s < assumed.bandwidth_gb_per_s * (1 - LINK_SLACK_FRACTION)


def _link_text(link: Link) -> str:
    return f"{link.kind} {link.bandwidth_gb_per_s:.1f} GB/s per GPU, {link.latency_us:.1f} us"


def placement_notes(result: PlacementResult, cluster: Cluster, gpu_specs: Mapping, assumed_kv: Link | None,
                    spread_racks: bool) -> list[str]:
    """What the placement adds to the explanation: where instances went, KV and pipeline links."""
    placement = result.plan.placement
    nodes = {n for p in placement for n in (p.nodes or [p.node])}
    racks = sorted({cluster.rack_of(n).name for n in nodes})
    spread = ", spread over racks" if spread_racks else ""
    plural = "s" if len(racks) != 1 else ""
    notes = [(f"placed {len(placement)} instances on {len(nodes)} nodes in {len(racks)} rack{plural} of "
              f"{cluster.name} (placement {result.status}{spread})")]
    if result.kv_link is not None:
        scopes = sorted({p.scope.replace('_', ' ') for p in result.kv_pairings})
        text = (f"KV prefill->decode: slowest placed path {_link_text(result.kv_link)} "
                f"(pairs placed: {', '.join(scopes)})")
        if assumed_kv is not None:
            text += f"; capacities assumed {assumed_kv.bandwidth_gb_per_s:.1f} GB/s per GPU"
        notes.append(text)
    for pool_index, link in sorted(result.pipeline_links.items()):
        pool = result.plan.pools[pool_index]
        gpu = gpu_specs.get(pool.gpu)
        if link.kind != "network" or gpu is None:
            continue
        modelled = pipeline_link(gpu, pool.gpus_per_instance)
        text = (f"pool {pool_index} ({pool.role} {pool.layout.short_name()}): pipeline stages span nodes, "
                f"stage-to-stage link {_link_text(link)}")
        if link.bandwidth_gb_per_s < modelled.bandwidth_gb_per_s * (1 - LINK_SLACK_FRACTION):
            metric = {"prefill": "TTFT", "decode": "TPOT"}.get(pool.role, "TTFT and TPOT")
            text += (f"; slower than the {modelled.bandwidth_gb_per_s:.1f} GB/s the performance model assumed, so "
                     f"its {metric} may exceed the prediction")
        else:
            text += " (as the performance model assumed)"
        notes.append(text)
    return notes + list(result.notes)


def with_placement(plan: Plan, result: PlacementResult, notes: list[str]) -> Plan:
    """``result.plan`` (placement filled) with ``notes`` added to its explanation."""
    explanation = result.plan.explanation
    return result.plan.model_copy(update={"explanation": explanation.model_copy(
        update={"notes": list(explanation.notes) + notes})})


def unplaced_plan(plan: Plan, result: PlacementResult, cluster: Cluster, notes: list[str]) -> Plan:
    """An infeasible (or timed-out) plan whose reasons are why the best plan found cannot be placed."""
    pools = "; ".join(f"{p.instances} x {p.role} {p.gpu} {p.layout.short_name()}" for p in plan.pools)
    reasons = [f"the best plan found ({pools}) cannot be placed on cluster {cluster.name}"] + list(result.reasons)
    suggestions = ["free more GPUs on the cluster (or repair the nodes that are down)",
                   "a --budget with fewer GPUs, so smaller instances are chosen"]
    explanation = Explanation(binding_constraints=[], notes=list(plan.explanation.notes) + notes,
                              candidates_dropped=dict(plan.explanation.candidates_dropped), reasons=reasons,
                              suggestions=suggestions)
    status = "timeout" if result.status == "timeout" else "infeasible"
    return plan.model_copy(update={
        "status": status, "mode": None, "pools": [], "totals": None, "latency": None, "placement": [],
        "alternatives": [], "explanation": explanation,
        "solver": plan.solver.model_copy(update={"status": status}),
    })
