"""Fleets: one CP-SAT model for several models on one budget, against brute force; the fleet file."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from layoutopt.errors import InputError
from layoutopt.optimizer.fleet import solve_fleet_tables
from layoutopt.optimizer.fleet_spec import fleet_from_dict
from test_optimizer_solver import PROPERTY, brute_force_plans, small_tables


def _gpus(table, counts) -> dict[str, int]:
    used: dict[str, int] = {}
    for c in table.candidates:
        used[c.gpu] = used.get(c.gpu, 0) + counts.get(c.name, 0) * c.gpus_per_instance
    return used


def _joint_plans(tables):
    """Every combination of per-member plans that fits the shared budget: (rates, total cost)."""
    shared = tables[0]
    per_member = [list(brute_force_plans(t)) for t in tables]
    for combo in itertools.product(*per_member):
        gpus: dict[str, int] = {}
        for t, (counts, _, _) in zip(tables, combo):
            for g, n in _gpus(t, counts).items():
                gpus[g] = gpus.get(g, 0) + n
        if any(gpus.get(g, 0) > limit for g, limit in shared.gpu_limits.items()):
            continue
        cost = sum(c for _, _, c in combo)
        if shared.max_cost_units is not None and cost > shared.max_cost_units:
            continue
        yield [r for _, r, _ in combo], cost


@st.composite
def fleets(draw):
    first = draw(small_tables())
    second = draw(small_tables()).model_copy(update={"gpu_limits": first.gpu_limits,
                                                     "max_cost_units": first.max_cost_units})
    return [first, second]


@PROPERTY
@given(fleets())
def test_fleet_min_cost_matches_brute_force(tables):
    plans = list(_joint_plans(tables))
    result = solve_fleet_tables(tables, [1.0, 1.0], tables[0].gpu_limits, tables[0].max_cost_units, "min-cost",
                                time_limit_s=5, tolerance_fraction=0.0)
    if not plans:
        assert result["status"] == "infeasible"
        return
    assert result["status"] == "optimal"
    assert sum(m["cost"] for m in result["members"]) == min(cost for _, cost in plans)


@PROPERTY
@given(fleets(), st.sampled_from([(1.0, 1.0), (1.0, 3.0)]))
def test_fleet_weighted_max_goodput_matches_brute_force(tables, weights):
    plans = list(_joint_plans(tables))
    result = solve_fleet_tables(tables, list(weights), tables[0].gpu_limits, tables[0].max_cost_units,
                                "max-goodput", time_limit_s=5, tolerance_fraction=0.0)
    if not plans:
        assert result["status"] == "infeasible"
        return
    value = [sum(w * r for w, r in zip(weights, rates)) for rates, _ in plans]
    best = max(value)
    got = sum(w * (m["dis"] + m["col"]) for w, m in zip(weights, result["members"]))
    assert result["status"] == "optimal"
    assert got == pytest.approx(best)
    assert sum(m["cost"] for m in result["members"]) == min(c for v, (_, c) in zip(value, plans) if v == best)


def test_fleet_file_errors_name_the_field():
    good = {"model": "qwen3-32b", "rate_rps": 1, "slo": {"ttft_ms": {"p90": 1000}, "tpot_ms": {"p90": 30}}}
    spec = fleet_from_dict({"budget": "16xH100", "models": [good, {**good, "workload": {"preset": "rag"}}]})
    assert spec.objective == "min-cost" and len(spec.models) == 2 and spec.models[0].workload.arrival_rate_rps == 1
    cases = [({"models": [{**good, "rate": 1}]}, "fleet.models[0].rate"),
             ({"models": [{k: v for k, v in good.items() if k != "rate_rps"}]}, "fleet.models[0].rate_rps"),
             ({"models": [{**good, "rate_rps": float("inf")}]}, "fleet.models[0].rate_rps"),
             ({"models": [{**good, "slo": {"ttft_ms": 5}}]}, "fleet.models[0].slo"),
             ({"models": []}, "fleet.models"), ({"objective": "cheapest", "models": [good]}, "fleet.objective"),
             ({"budgets": "8xH100", "models": [good]}, "fleet.budgets")]
    for data, field in cases:
        with pytest.raises(InputError) as error:
            fleet_from_dict(data)
        assert error.value.field.startswith(field), (data, error.value.field)
