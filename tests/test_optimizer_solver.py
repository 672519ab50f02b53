"""The CP-SAT solver against a brute-force enumerator over the same integer candidate tables."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layoutopt.optimizer.candidates import CandidateTable
from layoutopt.optimizer.constraints import ExcludePlanStructure
from layoutopt.optimizer.scaling import RATE_SCALE_PER_RPS, IntegerCandidate, IntegerTable, to_integer_table
from layoutopt.optimizer.solver import RATIO_TOLERANCE_FRACTION, LayoutSolver, _enough_gap, requests_per_usd
from synthetic_candidates import make_candidate
from layoutopt.optimizer.validate import plan_violations


def brute_force_plans(t: IntegerTable):
    """Every integer plan of ``t`` with its best rate split: yields (counts, rate, cost)."""
    rows = t.candidates
    kv = max((c.kv_kb_per_request for c in rows if c.role == "prefill"), default=0)
    for counts in itertools.product(*[range(c.max_instances + 1) for c in rows]):
        gpus: dict[str, int] = {}
        for c, n in zip(rows, counts):
            gpus[c.gpu] = gpus.get(c.gpu, 0) + n * c.gpus_per_instance
        if any(gpus.get(g, 0) > limit for g, limit in t.gpu_limits.items()):
            continue
        cost = sum(c.cost_units * n for c, n in zip(rows, counts))
        if t.max_cost_units is not None and cost > t.max_cost_units:
            continue
        per_role = {role: sum(n for c, n in zip(rows, counts) if c.role == role)
                    for role in ("prefill", "decode", "colocated")}
        if (per_role["prefill"] > 0) != (per_role["decode"] > 0):
            continue  # a used mode needs both of its roles
        if t.mode == "colocated" and per_role["prefill"]:
            continue
        if t.mode == "disaggregated" and per_role["colocated"]:
            continue

        def capacity(role):
            return sum(c.pool_capacity_units(n) for c, n in zip(rows, counts) if c.role == role)

        def nic(role):
            return sum(c.nic_kb_per_s * n for c, n in zip(rows, counts) if c.role == role)

        disaggregated = min(capacity("prefill"), capacity("decode"))
        if kv and disaggregated:
            disaggregated = min(disaggregated, RATE_SCALE_PER_RPS * nic("prefill") // kv,
                                RATE_SCALE_PER_RPS * nic("decode") // kv)
        rate = min(disaggregated + capacity("colocated"), t.max_rate_units)
        if rate < t.min_rate_units:
            continue
        yield dict(zip([c.name for c in rows], counts)), rate, cost


@st.composite
def small_tables(draw):
    roles = ["prefill", "decode", "colocated"]
    gpus = ["H100", "H200"]
    rows = []
    for index in range(draw(st.integers(2, 4))):
        capacity, max_instances = draw(st.integers(1, 60)), draw(st.integers(1, 3))
        # A pooled queue: the per-instance rate may rise from 2 and again from 3 instances on.
        steps, rate = [], capacity
        for n in range(2, max_instances + 1):
            gain = draw(st.sampled_from([0, 0, 1, 7]))
            if gain:
                rate += gain
                steps.append((n, rate))
        rows.append(IntegerCandidate(
            name=f"c{index}", role=draw(st.sampled_from(roles)), gpu=draw(st.sampled_from(gpus)),
            gpus_per_instance=draw(st.sampled_from([1, 2, 4])), cost_units=draw(st.integers(1000, 9000)),
            capacity_rate_units=capacity, kv_kb_per_request=draw(st.sampled_from([0, 0, 5000])),
            nic_kb_per_s=draw(st.integers(0, 30)), max_instances=max_instances, pool_rate_units=tuple(steps),
        ))
    limits = {g: draw(st.integers(2, 8)) for g in gpus}
    max_cost = draw(st.one_of(st.none(), st.integers(3000, 30000)))
    mode = draw(st.sampled_from(["auto", "auto", "colocated", "disaggregated"]))
    total = {r: sum(c.pool_capacity_units(c.max_instances) for c in rows if c.role == r) for r in roles}
    max_rate = total["colocated"] + min(total["prefill"], total["decode"])
    min_rate = draw(st.one_of(st.just(0), st.integers(1, max(1, max_rate))))
    return IntegerTable(candidates=tuple(rows), gpu_limits=limits, max_cost_units=max_cost,
                        min_rate_units=min_rate, mode=mode, max_rate_units=max_rate)


PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(small_tables())
def test_max_goodput_matches_brute_force(t):
    plans = [(r, c) for _, r, c in brute_force_plans(t) if r >= 1]
    outcome = LayoutSolver(t, "max-goodput", time_limit_s=5).solve()
    if not plans:
        assert outcome.status == "infeasible"
        return
    best_rate = max(r for r, _ in plans)
    cheapest = min(c for r, c in plans if r == best_rate)
    assert outcome.status == "optimal"
    assert outcome.rate_units == best_rate
    assert outcome.cost_units == cheapest


@PROPERTY
@given(small_tables())
def test_min_cost_matches_brute_force(t):
    if t.min_rate_units < 1:
        return
    plans = [(r, c) for _, r, c in brute_force_plans(t)]
    outcome = LayoutSolver(t, "min-cost", time_limit_s=5).solve()
    if not plans:
        assert outcome.status == "infeasible"
        return
    cheapest = min(c for _, c in plans)
    assert outcome.status == "optimal"
    assert outcome.cost_units == cheapest
    assert outcome.rate_units == max(r for r, c in plans if c == cheapest)


@PROPERTY
@given(small_tables())
def test_goodput_per_dollar_matches_brute_force(t):
    plans = [(r, c) for _, r, c in brute_force_plans(t) if r >= 1]
    outcome = LayoutSolver(t, "goodput-per-dollar", time_limit_s=5).solve()
    if not plans:
        assert outcome.status == "infeasible"
        return
    best_ratio = max(Fraction(r, c) for r, c in plans)
    assert outcome.status == "optimal"
    tol = Fraction(RATIO_TOLERANCE_FRACTION).limit_denominator(10**6)
    # The bound is valid and Dinkelbach stops once the incumbent is within half the tolerance of it.
    bound = outcome.best_bound / requests_per_usd(1, 1)  # back to rate units per cost unit
    assert best_ratio * (1 - Fraction(1, 10**9)) <= bound <= best_ratio / (1 - tol / 2) * (1 + Fraction(1, 10**9))
    assert Fraction(outcome.rate_units, outcome.cost_units) >= best_ratio * (1 - tol)
    # Second phase: most goodput among plans within the ratio tolerance of the bound, then the
    # cheapest, each proved within the tolerance (CP-SAT's relative gap, |value - bound| <= tol x value).
    floor = bound * (1 - float(tol))
    kept = [(r, c) for r, c in plans if r / c >= floor * (1 - 1e-9)]
    best_rate = max(r for r, _ in kept)
    assert best_rate * (1 - RATIO_TOLERANCE_FRACTION) <= outcome.rate_units <= best_rate
    cheapest = min(c for r, c in kept if r == outcome.rate_units)
    assert cheapest <= outcome.cost_units and outcome.cost_units * (1 - RATIO_TOLERANCE_FRACTION) <= cheapest
    assert outcome.rate_units / outcome.cost_units >= floor * (1 - 1e-9)


def synthetic_table(**kwargs) -> CandidateTable:
    candidates = (
        make_candidate("colocated", tp_size=1, capacity_rps=1.0),
        make_candidate("colocated", tp_size=2, capacity_rps=2.5),
        make_candidate("prefill", tp_size=1, capacity_rps=4.0, kv_bytes_per_request=1e8),
        make_candidate("decode", tp_size=2, capacity_rps=3.0),
    )
    return CandidateTable(candidates=candidates, **{"gpu_limits": {"H100-SXM": 8}, **kwargs})


def test_plan_from_solver_passes_validator():
    table = synthetic_table(min_rate_rps=3.3)
    for objective in ("goodput-per-dollar", "max-goodput", "min-cost"):
        outcome = LayoutSolver(to_integer_table(table), objective).solve()
        assert outcome.status == "optimal"
        assert plan_violations(table, outcome.counts, outcome.disaggregated_rate_units / RATE_SCALE_PER_RPS,
                               outcome.colocated_rate_units / RATE_SCALE_PER_RPS) == []


def test_hand_computed_goodput_per_dollar():
    # tp2 colocated: 2.5 req/s for $4/h = 0.625 req/s per $/h, better than tp1 (0.5) and the
    # disaggregated pair (1 / (2/4 + 4/3) = 0.545). Four of them use the 8 GPUs.
    outcome = LayoutSolver(to_integer_table(synthetic_table()), "goodput-per-dollar").solve()
    assert outcome.counts == {"colocated-H100-SXM-tp2-fp8-kvbf16": 4}
    assert outcome.objective_value == pytest.approx(0.625 * 3600)
    assert outcome.gap == 0.0


def test_mode_disaggregated_uses_pools():
    outcome = LayoutSolver(to_integer_table(synthetic_table(mode="disaggregated")), "max-goodput").solve()
    roles = {name.split("-")[0] for name in outcome.counts}
    assert roles == {"prefill", "decode"}
    assert outcome.colocated_rate_units == 0


def test_infeasible_rate_and_min_cost_needs_rate():
    outcome = LayoutSolver(to_integer_table(synthetic_table(min_rate_rps=50.0)), "goodput-per-dollar").solve()
    assert outcome.status == "infeasible" and not outcome.has_plan
    with pytest.raises(ValueError, match="min-cost needs a target rate"):
        LayoutSolver(to_integer_table(synthetic_table()), "min-cost")


def test_exclusion_gives_a_distinct_plan():
    table = to_integer_table(synthetic_table())
    first = LayoutSolver(table, "goodput-per-dollar").solve()
    second = LayoutSolver(table, "goodput-per-dollar", extra_constraints=[ExcludePlanStructure(first.counts)]).solve()
    assert set(second.counts) != set(first.counts)
    assert second.objective_value <= first.objective_value + 1e-9


def test_deterministic():
    table = to_integer_table(synthetic_table(gpu_limits={"H100-SXM": 64}))
    runs = [LayoutSolver(table, "goodput-per-dollar").solve() for _ in range(3)]
    assert len({(tuple(sorted(r.counts.items())), r.rate_units) for r in runs}) == 1


def random_table(seed: int, size: int = 60) -> CandidateTable:
    rng = random.Random(seed)
    prices = {"H100-SXM": 3.99, "H200-SXM": 4.54, "B200": 6.03}
    candidates = []
    for index in range(size):
        role, gpu = rng.choice(["prefill", "decode", "colocated"]), rng.choice(list(prices))
        tp = rng.choice([1, 2, 4, 8])
        candidates.append(make_candidate(role, gpu=gpu, tp_size=tp, capacity_rps=rng.uniform(0.5, 10) * tp**0.9,
                                         usd_per_gpu_hour=prices[gpu], name=f"c{index}-{role}",
                                         kv_bytes_per_request=rng.uniform(1e7, 1e9)))
    return CandidateTable(candidates=tuple(candidates), gpu_limits={"H100-SXM": 997, "H200-SXM": 1013, "B200": 1021})


@pytest.mark.parametrize("objective", ["max-goodput", "goodput-per-dollar"])
def test_time_limit_gives_timeout_with_best_plan_and_gap(objective):
    table = to_integer_table(random_table(3))
    outcome = LayoutSolver(table, objective, time_limit_s=1e-6).solve()
    assert outcome.status == "timeout"
    if outcome.has_plan:
        assert outcome.gap >= 0 and outcome.best_bound >= outcome.objective_value - 1e-9
    finished = LayoutSolver(table, objective, time_limit_s=10).solve()
    assert finished.status == "optimal" and 0 <= finished.gap <= finished.tolerance_fraction
    # The gap is the reported plan's own, second phase included.
    real = (finished.best_bound - finished.objective_value) / finished.best_bound
    assert finished.gap == pytest.approx(real, abs=1e-9)
    exact = LayoutSolver(table, objective, time_limit_s=10, tolerance_fraction=0.0).solve()
    assert exact.status == "optimal" and exact.gap == pytest.approx(0.0, abs=1e-12)


class _Plan:
    """A stand-in for a solution: the rate and cost units ``_use_budget`` compares."""

    def __init__(self, rate: int, cost: int):
        self.rate, self.cost = rate, cost

    def hint(self, variables) -> None:
        pass


@pytest.mark.parametrize(("incumbent_cost", "proved"), [(1010, True), (1100, False)])
def test_phase_two_keeps_a_better_incumbent_with_the_proof_it_has(monkeypatch, incumbent_cost, proved):
    """Phase 2 (most goodput at the ratio floor, then least cost, each within the tolerance) may stop
    at a plan serving less than the incumbent. The incumbent is reported; its goodput proof carries
    over (it serves more than a plan proven within the tolerance), its cost is proven only when
    within the tolerance of the cost phase's bound."""
    from layoutopt.optimizer import solver as solver_module

    solver = LayoutSolver(to_integer_table(synthetic_table()), "goodput-per-dollar")
    solver._dtime_left, solver._deadline = 10.0, float("inf")
    variables = solver._build()
    phase_plan, incumbent = _Plan(rate=990, cost=1000), _Plan(rate=1000, cost=incumbent_cost)
    monkeypatch.setattr(solver, "_two_phases", lambda *args, **kwargs: (
        phase_plan, solver_module.cp_model.OPTIMAL, 1005.0, True, True, 1000.0))
    final, got = solver._use_budget(variables, incumbent, Fraction(1, 2))
    assert final is incumbent and got is proved


@given(numerator=st.integers(1, 2**62), denominator=st.integers(1, 2**62), cheapest=st.integers(1, 10**9),
       tolerance=st.sampled_from([0.0, 0.001, 0.02, 0.1, 0.5]), share=st.floats(0, 1))
def test_an_improving_step_stopped_at_the_enough_gap_proves_q_within_half_the_tolerance(
        numerator, denominator, cheapest, tolerance, share):
    """A Dinkelbach step at q = p / d whose bound on d r - p cost is at most the gap it may stop at
    proves every plan's ratio below q / (1 - tol / 2): q is within half the tolerance of the best."""
    half = Fraction(tolerance).limit_denominator(10**6) / 2
    q = Fraction(numerator, denominator)
    bound = int(_enough_gap(numerator, cheapest, half) * share)  # any step bound at or below it
    assert _enough_gap(numerator, cheapest, half) <= cheapest * numerator * half / (1 - half)
    ratio_bound = q + Fraction(bound, denominator * cheapest)
    assert q >= ratio_bound * (1 - half)


def test_an_improving_step_stops_at_its_first_plan_within_half_the_tolerance():
    """``_StopAtRatio`` ends a search at the first solution whose rate / cost reaches the target (the
    plan the Dinkelbach loop would stop at anyway), not at the step's time share: enumerating every
    plan of a model with 40 of them, it stops at one that reaches the target, before the last."""
    from types import SimpleNamespace

    from ortools.sat.python import cp_model

    from layoutopt import cpsat
    from layoutopt.optimizer.solver import _StopAtRatio

    model = cp_model.CpModel()
    rate, cost = model.new_int_var(1, 40, "rate"), model.new_int_var(10, 10, "cost")
    seen = []

    class Counting(_StopAtRatio):
        def on_solution_callback(self) -> None:
            seen.append(self.value(rate))
            super().on_solution_callback()

    stop = Counting(SimpleNamespace(total_rate=rate, total_cost=lambda: cost + 0), Fraction(3))
    solver = cp_model.CpSolver()
    solver.parameters.enumerate_all_solutions = True
    solver.parameters.num_workers = 1
    status, _ = cpsat.solve(solver, model, stop)
    assert status == cp_model.FEASIBLE  # stopped: enumerating all 40 would end OPTIMAL
    assert len(seen) < 40 and seen[-1] >= 30 and all(r < 30 for r in seen[:-1])


def test_an_improving_step_that_stops_early_keeps_the_plan_within_the_tolerance():
    """With the early stop the ratio objective still ends ``optimal`` with the reported plan within
    the tolerance of a valid bound (the brute-force property above checks the bound itself)."""
    table = synthetic_table(min_rate_rps=1.0)
    outcome = LayoutSolver(to_integer_table(table), "goodput-per-dollar", time_limit_s=5).solve()
    plans = [(r, c) for _, r, c in brute_force_plans(to_integer_table(table)) if r >= 1]
    best = max(Fraction(r, c) for r, c in plans)
    assert outcome.status == "optimal"
    assert Fraction(outcome.rate_units, outcome.cost_units) >= best * (1 - Fraction(RATIO_TOLERANCE_FRACTION))
