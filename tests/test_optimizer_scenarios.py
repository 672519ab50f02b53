"""Plans robust across scenarios: one set of instances for every scenario, against brute force."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from layoutopt.errors import InputError
from layoutopt.optimizer.scenarios import scenarios_from_data, solve_scenario_tables
from test_optimizer_solver import PROPERTY, brute_force_plans, small_tables


@st.composite
def scenario_tables(draw):
    """The same layouts under two workloads: capacities and target rates differ, nothing else."""
    first = draw(small_tables())
    rows = tuple(c.model_copy(update={"capacity_rate_units": draw(st.integers(1, 60))}) for c in first.candidates)
    second = first.model_copy(update={"candidates": rows, "min_rate_units": draw(st.integers(0, 40))})
    return [first, second]


def _shared_plans(tables):
    """Counts every scenario's table accepts (budget, modes, its own rate): {counts: (rates, cost)}."""
    per_table = [{tuple(sorted(c.items())): (r, cost) for c, r, cost in brute_force_plans(t)} for t in tables]
    common = set(per_table[0]).intersection(*per_table[1:])
    return {k: ([p[k][0] for p in per_table], per_table[0][k][1]) for k in common}


@PROPERTY
@given(scenario_tables())
def test_robust_all_is_the_cheapest_plan_every_scenario_accepts(tables):
    plans = _shared_plans(tables)
    found = solve_scenario_tables(tables, tables[0].gpu_limits, tables[0].max_cost_units, "all",
                                  [t.min_rate_units for t in tables], [1.0, 1.0], 5.0, 0.0)
    if not plans:
        assert found["status"] == "infeasible"
        return
    assert found["status"] == "optimal"
    cheapest = min(cost for _, cost in plans.values())
    assert round(found["value"] * 1000) == cheapest


@PROPERTY
@given(scenario_tables())
def test_robust_worst_maximizes_the_worst_served_share_per_dollar(tables):
    tables = [t.model_copy(update={"min_rate_units": max(1, t.min_rate_units)}) for t in tables]
    rates = [t.min_rate_units for t in tables]
    free = [t.model_copy(update={"min_rate_units": 0}) for t in tables]
    plans = _shared_plans(free)
    found = solve_scenario_tables(free, tables[0].gpu_limits, tables[0].max_cost_units, "worst", rates,
                                  [1.0, 1.0], 5.0, 0.0)

    def worst(served):  # the model's share, in 1e-4 units, rounded down as its integer variable is
        return min((10_000 * min(r, rate)) // rate for r, rate in zip(served, rates))

    scored = [Fraction(worst(r), c) for r, c in plans.values() if c > 0 and worst(r) >= 1]
    if not scored:
        assert found["status"] in ("infeasible", "timeout")
        return
    assert found["status"] == "optimal"
    key = tuple(sorted((c.name, found["counts"].get(c.name, 0)) for c in free[0].candidates))
    assert key in plans
    served, cost = plans[key]
    assert Fraction(worst(served), cost) == max(scored)


def test_scenario_file_errors_name_the_field():
    good = {"name": "day", "rate_rps": 10, "workload": {"preset": "chat"}}
    assert [s.name for s in scenarios_from_data([good, {**good, "name": "night", "weight": 0.5}])] == ["day", "night"]
    for data, field in [([{**good, "rate_rps": -1}], "scenarios[0].rate_rps"), ([good, good], "scenarios[1].name"),
                        ([{**good, "rates": 1}], "scenarios[0].rates"), ([], "scenarios")]:
        with pytest.raises(InputError) as error:
            scenarios_from_data(data)
        assert error.value.field == field
