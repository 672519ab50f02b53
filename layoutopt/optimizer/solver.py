r"""CP-SAT model of the serving-layout problem, and the phases that optimize it.

Sets
    C           candidates (instance kinds); C_prefill, C_decode, C_coloc by role
    G           GPU types
Parameters (integers, from ``scaling.to_integer_table``)
    gpus_c      GPUs per instance of c                 g(c)   its GPU type
    cost_c      price of one instance (cost units: 1e-3 $/h)
    cap_c       requests one instance sustains at the SLO, with headroom (rate units: 1e-4 req/s)
    r_{c,k}     per-instance rate when n_c >= m_{c,k} instances share the router's queue (grid points
                m_{c,1} < m_{c,2} < ..., rates increasing; ``optimizer.pooling``); r_{c,0} = cap_c, m_{c,0} = 0
    kv          KV kilobytes one disaggregated request moves from prefill to decode
    nic_c       usable scale-out bandwidth of one instance (kB/s)
    U_c         most instances of c the budget allows
    s_c         GPUs of c kept in one NVLink domain: a pipeline stage (tp x dp x pcp), or the whole
                instance when the perf model put its stages on NVLink
    K_{g,s}     with a cluster file: GPUs groups of >= s GPUs can fill, sum_d s floor(free_d / s)
    B^rack_g    with a cluster file, when KV must stay in one rack: most free GPUs of g in one rack
    B_g         GPUs of type g available;  C_max  $ cap (cost units);  R_min  target rate (0 if none)
Variables
    n_c in {0..U_c}                 num_instances[c]
    r_dis, r_col, r in {0..R_max}   rate_units[disaggregated | colocated | total]
    u_dis, u_col in {0, 1}          uses_mode[disaggregated | colocated]
    y_c, z_{c,k} in {0, 1}          pool_capacity[c], pool_segment[c,m_{c,k}] (candidates with a pool grid)
Constraints
    GPU budget         sum_{c: g(c)=g} gpus_c n_c <= B_g                       for all g in G
    $ cap              sum_c cost_c n_c <= C_max
    prefill capacity   sum_{c in C_prefill} cap_c n_c >= r_dis
    decode capacity    sum_{c in C_decode}  cap_c n_c >= r_dis
    colocated capacity sum_{c in C_coloc}   cap_c n_c >= r_col
                       (a pooled candidate contributes y_c instead of cap_c n_c: sum_k z_{c,k} = 1 and
                       z_{c,k} => m_{c,k} <= n_c < m_{c,k+1}, y_c <= r_{c,k} n_c; exact at grid points)
    rate balance       r = r_dis + r_col >= R_min
    KV transfer        kv r_dis <= SCALE sum_{c in C_prefill} nic_c n_c   (and the same for C_decode)
    domain packing     sum_{c: g(c)=g, s_c >= s} gpus_c n_c <= K_{g,s}               (cluster file)
    KV pools in a rack sum_{c in C_prefill u C_decode, g(c)=g} gpus_c n_c <= B^rack_g (second stage)
    mode               n_c <= U_c u_mode(c);  r_mode <= R_max u_mode;  each role of a used mode has
                       an instance; --mode fixes u_dis = 0 or u_col = 0
Objectives (cost = sum_c cost_c n_c), each lexicographic in two solves (no big-M weights)
    max-goodput        max r; then, with r >= r*, min cost
    min-cost           min cost s.t. r >= R_min; then, with cost <= cost*, max r
    goodput-per-dollar max r / cost s.t. r >= max(R_min, 1). Dinkelbach: from q_0 = 0, solve
                       F(q_k) = max d r - p cost (q_k = p / d, an exact fraction, so the
                       coefficients are integers); the maximizer's ratio is q_{k+1}; stop when
                       F(q_k) = 0, which proves q_k optimal. The first step stops at a 5 % gap
                       (it only seeds q_1), improving steps at 0.1 %, at the absolute gap
                       cost_min p tol / (2 - tol) (which proves q_k within tol / 2 of the best:
                       F tends to 0 near the optimum, so a relative gap cannot stop there), or
                       a tenth of the time left. The iterations end as soon as the incumbent
                       is proven within tol / 2 of the bound q_ub (below), and an improving
                       step stops at its first solution that is (a solution callback): searching
                       on would refine only a bound the status does not need (qwen3-32b on
                       512xH100: 1.0 -> 0.04 deterministic s).
                       Then keep d' r >= p' cost with p'/d' = (1 - tol) q* (tol: the tolerance;
                       (1 - tol) q_ub when q* was not proved), max r, then min cost, each
                       proved within tol (both are knapsacks over every candidate): a bigger
                       budget is used whenever it keeps the ratio.
Bounds, gaps and status (what ``optimal`` promises)
    ``gap`` is the real relative gap of the reported plan against the proven bound of the first
    objective: for the ratio, (q_ub - q_plan) / q_ub, which includes what the second phase gave up
    (up to tol). ``optimal`` means: the first objective of the reported plan is proven within
    ``tolerance_fraction`` of the best any plan reaches, and the second phase (goodput, or cost)
    is proven optimal among the plans that keep that. max-goodput and min-cost stop CP-SAT at the
    tolerance (``relative_gap_limit``) and read its bound. For the ratio, a timed-out subproblem
    with bound F_ub proves r / cost <= q + F_ub / cost_min (cost_min: the cheapest plan that serves
    traffic), and the fractional relaxation (best capacity per dollar of any role combination) is
    a bound too; the smaller one is reported. ``SolveOutcome.proof`` says it in words.
Determinism
    ``cpsat.deterministic_solver``: one worker, a fixed seed, and a limit in CP-SAT's deterministic
    time (``max_deterministic_time``, about one second of work on a typical machine per unit),
    shared by all phases: the same input gives the same plan on any machine and under any load,
    timeouts included. A wall-clock cap of ``WALL_CAP_FACTOR`` x the limit + ``WALL_CAP_SLACK_S``
    stops a very slow machine; only then can the result differ (``SolveOutcome.wall_capped``).
    Single-worker search was chosen over ``interleave_search`` because it is deterministic without
    batching parameters and these models are small (a few hundred variables).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from fractions import Fraction

from ortools.sat.python import cp_model
from pydantic import BaseModel, ConfigDict, Field

from layoutopt import cpsat
from layoutopt.optimizer.constraints import default_constraints
from layoutopt.optimizer.objectives import (
    CostAtMost, MaximizeGoodput, MinimizeCost, ParametricRatio, PositiveRate, RateAtLeast, RatioFloor,
)
from layoutopt.plan import Objective, SolverStatus
from layoutopt.optimizer.ratio_bounds import cheapest_serving_cost_units, relaxed_ratio_bound
from layoutopt.optimizer.scaling import (
    COST_SCALE_PER_USD_PER_HOUR, RATE_SCALE_PER_RPS, IntegerTable, ratio_coefficients,
)
from layoutopt.optimizer.variables import LayoutVariables

# Presolve probing off: OR-Tools 9.15's closed feasible layout models as infeasible (layoutopt.cpsat),
# and these models solve faster without it (deepseek-v3 '$400/h': 1.14 -> 0.31 s of CP-SAT).
CP_MODEL_PROBING_LEVEL = 0
# Default tolerance: the reported plan's first objective is proven within this fraction of the
# best; the second goodput-per-dollar phase may give up this much of the best ratio for goodput.
DEFAULT_TOLERANCE_FRACTION = 0.02
RATIO_TOLERANCE_FRACTION = DEFAULT_TOLERANCE_FRACTION
# A wall-clock safety cap over the deterministic limit (seconds = factor x limit + slack).
WALL_CAP_FACTOR = 3.0
WALL_CAP_SLACK_S = 2.0
MAX_DINKELBACH_ITERATIONS = 40
# Improving Dinkelbach steps stop at this relative gap (the final, proving step has none).
DINKELBACH_STEP_RELATIVE_GAP = 1e-3
# The first step (most goodput, at q = 0) only gives the first ratio to improve on: proving it
# exactly is a knapsack over every candidate (2,048 GPUs with PP candidates: 10 s of deterministic
# time at a 0.1 % gap), so it stops at this gap.
DINKELBACH_FIRST_STEP_RELATIVE_GAP = 0.05
# Share of the time left an improving step may use. The iterations end once the incumbent's ratio
# is proven within half the tolerance of the bound (the second phase keeps the ratio within the
# whole tolerance of the bound); otherwise the next step goes on from it.
DINKELBACH_STEP_TIME_SHARE = 0.1
# Candidates per role (the best capacity per dollar) the first Dinkelbach plan is built from.
SEED_KINDS_PER_ROLE = 2
SECONDS_PER_HOUR = 3600.0


class SolveOutcome(BaseModel):
    """What one optimization returns: counts per candidate, rates and the proof status."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: SolverStatus
    counts: dict[str, int] = Field(default_factory=dict, description="instances per candidate name")
    disaggregated_rate_units: int = 0
    colocated_rate_units: int = 0
    cost_units: int = 0
    objective_value: float | None = Field(default=None, description="in objective_unit")
    best_bound: float | None = None
    gap: float | None = None
    objective_unit: str = ""
    wall_time_s: float = 0.0
    num_iterations: int = 0
    tolerance_fraction: float = DEFAULT_TOLERANCE_FRACTION
    proof: str = Field(default="", description="what the status proves about the reported plan, in words")
    deterministic_time: float = Field(default=0.0, description="CP-SAT deterministic time used, all phases")
    wall_capped: bool = Field(default=False, description="the wall-clock safety cap stopped a phase")

    @property
    def rate_units(self) -> int:
        return self.disaggregated_rate_units + self.colocated_rate_units

    @property
    def has_plan(self) -> bool:
        return bool(self.counts)


def requests_per_usd(rate_units: int | Fraction, cost_units: int | Fraction) -> float:
    """Requests served per dollar spent: (req/s) / ($/h) x 3600 s/h."""
    if not cost_units:
        return 0.0
    rps = float(rate_units) / RATE_SCALE_PER_RPS
    usd_per_hour = float(cost_units) / COST_SCALE_PER_USD_PER_HOUR
    return rps / usd_per_hour * SECONDS_PER_HOUR


class _Solution:
    """The numbers read off one CP-SAT solution."""

    def __init__(self, variables: LayoutVariables, solver: cp_model.CpSolver):
        self.counts = variables.counts(solver)
        self.disaggregated = int(solver.value(variables.disaggregated_rate))
        self.colocated = int(solver.value(variables.colocated_rate))
        self.rate = self.disaggregated + self.colocated
        self.cost = sum(c.cost_units * self.counts.get(c.name, 0) for c in variables.table.candidates)

    @property
    def ratio(self) -> Fraction:
        return Fraction(self.rate, self.cost) if self.cost else Fraction(0)

    def hint(self, variables: LayoutVariables) -> None:
        variables.model.clear_hints()
        for name, var in variables.num_instances.items():
            variables.model.add_hint(var, self.counts.get(name, 0))


class _StopAtRatio(cp_model.CpSolverSolutionCallback):
    """Stops a search at its first solution whose goodput per dollar reaches ``target``: an improving
    Dinkelbach step whose plan is already proven within half the tolerance of the bound ends the
    iterations, so searching on for more (to the step's time share) buys nothing the status needs.
    With one worker the solutions come in the same order on any machine, so the plan still
    depends on the input alone."""

    def __init__(self, variables: LayoutVariables, target: Fraction):
        super().__init__()
        self._rate, self._cost, self._target = variables.total_rate, variables.total_cost(), target

    def on_solution_callback(self) -> None:
        cost = self.value(self._cost)
        if cost > 0 and Fraction(self.value(self._rate), cost) >= self._target:
            self.stop_search()


def _enough_gap(numerator: int, cheapest_cost_units: int, half: Fraction) -> float:
    """The absolute gap at which an improving Dinkelbach step at q = p / d may stop: its bound F_ub
    on d r - p cost proves r / cost <= q + F_ub / (d cost_min) for every plan, so once F_ub is at
    most cost_min p h / (1 - h) the step's q (no more than the incumbent's ratio) is proven within
    h of the best. A relative gap on F cannot say this: F tends to 0 as q nears the optimum."""
    gap = math.floor(cheapest_cost_units * numerator * half / (1 - half))
    as_float = float(gap)  # CP-SAT takes a double: never one above the exact limit
    return as_float if as_float <= gap else math.nextafter(as_float, 0.0)


class LayoutSolver:
    """Builds the CP-SAT model of an ``IntegerTable`` and runs one objective's phases."""

    def __init__(self, table: IntegerTable, objective: Objective, time_limit_s: float = 10.0,
                 extra_constraints: Sequence = (), ratio_tolerance_fraction: float | None = None,
                 tolerance_fraction: float = DEFAULT_TOLERANCE_FRACTION):
        if objective == "min-cost" and table.min_rate_units <= 0:
            raise ValueError("min-cost needs a target rate (--rate)")
        self.table = table
        self.objective = objective
        self.time_limit_s = time_limit_s
        self.extra_constraints = list(extra_constraints)
        if not 0 <= tolerance_fraction < 1:
            raise ValueError(f"tolerance_fraction must be in [0, 1), got {tolerance_fraction}")
        self.tolerance_fraction = tolerance_fraction
        self.ratio_tolerance_fraction = tolerance_fraction if ratio_tolerance_fraction is None \
            else ratio_tolerance_fraction
        self._deadline = 0.0
        self._dtime_left = 0.0
        self._dtime_used = 0.0
        self._wall_capped = False
        self._timed_out = False

    # ------------------------------------------------------------------ plumbing
    def _build(self) -> LayoutVariables:
        variables = LayoutVariables(cp_model.CpModel(), self.table)
        for module in default_constraints() + self.extra_constraints:
            module.build(variables)
        return variables

    def _run(self, variables: LayoutVariables, relative_gap: float = 0.0, time_share: float = 1.0,
             absolute_gap: float | None = None, model: cp_model.CpModel | None = None,
             callback: cp_model.CpSolverSolutionCallback | None = None) -> tuple[int, cp_model.CpSolver]:
        solver = cpsat.deterministic_solver(self._dtime_left * time_share, wall_s=self._deadline - time.perf_counter(),
                                            probing_level=CP_MODEL_PROBING_LEVEL)
        solver.parameters.relative_gap_limit = relative_gap
        if absolute_gap is not None:
            solver.parameters.absolute_gap_limit = absolute_gap
        status, spent = cpsat.solve(solver, variables.model if model is None else model, callback)
        self._dtime_left -= spent
        self._dtime_used += spent
        if time.perf_counter() >= self._deadline:
            self._wall_capped = True
        if (status == cp_model.FEASIBLE or status == cp_model.UNKNOWN) and time_share >= 1.0:
            self._timed_out = True
        return status, solver

    def _out_of_time(self) -> bool:
        """True once the time limit is spent; a phase skipped for it makes the result 'timeout'."""
        if self._dtime_left <= 0 or time.perf_counter() >= self._deadline:
            self._timed_out = True
        return self._timed_out

    # ------------------------------------------------------------------ entry point
    def solve(self) -> SolveOutcome:
        start = time.perf_counter()
        self._deadline = start + WALL_CAP_FACTOR * self.time_limit_s + WALL_CAP_SLACK_S
        self._dtime_left = self.time_limit_s
        self._dtime_used = 0.0
        self._wall_capped = False
        self._timed_out = False
        if not self.table.candidates or self.table.max_rate_units < max(1, self.table.min_rate_units):
            return SolveOutcome(status="infeasible", wall_time_s=time.perf_counter() - start,
                                tolerance_fraction=self.tolerance_fraction,
                                proof="no candidate (or not enough capacity in all of them together) serves the rate")
        if self.objective == "goodput-per-dollar":
            outcome = self._solve_ratio()
        else:
            outcome = self._solve_lexicographic()
        return outcome.model_copy(update={
            "wall_time_s": time.perf_counter() - start, "tolerance_fraction": self.tolerance_fraction,
            "deterministic_time": self._dtime_used, "wall_capped": self._wall_capped})

    def _status(self, proved: bool, found: bool) -> SolverStatus:
        if not found:
            return "timeout" if self._timed_out else "infeasible"
        if proved:
            return "optimal"
        return "timeout" if self._timed_out else "feasible"

    # ------------------------------------------------------------------ max-goodput, min-cost
    def _two_phases(self, variables: LayoutVariables, first, keep: Callable[[_Solution], object], second,
                    better: Callable[[_Solution, _Solution], bool], second_gap: float = 0.0,
                    first_gap: float = 0.0) -> tuple[_Solution | None, int, float, bool, bool, float | None]:
        """Optimize ``first``; then, holding its optimum with ``keep``, optimize ``second`` (proved
        within the relative ``second_gap``).

        Returns (final solution, first phase status, first phase bound, first phase proved,
        second phase proved, second phase bound or None when it did not run).
        """
        first.build(variables)
        status, solver = self._run(variables, first_gap)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None, status, 0.0, False, False, None
        primary = _Solution(variables, solver)
        bound = solver.best_objective_bound
        if self._out_of_time():
            return primary, status, bound, status == cp_model.OPTIMAL, False, None
        keep(primary).build(variables)
        second.build(variables)
        primary.hint(variables)
        second_status, second_solver = self._run(variables, second_gap)
        final, second_bound = primary, None
        if second_status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            found = _Solution(variables, second_solver)
            final = found if better(found, primary) else primary
            second_bound = second_solver.best_objective_bound
        return final, status, bound, status == cp_model.OPTIMAL, second_status == cp_model.OPTIMAL, second_bound

    def _solve_lexicographic(self) -> SolveOutcome:
        variables = self._build()
        if self.objective == "max-goodput":
            PositiveRate().build(variables)
            result = self._two_phases(variables, MaximizeGoodput(), lambda sol: RateAtLeast(sol.rate),
                                      MinimizeCost(), lambda a, b: a.cost < b.cost)
        else:
            result = self._two_phases(variables, MinimizeCost(), lambda sol: CostAtMost(sol.cost),
                                      MaximizeGoodput(), lambda a, b: a.rate > b.rate)
        solution, status, bound_units, _, second_proved, _ = result
        if status == cp_model.MODEL_INVALID:
            return SolveOutcome(status="model_invalid", num_iterations=1)
        if solution is None:
            return SolveOutcome(status=self._status(False, False), num_iterations=1)
        if self.objective == "max-goodput":
            value, bound = solution.rate / RATE_SCALE_PER_RPS, math.floor(bound_units) / RATE_SCALE_PER_RPS
            gap = (bound - value) / bound if bound > 0 else 0.0
            unit = "req/s"
        else:
            value = solution.cost / COST_SCALE_PER_USD_PER_HOUR
            bound = math.ceil(bound_units) / COST_SCALE_PER_USD_PER_HOUR
            gap = (value - bound) / value if value > 0 else 0.0
            unit = "$/h"
        gap = max(gap, 0.0)
        # Optimal: the first objective proven within the tolerance (by CP-SAT's bound, also when a
        # phase ran out of time), the second proven optimal given it.
        status_name = self._status(second_proved and gap <= self.tolerance_fraction * (1 + 1e-6) + 1e-9, True)
        first = "goodput" if self.objective == "max-goodput" else "cost"
        second = "cost the least" if self.objective == "max-goodput" else "goodput the most"
        if status_name == "optimal":
            proof = (f"{first} {value:.4g} {unit} proven within {gap:.2%} of the best any plan reaches "
                     f"(bound {bound:.4g} {unit}; tolerance {self.tolerance_fraction:.2%}); {second} of the plans "
                     f"that keep it, within the same tolerance")
        else:
            proof = (f"{first} {value:.4g} {unit} is {gap:.2%} from the bound {bound:.4g} {unit}: not proven within "
                     f"the {self.tolerance_fraction:.2%} tolerance (time limit)")
        return self._outcome(solution, status_name, value, bound, gap, unit, 1).model_copy(update={"proof": proof})

    def _outcome(self, solution: _Solution, status: SolverStatus, value: float, bound: float, gap: float,
                 unit: str, iterations: int) -> SolveOutcome:
        return SolveOutcome(
            status=status, counts=solution.counts, disaggregated_rate_units=solution.disaggregated,
            colocated_rate_units=solution.colocated, cost_units=solution.cost, objective_value=value,
            best_bound=bound, gap=gap, objective_unit=unit, num_iterations=iterations,
        )

    # ------------------------------------------------------------------ goodput per dollar
    def _solve_ratio(self) -> SolveOutcome:
        variables = self._build()
        PositiveRate().build(variables)
        max_rate = self.table.max_rate_units
        max_cost = self.table.max_total_cost_units
        incumbent: _Solution | None = None
        ratio = Fraction(0)
        proved = False
        ratio_bound: Fraction | None = None
        iterations = 0
        relaxed = relaxed_ratio_bound(self.table)
        cheapest = max(1, cheapest_serving_cost_units(self.table))
        half = Fraction(self.ratio_tolerance_fraction).limit_denominator(10**6) / 2
        seed = self._seed(variables)
        if seed is not None:
            incumbent, ratio = seed, seed.ratio
            incumbent.hint(variables)
        while iterations < MAX_DINKELBACH_ITERATIONS:
            iterations += 1
            numerator, denominator = ratio_coefficients(ratio, max_rate, max_cost)
            ParametricRatio(numerator, denominator).build(variables)
            # An improving step need not be optimal; only the last step (value 0) must be proved.
            share = DINKELBACH_STEP_TIME_SHARE if incumbent else 1.0
            known = [b for b in (ratio_bound, relaxed) if b is not None]
            # An improving step may stop at a plan proven within half the tolerance (below).
            stop = _StopAtRatio(variables, min(known) * (1 - half)) if incumbent and known else None
            status, solver = self._run(variables, DINKELBACH_STEP_RELATIVE_GAP if incumbent
                                       else DINKELBACH_FIRST_STEP_RELATIVE_GAP, share,
                                       _enough_gap(numerator, cheapest, half) if incumbent else None,
                                       callback=stop)
            if status == cp_model.MODEL_INVALID:
                return SolveOutcome(status="model_invalid", num_iterations=iterations)
            if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                if incumbent is None:
                    return SolveOutcome(status=self._status(False, False), num_iterations=iterations)
                break
            found = _Solution(variables, solver)
            subproblem_bound = Fraction(math.floor(solver.best_objective_bound))
            q = Fraction(numerator, denominator)
            # Every plan has d r - p cost <= bound, so r / cost <= q + bound / (d cost_min); every
            # step's bound holds, so the smallest is kept.
            step_bound = q + max(subproblem_bound, Fraction(0)) / (denominator * cheapest)
            ratio_bound = step_bound if ratio_bound is None else min(ratio_bound, step_bound)
            if found.ratio > ratio:
                incumbent, ratio = found, found.ratio
                incumbent.hint(variables)
                if self._out_of_time():
                    break
                bound_now = min(b for b in (ratio_bound, relaxed) if b is not None)
                if ratio >= bound_now * (1 - half):
                    break  # proven within half the tolerance: the second phase keeps the ratio within all of it
                continue
            proved = subproblem_bound <= 0 and q == ratio
            break
        assert incumbent is not None
        bounds = [b for b in (ratio_bound, relaxed) if b is not None]
        best_bound = max(min(bounds), ratio) if bounds else ratio
        if proved:
            best_bound = ratio
        final, budget_proved = incumbent, False
        # Phase 2 keeps the ratio within the tolerance of the bound (of the ratio itself when proved).
        floor = min(ratio, best_bound * (1 - Fraction(self.ratio_tolerance_fraction).limit_denominator(10**6)))
        if not self._out_of_time():
            final, budget_proved = self._use_budget(variables, incumbent, floor)
        # The real gap of the reported plan: what phase 2 gave up for goodput is included.
        gap = max(float((best_bound - final.ratio) / best_bound), 0.0) if best_bound > 0 else 0.0
        status = self._status(budget_proved and gap <= self.tolerance_fraction * (1 + 1e-6) + 1e-9, True)
        value = requests_per_usd(final.rate, final.cost)
        bound = requests_per_usd(best_bound.numerator, best_bound.denominator)
        tol = self.ratio_tolerance_fraction
        within = f"{value:,.0f} requests/$, proven within {gap:.2%} of the best any plan reaches ({bound:,.0f})"
        if gap > self.tolerance_fraction * (1 + 1e-6) + 1e-9:
            proof = (f"{value:,.0f} requests/$ is {gap:.2%} from the bound {bound:,.0f}: not proven within the "
                     f"{self.tolerance_fraction:.2%} tolerance (time limit)")
        elif not budget_proved:
            proof = (f"{within}; its goodput is not proven within {self.tolerance_fraction:.1%} of the most of the "
                     f"plans with at least "
                     f"{requests_per_usd(floor.numerator, floor.denominator):,.0f} requests/$ (time limit)")
        else:
            of = "the best ratio (proven)" if proved else "the bound"
            proof = (f"{within}; goodput proven within {self.tolerance_fraction:.1%} of the most any plan with at "
                     f"least {requests_per_usd(floor.numerator, floor.denominator):,.0f} requests/$ ({tol:.1%} below "
                     f"{of}) reaches, then cost within {self.tolerance_fraction:.1%} of the least")
        return self._outcome(final, status, value, bound, gap, "requests/$", iterations).model_copy(
            update={"proof": proof})

    def _seed(self, variables: LayoutVariables) -> _Solution | None:
        """A first plan for Dinkelbach instead of the most goodput at q = 0 (a knapsack over every
        candidate: 0.95 s of deterministic time for qwen3-32b on 2,048 GPUs of three types): the
        most goodput of the few candidates with the best capacity per dollar of each role
        (``SEED_KINDS_PER_ROLE``), the others held at zero in a copy of the model. Any plan is a
        valid start (its ratio is a lower bound); None when those candidates serve nothing."""
        chosen = set()
        for role in ("prefill", "decode", "colocated"):
            rows = sorted(self.table.by_role(role), key=lambda c: (Fraction(c.cost_units, max(c.best_rate_units, 1)),
                                                                   c.name))
            chosen.update(c.name for c in rows[:SEED_KINDS_PER_ROLE])
        model = variables.model.clone()
        for name, count in variables.num_instances.items():
            if name not in chosen:
                model.add(count == 0)
        model.maximize(variables.total_rate)
        status, solver = self._run(variables, DINKELBACH_FIRST_STEP_RELATIVE_GAP, DINKELBACH_STEP_TIME_SHARE,
                                   model=model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None
        found = _Solution(variables, solver)
        return found if found.rate > 0 and found.cost > 0 else None

    def _use_budget(self, variables: LayoutVariables, incumbent: _Solution, floor: Fraction) -> tuple[_Solution, bool]:
        """Keep the ratio at least ``floor``, maximize goodput, then minimize cost; (plan, proved)."""
        numerator, denominator = ratio_coefficients(floor, self.table.max_rate_units, self.table.max_total_cost_units)
        RatioFloor(numerator, denominator).build(variables)
        incumbent.hint(variables)
        final, status, _, first_proved, second_proved, cost_bound = self._two_phases(
            variables, MaximizeGoodput(), lambda sol: RateAtLeast(sol.rate), MinimizeCost(),
            lambda a, b: a.cost < b.cost,
            # Most goodput at the ratio floor, then the least cost at it: knapsacks of their own,
            # proved within the tolerance, as the ratio is.
            first_gap=self.tolerance_fraction, second_gap=self.tolerance_fraction)
        if final is None:
            return incumbent, False
        proved = first_proved and second_proved
        if (final.rate, -final.cost) < (incumbent.rate, -incumbent.cost):
            # The incumbent keeps the floor and serves at least the phase's goodput, so that proof
            # covers it; it held the phase's goodput in the cost phase too, whose bound is then at
            # most its cost: proven when within the tolerance of that bound (CP-SAT's relative gap).
            cost_proved = cost_bound is not None and (
                incumbent.cost - cost_bound <= self.tolerance_fraction * max(incumbent.cost, 1) + 1e-9)
            return incumbent, proved and cost_proved
        return final, proved
