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
domains leaves no symmetric copies to search. A class with more than ``MAX_PATTERNS_PER_CLASS``
patterns (an NVL72 domain shared by many small pools) instead gets per-domain counts x_{p,d}
with sum_p s_p x_{p,d} <= f_d.
Solving, in near-linear time where the structure allows it
    1. ``greedy``: each pool dealt to racks in proportion (prefill following the KV its rack's
       decode takes, capped at the spread bound), then packed best-fit, largest instances first;
       ``improve`` then repacks racks and moves KV-neutral instances to racks with whole free
       domains while the NVLink-domain objectives drop;
    2. ``bounds``: for each objective in order, a lower bound given the earlier ones at their
       optimum (spread by water-filling, 0 for rack-local pipelines and KV; for the domain
       objectives the exact optimum of ``rack_dp`` where the spread fixes the racks' shares,
       else the LP relaxation with racks of one shape merged, and the pooled relaxation -- all
       racks merged -- where the LP falls short). Every objective the greedy value meets is
       proven optimal with no search; where it falls short of ``rack_dp``'s optimum, that
       program's placement replaces it;
    3. CP-SAT on the full model only from the first objective the bound does not prove: the
       proven ones held at their value, interchangeable racks in order (``constraints``), the
       greedy placement as hint (and as the answer when time runs out and it is lexicographically
       better), the bound as a cut. Skipped when the model has more than
       ``SEARCH_VARIABLES_PER_S`` placement variables per deterministic second of budget: the
       greedy placement is then reported ``feasible``, each objective with its bound.
    4. the engine's node-split rule (``uneven_nodes``, ``engines.rules.check_node_split``, what emit
       checks): a placed instance the rule refuses (SGLang PP4 as 3 + 1 GPUs) makes its pool be
       placed again in equal parts per node the rule accepts (``node_rule``), the parts of one
       instance in different domains, with the same steps; its objectives are proven where they
       meet the rule-free optimum, and infeasible names the rule when no option fits (and the pool,
       ``result.rule_refusals``, with how many of its instances the free GPUs hold in legal splits,
       so that ``solve`` can re-solve with at most that many).
The status is ``optimal`` only when every objective is proven (``result.objectives`` says how).
Determinism: one worker, a fixed seed, and a budget in CP-SAT deterministic time over every
solve of a placement (``budget``), so neither the placement nor its status depends on the
machine's speed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

from ortools.sat.python import cp_model

from layoutopt.errors import InputError
from layoutopt.plan import Plan
from layoutopt.topology.cluster import Cluster
from layoutopt.topology.placement.bounds import LowerBounds
from layoutopt.topology.placement.budget import SolveBudget
from layoutopt.topology.placement.constraints import default_constraints
from layoutopt.topology.placement.data import PlacementData, prepare
from layoutopt.topology.placement.explain import (
    kv_reason,
    packing_reason,
    precheck_reasons,
)
from layoutopt.topology.placement.evaluate import kv_balance_units, model_violations, objective_values
from layoutopt.topology.placement.greedy import greedy_counts
from layoutopt.topology.placement.node_rule import (
    PartOption, broken_splits, legal_instances, legal_part_gpus, part_options, split_plan,
)
from layoutopt.topology.placement.objectives import objectives_in_order
from layoutopt.topology.placement.report import placed_result, unplaced_result
from layoutopt.topology.placement.result import ObjectiveProof, PlacementResult, RuleRefusal
from layoutopt.topology.placement.variables import PlacementVariables

# The full model is searched only up to this many placement variables per deterministic second
# of budget: CP-SAT proves the benchmark's fragmented 4,096-GPU cluster (759 variables) within
# 1 deterministic s, but not a 16,384-GPU one (3,091 variables) within 30
# (benchmarks/placement_scaling.py).
SEARCH_VARIABLES_PER_S = 50


@dataclass(frozen=True)
class _Outcome:
    status: str  # optimal | feasible | infeasible | timeout
    counts: dict[tuple[int, str], int] = field(default_factory=dict)
    egress_units: dict[str, int] = field(default_factory=dict)
    ingress_units: dict[str, int] = field(default_factory=dict)
    proofs: tuple[ObjectiveProof, ...] = ()


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
    ``spread_racks`` spreads each pool's instances over racks. ``time_limit_s`` is CP-SAT
    deterministic time over every solve (about seconds of one core's search; the greedy, the
    bounds and building the result are not counted). Returns the result; check
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
    budget = SolveBudget(time_limit_s)
    outcome = _solve(data, budget, enforce_kv_capacity=True)
    if outcome.status == "infeasible":
        return unplaced_result(plan, "infeasible", [_infeasible_reason(data, cluster, budget)], start_s)
    if outcome.status == "timeout":
        reason = f"no placement found within {time_limit_s:g} s of search; give placement more time"
        return unplaced_result(plan, "timeout", [reason], start_s)
    result = placed_result(plan, cluster, data, outcome.status, outcome.counts, kv_bytes_per_request, start_s,
                           list(outcome.proofs))
    broken = broken_splits(plan, result.instances)
    if not broken:
        return result
    return _place_in_parts(plan, cluster, data, outcome, broken, kv_bytes_per_request, spread_racks, budget, start_s)


def _place_in_parts(plan: Plan, cluster: Cluster, free_data: PlacementData, free_outcome: _Outcome,
                    broken: dict, kv_bytes_per_request: float | None, spread_racks: bool, budget: SolveBudget,
                    start_s: float) -> PlacementResult:
    """The placement again, each pool whose instance the engine's node-split rule refused placed in
    equal parts the rule accepts (``node_rule.part_options``: one part size, else a mix of two); a
    pool refused again, or the pool with the most options left when nothing fits, takes its next
    option, pools refused in turn join, until every instance passes (each round uses up an option
    or adds a pool, so it ends). The rounds share the placement's CP-SAT budget. Its objectives
    are proven where they meet the rule-free optimum (a bound: the rule only removes placements);
    infeasible, naming the rule, when no option fits."""
    options: dict[int, list[PartOption]] = {}
    chosen: dict[int, int] = {}
    refused: dict[int, tuple[str, object]] = {}
    while True:
        for pool_index, found in broken.items():
            refused.setdefault(pool_index, found)
            if pool_index in options:
                chosen[pool_index] += 1
            else:
                options[pool_index], chosen[pool_index] = part_options(plan, free_data, pool_index), 0
            if chosen[pool_index] >= len(options[pool_index]):
                refusal = _refusal(plan, free_data, pool_index, refused[pool_index], len(options[pool_index]))
                return unplaced_result(plan, "infeasible", [refusal.reason], start_s, [refusal])
        derived, part_groups, origin = split_plan(plan, {p: options[p][chosen[p]] for p in options})
        data = prepare(derived, cluster, kv_bytes_per_request, spread_racks, part_groups)
        outcome = _solve(data, budget, enforce_kv_capacity=True)
        if outcome.status in ("infeasible", "timeout"):
            pool_index = max(options, key=lambda p: (len(options[p]) - chosen[p], -p))
            if chosen[pool_index] + 1 >= len(options[pool_index]):
                refusal = _refusal(plan, free_data, pool_index, refused[pool_index], len(options[pool_index]))
                if outcome.status == "timeout":
                    reason = refusal.reason + "; the search ran out of time: give placement more time"
                    return unplaced_result(plan, "timeout", [reason], start_s)
                return unplaced_result(plan, "infeasible", [refusal.reason], start_s, [refusal])
            broken = {pool_index: refused[pool_index]}
            continue
        proofs = _proofs_against(free_data, free_outcome, data, outcome, origin)
        status = "optimal" if all(p.proven_by != "none" for p in proofs) else "feasible"
        result = placed_result(plan, cluster, data, status, outcome.counts, kv_bytes_per_request, start_s, proofs,
                               origin)
        broken = broken_splits(plan, result.instances)
        if not broken:
            return result


def _refusal(plan: Plan, free_data: PlacementData, pool_index: int, found: tuple, tried: int) -> RuleRefusal:
    """The structured refusal of a pool (``result.rule_refusals``): rule, reason and legal count."""
    return RuleRefusal(pool_index=pool_index, rule=found[1].rule, reason=_rule_reason(plan, pool_index, found, tried),
                       legal_instances=legal_instances(plan, free_data, pool_index),
                       part_gpus=legal_part_gpus(plan, free_data, pool_index))


def _rule_reason(plan: Plan, pool_index: int, found: tuple, tried: int) -> str:
    instance, violation = found
    pool = plan.pools[pool_index]
    text = (f"the cluster's free GPUs cannot hold {pool.role} pool {pool_index} ({pool.gpu} {pool.layout.short_name()}) "
            f"split over nodes as {plan.engine} requires: {violation} (the rule-free placement of {instance})")
    if not tried:
        return text + "; no split of its instances into equal parts per node that the rule accepts fits the free GPUs"
    return (text + f"; none of the {tried} ways tried to place its instances in equal parts per node (one part size, "
            "or two) fits the free GPUs")


def _proofs_against(free_data: PlacementData, free_outcome: _Outcome, data: PlacementData,
                    outcome: _Outcome, origin: dict[int, int]) -> list[ObjectiveProof]:
    """Objectives of the placement in parts, in the rule-free model's units, each proven while it
    and every earlier one meet the rule-free optimum (no placement the rule allows does better)."""
    groups = {d.pool_index: d.groups_per_part for d in data.demands}
    counts: dict[tuple[int, str], int] = {}
    for (p, name), n in outcome.counts.items():
        key = (origin.get(p, p), name)
        counts[key] = counts.get(key, 0) + n * groups[p]
    values = objective_values(free_data, counts)
    proofs: list[ObjectiveProof] = []
    earlier_met = True
    for proof in free_outcome.proofs:
        key = next(o.key for o in _objectives(free_data) if o.name == proof.name)
        met = earlier_met and proof.proven_by != "none" and values[key] <= proof.value
        proofs.append(ObjectiveProof(name=proof.name, value=values[key],
                                     lower_bound=proof.lower_bound if earlier_met else 0,
                                     proven_by=proof.proven_by if met else "none"))
        earlier_met = met
    return proofs


def _infeasible_reason(data: PlacementData, cluster: Cluster, budget: SolveBudget) -> str:
    if data.uplink_kv_units is None:
        return packing_reason(data, cluster)
    relaxed = _search(data, SolveBudget(max(budget.left_s, 1.0)), _objectives(data, kv_only=True), {}, {}, None,
                      enforce_kv_capacity=False)
    if relaxed.status in ("optimal", "feasible"):
        crossing = {r: max(relaxed.egress_units[r], relaxed.ingress_units[r]) for r in relaxed.egress_units}
        return kv_reason(data, crossing)
    return packing_reason(data, cluster)


def _objectives(data: PlacementData, kv_only: bool = False) -> list:
    objectives = objectives_in_order(data.spread_racks and not kv_only, data.has_kv,
                                     any(d.pp_size > 1 for d in data.demands) and not kv_only)
    return objectives[:1] if kv_only else objectives


def _solve(data: PlacementData, budget: SolveBudget, enforce_kv_capacity: bool, use_bounds: bool = True) -> _Outcome:
    """The greedy placement proven by bounds where they meet it, CP-SAT from the first objective
    they do not prove. ``use_bounds=False`` searches every objective with CP-SAT (the reference
    the tests compare with)."""
    objectives = _objectives(data)
    greedy = greedy_counts(data) if use_bounds else None
    if greedy is not None and model_violations(data, greedy, enforce_kv_capacity):
        greedy = None
    proven: dict[str, int] = {}
    lower: dict[str, int] = {}
    if greedy is not None:
        bounds = LowerBounds(data, budget)
        values, proven, lower = _prove(objectives, bounds, objective_values(data, greedy))
        exact = bounds.exact(proven) if len(proven) < len(objectives) else None
        if exact is not None and not model_violations(data, exact.counts, enforce_kv_capacity):
            # The rack programs' placement is optimal on the NVLink-domain objectives given the
            # proven ones: take it where it beats the greedy one, and prove it the same way.
            found = objective_values(data, exact.counts)
            if [found[o.key] for o in objectives] < [values[o.key] for o in objectives]:
                greedy = exact.counts
                values, proven, lower = _prove(objectives, bounds, found)
        if len(proven) == len(objectives):
            proofs = tuple(ObjectiveProof(name=o.name, value=values[o.key], lower_bound=lower[o.key],
                                          proven_by="bound") for o in objectives)
            return _from_counts(data, "optimal", greedy, proofs)
        if _model_size(data) > SEARCH_VARIABLES_PER_S * budget.left_s:
            # A search this large would not finish within the budget: report the greedy placement
            # with the bounds it does not meet (status feasible); the later bounds hold as well
            # without the earlier objectives held.
            for o in objectives:
                if o.key not in lower:
                    lower[o.key] = bounds.of(o.key, proven, values[o.key])
            done = [ObjectiveProof(name=o.name, value=values[o.key], lower_bound=lower[o.key], proven_by="bound")
                    for o in objectives if o.key in proven]
            return _from_counts(data, "feasible", greedy, tuple(_unproven(objectives, values, lower, done)))
    return _search(data, budget, objectives, proven, lower, greedy, enforce_kv_capacity)


def _prove(objectives: list, bounds: LowerBounds,
           values: dict[str, int]) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """(values, proven, lower): each objective's bound in order, up to the first ``values`` miss."""
    proven: dict[str, int] = {}
    lower: dict[str, int] = {}
    for objective in objectives:
        bound = bounds.of(objective.key, proven, values[objective.key])
        lower[objective.key] = bound
        if values[objective.key] > bound + getattr(objective, "absolute_gap", 0):
            break
        proven[objective.key] = values[objective.key]
    return values, proven, lower


def _model_size(data: PlacementData) -> int:
    """Placement variables of the full model: one per class and pattern, or per domain and pool."""
    return sum(len(c.patterns) or len(c.members) * len(c.pool_indices) for c in data.classes)


def _search(data: PlacementData, budget: SolveBudget, objectives: list, proven: dict[str, int],
            lower: dict[str, int], greedy: dict[tuple[int, str], int] | None,
            enforce_kv_capacity: bool) -> _Outcome:
    """CP-SAT over the objectives not in ``proven`` (those held at their value), in order."""
    model = cp_model.CpModel()
    variables = PlacementVariables(model, data)
    for constraint in default_constraints(enforce_kv_capacity):
        constraint.build(variables)
    expressions = [objective.build(variables) for objective in objectives]
    greedy_values = objective_values(data, greedy) if greedy is not None else {}
    proofs: list[ObjectiveProof] = []
    for objective, expression in zip(objectives, expressions):
        if objective.key in proven:
            model.add(expression <= proven[objective.key])
            proofs.append(ObjectiveProof(name=objective.name, value=proven[objective.key],
                                         lower_bound=lower[objective.key], proven_by="bound"))
    if greedy is not None:
        variables.add_hint(greedy)
    status, outcome = "optimal", None
    for objective, expression in zip(objectives, expressions):
        if objective.key in proven:
            continue
        gap = getattr(objective, "absolute_gap", 0)
        if greedy is not None and not outcome and objective.key in greedy_values:
            # The greedy placement meets every held objective, so the optimum is no worse than it.
            model.add(expression <= greedy_values[objective.key])
        if objective.key in lower:
            # A valid cut: no placement beats the bound, and it lets CP-SAT stop as soon as it meets it.
            model.add(expression >= lower[objective.key])
        code = cp_model.UNKNOWN if budget.spent else None
        if code is None:
            model.minimize(expression)
            code, solver = budget.solve(model, absolute_gap=gap)
        if code == cp_model.INFEASIBLE and greedy is None:
            return _Outcome(status="infeasible")
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            if outcome is None and greedy is None:
                return _Outcome(status="timeout")
            break
        outcome = _read(solver, variables)
        value = round(solver.objective_value)
        bound = max(lower.get(objective.key, 0), math.ceil(solver.best_objective_bound - 1e-6))
        proofs.append(ObjectiveProof(name=objective.name, value=value, lower_bound=bound,
                                     proven_by="search" if code == cp_model.OPTIMAL else "none"))
        if code == cp_model.FEASIBLE:
            status = "feasible"
            break
        # Hold this objective at the value found (within its tolerance), and start the next phase
        # from this solution.
        model.add(expression <= value + gap)
        model.clear_hints()
        variables.add_hint_from(solver)
    if outcome is None:
        # Time ran out before CP-SAT improved on the greedy placement: report that one, unproven.
        return _from_counts(data, "feasible", greedy, tuple(_unproven(objectives, greedy_values, lower, proofs)))
    if len(proofs) < len(objectives):
        status = "feasible"
        values = objective_values(data, outcome.counts)
        proofs = _unproven(objectives, values, lower, proofs)
    if status == "feasible" and greedy is not None:
        # CP-SAT stopped in a phase: its solution may be worse than the greedy one on the phases
        # it did not reach. Report the lexicographically better one; a proof carries over only
        # while the two agree on every objective up to it.
        found = objective_values(data, outcome.counts)
        keys = [o.key for o in objectives]
        if [greedy_values[k] for k in keys] < [found[k] for k in keys]:
            same, kept = True, []
            for key, proof in zip(keys, proofs):
                same = same and greedy_values[key] == found[key]
                kept.append(proof.model_copy(update={"value": greedy_values[key],
                                                     "proven_by": proof.proven_by if same else "none"}))
            return _from_counts(data, "feasible", greedy, tuple(kept))
    return replace(outcome, status=status, proofs=tuple(proofs))


def _unproven(objectives: list, values: dict[str, int], lower: dict[str, int],
              proofs: list[ObjectiveProof]) -> list[ObjectiveProof]:
    """``proofs`` completed with the objectives not reached, marked unproven."""
    done = {p.name for p in proofs}
    return proofs + [ObjectiveProof(name=o.name, value=values[o.key], lower_bound=lower.get(o.key, 0), proven_by="none")
                     for o in objectives if o.name not in done]


def _from_counts(data: PlacementData, status: str, counts: dict[tuple[int, str], int],
                 proofs: tuple[ObjectiveProof, ...]) -> _Outcome:
    balance = kv_balance_units(data, counts)
    return _Outcome(status=status, counts=counts, proofs=proofs,
                    egress_units={r: max(0, b) for r, b in balance.items()},
                    ingress_units={r: max(0, -b) for r, b in balance.items()})


def _read(solver: cp_model.CpSolver, v: PlacementVariables) -> _Outcome:
    return _Outcome(
        status="feasible",
        counts=v.counts_per_domain(solver),
        egress_units={r: int(solver.value(x)) for r, x in v.kv_egress.items()},
        ingress_units={r: int(solver.value(x)) for r, x in v.kv_ingress.items()},
    )
