r"""Several models on one budget: one CP-SAT model that assigns GPU types and counts to all of them.

Sets
    M           fleet members (models), each with its candidate table C_m (``enumeration``)
Variables
    every variable of ``LayoutVariables`` once per member m (names prefixed ``m<i>:``)
Constraints
    per member      every family of ``constraints.default_constraints`` except the two below,
                    on the member's own candidates (capacity per role, rate, mode, KV, engine pairs)
    GPU budget      sum_m sum_{c in C_m: g(c)=g} gpus_c n_c <= B_g     (shared by all members)
    $ cap           sum_m sum_{c in C_m} cost_c n_c <= C_max           (shared)
Objectives (R = sum_m w_m r_m with integer weights w_m; cost = sum over all members)
    min-cost            min cost s.t. r_m >= R_m for every m; then, with cost <= cost*, max R
    max-goodput         max R; then, with R >= R*, min cost
    goodput-per-dollar  max R / cost by Dinkelbach (as in ``solver``), then the cheapest plan at it
Status: as ``solver``: optimal when the first objective is proven within the tolerance and the
second phase is proven; the limit is CP-SAT deterministic time over all phases.

The report compares the fleet with the naive split: each model alone on a share of every GPU
count and of the $ cap in proportion to its token load (rate x mean input + output tokens).
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from pathlib import Path

from ortools.sat.python import cp_model

from layoutopt import cpsat
from layoutopt.errors import InputError
from layoutopt.hardware_catalog.budget import Budget, parse_budget
from layoutopt.hardware_catalog.catalog import load_catalog
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer.candidates import CandidateTable
from layoutopt.optimizer.constraints import CostCap, GpuBudget, default_constraints
from layoutopt.optimizer.enumeration import build_candidate_table
from layoutopt.optimizer.fleet_spec import FleetSpec, check_fleet_contexts, load_fleet
from layoutopt.optimizer.plan_builder import build_plan
from layoutopt.optimizer.scaling import (
    COST_SCALE_PER_USD_PER_HOUR, RATE_SCALE_PER_RPS, IntegerTable, to_integer_table,
)
from layoutopt.optimizer.search import SearchResult
from layoutopt.optimizer.solver import (
    CP_MODEL_PROBING_LEVEL, DEFAULT_TOLERANCE_FRACTION, WALL_CAP_FACTOR, WALL_CAP_SLACK_S, LayoutSolver,
    SolveOutcome,
)
from layoutopt.optimizer.variables import LayoutVariables
from layoutopt.plan import SolverInfo
from layoutopt.plan.fleet import FleetPlan, FleetTotals, SplitMember

WEIGHT_SCALE = 1000
MAX_DINKELBACH_ITERATIONS = 40


class _FleetModel:
    """The shared CP-SAT model: one ``LayoutVariables`` per member, shared budget and $ cap."""

    def __init__(self, tables: list[IntegerTable], weights: list[int], gpu_limits: dict[str, int],
                 max_cost_units: int | None):
        self.model = cp_model.CpModel()
        self.members = [LayoutVariables(self.model, t, prefix=f"m{i}:") for i, t in enumerate(tables)]
        self.weights = weights
        for variables in self.members:
            for module in default_constraints():
                if not isinstance(module, (GpuBudget, CostCap)):
                    module.build(variables)
        # One budget for the whole fleet: GPUs of each type and dollars are shared by every model.
        for gpu, limit in sorted(gpu_limits.items()):
            terms = [v.gpus_of_type(gpu) for v in self.members]
            self.model.add(cp_model.LinearExpr.sum(terms) <= limit).with_name(f"fleet_gpu_budget[{gpu}]")
        if max_cost_units is not None:
            self.model.add(self.cost() <= max_cost_units).with_name("fleet_cost_cap")

    def cost(self) -> cp_model.LinearExpr:
        return cp_model.LinearExpr.sum([v.total_cost() for v in self.members])

    def value(self) -> cp_model.LinearExpr:
        """Weighted goodput sum_m w_m r_m (rate units x weight units)."""
        return cp_model.LinearExpr.weighted_sum([v.total_rate for v in self.members], self.weights)


class _Runner:
    """Single-worker, fixed-seed CP-SAT runs sharing one deterministic-time budget."""

    def __init__(self, time_limit_s: float):
        self.left_s = time_limit_s
        self.used_s = 0.0
        self.deadline = time.perf_counter() + WALL_CAP_FACTOR * time_limit_s + WALL_CAP_SLACK_S
        self.timed_out = False

    def run(self, model: cp_model.CpModel) -> tuple[int, cp_model.CpSolver]:
        solver = cpsat.deterministic_solver(self.left_s, wall_s=self.deadline - time.perf_counter(),
                                            probing_level=CP_MODEL_PROBING_LEVEL)
        status, spent = cpsat.solve(solver, model)
        self.left_s -= spent
        self.used_s += spent
        if status in (cp_model.FEASIBLE, cp_model.UNKNOWN):
            self.timed_out = True
        return status, solver

    @property
    def spent(self) -> bool:
        return self.left_s <= 0 or time.perf_counter() >= self.deadline


def _snapshot(fleet: _FleetModel, solver: cp_model.CpSolver) -> list[dict]:
    """Per member: counts, disaggregated and colocated rate units, cost units."""
    out = []
    for v in fleet.members:
        counts = v.counts(solver)
        out.append(dict(counts=counts, dis=int(solver.value(v.disaggregated_rate)),
                        col=int(solver.value(v.colocated_rate)),
                        cost=sum(c.cost_units * counts.get(c.name, 0) for c in v.table.candidates)))
    return out


def _hint(fleet: _FleetModel, snapshot: list[dict]) -> None:
    fleet.model.clear_hints()
    for v, member in zip(fleet.members, snapshot):
        for name, var in v.num_instances.items():
            fleet.model.add_hint(var, member["counts"].get(name, 0))


def _value_of(snapshot: list[dict], weights: list[int]) -> int:
    return sum(w * (m["dis"] + m["col"]) for m, w in zip(snapshot, weights))


def _cost_of(snapshot: list[dict]) -> int:
    return sum(m["cost"] for m in snapshot)


def solve_fleet_tables(tables: list[IntegerTable], weights: list[float], gpu_limits: dict[str, int],
                       max_cost_units: int | None, objective: str, time_limit_s: float = 10.0,
                       tolerance_fraction: float = DEFAULT_TOLERANCE_FRACTION) -> dict:
    """Solve the fleet over integer tables; returns status, per-member snapshot, value, bound, gap, proof."""
    int_weights = [max(1, round(w * WEIGHT_SCALE)) for w in weights]
    fleet = _FleetModel(tables, int_weights, gpu_limits, max_cost_units)
    runner = _Runner(time_limit_s)
    if objective == "goodput-per-dollar":
        for v in fleet.members:
            fleet.model.add(v.total_rate >= 1).with_name(f"positive_rate[{v.prefix}]")
        return _ratio(fleet, runner, tolerance_fraction)
    _relaxation(fleet, tables, objective, runner)
    if objective == "min-cost":
        fleet.model.minimize(fleet.cost())
    else:
        fleet.model.maximize(fleet.value())
    status, solver = runner.run(fleet.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        state = "timeout" if runner.timed_out else "infeasible"
        return dict(status=state, members=None, dtime=runner.used_s, proof="")
    first = _snapshot(fleet, solver)
    bound_units = solver.best_objective_bound
    final, second_proved = first, False
    if not runner.spent:
        # Second phase: keep the first optimum, improve the other term.
        if objective == "min-cost":
            fleet.model.add(fleet.cost() <= _cost_of(first))
            fleet.model.maximize(fleet.value())
        else:
            fleet.model.add(fleet.value() >= _value_of(first, int_weights))
            fleet.model.minimize(fleet.cost())
        _hint(fleet, first)
        second_status, second_solver = runner.run(fleet.model)
        if second_status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            final = _snapshot(fleet, second_solver)
        second_proved = second_status == cp_model.OPTIMAL
    if objective == "min-cost":
        value, bound = _cost_of(first) / COST_SCALE_PER_USD_PER_HOUR, math.ceil(bound_units) / COST_SCALE_PER_USD_PER_HOUR
        gap, unit, what = ((value - bound) / value if value > 0 else 0.0), "$/h", "cost"
    else:
        scale = RATE_SCALE_PER_RPS * WEIGHT_SCALE
        value, bound = _value_of(first, int_weights) / scale, math.floor(bound_units) / scale
        gap, unit, what = ((bound - value) / bound if bound > 0 else 0.0), "weighted req/s", "weighted goodput"
    gap = max(gap, 0.0)
    optimal = second_proved and gap <= tolerance_fraction * (1 + 1e-6) + 1e-9
    state = "optimal" if optimal else ("timeout" if runner.timed_out or runner.spent else "feasible")
    proof = (f"fleet {what} {value:.4g} {unit} proven within {gap:.2%} of the best (bound {bound:.4g})"
             + ("; second phase proven" if second_proved else "; second phase not proven (time limit)"))
    return dict(status=state, members=final, value=value, bound=bound, gap=gap, unit=unit, dtime=runner.used_s,
                proof=proof)


def _relaxation(fleet: _FleetModel, tables: list[IntegerTable], objective: str, runner: _Runner) -> None:
    """Each member alone on the whole budget: a bound on the fleet's optimum, and its first hint.

    Dropping the shared budget decouples the members, so the sum of their optima alone bounds the
    fleet (min-cost: from below; weighted max-goodput: from above). When the members' plans alone
    fit the shared budget together they are a fleet optimum, which CP-SAT then only has to confirm.
    """
    share_s = runner.left_s / (2 * len(tables))
    alone = []
    for table in tables:
        if objective == "min-cost" and table.min_rate_units <= 0:
            alone.append(SolveOutcome(status="optimal"))  # nothing to serve: the empty plan, cost 0
            continue
        outcome = LayoutSolver(table, objective, share_s, tolerance_fraction=0.0).solve()
        runner.left_s -= outcome.deterministic_time
        runner.used_s += outcome.deterministic_time
        alone.append(outcome)
    if objective == "min-cost":
        if all(o.status == "optimal" for o in alone):
            fleet.model.add(fleet.cost() >= sum(o.cost_units for o in alone)).with_name("fleet_relaxation_bound")
    elif all(o.status in ("optimal", "infeasible") for o in alone):
        bound = sum(w * (o.rate_units if o.has_plan else 0) for w, o in zip(fleet.weights, alone))
        fleet.model.add(fleet.value() <= bound).with_name("fleet_relaxation_bound")
    if all(o.status == "optimal" for o in alone):
        _hint(fleet, [dict(counts=o.counts) for o in alone])


def _ratio(fleet: _FleetModel, runner: _Runner, tolerance: float) -> dict:
    """Dinkelbach on sum_m w_m r_m / cost, then the most weighted goodput within the tolerance."""
    ratio, incumbent, proved, iterations = Fraction(0), None, False, 0
    objective_expr = None
    while iterations < MAX_DINKELBACH_ITERATIONS and not runner.spent:
        iterations += 1
        objective_expr = ratio.denominator * fleet.value() - ratio.numerator * fleet.cost()
        fleet.model.maximize(objective_expr)
        status, solver = runner.run(fleet.model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            break
        found = _snapshot(fleet, solver)
        found_ratio = Fraction(_value_of(found, fleet.weights), max(1, _cost_of(found)))
        if found_ratio > ratio:
            incumbent, ratio = found, found_ratio
            _hint(fleet, found)
            continue
        proved = status == cp_model.OPTIMAL and solver.best_objective_bound <= 0
        break
    if incumbent is None:
        return dict(status="timeout" if runner.timed_out else "infeasible", members=None, dtime=runner.used_s,
                    proof="")
    final, second_proved = incumbent, False
    if not runner.spent:
        floor = ratio * (1 - Fraction(tolerance).limit_denominator(10**6))
        fleet.model.add(floor.denominator * fleet.value() >= floor.numerator * fleet.cost())
        fleet.model.maximize(fleet.value())
        _hint(fleet, incumbent)
        status, solver = runner.run(fleet.model)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            final = _snapshot(fleet, solver)
        second_proved = status == cp_model.OPTIMAL
    per_usd = 3600 * COST_SCALE_PER_USD_PER_HOUR / (RATE_SCALE_PER_RPS * WEIGHT_SCALE)
    value = float(Fraction(_value_of(final, fleet.weights), max(1, _cost_of(final)))) * per_usd
    bound = float(ratio) * per_usd
    gap = max(0.0, (bound - value) / bound) if bound > 0 else 0.0
    optimal = proved and second_proved and gap <= tolerance * (1 + 1e-6) + 1e-9
    state = "optimal" if optimal else ("timeout" if runner.timed_out or runner.spent else "feasible")
    proof = (f"weighted requests/$ {value:,.0f}, within {gap:.2%} of the best ratio {bound:,.0f}"
             + (" (proven)" if proved else " (best ratio not proven: time limit)"))
    return dict(status=state, members=final, value=value, bound=bound, gap=gap, unit="weighted requests/$",
                dtime=runner.used_s, proof=proof, iterations=iterations)


def _load(member) -> float:
    """Tokens/s a model must move: its rate (or weight) times mean input + output tokens."""
    rate = member.rate_rps if member.rate_rps is not None else member.weight
    return rate * (member.workload.mean_input_tokens + member.workload.mean_output_tokens)


def _split_budget(budget: Budget, share: float) -> tuple[dict[str, int], float | None, str]:
    counts = {g: int(math.floor(n * share + 1e-9)) for g, n in budget.gpu_counts.items()}
    cap = None if budget.max_usd_per_hour is None else budget.max_usd_per_hour * share
    text = "+".join(f"{n}x{g}" for g, n in counts.items())
    if cap is not None:
        text = (text + ", " if text else "") + f"${cap:.2f}/h"
    return counts, cap, text


def solve_fleet(fleet: FleetSpec | str | Path, budget: str | Budget | None = None, *, engine: str = "vllm",
                precision: str = "auto", headroom: float = 0.7, time_limit_s: float = 10.0,
                tolerance_fraction: float = DEFAULT_TOLERANCE_FRACTION, gpus_path: str | Path | None = None,
                prices_path: str | Path | None = None) -> FleetPlan:
    """Plan every model of ``fleet`` on one budget (``budget`` overrides the file's) in one CP-SAT model."""
    spec = fleet if isinstance(fleet, FleetSpec) else load_fleet(fleet)
    if not time_limit_s > 0:
        raise InputError("--time-limit", time_limit_s, "seconds > 0")
    if not 0 <= tolerance_fraction <= 0.5:
        raise InputError("--tolerance", tolerance_fraction, "a fraction in [0, 0.5]")
    catalog = load_catalog(gpus_path=gpus_path, prices_path=prices_path)
    given = budget if budget is not None else spec.budget
    if given is None:
        raise InputError("--budget", None, "a budget in the fleet file or on the command line, e.g. 64xH100+32xH200")
    parsed = given if isinstance(given, Budget) else parse_budget(given, catalog)
    gpus = ([catalog.gpu(n) for n in parsed.gpu_counts] if parsed.gpu_counts
            else [g for g in catalog.gpus if g.price is not None])
    check_fleet_contexts(spec)
    models = [get_model(m.model) for m in spec.models]
    tables: list[CandidateTable] = [
        build_candidate_table(model, gpus, m.workload, m.slo, gpu_limits=dict(parsed.gpu_counts),
                              max_usd_per_hour=parsed.max_usd_per_hour, min_rate_rps=m.rate_rps, engine=engine,
                              precision=precision, headroom=headroom)
        for model, m in zip(models, spec.models)]
    integer = [to_integer_table(t) for t in tables]
    max_cost = integer[0].max_cost_units
    started = time.perf_counter()
    result = solve_fleet_tables(integer, [m.weight for m in spec.models], dict(parsed.gpu_counts), max_cost,
                                spec.objective, time_limit_s, tolerance_fraction)
    wall_s = time.perf_counter() - started
    solver_info = SolverInfo(
        status=result["status"], wall_time_s=wall_s, objective_value=result.get("value"),
        best_bound=result.get("bound"), gap=result.get("gap"), num_candidates=sum(len(t.candidates) for t in integer),
        num_iterations=result.get("iterations", 1), objective_unit=result.get("unit", ""), time_limit_s=time_limit_s,
        num_layouts_considered=sum(t.num_considered for t in tables), tolerance_fraction=tolerance_fraction,
        proof=result["proof"])
    budget_text = parsed.text or parsed.describe()
    plans = []
    if result["members"] is not None:
        for model, m, table, member in zip(models, spec.models, tables, result["members"]):
            plans.append(member_plan(member, result["status"], f"part of the fleet plan: {result['proof']}",
                                     model=model, table=table, slo=m.slo, workload=m.workload,
                                     objective=spec.objective, engine=engine, headroom=headroom, budget=parsed,
                                     time_limit_s=time_limit_s, tolerance_fraction=tolerance_fraction))
    totals = None
    if plans and all(p.totals is not None for p in plans):
        by_type: dict[str, int] = {}
        for p in plans:
            for g, n in p.totals.gpus_by_type.items():
                by_type[g] = by_type.get(g, 0) + n
        totals = FleetTotals(gpus=sum(by_type.values()), gpus_by_type=by_type,
                             cost_usd_per_hour=sum(p.totals.cost_usd_per_hour for p in plans),
                             goodput_rps_by_model={p.model: p.totals.goodput_rps for p in plans})
    split = _naive_split(spec, tables, parsed, time_limit_s, tolerance_fraction)
    split_cost = None if any(s.cost_usd_per_hour is None for s in split) else sum(s.cost_usd_per_hour for s in split)
    saving = saving_fraction = None
    notes = [f"one CP-SAT model over {len(spec.models)} models sharing {budget_text}; placement is per model "
             "(run solve for one model to place it)"]
    if totals is not None and split_cost is not None and spec.objective == "min-cost":
        saving = round(split_cost - totals.cost_usd_per_hour, 6) + 0.0  # no "-0.00" from float noise
        saving_fraction = saving / split_cost if split_cost > 0 else 0.0
        notes.append(f"naive split (each model alone on a share of the budget by token load) costs "
                     f"${split_cost:,.2f}/h; the fleet plan ${totals.cost_usd_per_hour:,.2f}/h: "
                     f"saves ${saving:,.2f}/h ({saving_fraction:.1%})")
    elif totals is not None and split_cost is None:
        failed = [s.model for s in split if s.cost_usd_per_hour is None]
        notes.append(f"naive split: {', '.join(failed)} cannot meet its rate and SLO on its share alone; the fleet can")
    return FleetPlan(status=result["status"], objective=spec.objective, budget=budget_text, plans=plans,
                     totals=totals, solver=solver_info, split=split, split_cost_usd_per_hour=split_cost,
                     saving_usd_per_hour=saving, saving_fraction=saving_fraction, notes=notes)


def member_plan(member: dict, status: str, proof: str, *, model, table: CandidateTable, slo, workload,
                objective: str, engine: str, headroom: float, budget: Budget, time_limit_s: float,
                tolerance_fraction: float):
    """The Plan of one member of a solved fleet model (its snapshot from ``solve_fleet_tables``)."""
    outcome = SolveOutcome(status=status, counts=member["counts"], disaggregated_rate_units=member["dis"],
                           colocated_rate_units=member["col"], cost_units=member["cost"],
                           objective_value=member["cost"] / COST_SCALE_PER_USD_PER_HOUR, objective_unit="$/h",
                           tolerance_fraction=tolerance_fraction, proof=proof)
    return build_plan(SearchResult(best=outcome), model=model, table=table, slo=slo, workload=workload,
                      objective=objective, engine=engine, headroom=headroom, budget=budget, defaults_used=[],
                      time_limit_s=time_limit_s)


def _naive_split(spec: FleetSpec, tables: list[CandidateTable], budget: Budget, time_limit_s: float,
                 tolerance_fraction: float) -> list[SplitMember]:
    """Each model alone on its token-load share of every GPU count and of the $ cap."""
    loads = [_load(m) for m in spec.models]
    out = []
    for m, table, load in zip(spec.models, tables, loads):
        share = load / sum(loads)
        counts, cap, text = _split_budget(budget, share)
        alone = table.model_copy(update={"gpu_limits": counts, "max_usd_per_hour": cap})
        outcome = LayoutSolver(to_integer_table(alone), spec.objective, time_limit_s / max(1, len(spec.models)),
                               tolerance_fraction=tolerance_fraction).solve() if counts or cap else None
        found = outcome is not None and outcome.has_plan
        out.append(SplitMember(
            model=m.model, budget=text or "nothing", share_fraction=share,
            status=outcome.status if outcome is not None else "infeasible",
            cost_usd_per_hour=outcome.cost_units / COST_SCALE_PER_USD_PER_HOUR if found else None,
            goodput_rps=outcome.rate_units / RATE_SCALE_PER_RPS if found else None))
    return out
