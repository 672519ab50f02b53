r"""One plan robust across traffic scenarios: one set of instances, every scenario in the same CP-SAT model.

Sets
    S           scenarios (name, weight w_s, rate R_s, workload, SLO), each with its candidate table C_s
                (capacities under that scenario's workload and SLO; dominance is not pruned per
                scenario, since a layout dominated under one workload may not be under another)
    L           layouts: the union of the C_s names
Variables
    N_l         instances of layout l, shared by every scenario            num_instances[l]
    every variable of ``LayoutVariables`` once per scenario (prefix ``s<i>:``), with n^s_l = N_l
Constraints
    per scenario    every family of ``constraints.default_constraints`` but the budget and $ cap
    GPU budget, $ cap    on N (each instance counted once)
Objectives (--robust)
    all         min cost s.t. r_s >= R_s in every scenario (the plan holds every SLO at its rate)
    expected    max (sum_s w_s r_s) / cost with r_s <= R_s (weighted goodput per dollar), Dinkelbach
    worst       max (min_s r_s / R_s) / cost: the worst scenario's served share per dollar, Dinkelbach
The report names the scenarios that bind (all: leaving it out would make the optimum cheaper;
worst: the smallest served share; expected: demand not fully served) and what each scenario would
cost alone (min-cost for its rate alone).
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

from ortools.sat.python import cp_model
from pydantic import BaseModel, ConfigDict, Field

from layoutopt.errors import InputError
from layoutopt.hardware_catalog.budget import Budget, parse_budget
from layoutopt.hardware_catalog.catalog import load_catalog
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer.constraints import CostCap, GpuBudget, default_constraints
from layoutopt.optimizer.enumeration import build_candidate_table
from layoutopt.optimizer.fleet import _Runner
from layoutopt.optimizer.scaling import COST_SCALE_PER_USD_PER_HOUR, rate_units_up, to_integer_table
from layoutopt.optimizer.solver import DEFAULT_TOLERANCE_FRACTION, LayoutSolver
from layoutopt.optimizer.variables import LayoutVariables
from layoutopt.plan import Pool, SolverStatus
from layoutopt.workloads.loaders import read_yaml, slo_from_dict, workload_from_dict
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

ROBUST_CHOICES = ("all", "expected", "worst")
SHARE_SCALE = 10_000  # worst: served share r_s / R_s in 1e-4 units
MAX_SCENARIOS = 16
MAX_DINKELBACH_ITERATIONS = 40
_KEYS = ("name", "weight", "rate_rps", "workload", "slo")


class Scenario(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    weight: float = Field(default=1.0, gt=0)
    rate_rps: float = Field(gt=0)
    workload: Workload
    slo: SLO | None = None


class ScenarioResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    weight: float
    rate_rps: float
    served_rps: float = Field(description="rate the robust plan serves in this scenario within its SLO")
    capacity_slack_fraction: float = Field(description="(capacity - rate) / rate of the robust plan here")
    binds: bool
    alone_status: SolverStatus
    alone_cost_usd_per_hour: float | None = Field(description="cheapest plan for this scenario alone")


class RobustPlan(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = "robust"
    status: SolverStatus
    robust: str
    model: str
    budget: str
    pools: list[Pool]
    cost_usd_per_hour: float | None
    scenarios: list[ScenarioResult]
    binding_scenarios: list[str]
    objective_value: float | None = None
    objective_unit: str = ""
    gap: float | None = None
    proof: str = ""
    notes: list[str] = Field(default_factory=list)


def scenarios_from_data(data: Any, base_dir: str | Path | None = None) -> tuple[Scenario, ...]:
    """Scenarios from a list (or ``{scenarios: [...]}``) of mappings with the keys in ``_KEYS``."""
    if isinstance(data, dict) and set(data) == {"scenarios"}:
        data = data["scenarios"]
    if not isinstance(data, list) or not 1 <= len(data) <= MAX_SCENARIOS:
        raise InputError("scenarios", data if not isinstance(data, list) else len(data),
                         f"a list of 1 to {MAX_SCENARIOS} scenarios")
    parsed, names = [], set()
    for i, item in enumerate(data):
        where = f"scenarios[{i}]"
        if not isinstance(item, dict):
            raise InputError(where, item, "a mapping with name, weight, rate_rps, workload and an optional slo")
        unknown = sorted(set(item) - set(_KEYS))
        if unknown:
            raise InputError(f"{where}.{unknown[0]}", item[unknown[0]], f"one of the keys {', '.join(_KEYS)}")
        name = item.get("name")
        if not isinstance(name, str) or not name or name in names:
            raise InputError(f"{where}.name", name, "a unique, non-empty scenario name")
        names.add(name)
        for key, default in (("rate_rps", None), ("weight", 1.0)):
            value = item.get(key, default)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise InputError(f"{where}.{key}", value, "a finite number > 0")
        workload = workload_from_dict(item.get("workload", {"preset": "chat"}), base_dir, f"{where}.workload")
        rate = float(item["rate_rps"])
        parsed.append(Scenario(name=name, weight=float(item.get("weight", 1.0)), rate_rps=rate,
                               workload=workload.model_copy(update={"arrival_rate_rps": rate}),
                               slo=slo_from_dict(item["slo"], f"{where}.slo") if "slo" in item else None))
    return tuple(parsed)


def load_scenarios(path: str | Path) -> tuple[Scenario, ...]:
    return scenarios_from_data(read_yaml(path, "--scenarios"), Path(path).parent)


class _ScenarioModel:
    """Shared instance counts N_l; one ``LayoutVariables`` per scenario tied to them."""

    def __init__(self, tables, gpu_limits: dict[str, int], max_cost_units: int | None):
        self.model = cp_model.CpModel()
        self.members = [LayoutVariables(self.model, t, prefix=f"s{i}:") for i, t in enumerate(tables)]
        rows = {}
        for t in tables:
            for c in t.candidates:
                rows.setdefault(c.name, c)
        self.rows = rows
        # One set of instances serves every scenario: the decision the plan is.
        self.shared = {name: self.model.new_int_var(0, c.max_instances, f"num_instances[{name}]")
                       for name, c in sorted(rows.items())}
        for v in self.members:
            for name, var in v.num_instances.items():
                self.model.add(var == self.shared[name])
            for module in default_constraints():
                if not isinstance(module, (GpuBudget, CostCap)):
                    module.build(v)
        for gpu, limit in sorted(gpu_limits.items()):
            used = [(self.shared[n], c.gpus_per_instance) for n, c in rows.items() if c.gpu == gpu]
            if used:
                self.model.add(cp_model.LinearExpr.weighted_sum([u for u, _ in used], [g for _, g in used]) <= limit)
        if max_cost_units is not None:
            self.model.add(self.cost() <= max_cost_units).with_name("cost_cap")

    def cost(self) -> cp_model.LinearExpr:
        return cp_model.LinearExpr.weighted_sum([self.shared[n] for n in self.rows],
                                                [c.cost_units for c in self.rows.values()])


def _counts(sm: _ScenarioModel, solver: cp_model.CpSolver) -> dict[str, int]:
    return {n: int(solver.value(v)) for n, v in sm.shared.items() if solver.value(v)}


def _dinkelbach(sm: _ScenarioModel, value: cp_model.LinearExpr, runner: _Runner, tolerance: float):
    """max value / cost; returns (counts, solver of the final phase, ratio, proved)."""
    sm.model.add(value >= 1)
    ratio, best, proved = Fraction(0), None, False
    for _ in range(MAX_DINKELBACH_ITERATIONS):
        if runner.spent:
            break
        sm.model.maximize(ratio.denominator * value - ratio.numerator * sm.cost())
        status, solver = runner.run(sm.model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            break
        found = Fraction(int(solver.value(value)), max(1, int(solver.value(sm.cost()))))
        if found > ratio:
            ratio, best = found, (_counts(sm, solver), solver)
            continue
        proved = status == cp_model.OPTIMAL and solver.best_objective_bound <= 0
        break
    return best, ratio, proved


def solve_robust(model: str, budget: str | Budget, scenarios: tuple[Scenario, ...] | str | Path, slo: SLO,
                 robust: str = "all", *, engine: str = "vllm", precision: str = "auto", headroom: float = 0.7,
                 time_limit_s: float = 10.0, tolerance_fraction: float = DEFAULT_TOLERANCE_FRACTION,
                 gpus_path: str | Path | None = None, prices_path: str | Path | None = None) -> RobustPlan:
    """The plan that holds across ``scenarios`` (``robust``: all, expected or worst; see the module docstring)."""
    if robust not in ROBUST_CHOICES:
        raise InputError("--robust", robust, f"one of {', '.join(ROBUST_CHOICES)}")
    items = scenarios if isinstance(scenarios, tuple) else load_scenarios(scenarios)
    catalog = load_catalog(gpus_path=gpus_path, prices_path=prices_path)
    parsed = budget if isinstance(budget, Budget) else parse_budget(budget, catalog)
    gpus = ([catalog.gpu(n) for n in parsed.gpu_counts] if parsed.gpu_counts
            else [g for g in catalog.gpus if g.price is not None])
    spec = get_model(model)
    tables = [build_candidate_table(spec, gpus, s.workload, s.slo or slo, gpu_limits=dict(parsed.gpu_counts),
                                    max_usd_per_hour=parsed.max_usd_per_hour,
                                    min_rate_rps=s.rate_rps if robust == "all" else None, engine=engine,
                                    precision=precision, headroom=headroom, prune_dominated=False)
              for s in items]
    integer = [to_integer_table(t) for t in tables]
    rates = [rate_units_up(s.rate_rps) for s in items]
    found = solve_scenario_tables(integer, dict(parsed.gpu_counts), integer[0].max_cost_units, robust, rates,
                                  [s.weight for s in items], time_limit_s, tolerance_fraction)
    counts, status, value, unit, gap, proof, binding = (found[k] for k in (
        "counts", "status", "value", "unit", "gap", "proof", "binding"))
    return _report(items, tables, integer, counts, status, robust, spec.name, parsed, value, unit, gap, proof,
                   time_limit_s, tolerance_fraction, binding)


def solve_scenario_tables(integer, gpu_limits: dict[str, int], max_cost_units: int | None, robust: str,
                          rates: list[int], scenario_weights: list[float], time_limit_s: float = 10.0,
                          tolerance_fraction: float = DEFAULT_TOLERANCE_FRACTION) -> dict:
    """The robust CP-SAT model over integer tables (one per scenario); rates in rate units."""
    sm = _ScenarioModel(integer, gpu_limits, max_cost_units)
    runner = _Runner(time_limit_s)
    if robust != "all":
        for v, rate in zip(sm.members, rates):
            sm.model.add(v.total_rate <= rate)  # goodput in a scenario is at most its demand
    counts, value, bound, gap, unit, proof, status = {}, None, None, None, "", "", "infeasible"
    binding: list[int] | None = None
    if robust == "all":
        sm.model.minimize(sm.cost())
        code, solver = runner.run(sm.model)
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            counts = _counts(sm, solver)
            value = solver.objective_value / COST_SCALE_PER_USD_PER_HOUR
            bound = math.ceil(solver.best_objective_bound) / COST_SCALE_PER_USD_PER_HOUR
            gap = max(0.0, (value - bound) / value) if value else 0.0
            unit = "$/h"
            status = "optimal" if gap <= tolerance_fraction + 1e-9 else "timeout"
            proof = f"cost {value:.4g} $/h serving every scenario's rate, within {gap:.2%} of the bound {bound:.4g}"
            binding = _leave_one_out(integer, gpu_limits, solver.objective_value, time_limit_s)
        elif runner.timed_out:
            status = "timeout"
    else:
        if robust == "expected":
            weights = [max(1, round(w * 1000)) for w in scenario_weights]
            value_expr = cp_model.LinearExpr.weighted_sum([v.total_rate for v in sm.members], weights)
        else:
            worst = sm.model.new_int_var(0, SHARE_SCALE, "worst_served_share")
            for v, rate in zip(sm.members, rates):
                # worst <= SHARE_SCALE * r_s / R_s for every scenario
                sm.model.add(worst * rate <= SHARE_SCALE * v.total_rate)
            value_expr = worst
        best, ratio, proved = _dinkelbach(sm, value_expr, runner, tolerance_fraction)
        if best is not None:
            counts = best[0]
            value = float(ratio) * COST_SCALE_PER_USD_PER_HOUR * 3600
            unit = "weighted requests/$ x 1000" if robust == "expected" else "worst served share x 1e4 per $"
            status = "optimal" if proved else ("timeout" if runner.spent else "feasible")
            gap = 0.0 if proved else None
            proof = ("best ratio proven (Dinkelbach)" if proved else "best ratio not proven (time limit)")
        elif runner.timed_out:
            status = "timeout"
    return dict(counts=counts, status=status, value=value, unit=unit, gap=gap, proof=proof, binding=binding)


def _leave_one_out(integer, gpu_limits: dict[str, int], cost_units: float, time_limit_s: float) -> list[int]:
    """Scenarios that bind the min-cost plan: without each of them alone, the optimum would be cheaper."""
    binding = []
    for i in range(len(integer)):
        rest = [t for j, t in enumerate(integer) if j != i]
        if not rest:
            binding.append(i)
            continue
        sm = _ScenarioModel(rest, gpu_limits, integer[0].max_cost_units)
        sm.model.minimize(sm.cost())
        code, solver = _Runner(time_limit_s / len(integer)).run(sm.model)
        if code == cp_model.OPTIMAL and solver.objective_value < cost_units - 0.5:
            binding.append(i)
    return binding


def _capacity(table, counts: dict[str, int]) -> float:
    """Rate (req/s) the instances in ``counts`` sustain under one scenario's table."""
    cap = {"prefill": 0.0, "decode": 0.0, "colocated": 0.0}
    for c in table.candidates:
        cap[c.role] += c.pool_capacity_rps(counts.get(c.name, 0))
    return cap["colocated"] + min(cap["prefill"], cap["decode"])


def _report(items, tables, integer, counts, status, robust, model_name, budget: Budget, value, unit, gap, proof,
            time_limit_s: float, tolerance_fraction: float, binding_indices: list[int] | None = None) -> RobustPlan:
    from layoutopt.optimizer.assemble import pools_of

    results, binding = [], []
    shares = [min(1.0, _capacity(t, counts) / s.rate_rps) for s, t in zip(items, tables)]
    for i, (s, table) in enumerate(zip(items, tables)):
        capacity = _capacity(table, counts)
        slack = (capacity - s.rate_rps) / s.rate_rps
        if binding_indices is not None:  # all: without it the plan would be cheaper
            binds = i in binding_indices
        elif robust == "worst":  # the scenario with the smallest served share
            binds = bool(counts) and shares[i] <= min(shares) + 1e-9
        else:  # expected: a scenario whose demand the plan does not fully serve
            binds = bool(counts) and shares[i] < 1.0 - 1e-9
        if binds:
            binding.append(s.name)
        alone_table = to_integer_table(table.model_copy(update={"min_rate_rps": s.rate_rps}))
        alone = LayoutSolver(alone_table, "min-cost", time_limit_s / max(1, len(items)),
                             tolerance_fraction=tolerance_fraction).solve()
        results.append(ScenarioResult(
            name=s.name, weight=s.weight, rate_rps=s.rate_rps, served_rps=min(capacity, s.rate_rps),
            capacity_slack_fraction=slack, binds=binds, alone_status=alone.status,
            alone_cost_usd_per_hour=alone.cost_units / COST_SCALE_PER_USD_PER_HOUR if alone.has_plan else None))
    by_name = {}
    for table in tables:
        for c in table.candidates:
            by_name.setdefault(c.name, c)
    used = [(by_name[n], k) for n, k in sorted(counts.items())]
    cost = sum(c.cost_usd_per_hour * k for c, k in used) if used else None
    if robust == "all" and cost is not None and not binding:
        # No single scenario makes the plan dearer than the others would: those that alone need
        # the whole plan bind together.
        tied = [r.name for r in results if r.alone_cost_usd_per_hour is not None
                and r.alone_cost_usd_per_hour >= cost * (1 - 1e-9)]
        results = [r.model_copy(update={"binds": r.name in tied}) for r in results]
        binding = tied
    for table in tables:
        for c in table.candidates:
            by_name.setdefault(c.name, c)
    used = [(by_name[n], k) for n, k in sorted(counts.items())]
    cost = sum(c.cost_usd_per_hour * k for c, k in used) if used else None
    notes = []
    alone_costs = [r.alone_cost_usd_per_hour for r in results]
    if cost is not None and all(a is not None for a in alone_costs):
        alone_text = ", ".join(f"{r.name} ${r.alone_cost_usd_per_hour:,.2f}/h" for r in results)
        notes.append(f"each scenario alone: {alone_text}; the robust plan: ${cost:,.2f}/h")
    if binding:
        why = {"all": "without it the plan would be cheaper", "worst": "the smallest share of its rate served",
               "expected": "its demand is not fully served"}[robust]
        notes.append(f"binding scenario(s): {', '.join(binding)} ({why})")
    return RobustPlan(status=status, robust=robust, model=model_name, budget=budget.text or budget.describe(),
                      pools=pools_of(used) if used else [], cost_usd_per_hour=cost, scenarios=results,
                      binding_scenarios=binding, objective_value=value, objective_unit=unit, gap=gap, proof=proof,
                      notes=notes)
