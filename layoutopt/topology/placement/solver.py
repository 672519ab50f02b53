r"""Placement of a plan's instances on a cluster's free GPUs, as a CP-SAT model.

Sets
    P           pools of the plan (prefill, decode, colocated);  R racks
    C           classes of interchangeable NVLink domains (same rack, GPU type, free GPUs);
                C_r those in rack r;  K_c fill patterns of class c
Parameters
    n_p, pp_p   instances and pipeline stages of pool p;  s_p = tp x dp x pcp  GPUs per stage
    m_c, f_c    domains in class c and free GPUs of each
    a_{c,k,p}   stage groups of pool p in pattern k: every non-empty vector with
                sum_p s_p a_{c,k,p} <= f_c (pools of c's GPU type only)
    k_p         KV units one stage of p sends (prefill, > 0) or takes (decode, < 0); 0 otherwise
    U_r         uplink capacity of rack r in KV units (only when KV bytes per request are given)
Variables
    w_{c,k} in {0..m_c}           domains_with[c#k]: domains of class c filled with pattern k
    e_r, i_r >= 0                 kv_egress[r], kv_ingress[r]
    S_{p,r} = sum_{c in C_r, k} a_{c,k,p} w_{c,k}     stage groups of p in rack r (an expression)
Constraints
    every stage placed   sum_r S_{p,r} = n_p pp_p                                  for all p
    domain capacity      sum_k w_{c,k} <= m_c                                       for all c
    KV over uplinks      e_r >= sum_p k_p S_{p,r} >= -i_r;  e_r, i_r <= U_r          for all r
Objectives, lexicographic (each solved with the previous ones held at their optimum, or within
its stated tolerance)
    spread (with --spread-racks) min sum_p m_p,  pp_p m_p >= S_{p,r}  for all r
    pipelines in one rack        min sum_{p,r} (S_{p,r} mod pp_p)  (stages of rack-crossing instances)
    KV locality                  min sum_r e_r  (to within 1% of all KV traffic)
    pipelines in one domain      min sum_{c,k} w_{c,k} sum_p (a_{c,k,p} mod pp_p)  (stages of
                                 instances split over NVLink domains)
    tidy packing                 min domains touched = sum_{c,k} w_{c,k}
A domain is all-to-all at full scale-up bandwidth, so a pattern that fits its free GPUs is
realised by any free GPU indices (``assign``). Grouping identical instances and identical
domains leaves no symmetric copies to search: 1,024 GPUs in 128 HGX nodes are a few hundred
integers. A class with more than ``MAX_PATTERNS_PER_CLASS`` patterns (an NVL72 domain shared by
many small pools) instead gets per-domain counts x_{p,d} with sum_p s_p x_{p,d} <= f_d.
Determinism: one worker and a fixed seed; the time limit covers every phase together.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from ortools.sat.python import cp_model

from layoutopt.errors import InputError
from layoutopt.plan import Plan
from layoutopt.topology.cluster import Cluster
from layoutopt.topology.placement.constraints import default_constraints
from layoutopt.topology.placement.data import PlacementData, prepare
from layoutopt.topology.placement.explain import (
    kv_reason,
    packing_reason,
    precheck_reasons,
)
from layoutopt.topology.placement.objectives import objectives_in_order
from layoutopt.topology.placement.report import placed_result, unplaced_result
from layoutopt.topology.placement.result import PlacementResult
from layoutopt.topology.placement.variables import PlacementVariables

RANDOM_SEED = 20240607
NUM_WORKERS = 1


@dataclass(frozen=True)
class _Outcome:
    status: str  # optimal | feasible | infeasible | timeout
    counts: dict[tuple[int, str], int] = field(default_factory=dict)
    egress_units: dict[str, int] = field(default_factory=dict)
    ingress_units: dict[str, int] = field(default_factory=dict)


def place(
    plan: Plan,
    cluster: Cluster,
    *,
    spread_racks: bool = False,
    time_limit_s: float = 10.0,
    kv_bytes_per_request: float | None = None,
) -> PlacementResult:
    """Assign every instance of ``plan`` to free GPUs of ``cluster``.

    ``kv_bytes_per_request`` (KV cache bytes one prefill instance ships per request) turns on the
    rack-uplink capacity constraint; without it KV traffic is only kept local where possible.
    ``spread_racks`` spreads each pool's instances over racks. Returns the result; check
    ``result.placed`` or call ``result.raise_if_unplaced()``.
    """
    start_s = time.perf_counter()
    if time_limit_s <= 0:
        raise InputError("time_limit_s", time_limit_s, "a positive number of seconds")
    if kv_bytes_per_request is not None and kv_bytes_per_request < 0:
        raise InputError("kv_bytes_per_request", kv_bytes_per_request, "a non-negative number of bytes")
    if not plan.pools:
        return unplaced_result(plan, "infeasible", ["the plan has no pools to place"], start_s)
    data = prepare(plan, cluster, kv_bytes_per_request, spread_racks)
    reasons = precheck_reasons(data, cluster)
    if reasons:
        return unplaced_result(plan, "infeasible", reasons, start_s)
    deadline_s = start_s + time_limit_s
    outcome = _solve(data, deadline_s, enforce_kv_capacity=True)
    if outcome.status == "infeasible":
        return unplaced_result(plan, "infeasible", [_infeasible_reason(data, cluster, deadline_s)], start_s)
    if outcome.status == "timeout":
        reason = f"no placement found within {time_limit_s:g} s; give placement more time"
        return unplaced_result(plan, "timeout", [reason], start_s)
    return placed_result(plan, cluster, data, outcome.status, outcome.counts, kv_bytes_per_request, start_s)


def _infeasible_reason(data: PlacementData, cluster: Cluster, deadline_s: float) -> str:
    if data.uplink_kv_units is None:
        return packing_reason(data, cluster)
    relaxed = _solve(data, max(deadline_s, time.perf_counter() + 1.0), enforce_kv_capacity=False,
                     kv_only=True)
    if relaxed.status in ("optimal", "feasible"):
        crossing = {r: max(relaxed.egress_units[r], relaxed.ingress_units[r]) for r in relaxed.egress_units}
        return kv_reason(data, crossing)
    return packing_reason(data, cluster)


def _solve(data: PlacementData, deadline_s: float, enforce_kv_capacity: bool, kv_only: bool = False) -> _Outcome:
    """Build the model and optimize its objectives in order until the deadline."""
    model = cp_model.CpModel()
    variables = PlacementVariables(model, data)
    for constraint in default_constraints(enforce_kv_capacity):
        constraint.build(variables)
    objectives = objectives_in_order(data.spread_racks and not kv_only, data.has_kv,
                                     any(d.pp_size > 1 for d in data.demands) and not kv_only)
    if kv_only:
        objectives = objectives[:1]
    expressions = [objective.build(variables) for objective in objectives]
    solver = cp_model.CpSolver()
    solver.parameters.random_seed = RANDOM_SEED
    solver.parameters.num_workers = NUM_WORKERS
    status, outcome = "optimal", None
    for objective, expression in zip(objectives, expressions):
        remaining_s = deadline_s - time.perf_counter()
        if remaining_s <= 0:
            status = "feasible"
            break
        model.minimize(expression)
        solver.parameters.max_time_in_seconds = remaining_s
        solver.parameters.absolute_gap_limit = getattr(objective, "absolute_gap", 0)
        code = solver.solve(model)
        if code == cp_model.INFEASIBLE:
            return _Outcome(status="infeasible")
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            if outcome is None:
                return _Outcome(status="timeout")
            status = "feasible"
            break
        if code == cp_model.FEASIBLE:
            status = "feasible"
        outcome = _read(solver, variables)
        # Hold this objective at the value found (within its tolerance), and start the next phase
        # from this solution.
        model.add(expression <= round(solver.objective_value) + getattr(objective, "absolute_gap", 0))
        model.clear_hints()
        for var in [*variables.domains_with.values(), *variables.stages.values()]:
            model.add_hint(var, solver.value(var))
    if outcome is None:
        return _Outcome(status="timeout")
    return replace(outcome, status=status)


def _read(solver: cp_model.CpSolver, v: PlacementVariables) -> _Outcome:
    return _Outcome(
        status="feasible",
        counts=v.counts_per_domain(solver),
        egress_units={r: int(solver.value(x)) for r, x in v.kv_egress.items()},
        ingress_units={r: int(solver.value(x)) for r, x in v.kv_ingress.items()},
    )
