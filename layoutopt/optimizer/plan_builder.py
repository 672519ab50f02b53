"""Assemble the ``Plan`` (feasible or not) from the search result and the inputs."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from layoutopt.engines import check_layout, engine_ref_of
from layoutopt.hardware_catalog.budget import Budget
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.optimizer.assemble import goodput_rps, latency_of, plan_mode, pools_of, totals_of, used_candidates
from layoutopt.optimizer.candidates import CandidateTable
from layoutopt.optimizer.diagnose import diagnose, pcp_variants
from layoutopt.optimizer.explain import binding_constraints, filter_notes, mode_note, ratio_check
from layoutopt.plan import Alternative, Explanation, Plan, SolverInfo
from layoutopt.optimizer.scaling import rate_rps
from layoutopt.optimizer.search import SearchResult
from layoutopt.optimizer.solver import SolveOutcome
from layoutopt.optimizer.validate import plan_violations
from layoutopt.perf_model.capacity import instance_capacity
from layoutopt.perf_model.links import inter_node_link
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload


def _solver_info(outcome: SolveOutcome, table: CandidateTable, time_limit_s: float) -> SolverInfo:
    return SolverInfo(
        status=outcome.status, wall_time_s=outcome.wall_time_s, objective_value=outcome.objective_value,
        best_bound=outcome.best_bound, gap=outcome.gap, num_candidates=len(table.candidates),
        num_iterations=max(1, outcome.num_iterations), objective_unit=outcome.objective_unit,
        time_limit_s=time_limit_s, num_layouts_considered=table.num_considered,
        tolerance_fraction=outcome.tolerance_fraction, proof=outcome.proof,
    )


def _inputs(workload: Workload, slo: SLO, budget: Budget, headroom: float) -> dict:
    return {"workload": workload.model_dump(mode="json"), "slo": slo.model_dump(mode="json"),
            "budget": budget.text or budget.describe(), "headroom_fraction": headroom}


def solver_note(status: str, proof: str) -> str:
    """The explanation note that states the solver's proof (``rule_rounds`` rewrites it when the
    proof covers a capped table only)."""
    return f"solver ({status}): {proof}"


def _notes(outcome: SolveOutcome, table: CandidateTable, used, objective: str, headroom: float,
           defaults_used: list[str]) -> list[str]:
    notes = [f"default {d}" for d in defaults_used]
    if outcome.proof:
        notes.append(solver_note(outcome.status, outcome.proof))
    if table.min_rate_rps:
        notes.append(f"serves the target {table.min_rate_rps:g} req/s; capacity {goodput_rps(outcome):.2f} req/s")
    why_mode = mode_note(table, used)
    if why_mode:
        notes.append(why_mode)
    notes.append(f"latencies are predicted at each pool's capacity, which includes the {headroom:g} "
                 "utilization headroom")
    gpus: dict[str, int] = {}
    for c, n in used:
        gpus[c.gpu] = gpus.get(c.gpu, 0) + c.gpus_per_instance * n
    for gpu, limit in table.gpu_limits.items():
        left = limit - gpus.get(gpu, 0)
        if left > 0 and objective != "min-cost":
            notes.append(f"{left} {gpu} left unused: more instances would not raise the objective")
    notes += filter_notes(table)
    return notes


def build_plan(found: SearchResult, *, model: ModelSpec, table: CandidateTable, slo: SLO, workload: Workload,
               objective: str, engine: str, headroom: float, budget: Budget, defaults_used: list[str],
               time_limit_s: float) -> Plan:
    """The Plan of a search that found at least one plan."""
    best = found.best
    used = used_candidates(table, best)
    problems = plan_violations(table, best.counts, rate_rps(best.disaggregated_rate_units),
                               rate_rps(best.colocated_rate_units))
    if problems:
        raise RuntimeError(f"solver returned a plan that breaks its constraints: {problems}")
    pools = pools_of(used)
    alternatives = []
    for rank, alternative in enumerate(found.alternatives, start=1):
        alt_used = used_candidates(table, alternative)
        alt_pools = pools_of(alt_used)
        alternatives.append(Alternative(
            rank=rank, mode=plan_mode(alt_used), pools=alt_pools,
            totals=totals_of(alt_pools, goodput_rps(alternative), table.mean_output_tokens),
            latency=latency_of(alt_used, alternative, slo), objective_value=alternative.objective_value or 0.0))
    explanation = Explanation(
        binding_constraints=binding_constraints(table, best, used, slo, objective),
        notes=_notes(best, table, used, objective, headroom, defaults_used),
        ratio_check=ratio_check(table, used, best),
        candidates_dropped={f.name: f.num_dropped for f in table.filters},
    )
    latency = latency_of(used, best, slo)
    status, solver_info = best.status, _solver_info(best, table, time_limit_s)
    missed = _predicted_miss(latency, slo)
    if missed and status == "optimal":
        # Proven optimal over the candidate table, but the plan's own prediction misses the SLO.
        status = "feasible"
        solver_info = solver_info.model_copy(update={"status": status})
        explanation = explanation.model_copy(update={"notes": list(explanation.notes) + [
            f"status feasible, not optimal: {missed}"]})
    return Plan(
        status=status, objective=objective, mode=plan_mode(used), model=model.name,
        engine=engine if isinstance(engine, str) else engine.name,
        workload=_inputs(workload, slo, budget, headroom), pools=pools,
        totals=totals_of(pools, goodput_rps(best), table.mean_output_tokens), latency=latency,
        solver=solver_info, explanation=explanation, alternatives=alternatives,
        defaults_used=list(defaults_used),
    )


def _predicted_miss(latency, slo: SLO) -> str | None:
    """Why the plan's own predicted latencies break the SLO (infinite, or attainment short), if they do."""
    if latency is None:
        return None
    values = [latency.ttft_ms.p50, latency.ttft_ms.p90, latency.ttft_ms.p99,
              latency.tpot_ms.p50, latency.tpot_ms.p90, latency.tpot_ms.p99]
    if not all(math.isfinite(v) for v in values):
        return "a predicted latency percentile is infinite (the pools run at the edge of stability; lower --headroom)"
    if latency.slo_attainment < slo.attainment - 1e-9:
        return (f"predicted SLO attainment {latency.slo_attainment:.1%} is below the SLO's {slo.attainment:.1%} "
                "(lower --headroom)")
    return None


def infeasible_plan(outcome: SolveOutcome, *, model: ModelSpec, table: CandidateTable, slo: SLO,
                    workload: Workload, objective: str, engine: str, headroom: float, budget: Budget,
                    defaults_used: list[str], time_limit_s: float, gpus: Sequence[GpuSpec],
                    other_gpus: Sequence[GpuSpec],
                    table_for: Callable[[Sequence[GpuSpec], dict[str, int]], CandidateTable],
                    precision: str) -> Plan:
    """The Plan of a search that found none: status infeasible (or timeout), reasons, suggestions."""
    def pcp_ttft() -> tuple[str, float] | None:
        return _pcp_ttft(model, table, gpus, workload, slo, engine, headroom)

    if outcome.status == "timeout":
        reasons = [f"no plan found within the {time_limit_s:g} s time limit"]
        suggestions = ["a longer --time-limit"]
    else:
        found = diagnose(table, model, slo, gpus, build_table=table_for, other_gpus=other_gpus,
                         objective=objective, pcp_ttft_ms=pcp_ttft)
        reasons, suggestions = found.reasons, found.suggestions
    explanation = Explanation(
        binding_constraints=[], notes=[f"default {d}" for d in defaults_used] + filter_notes(table),
        candidates_dropped={f.name: f.num_dropped for f in table.filters}, reasons=reasons, suggestions=suggestions,
    )
    return Plan(
        status=outcome.status, objective=objective, mode=None, model=model.name,
        engine=engine if isinstance(engine, str) else engine.name,
        workload=_inputs(workload, slo, budget, headroom), pools=[], totals=None, latency=None,
        solver=_solver_info(outcome, table, time_limit_s), explanation=explanation, defaults_used=list(defaults_used),
    )


def _pcp_ttft(model: ModelSpec, table: CandidateTable, gpus: Sequence[GpuSpec], workload: Workload, slo: SLO,
              engine: str, headroom: float) -> tuple[str, float] | None:
    """(layout, unloaded TTFT ms) of the fastest prefill layout with PCP added, when that is faster."""
    floor = table.fastest_ttft
    gpu = next((g for g in gpus if floor is not None and g.name == floor.gpu), None)
    if floor is None or gpu is None:
        return None
    best: tuple[str, float] | None = None
    rules = engine_ref_of(engine)
    for layout in pcp_variants(floor.layout, gpu):
        if rules is not None and check_layout(rules, model, gpu, layout, floor.role):
            continue  # never suggest a PCP layout the engine cannot run (e.g. PCP on GQA in vLLM 0.33)
        perf = instance_capacity(model, gpu, layout, floor.role, workload, slo, engine=engine, headroom=headroom,
                                 kv_link=inter_node_link(gpu) if floor.role == "prefill" else None)
        if 0 < perf.unloaded_ttft_ms < floor.latency_ms and (best is None or perf.unloaded_ttft_ms < best[1]):
            best = (layout.short_name(), perf.unloaded_ttft_ms)
    return best
